"""warpspec.nn's MLA attention block over a paged latent cache, its RMS norm and the
cache maker."""
import math

import torch

from .. import _lib, attention, mla_decode, mla_kv_quantize_fp8, mla_sparse_prefill
from .. import _nn_reference as ref
from .._lib import invalid
from ..attention import MLA_HEADS_RULE, _mla_heads_ok
from ._checks import DENSE_DIMS, LATENT, ROPE, _require_gpu, _same_device, _tensor

# ---- MLA attention ------------------------------------------------------------------------
class RMSNorm(torch.nn.Module):
    """RMS norm computed in fp32, returned in the input's dtype."""

    def __init__(self, dim, eps=1e-6, *, dtype=torch.bfloat16, device=None):
        super().__init__()
        self.eps = float(eps)
        self.weight = torch.nn.Parameter(torch.ones(dim, dtype=dtype, device=device))

    def forward(self, x):
        return ref.rms_norm(x.float(), self.weight.float(), self.eps).to(x.dtype)


def paged_cache(batch, max_len, *, page_size=64, fp8=False, device=None):
    """(kv_cache, block_table) for `batch` sequences of up to max_len tokens: a zeroed
    cache [pages, page_size, 576] bf16 (fp8=True: uint8 [pages, page_size, 656], the rows
    of mla_kv_quantize_fp8) and block_table int32 [batch, ceil(max_len / page_size)],
    sequence b owning the pages b x n .. (b + 1) x n - 1. A server hands pages out as
    sequences grow; MLAAttention takes any table whose pages cover the positions written."""
    what = "paged_cache"
    batch, max_len = _lib.as_int(batch, f"{what}: batch", 1), _lib.as_int(max_len, f"{what}: max_len", 1)
    page_size = _lib.as_int(page_size, f"{what}: page_size", 1)
    n = -(-max_len // page_size)
    row = ref.MLA_FP8_ROW_BYTES if fp8 else LATENT + ROPE
    cache = torch.zeros(batch * n, page_size, row, dtype=torch.uint8 if fp8 else torch.bfloat16, device=device)
    table = torch.arange(batch * n, dtype=torch.int32, device=device).view(batch, n)
    return cache, table


class MLAAttention(torch.nn.Module):
    """DeepSeek MLA attention over a paged latent cache (DeepSeek-V2/V3's layer):

        q      = wq(x), or wq_b(q_norm(wq_a(x))) with q_lora_rank   [heads, nope + 64]
        latent = kv_norm(wkv_a(x)[:512]), k_pe = rope(wkv_a(x)[512:])   cached: [latent, k_pe]
        k, v   = wkv_b(latent) per head [nope], [v_head_dim]; k's rope part is k_pe (shared)
        out    = wo(softmax((q_nope k_nope + q_pe k_pe) x softmax_scale) v)

    forward(x, kv_cache, block_table, cache_seqlens=None, max_seqlen=None):
    x [B, S, hidden] bf16. The S new tokens of sequence b take positions cache_seqlens[b]
    .. + S - 1 (cache_seqlens None: 0 .. S - 1, a prefill); their rows ([latent, k_pe],
    576 values) are written into kv_cache at those positions through block_table
    [B, max_pages] int32 (page ids), then:
      prefill (cache_seqlens None): causal attention among the S new tokens, from the rows
        as computed (BF16, before any FP8 rounding). prefill="dense": warpspec.attention
        on k and v decompressed per head (qk / v head dims 192/128 or 128/128, i.e.
        qk_nope_head_dim 128 or 64 with v_head_dim 128); "latent": mla_sparse_prefill in
        the absorbed form, each query listing every earlier position (an [B S, S] index
        tensor); "auto": dense where the dims allow. Every sequence of a prefill has S
        tokens; prefill ragged prompts one sequence at a time, or continue one in chunks
        as decode.
      decode (cache_seqlens int32 [B], the tokens already cached): warpspec.mla_decode on
        the absorbed query (q_nope wkv_b's k part, 512 dims, then q_pe) over the cache;
        S > 1 is causal among the new tokens. max_seqlen: a host bound of cache_seqlens +
        S (a tighter one lets the kernel split the keys better).
    Returns [B, S, hidden] bf16. The caller owns the cache (paged_cache makes one): BF16
    [pages, page_size, 576], or FP8 uint8 [pages, page_size, 656] (written through
    mla_kv_quantize_fp8). The table's pages must cover every position written: it is
    read on the GPU unchecked.

    The kernels fix the latent at 512 and the rope part at 64 dims, and take heads in
    multiples of 64 or divisors of 64 (16 or 32: the heads one GPU holds when a model's 128
    are split over ranks; this module computes the heads it is given, it does not split).
    Rotary embedding: pairs (2i, 2i + 1) rotated by position x rope_theta^(-2i / 64), as
    DeepSeek's reference code; no YaRN (fold its mscale into softmax_scale, default
    1 / sqrt(qk_nope_head_dim + 64)). reference=True: the float64 decompressed form in
    PyTorch (writing the cache the same way), returning float64. torch.compile takes the
    BF16 and FP8 decode and the dense prefill whole (the FP8 rows then come from the same
    format in torch ops); the latent prefill breaks the graph at mla_sparse_prefill."""

    def __init__(self, hidden, heads, *, q_lora_rank=None, qk_nope_head_dim=128, v_head_dim=128, rope_theta=10000.0,
                 softmax_scale=None, prefill="auto", norm_eps=1e-6, dtype=torch.bfloat16, device=None):
        super().__init__()
        what = "MLAAttention"
        i = _lib.as_int
        self.hidden, self.heads = i(hidden, f"{what}: hidden", 1), i(heads, f"{what}: heads", 1)
        self.qk_nope_head_dim = i(qk_nope_head_dim, f"{what}: qk_nope_head_dim", 1)
        self.v_head_dim = i(v_head_dim, f"{what}: v_head_dim", 1)
        self.q_lora_rank = None if q_lora_rank is None else i(q_lora_rank, f"{what}: q_lora_rank", 1)
        if not _mla_heads_ok(self.heads):  # the ops' own rule (warpspec.attention)
            raise invalid(f"{what}: {self.heads} heads; the MLA kernels take {MLA_HEADS_RULE}")
        self.rope_theta = _lib.as_float(rope_theta, f"{what}: rope_theta", 1e-30)
        qk = self.qk_nope_head_dim + ROPE
        self.softmax_scale = 1.0 / math.sqrt(qk) if softmax_scale is None else \
            _lib.as_float(softmax_scale, f"{what}: softmax_scale", 1e-30)
        dense_ok = (qk, self.v_head_dim) in DENSE_DIMS
        if prefill not in ("auto", "dense", "latent"):
            raise invalid(f"{what}: prefill {prefill!r}, one of 'auto', 'dense', 'latent'")
        if prefill == "dense" and not dense_ok:
            dims = " or ".join(f"{a}/{b}" for a, b in DENSE_DIMS)
            raise invalid(f"{what}: prefill 'dense' needs qk / v head dims {dims} (warpspec.attention); these are "
                          f"{qk}/{self.v_head_dim}: use 'latent'")
        self.prefill = ("dense" if dense_ok else "latent") if prefill == "auto" else prefill
        H, kw = self.heads, {"bias": False, "dtype": dtype, "device": device}
        if self.q_lora_rank is None:
            self.wq = torch.nn.Linear(self.hidden, H * qk, **kw)
        else:
            self.wq_a = torch.nn.Linear(self.hidden, self.q_lora_rank, **kw)
            self.q_norm = RMSNorm(self.q_lora_rank, norm_eps, dtype=dtype, device=device)
            self.wq_b = torch.nn.Linear(self.q_lora_rank, H * qk, **kw)
        self.wkv_a = torch.nn.Linear(self.hidden, LATENT + ROPE, **kw)
        self.kv_norm = RMSNorm(LATENT, norm_eps, dtype=dtype, device=device)
        self.wkv_b = torch.nn.Linear(LATENT, H * (self.qk_nope_head_dim + self.v_head_dim), **kw)
        self.wo = torch.nn.Linear(H * self.v_head_dim, self.hidden, **kw)

    def extra_repr(self):
        return (f"hidden={self.hidden}, heads={self.heads}, q_lora_rank={self.q_lora_rank}, "
                f"qk_nope_head_dim={self.qk_nope_head_dim}, v_head_dim={self.v_head_dim}, prefill={self.prefill!r}")

    def forward(self, x, kv_cache, block_table, cache_seqlens=None, *, max_seqlen=None, reference=False):
        cache_seqlens, max_seqlen = self._check(x, kv_cache, block_table, cache_seqlens, max_seqlen, reference)
        B, S, _ = x.shape
        if B == 0 or S == 0:  # an idle data-parallel rank
            return x.new_zeros(B, S, self.hidden, dtype=torch.float64 if reference else x.dtype)
        if reference:
            return ref.mla_forward(self, x, kv_cache, block_table, cache_seqlens)
        H, dn, dv = self.heads, self.qk_nope_head_dim, self.v_head_dim
        q = (self.wq(x) if self.q_lora_rank is None else self.wq_b(self.q_norm(self.wq_a(x)))).view(B, S, H, dn + ROPE)
        kv_a = self.wkv_a(x)
        latent = self.kv_norm(kv_a[..., :LATENT])
        start = torch.zeros(B, dtype=torch.long, device=x.device) if cache_seqlens is None else cache_seqlens.long()
        pos = start[:, None] + torch.arange(S, device=x.device)
        cos, sin = ref.rope_angles(pos, self.rope_theta)
        k_pe = ref.apply_rope(kv_a[..., LATENT:], cos, sin).to(x.dtype)
        q_nope, q_pe = q[..., :dn], ref.apply_rope(q[..., dn:], cos[:, :, None], sin[:, :, None]).to(x.dtype)
        rows = torch.cat([latent, k_pe], -1)
        fp8_rows = ref.mla_rows_to_fp8 if torch.compiler.is_compiling() else mla_kv_quantize_fp8  # the same bytes
        self._write_rows(kv_cache, block_table, pos, rows, fp8_rows)
        if cache_seqlens is None and self.prefill == "dense":
            kv = self.wkv_b(latent).view(B, S, H, dn + dv)
            k = torch.cat([kv[..., :dn], k_pe[:, :, None, :].expand(B, S, H, ROPE)], -1)
            o = attention(torch.cat([q_nope, q_pe], -1), k, kv[..., dn:].contiguous(), causal=True,
                          softmax_scale=self.softmax_scale)
        else:
            w = self.wkv_b.weight.view(H, dn + dv, LATENT)  # absorbed: q_nope into the latent, o out of it
            q_abs = torch.cat([torch.einsum("bshn,hnc->bshc", q_nope, w[:, :dn]), q_pe], -1)
            if cache_seqlens is None:
                o_lat = mla_sparse_prefill(q_abs.view(B * S, H, LATENT + ROPE), rows.view(B * S, LATENT + ROPE),
                                           _causal_indices(B, S, x.device), softmax_scale=self.softmax_scale)
            else:
                o_lat = mla_decode(q_abs, kv_cache, block_table, (cache_seqlens + S).to(torch.int32),
                                   max_seqlen=max_seqlen, softmax_scale=self.softmax_scale)
            o = torch.einsum("bshc,hvc->bshv", o_lat.view(B, S, H, LATENT), w[:, dn:])
        return self.wo(o.reshape(B, S, H * dv))

    @staticmethod
    def _write_rows(kv_cache, block_table, pos, rows, fp8_rows):
        """rows [B, S, 576] bf16 into the cache at positions pos [B, S] through the table
        (FP8 caches: the rows fp8_rows makes)."""
        page, width = kv_cache.shape[1], kv_cache.shape[-1]
        slots = block_table.long().gather(1, pos // page) * page + pos % page
        if kv_cache.dtype == torch.uint8:
            rows = fp8_rows(rows.contiguous())
        kv_cache.view(-1, width).index_copy_(0, slots.reshape(-1), rows.reshape(-1, width).to(kv_cache.dtype))

    def _check(self, x, kv_cache, block_table, cache_seqlens, max_seqlen, reference):
        """Every argument checked before anything runs; returns cache_seqlens as int32 and
        max_seqlen as an int (or None)."""
        what = "MLAAttention"
        dtypes = (torch.bfloat16,) if not reference else (torch.bfloat16, torch.float16, torch.float32, torch.float64)
        _tensor(x, "x", dtypes, (None, None, self.hidden), what)
        if not reference and self.wkv_a.weight.dtype != torch.bfloat16:
            raise invalid(f"{what}: the weights are {self.wkv_a.weight.dtype}; the kernels take bf16 "
                          "(reference=True takes any)")
        B, S = x.shape[0], x.shape[1]
        _tensor(kv_cache, "kv_cache", (torch.bfloat16, torch.uint8), None, what)
        width = ref.MLA_FP8_ROW_BYTES if kv_cache.dtype == torch.uint8 else LATENT + ROPE
        one_head = kv_cache.dim() == 3 or (kv_cache.dim() == 4 and kv_cache.shape[2] == 1)
        if not one_head or kv_cache.shape[-1] != width:
            raise invalid(f"{what}: kv_cache has shape {tuple(kv_cache.shape)}, expected (pages, page_size, {width}) "
                          f"for {kv_cache.dtype} rows")
        if not kv_cache.is_contiguous():
            raise invalid(f"{what}: kv_cache must be contiguous (rows are written into it in place)")
        _tensor(block_table, "block_table", (torch.int32,), (B, None), what)
        capacity = block_table.shape[1] * kv_cache.shape[1]
        if cache_seqlens is None:
            if S > capacity:
                raise invalid(f"{what}: a prefill of {S} tokens, the block table holds {capacity} per sequence")
        else:
            cache_seqlens = _tensor(cache_seqlens, "cache_seqlens", (torch.int32, torch.int64), (B,), what)
            cache_seqlens = cache_seqlens.to(torch.int32)
        if max_seqlen is not None:
            max_seqlen = _lib.as_int(max_seqlen, f"{what}: max_seqlen", S)
            if max_seqlen > capacity:
                raise invalid(f"{what}: max_seqlen {max_seqlen} > {capacity} positions of the block table")
        _same_device(what, x=x, kv_cache=kv_cache, block_table=block_table, cache_seqlens=cache_seqlens,
                     weights=self.wkv_a.weight)
        if not reference:
            _require_gpu(what, x)
        return cache_seqlens, max_seqlen


def _causal_indices(batch, seq, device):
    """int32 [batch x seq, seq]: token i of sequence b lists the rows b x seq + j, j <= i,
    then -1 (mla_sparse_prefill's masked slot)."""
    i = torch.arange(seq, device=device)
    rows = (torch.arange(batch, device=device) * seq)[:, None, None] + i[None, None, :]
    return torch.where(i[None, None, :] <= i[None, :, None], rows, -1).to(torch.int32).view(batch * seq, seq)
