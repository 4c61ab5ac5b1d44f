"""warpspec.nn: PyTorch modules for a DeepSeek-V3-style model, over the package's ops.

    import warpspec.nn as wnn
    moe = wnn.MoEBlock.from_bf16(w1, w2, topk=8, max_tokens=4096,   # this rank's experts
                                 group=dist.group.WORLD)             # (None: one GPU)
    y = moe(x, topk_idx, topk_weights)        # the router is the caller's

    attn = wnn.MLAAttention(hidden=7168, heads=128, q_lora_rank=1536, device="cuda")
    cache, table = wnn.paged_cache(batch=8, max_len=4096, fp8=True, device="cuda")
    y = attn(prompt, cache, table)            # prefill: positions 0 .. S - 1
    y = attn(step, cache, table, seqlens)     # decode: after `seqlens` cached tokens

MoEBlock is warpspec.MoeLayer (dispatch, FP8 experts, combine) as a module. MLAAttention
runs warpspec.attention or mla_sparse_prefill (prefill), warpspec.mla_decode over the
paged latent cache (decode) and mla_kv_quantize_fp8 (the FP8 cache); its projections,
norms and rotary embedding are PyTorch ops. forward(..., reference=True) of either module is a float64
pure-PyTorch path (_nn_reference.py) that runs anywhere, the CPU included, and that the
GPU tests hold the kernel paths against. Bad shapes and dtypes raise the package's
InvalidArgumentError / InvalidTypeError before any kernel runs."""

try:
    import torch
except ImportError as e:  # the rest of the package works without PyTorch; this part cannot
    raise ImportError("warpspec.nn needs PyTorch (pip install torch)") from e

import importlib
import math

from . import Communicator, MoeLayer, _lib, attention, get_unique_id, mla_decode, mla_kv_quantize_fp8, \
    mla_sparse_prefill, quantize_fp8
from . import _nn_reference as ref
from ._lib import invalid, wrong_type
from ._nn_reference import moe_reference

MAX_TOPK = 16                           # warpspec/moe.h: WS_EP_MAX_TOPK
LATENT, ROPE = ref.MLA_LATENT, ref.MLA_ROPE  # the MLA kernels' fixed dims: q/k 576, v 512
HEADS_MULTIPLE = 64                     # mla_decode and mla_sparse_prefill take heads in 64s
DENSE_DIMS = ((128, 128), (192, 128))   # (qk, v) head dims warpspec.attention takes for MLA
_FP8 = (torch.float8_e4m3fn, torch.uint8)

__all__ = ["MoEBlock", "MLAAttention", "RMSNorm", "paged_cache", "shared_communicator", "moe_reference"]


def _tensor(t, name, dtypes, shape=None, what=""):
    """t checked to be a torch tensor of one of `dtypes` and, if given, `shape` (None: any
    extent there)."""
    if not isinstance(t, torch.Tensor):
        raise wrong_type(f"{what}: {name} is {type(t).__name__}, expected a torch.Tensor")
    if t.dtype not in dtypes:
        raise invalid(f"{what}: {name} has dtype {t.dtype}, expected {' or '.join(str(d) for d in dtypes)}")
    if shape is not None and (t.dim() != len(shape) or any(w is not None and s != w for s, w in zip(t.shape, shape))):
        want = "(" + ", ".join("*" if w is None else str(w) for w in shape) + ")"
        raise invalid(f"{what}: {name} has shape {tuple(t.shape)}, expected {want}")
    return t


def _require_gpu(what, x):
    if x.device.type != "cuda":
        raise invalid(f"{what}: x is on {x.device}; the kernels run on an sm_90 GPU (reference=True runs anywhere)")


def _same_device(what, **tensors):
    devs = {n: t.device for n, t in tensors.items() if t is not None}
    if len(set(devs.values())) > 1:
        raise invalid(f"{what}: tensors on different devices: " + ", ".join(f"{n} on {d}" for n, d in devs.items()))


# ---- the communicator -----------------------------------------------------------------
_SHARED = {"comm": None, "group": None}


def shared_communicator(group=None, device=None):
    """The warpspec.Communicator the MoE blocks share: NVSHMEM initialises once per process,
    so one communicator serves every block. Made on the first call, over `group` (a
    torch.distributed process group; collective over it) or, with group None, over this
    process alone (one GPU, no expert parallelism). device: its CUDA device (default the
    current one). Destroy it with .destroy() (collective) when done."""
    comm = _SHARED["comm"]
    if comm is not None and comm._h is not None:
        if _SHARED["group"] is not group:
            raise invalid(f"shared_communicator: this process already has one over {comm.size} rank(s) for another "
                          "group (NVSHMEM initialises once per process); pass the same group, or comm=")
        return comm
    comm = Communicator(0, 1, get_unique_id(), device=device) if group is None else \
        Communicator.from_process_group(group, device=device)
    _SHARED.update(comm=comm, group=group)
    return comm


def _ep_rank(comm, group, what):
    """(rank, ranks) of the expert-parallel group: the communicator's, the process group's,
    or (0, 1) for one GPU."""
    if comm is not None and group is not None:
        raise invalid(f"{what}: pass comm or group, not both")
    if comm is not None:
        if not isinstance(comm, Communicator):
            raise wrong_type(f"{what}: comm is {type(comm).__name__}, expected a warpspec.Communicator "
                             "(for a torch.distributed group pass group=)")
        return comm.rank, comm.size
    if group is not None:
        import torch.distributed as dist
        if not dist.is_available() or not dist.is_initialized():
            raise invalid(f"{what}: group given but torch.distributed is not initialised (dist.init_process_group)")
        return dist.get_rank(group), dist.get_world_size(group)
    return 0, 1


# ---- the MoE block ----------------------------------------------------------------------
class MoEBlock(torch.nn.Module):
    """DeepSeek-V3-style routed experts, expert parallel over the ranks of `comm` / `group`
    (rank r holds experts r x E / n .. (r + 1) x E / n - 1; neither given: one GPU):

        y = block(x, topk_idx, topk_weights)   # [..., hidden] bf16 out

    x [..., hidden] bf16, or FP8 as (x, x_scale) / x_scale= with scales [..., hidden / 128]
    fp32 (1 x 128 blocks, warpspec.quantize_fp8's); topk_idx [..., topk] int32 or int64
    (-1 skips a slot); topk_weights [..., topk] floating (used as fp32). At most max_tokens
    tokens per call and rank; 0 tokens (an idle rank) is fine and still serves its experts.
    Every call is collective over the ranks, as MoeLayer's. Shared experts and the router
    are the caller's.

    w1 [E/n, 2 I, hidden] (gate rows, then up) and w2 [E/n, hidden, I] float8_e4m3fn with
    128 x 128 fp32 scales w1_scale [E/n, 2 I / 128, hidden / 128], w2_scale [E/n, hidden /
    128, I / 128]: buffers of the module (state_dict, .to()). from_bf16 quantises BF16
    weights, random makes them. The C layer is made at the first forward or prepare()
    (collective) and made again when the weights have moved (.to()); call prepare() before
    torch.compile or CUDA graph capture. hidden and intermediate multiples of 128."""

    def __init__(self, hidden, intermediate, experts, topk, max_tokens, w1, w1_scale, w2, w2_scale, *, comm=None,
                 group=None, path="auto", num_sms=0):
        super().__init__()
        what = "MoEBlock"
        self.rank, self.ranks = _ep_rank(comm, group, what)
        i = _lib.as_int
        self.hidden = i(hidden, f"{what}: hidden", 128)
        self.intermediate = i(intermediate, f"{what}: intermediate", 128)
        self.experts, self.topk = i(experts, f"{what}: experts", 1), i(topk, f"{what}: topk", 1, MAX_TOPK)
        self.max_tokens, self.num_sms = i(max_tokens, f"{what}: max_tokens", 1), i(num_sms, f"{what}: num_sms", 0)
        H, I = self.hidden, self.intermediate
        if H % 128 or I % 128:
            raise invalid(f"{what}: hidden {H} and intermediate {I} must be multiples of 128")
        if self.experts % self.ranks:
            raise invalid(f"{what}: {self.experts} experts over {self.ranks} ranks: must divide")
        if self.topk > self.experts:
            raise invalid(f"{what}: topk {self.topk} > {self.experts} experts")
        paths = importlib.import_module(__package__ + ".moe_layer").PATHS
        if not isinstance(path, str) or path not in paths:
            raise invalid(f"{what}: path {path!r}, one of {sorted(paths)}")
        self.path = path
        weights = dict(zip(self._weight_specs(), (w1, w1_scale, w2, w2_scale)))
        for name, (dtypes, shape) in self._weight_specs().items():
            _tensor(weights[name], name, dtypes, shape, what)
        _same_device(what, **weights)
        for name, t in weights.items():
            self.register_buffer(name, t.contiguous())  # the C layer reads them in place
        self._comm, self._group = comm, group
        self._layer, self._ptrs = None, None

    @property
    def local_experts(self):
        return self.experts // self.ranks

    def _weight_specs(self):
        """name: (dtypes, shape) of each expert weight buffer, this rank's experts."""
        L, H, I, f32 = self.local_experts, self.hidden, self.intermediate, (torch.float32,)
        return {"w1": (_FP8, (L, 2 * I, H)), "w1_scale": (f32, (L, 2 * I // 128, H // 128)),
                "w2": (_FP8, (L, H, I)), "w2_scale": (f32, (L, H // 128, I // 128))}

    def extra_repr(self):
        return (f"hidden={self.hidden}, intermediate={self.intermediate}, experts={self.experts} "
                f"({self.local_experts} on rank {self.rank} of {self.ranks}), topk={self.topk}, "
                f"max_tokens={self.max_tokens}, path={self.path!r}")

    # ---- weights ----
    @staticmethod
    def quantize_weights(w1, w2):
        """(w1, w1_scale, w2, w2_scale) as MoEBlock takes them, from floating expert weights
        w1 [L, 2 I, H] and w2 [L, H, I] (rounded to BF16 first): FP8 with 128 x 128 scales,
        per expert. CUDA tensors go through warpspec.quantize_fp8, CPU ones through the
        same definition in torch ops."""
        what = "MoEBlock.quantize_weights"
        floats = (torch.bfloat16, torch.float16, torch.float32, torch.float64)
        _tensor(w1, "w1", floats, (None, None, None), what)
        L, I2, H = w1.shape
        _tensor(w2, "w2", floats, (L, H, I2 // 2), what)
        if I2 % 256 or H % 128:
            raise invalid(f"{what}: w1 {tuple(w1.shape)}: 2 x intermediate and hidden must be multiples of 256 and 128")

        def q(w):
            w = w.to(torch.bfloat16).contiguous()
            return quantize_fp8(w, block=(128, 128)) if w.is_cuda else ref.quantize_blocks(w, (128, 128))

        pairs1, pairs2 = [q(w) for w in w1], [q(w) for w in w2]
        return (torch.stack([p[0] for p in pairs1]), torch.stack([p[1] for p in pairs1]),
                torch.stack([p[0] for p in pairs2]), torch.stack([p[1] for p in pairs2]))

    @staticmethod
    def random_weights(hidden, intermediate, experts, *, first=0, seed=0, device=None):
        """BF16 w1 [experts, 2 I, H], w2 [experts, H, I] of experts first .. first + experts
        - 1, uniform in +-1 / sqrt(fan in). Expert e comes from its own generator (seed, e),
        so every expert-parallel split holds the same weights for the same expert."""
        w1, w2 = [], []
        for e in range(first, first + experts):
            g = torch.Generator().manual_seed(seed * 1000003 + e)
            w1.append((torch.rand(2 * intermediate, hidden, generator=g) * 2 - 1) / math.sqrt(hidden))
            w2.append((torch.rand(hidden, intermediate, generator=g) * 2 - 1) / math.sqrt(intermediate))
        return (torch.stack(w1).to(device=device, dtype=torch.bfloat16),
                torch.stack(w2).to(device=device, dtype=torch.bfloat16))

    @classmethod
    def from_bf16(cls, w1, w2, *, experts=None, topk, max_tokens, comm=None, group=None, **kw):
        """A block from this rank's experts in BF16, w1 [E/n, 2 I, H] and w2 [E/n, H, I],
        quantised by quantize_weights. experts: E in all (default E/n x ranks)."""
        _, ranks = _ep_rank(comm, group, "MoEBlock.from_bf16")
        w1q, w1s, w2q, w2s = cls.quantize_weights(w1, w2)
        L, H, I = w1q.shape[0], w1q.shape[2], w2q.shape[2]
        return cls(H, I, L * ranks if experts is None else experts, topk, max_tokens, w1q, w1s, w2q, w2s, comm=comm,
                   group=group, **kw)

    @classmethod
    def random(cls, hidden, intermediate, experts, topk, max_tokens, *, comm=None, group=None, seed=0, device=None,
               **kw):
        """A block with random_weights for this rank's experts (the same expert, the same
        weights, on any number of ranks)."""
        rank, ranks = _ep_rank(comm, group, "MoEBlock.random")
        experts = _lib.as_int(experts, "MoEBlock.random: experts", 1)
        if experts % ranks:
            raise invalid(f"MoEBlock.random: {experts} experts over {ranks} ranks: must divide")
        L = experts // ranks
        w1, w2 = cls.random_weights(_lib.as_int(hidden, "MoEBlock.random: hidden", 128),
                                    _lib.as_int(intermediate, "MoEBlock.random: intermediate", 128), L,
                                    first=rank * L, seed=seed, device=device)
        return cls.from_bf16(w1, w2, experts=experts, topk=topk, max_tokens=max_tokens, comm=comm, group=group, **kw)

    # ---- the C layer ----
    def prepare(self):
        """Make the C layer now (collective: every rank calls it, or its first forward):
        on the communicator given, else on shared_communicator(group)."""
        what = "MoEBlock"
        if not self.w1.is_cuda:
            raise invalid(f"{what}: the expert weights are on {self.w1.device}; move the block to its GPU "
                          "(block.cuda()) first; reference=True runs on the CPU")
        for name, (dtypes, shape) in self._weight_specs().items():
            _tensor(getattr(self, name), name, dtypes, shape, what + " (a module-wide .to(dtype) converts buffers too)")
        dev = self.w1.device.index
        comm = self._comm if self._comm is not None else shared_communicator(self._group, dev)
        if comm.size != self.ranks or comm.device != dev:
            raise invalid(f"{what}: the communicator has {comm.size} rank(s) on cuda:{comm.device}; the block was made "
                          f"for {self.ranks} with its weights on cuda:{dev}")
        self.close()
        self._layer = MoeLayer(comm, hidden=self.hidden, inter=self.intermediate, experts=self.experts,
                               topk=self.topk, max_tokens=self.max_tokens, w1=self.w1, w1_scale=self.w1_scale,
                               w2=self.w2, w2_scale=self.w2_scale, num_sms=self.num_sms, path=self.path)
        # comm.destroy() destroys the layers in this dict before the communicator
        comm.__dict__.setdefault("_moe_layers", {})[("warpspec.nn", id(self))] = self._layer
        self._ptrs = self._weight_ptrs()

    def close(self):
        """Destroy the C layer (collective); a later forward makes a new one."""
        layer, self._layer = self._layer, None
        if layer is not None:
            layer.comm.__dict__.get("_moe_layers", {}).pop(("warpspec.nn", id(self)), None)
            layer.destroy()

    def _weight_ptrs(self):
        return tuple(t.data_ptr() for t in (self.w1, self.w1_scale, self.w2, self.w2_scale))

    # ---- forward ----
    def forward(self, x, topk_idx, topk_weights, x_scale=None, *, reference=False):
        """[..., hidden] bf16 (float64 with reference=True: moe_reference over this
        block's weights, which needs every expert here, i.e. one rank)."""
        if isinstance(x, (tuple, list)):
            if len(x) != 2 or x_scale is not None:
                raise invalid("MoEBlock: x as a pair is (x_fp8, x_scale), and then no x_scale=")
            x, x_scale = x
        x, idx, w, s, lead = self._flat_inputs(x, topk_idx, topk_weights, x_scale)
        if reference:
            if self.ranks != 1:
                raise invalid("MoEBlock: reference=True needs every expert on this rank (one rank); under expert "
                              "parallelism call warpspec.nn.moe_reference with all the experts' weights")
            return moe_reference(x, idx, w, self.w1, self.w1_scale, self.w2, self.w2_scale,
                                 x_scale=s).view(*lead, self.hidden)
        if not torch.compiler.is_compiling():  # traced code runs the layer made before
            _require_gpu("MoEBlock", x)
            if x.device != self.w1.device:
                raise invalid(f"MoEBlock: x is on {x.device}, the expert weights on {self.w1.device}")
            if self._layer is None or self._layer._h is None or self._ptrs != self._weight_ptrs():
                self.prepare()
        return self._layer(x, idx, w, x_scale=s).view(*lead, self.hidden)

    def _flat_inputs(self, x, topk_idx, topk_weights, x_scale):
        """The inputs checked and flattened to [T, ...] rows: (x, idx int32, weights fp32,
        x_scale or None, leading shape)."""
        what, H, K = "MoEBlock", self.hidden, self.topk
        _tensor(x, "x", (torch.bfloat16,) + _FP8, None, what)
        if x.dim() < 1 or x.shape[-1] != H:
            raise invalid(f"{what}: x has shape {tuple(x.shape)}, expected (..., {H})")
        if (x.dtype == torch.bfloat16) != (x_scale is None):
            raise invalid(f"{what}: x is {x.dtype}: bf16 x goes without x_scale, FP8 x with it")
        lead = tuple(x.shape[:-1])
        T = math.prod(lead)
        if T > self.max_tokens:
            raise invalid(f"{what}: {T} tokens, the block was made for at most {self.max_tokens} per call")
        _tensor(topk_idx, "topk_idx", (torch.int32, torch.int64), lead + (K,), what)
        _tensor(topk_weights, "topk_weights", (torch.float32, torch.bfloat16, torch.float16, torch.float64),
                lead + (K,), what)
        if x_scale is not None:
            _tensor(x_scale, "x_scale", (torch.float32,), lead + (H // 128,), what)
            x_scale = x_scale.reshape(T, H // 128).contiguous()
        _same_device(what, x=x, topk_idx=topk_idx, topk_weights=topk_weights, x_scale=x_scale)
        return (x.reshape(T, H).contiguous(), topk_idx.reshape(T, K).to(torch.int32).contiguous(),
                topk_weights.reshape(T, K).float().contiguous(), x_scale, lead)


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
    multiples of 64 (attention is data-parallel here, not split over ranks by heads).
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
        if self.heads % HEADS_MULTIPLE:
            raise invalid(f"{what}: {self.heads} heads; the MLA kernels take a multiple of {HEADS_MULTIPLE}")
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
