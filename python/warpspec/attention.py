"""Attention over tensors: warpspec/attention.h.

    attention(q, k, v, causal=False, ...)      flash attention forward, BF16
    mla_sparse_prefill(q, kv, indices, ...)    DeepSeek-V3.2 sparse MLA prefill, BF16
    mla_decode(q, kv_cache, block_table, seqlens, ...)   DeepSeek-V3 MLA decode, paged cache
    mla_sparse_decode(q, kv_cache, indices, ...)   DeepSeek-V3.2 sparse MLA decode, paged cache

Dense batches in PyTorch's [batch, seq, heads, dim] layout: q [B, Sq, Hq, Dqk],
k [B, Sk, Hkv, Dqk], v [B, Sk, Hkv, Dv]. Variable-length batches (FlashAttention's
varlen layout): q [Tq, Hq, Dqk], k [Tk, Hkv, Dqk], v [Tk, Hkv, Dv] with cu_seqlens_q /
cu_seqlens_k int32 [B + 1] on the device (0 first), and max_seqlen_q / max_seqlen_k (the
longest sequence; if None they are read from the offsets, which waits for the GPU).
Head dims 64/64, 128/128, 192/128; Hq a multiple of Hkv (GQA, MQA). causal: keep key
j <= query i ("top_left", PyTorch SDPA's is_causal) or j <= i + Sk - Sq
("bottom_right", FlashAttention >= 2.1). Returns o (and lse [Hq, Tq] fp32, natural log,
with return_lse=True).

Index tensors are trusted, as FlashAttention trusts them: offsets past the rows or
decreasing, page ids out of range or lengths beyond the block table read out of bounds.
check=True (or WARPSPEC_CHECK=1 for the whole process) scans them on the GPU first
(attention: cu_seqlens start at 0, never decrease, end within the rows, no sequence longer
than max_seqlen; mla_decode: seqlens within max_pages x page_size, the used page ids within
the cache; mla_sparse_decode: every index -1 or a row of the cache) and raises InvalidArgumentError naming the first bad entry. It waits for the
GPU: for debugging, not inside CUDA graph capture. mla_sparse_prefill and nsa_attention
need no check: any index is defined there (out of range = masked).
"""

import ctypes
import sys

from . import _lib, _ops
from ._lib import FLT_MAX, as_float, as_int, as_ints, invalid, wrong_type
from ._tensor import BF16, I32, empty, on_device, require_hopper, stream_arg, stream_handle, torch_or_raise, view

WS_ATTN_NO_MASK, WS_ATTN_CAUSAL_TOP_LEFT, WS_ATTN_CAUSAL_BOTTOM_RIGHT = 0, 1, 2


def _scale(softmax_scale):
    """The C softmax_scale: 0 for None (1 / sqrt(dim_qk)), else a finite number >= 0."""
    return 0.0 if softmax_scale is None else as_float(softmax_scale, "softmax_scale", 0.0, FLT_MAX)


def _outputs(views, out, lse, oshape, lshape, return_lse, what):
    """Check the given out (bf16 oshape) and lse (fp32 lshape), find the device of all the
    arguments, allocate what is missing: (dev, out, view of out, lse, view of lse)."""
    vo = view(out, "out", optional=True)
    if vo is not None:
        vo.expect(BF16, shape=oshape)
        views.append(vo)
    vl = view(lse, "lse", optional=True)
    if vl is not None:
        vl.expect(("float32",), shape=lshape)
        views.append(vl)
    dev = require_hopper(views, what)
    if out is None:
        out = empty(oshape, "bfloat16", dev, what)
        vo = view(out, "out")
    if lse is None and return_lse:
        lse = empty(lshape, "float32", dev, what)
        vl = view(lse, "lse")
    return dev, out, vo, lse, vl



def _real(x):
    """A Python int or float (not bool): what the custom ops' optional numbers take."""
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def attention(q, k, v, *, causal=False, causal_align="top_left", softmax_scale=None, cu_seqlens_q=None,
              cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, out=None, return_lse=False, lse=None,
              stream=None, check=False):
    """Flash attention forward (see the module's text). Called plainly on torch tensors it
    goes through the custom op torch.ops.warpspec.attention (torch.compile, CUDA graphs);
    varlen batches need max_seqlen_q / max_seqlen_k for that."""
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if (out is None and lse is None and stream is None and check is False and isinstance(causal, bool)
            and isinstance(causal_align, str) and (softmax_scale is None or _real(softmax_scale))
            and (not varlen or (type(max_seqlen_q) is int and type(max_seqlen_k) is int))):
        op = _ops.routed(q, k, v, cu_seqlens_q, cu_seqlens_k)
        if op is not None:
            o, l = op.attention(q, k, v, causal, causal_align, None if softmax_scale is None else float(softmax_scale),
                                cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
            return (o, l) if return_lse else o
    return attention_direct(q, k, v, causal=causal, causal_align=causal_align, softmax_scale=softmax_scale,
                            cu_seqlens_q=cu_seqlens_q, cu_seqlens_k=cu_seqlens_k, max_seqlen_q=max_seqlen_q,
                            max_seqlen_k=max_seqlen_k, out=out, return_lse=return_lse, lse=lse, stream=stream,
                            check=check)


def attention_direct(q, k, v, *, causal=False, causal_align="top_left", softmax_scale=None, cu_seqlens_q=None,
                     cu_seqlens_k=None, max_seqlen_q=None, max_seqlen_k=None, out=None, return_lse=False, lse=None,
                     stream=None, check=False):
    stream, scale = stream_arg(stream), _scale(softmax_scale)
    varlen = cu_seqlens_q is not None or cu_seqlens_k is not None
    if varlen and (cu_seqlens_q is None or cu_seqlens_k is None):
        raise invalid("attention: cu_seqlens_q and cu_seqlens_k go together")
    nd = 3 if varlen else 4
    vq = view(q, "q").expect(BF16, ndim=nd)
    vk = view(k, "k").expect(BF16, ndim=nd)
    vv = view(v, "v").expect(BF16, ndim=nd)
    if varlen:
        tq, hq, dqk = vq.shape
        tk, hkv, _ = vk.shape
        batch = None
    else:
        batch, sq, hq, dqk = vq.shape
        _, sk, hkv, _ = vk.shape
        tq, tk = batch * sq, batch * sk
    dv = vv.shape[-1]
    if vk.shape[:-1] != vv.shape[:-1] or vk.shape[-1] != dqk:
        raise invalid(f"attention: k {vk.shape} and v {vv.shape} must share all but the last extent, "
                      f"k's last = q's last ({dqk})")
    if not varlen and vk.shape[0] != batch:
        raise invalid(f"attention: q has batch {batch}, k {vk.shape[0]}")
    if (dqk, dv) not in ((64, 64), (128, 128), (192, 128)):
        raise invalid(f"attention: head dims {dqk}/{dv} (qk/v): 64/64, 128/128 or 192/128")
    if hkv < 1 or hq % hkv:
        raise invalid(f"attention: {hq} query heads must be a multiple of {hkv} kv heads")
    views = [vq, vk, vv]
    if varlen:
        vcq = view(cu_seqlens_q, "cu_seqlens_q").expect(I32, ndim=1)
        vck = view(cu_seqlens_k, "cu_seqlens_k").expect(I32, ndim=1)
        if vcq.shape != vck.shape or vcq.shape[0] < 2:
            raise invalid(f"attention: cu_seqlens_q {vcq.shape} and cu_seqlens_k {vck.shape}: both [batch + 1]")
        batch = vcq.shape[0] - 1
        if max_seqlen_q is None or max_seqlen_k is None:
            torch = sys.modules.get("torch")  # offsets that are torch tensors have imported it
            if torch is None or not (isinstance(cu_seqlens_q, torch.Tensor) and isinstance(cu_seqlens_k, torch.Tensor)):
                raise wrong_type("attention: cu_seqlens given without max_seqlen_q / max_seqlen_k: pass them, or pass "
                                 "the offsets as torch tensors (then they are read from them, which waits for the GPU)")
            dq, dk = cu_seqlens_q.diff(), cu_seqlens_k.diff()
            max_seqlen_q = int(dq.max()) if max_seqlen_q is None else max_seqlen_q
            max_seqlen_k = int(dk.max()) if max_seqlen_k is None else max_seqlen_k
        sq = as_int(max_seqlen_q, "attention: max_seqlen_q", 1)
        sk = as_int(max_seqlen_k, "attention: max_seqlen_k", 1)
        views += [vcq, vck]
    if causal_align not in ("top_left", "bottom_right"):
        raise invalid(f"attention: causal_align {causal_align!r}, expected 'top_left' or 'bottom_right'")
    mask = WS_ATTN_NO_MASK if not causal else (
        WS_ATTN_CAUSAL_TOP_LEFT if causal_align == "top_left" else WS_ATTN_CAUSAL_BOTTOM_RIGHT)
    as_ints("attention", batch=batch, seqlen_q=sq, seqlen_k=sk, heads_q=hq, heads_kv=hkv, total_q=tq, total_k=tk)
    oshape = (tq, hq, dv) if varlen else (batch, sq, hq, dv)
    dev, out, vo, lse, vl = _outputs(views, out, lse, oshape, (hq, tq), return_lse, "warpspec.attention")
    p = _lib.AttnProblem()
    p.batch, p.seqlen_q, p.seqlen_k = batch, sq, sk
    p.cu_seqlens_q = vcq.ptr if varlen else None
    p.cu_seqlens_k = vck.ptr if varlen else None
    p.heads_q, p.heads_kv, p.dim_qk, p.dim_v = hq, hkv, dqk, dv
    p.mask = mask
    p.softmax_scale = scale
    p.q, p.k, p.v, p.o = vq.ptr, vk.ptr, vv.ptr, vo.ptr
    p.lse = vl.ptr if vl is not None else None
    p.total_q, p.total_k = (tq, tk) if varlen else (0, 0)
    with on_device(dev):
        s = stream_handle(stream, dev)
        with _lib.checking(check):
            _lib.check(_lib.lib.ws_attn_forward(ctypes.byref(p), ctypes.c_void_p(s)))
    return (out, lse) if (return_lse or lse is not None) else out


def mla_sparse_prefill(q, kv, indices, *, softmax_scale=None, out=None, return_lse=False, lse=None, stream=None):
    """q [S, H, 576] bf16 (512 latent + 64 rope), kv [S_kv, 576] bf16 (or [S_kv, 1, 576]; its
    first 512 columns are also V), indices [S, topk] int32 (int64 converted): query i
    attends to kv rows indices[i, :]; -1 and values outside 0 .. S_kv - 1 are masked and
    never read, duplicates count as often as they appear. H a multiple of 64. Returns
    o [S, H, 512] bf16 (and lse [S, H] fp32, natural log, with return_lse=True)."""
    stream, scale = stream_arg(stream), _scale(softmax_scale)
    if str(getattr(indices, "dtype", "")) == "torch.int64":
        indices = indices.to(dtype=torch_or_raise("warpspec.mla_sparse_prefill").int32)
    vq = view(q, "q").expect(BF16, ndim=3)
    s_q, heads, dqk = vq.shape
    vkv = view(kv, "kv").expect(BF16, ndim=(2, 3))
    if len(vkv.shape) == 3 and vkv.shape[1] != 1:
        raise invalid(f"kv: shape {vkv.shape}: one latent head ([S_kv, 576] or [S_kv, 1, 576])")
    s_kv, dkv = vkv.shape[0], vkv.shape[-1]
    if dqk != dkv:
        raise invalid(f"mla_sparse_prefill: q's last extent {dqk} and kv's {dkv} differ")
    dv = 512
    if dqk != 576:
        raise invalid(f"mla_sparse_prefill: head dim {dqk}; the kernel is built for 576 (512 latent + 64 rope)")
    if not _mla_heads_ok(heads):
        raise invalid(f"mla_sparse_prefill: {heads} heads, {MLA_HEADS_RULE}")
    vi = view(indices, "indices").expect(I32, ndim=2)
    if vi.shape[0] != s_q:
        raise invalid(f"indices: shape {vi.shape}, expected ({s_q}, topk)")
    topk = vi.shape[1]
    as_ints("mla_sparse_prefill", s_q=s_q, heads=heads, s_kv=s_kv, topk=topk)
    views = [vq, vkv, vi]
    dev, out, vo, lse, vl = _outputs(views, out, lse, (s_q, heads, dv), (s_q, heads), return_lse,
                                     "warpspec.mla_sparse_prefill")
    p = _lib.MlaSparseProblem()
    p.s_q, p.heads, p.s_kv, p.topk, p.dim_qk, p.dim_v = s_q, heads, s_kv, topk, dqk, dv
    p.softmax_scale = scale
    p.q, p.kv, p.indices, p.o = vq.ptr, vkv.ptr, vi.ptr, vo.ptr
    p.lse = vl.ptr if vl is not None else None
    with on_device(dev):
        s = stream_handle(stream, dev)
        _lib.check(_lib.lib.ws_mla_sparse_forward(ctypes.byref(p), ctypes.c_void_p(s)))
    return (out, lse) if (return_lse or lse is not None) else out


MLA_FP8_ROW_BYTES = 656  # warpspec/attention.h: WS_MLA_FP8_ROW_BYTES
MLA_HEADS_RULE = "a multiple of 64 or a divisor of 64 (1, 2, 4, 8, 16, 32)"  # mla_shape_check


def _mla_heads_ok(heads):
    """The MLA kernels' CTA holds 64 query rows: a token's heads fill whole CTAs, or one CTA
    with padding rows when it has fewer (a tensor-parallel shard: 16 or 32 heads)."""
    return heads >= 1 and (heads % 64 == 0 or 64 % heads == 0)


def mla_decode(q, kv_cache, block_table, seqlens, *, max_seqlen=None, softmax_scale=None, out=None, return_lse=False,
               lse=None, stream=None, check=False):
    """MLA decode over a paged latent cache (FlashMLA's and vLLM's layout).
    q [B, s_q, H, 576] bf16; kv_cache [pages, page_size, 576] (or [pages, page_size, 1,
    576]) bf16, its first 512 columns also V, or the FP8 cache: uint8 [pages, page_size,
    656] rows from mla_kv_quantize_fp8 (dequantised as they are read); block_table [B, max_pages] int32 page ids;
    seqlens [B] int32 cached tokens (query i of s_q sees keys 0 .. seqlen - s_q + i).
    max_seqlen: an upper bound of seqlens known on the host (None: max_pages x page_size;
    a tight bound lets the keys split over more CTAs). Returns o [B, s_q, H, 512] bf16
    (and lse [B, s_q, H] fp32). A split-KV workspace is allocated with PyTorch when
    needed. check=True: scan seqlens and block_table on the GPU first (module docstring)."""
    if (out is None and lse is None and stream is None and check is False
            and (max_seqlen is None or type(max_seqlen) is int) and (softmax_scale is None or _real(softmax_scale))):
        op = _ops.routed(q, kv_cache, block_table, seqlens)
        if op is not None:  # torch tensors: the custom op (torch.compile, CUDA graphs)
            o, l = op.mla_decode(q, kv_cache, block_table, seqlens, max_seqlen,
                                 None if softmax_scale is None else float(softmax_scale))
            return (o, l) if return_lse else o
    return mla_decode_direct(q, kv_cache, block_table, seqlens, max_seqlen=max_seqlen, softmax_scale=softmax_scale,
                             out=out, return_lse=return_lse, lse=lse, stream=stream, check=check)


def _mla_q_and_cache(q, kv_cache, op):
    """The checks both MLA decodes make on q [B, s_q, H, 576] bf16 and the paged cache
    ([pages, page_size, (1,) 576] bf16 or the FP8 cache's uint8 rows): (q view, cache view,
    whether the cache is FP8)."""
    vq = view(q, "q").expect(BF16, ndim=4)
    heads, dqk = vq.shape[2], vq.shape[3]
    vc = view(kv_cache, "kv_cache").expect(BF16 + ("uint8",), ndim=(3, 4))
    fp8 = vc.dtype == "uint8"
    row = MLA_FP8_ROW_BYTES if fp8 else 576
    if len(vc.shape) == 4 and vc.shape[2] != 1:
        raise invalid(f"kv_cache: shape {vc.shape}: one latent head ([pages, page_size, {row}])")
    dkv = vc.shape[-1]
    if fp8 and dkv != MLA_FP8_ROW_BYTES:
        raise invalid(f"kv_cache: uint8 rows of {dkv} bytes; the FP8 cache has rows of {MLA_FP8_ROW_BYTES} "
                      "(warpspec.mla_kv_quantize_fp8)")
    if dqk != 576 or (not fp8 and dkv != 576):
        raise invalid(f"{op}: head dims q {dqk}, cache {dkv}; the kernel is built for 576 (512 + 64 rope)")
    if not _mla_heads_ok(heads):
        raise invalid(f"{op}: {heads} heads, {MLA_HEADS_RULE}")
    return vq, vc, fp8


def mla_decode_direct(q, kv_cache, block_table, seqlens, *, max_seqlen=None, softmax_scale=None, out=None,
                      return_lse=False, lse=None, stream=None, check=False):
    """mla_decode() without the custom op: the checks and the C calls (the op's implementation)."""
    stream, scale = stream_arg(stream), _scale(softmax_scale)
    max_seqlen = 0 if max_seqlen is None else as_int(max_seqlen, "mla_decode: max_seqlen", 0)
    vq, vc, fp8 = _mla_q_and_cache(q, kv_cache, "mla_decode")
    b, s_q, heads = vq.shape[:3]
    pages, page_size = vc.shape[0], vc.shape[1]
    vt = view(block_table, "block_table").expect(I32, ndim=2)
    if vt.shape[0] != b:
        raise invalid(f"block_table: shape {vt.shape}, expected ({b}, max_pages)")
    vs = view(seqlens, "seqlens").expect(I32, shape=(b,))
    max_pages = vt.shape[1]
    as_ints("mla_decode", batch=b, s_q=s_q, heads=heads, page_size=page_size, num_pages=pages, max_pages=max_pages)
    views = [vq, vc, vt, vs]
    dev, out, vo, lse, vl = _outputs(views, out, lse, (b, s_q, heads, 512), (b, s_q, heads), return_lse,
                                     "warpspec.mla_decode")
    p = _lib.MlaDecodeProblem()
    p.batch, p.s_q, p.heads, p.dim_qk, p.dim_v = b, s_q, heads, 576, 512
    p.page_size, p.num_pages, p.max_pages = page_size, pages, max_pages
    p.max_seqlen = max_seqlen
    p.softmax_scale = scale
    p.q, p.kv_cache, p.block_table, p.seqlens, p.o = vq.ptr, vc.ptr, vt.ptr, vs.ptr, vo.ptr
    p.lse = vl.ptr if vl is not None else None
    p.kv_fp8 = 1 if fp8 else 0
    with on_device(dev):
        need = ctypes.c_size_t()
        _lib.check(_lib.lib.ws_mla_decode_workspace_size(ctypes.byref(p), ctypes.byref(need)))
        ws = empty((need.value,), "uint8", dev, "warpspec.mla_decode") if need.value else None
        s = stream_handle(stream, dev)
        with _lib.checking(check):
            _lib.check(_lib.lib.ws_mla_decode_forward(ctypes.byref(p), ws.data_ptr() if ws is not None else None,
                                                      need.value, ctypes.c_void_p(s)))
    return (out, lse) if (return_lse or lse is not None) else out


def mla_sparse_decode(q, kv_cache, indices, *, softmax_scale=None, out=None, return_lse=False, lse=None,
                      workspace=None, stream=None, check=False):
    """Sparse MLA decode (DeepSeek-V3.2, FlashMLA's sparse decode): each query token
    attends to its own top-k rows of a paged latent cache.
    q [B, s_q, H, 576] bf16 (H a multiple of 64); kv_cache [pages, page_size, 576] (or
    [pages, page_size, 1, 576]) bf16, or the FP8 cache uint8 [pages, page_size, 656]
    (mla_kv_quantize_fp8); indices [B, s_q, topk] int32: flat cache rows page x page_size
    + offset, -1 masked (a list of only -1 gives o = 0, lse = -inf), a duplicate counted
    twice. Returns o [B, s_q, H, 512] bf16 (and lse [B, s_q, H] fp32 with return_lse).
    When B x s_q is too small to fill the GPU each list is split over CTAs and merged:
    workspace (a uint8 tensor, or None: allocated with PyTorch) holds the partials.
    check=True: scan the indices on the GPU first (-1 or a row of the cache)."""
    if (out is None and lse is None and workspace is None and stream is None and check is False
            and (softmax_scale is None or _real(softmax_scale))):
        op = _ops.routed(q, kv_cache, indices)
        if op is not None:  # torch tensors: the custom op (torch.compile, CUDA graphs)
            o, l = op.mla_sparse_decode(q, kv_cache, indices, None if softmax_scale is None else float(softmax_scale))
            return (o, l) if return_lse else o
    return mla_sparse_decode_direct(q, kv_cache, indices, softmax_scale=softmax_scale, out=out, return_lse=return_lse,
                                    lse=lse, workspace=workspace, stream=stream, check=check)


def mla_sparse_decode_direct(q, kv_cache, indices, *, softmax_scale=None, out=None, return_lse=False, lse=None,
                             workspace=None, stream=None, check=False):
    """mla_sparse_decode() without the custom op: the checks and the C calls (the op's implementation)."""
    stream, scale = stream_arg(stream), _scale(softmax_scale)
    what = "warpspec.mla_sparse_decode"
    vq, vc, fp8 = _mla_q_and_cache(q, kv_cache, "mla_sparse_decode")
    b, s_q, heads = vq.shape[:3]
    pages, page_size = vc.shape[0], vc.shape[1]
    vi = view(indices, "indices").expect(I32, ndim=3)
    if vi.shape[0] != b or vi.shape[1] != s_q:
        raise invalid(f"indices: shape {vi.shape}, expected ({b}, {s_q}, topk)")
    topk = vi.shape[2]
    as_ints("mla_sparse_decode", batch=b, s_q=s_q, heads=heads, page_size=page_size, num_pages=pages, topk=topk)
    views = [vq, vc, vi]
    vw = view(workspace, "workspace", optional=True)
    if vw is not None:
        vw.expect(("uint8",), ndim=1)
        views.append(vw)
    dev, out, vo, lse, vl = _outputs(views, out, lse, (b, s_q, heads, 512), (b, s_q, heads), return_lse, what)
    p = _lib.MlaSparseDecodeProblem()
    p.batch, p.s_q, p.heads, p.dim_qk, p.dim_v = b, s_q, heads, 576, 512
    p.page_size, p.num_pages, p.topk = page_size, pages, topk
    p.softmax_scale = scale
    p.q, p.kv_cache, p.indices, p.o = vq.ptr, vc.ptr, vi.ptr, vo.ptr
    p.lse = vl.ptr if vl is not None else None
    p.kv_fp8 = 1 if fp8 else 0
    with on_device(dev):
        need = ctypes.c_size_t()
        _lib.check(_lib.lib.ws_mla_sparse_decode_workspace_size(ctypes.byref(p), ctypes.byref(need)))
        if vw is not None:
            if vw.shape[0] < need.value:
                raise invalid(f"workspace: {vw.shape[0]} bytes, the split needs {need.value} "
                              "(ws_mla_sparse_decode_workspace_size)")
            wptr, wbytes = vw.ptr, vw.shape[0]
        else:
            ws = empty((need.value,), "uint8", dev, what) if need.value else None
            wptr, wbytes = (ws.data_ptr() if ws is not None else None), need.value
        s = stream_handle(stream, dev)
        with _lib.checking(check):
            _lib.check(_lib.lib.ws_mla_sparse_decode_forward(ctypes.byref(p), wptr, wbytes, ctypes.c_void_p(s)))
    return (out, lse) if (return_lse or lse is not None) else out


def mla_kv_quantize_fp8(kv, *, out=None, stream=None):
    """BF16 latent cache rows [..., 576] into the FP8 rows FlashMLA's FP8 decode reads,
    uint8 [..., 656]: 512 E4M3 in four tiles of 128, four fp32 power-of-two scales (a
    value is e4m3 x scale), the 64 rope dims as BF16 (warpspec/attention.h). On the GPU,
    bit for bit the host quantiser's bytes."""
    stream = stream_arg(stream)
    vk = view(kv, "kv").expect(BF16)
    if not vk.shape or vk.shape[-1] != 576:
        raise invalid(f"kv: shape {vk.shape}, expected (..., 576)")
    rows = 1
    for d in vk.shape[:-1]:
        rows *= d
    what = "warpspec.mla_kv_quantize_fp8"
    vo = view(out, "out").expect(("uint8",), shape=tuple(vk.shape[:-1]) + (MLA_FP8_ROW_BYTES,)) if out is not None else None
    dev = require_hopper([vk, vo], what)  # a __cuda_array_interface__ input's device comes from CUDA
    if out is None:
        out = empty(tuple(vk.shape[:-1]) + (MLA_FP8_ROW_BYTES,), "uint8", dev, what)
        vo = view(out, "out")
    with on_device(dev):
        s = stream_handle(stream, dev)
        _lib.check(_lib.lib.ws_mla_kv_quantize_fp8(vk.ptr, ctypes.c_size_t(rows), vo.ptr, ctypes.c_void_p(s)))
    return out


def nsa_attention(q, k, v, block_indices, *, block=64, softmax_scale=None, out=None, return_lse=False, lse=None,
                  stream=None):
    """NSA selected-block attention, forward (one sequence): q [T, Hq, Dqk], k [T, Hkv, Dqk],
    v [T, Hkv, Dv] bf16, block_indices [T, Hkv, topn] int32 (int64 converted): query i of
    kv group g attends to the keys of blocks block_indices[i, g, :] (block b = keys
    b x block .. b x block + block - 1), only keys <= i; -1 and blocks past the end are
    skipped, a block listed twice counts twice. Hq / Hkv query heads share a selection
    (16, 32, 64 or 128 of them); dims 64/64, 128/128, 192/128; block 64. Returns
    o [T, Hq, Dv] bf16 (and lse [T, Hq] fp32, natural log, with return_lse=True)."""
    block = as_int(block, "nsa_attention: block", 1)
    stream, scale = stream_arg(stream), _scale(softmax_scale)
    if str(getattr(block_indices, "dtype", "")) == "torch.int64":
        block_indices = block_indices.to(dtype=torch_or_raise("warpspec.nsa_attention").int32)
    vq = view(q, "q").expect(BF16, ndim=3)
    t, hq, dqk = vq.shape
    vk = view(k, "k").expect(BF16, ndim=3)
    vv = view(v, "v").expect(BF16, ndim=3)
    if vk.shape[0] != t or vv.shape[0] != t or vk.shape[1] != vv.shape[1] or vk.shape[2] != dqk:
        raise invalid(f"nsa_attention: q {vq.shape}, k {vk.shape}, v {vv.shape}: expected k [T, Hkv, {dqk}] and "
                      f"v [T, Hkv, Dv] with T = {t}")
    hkv, dv = vk.shape[1], vv.shape[2]
    if hkv < 1 or hq < 1 or hq % hkv:
        raise invalid(f"nsa_attention: {hq} query heads over {hkv} kv heads: both >= 1, a whole number of query "
                      "heads per kv head")
    vi = view(block_indices, "block_indices").expect(I32, ndim=3)
    if vi.shape[0] != t or vi.shape[1] != hkv:
        raise invalid(f"block_indices: shape {vi.shape}, expected ({t}, {hkv}, topn)")
    as_ints("nsa_attention", tokens=t, heads_q=hq, heads_kv=hkv, topn=vi.shape[2])
    views = [vq, vk, vv, vi]
    dev, out, vo, lse, vl = _outputs(views, out, lse, (t, hq, dv), (t, hq), return_lse, "warpspec.nsa_attention")
    p = _lib.NsaProblem()
    p.tokens, p.heads_q, p.heads_kv, p.dim_qk, p.dim_v = t, hq, hkv, dqk, dv
    p.block, p.topn = block, vi.shape[2]
    p.softmax_scale = scale
    p.q, p.k, p.v, p.block_indices, p.o = vq.ptr, vk.ptr, vv.ptr, vi.ptr, vo.ptr
    p.lse = vl.ptr if vl is not None else None
    with on_device(dev):
        s = stream_handle(stream, dev)
        _lib.check(_lib.lib.ws_nsa_forward(ctypes.byref(p), ctypes.c_void_p(s)))
    return (out, lse) if (return_lse or lse is not None) else out
