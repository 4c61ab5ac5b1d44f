"""A whole MoE layer in one call (warpspec/moe_layer.h) over torch tensors.

    layer = warpspec.MoeLayer(comm, hidden=7168, inter=2048, experts=256, topk=8,
                              max_tokens=4096, w1=w1, w1_scale=w1s, w2=w2, w2_scale=w2s)
    out = layer(x, topk_idx, topk_weights)          # x bf16, or fp8 with x_scale=

w1 [E/n, 2 I, H] and w2 [E/n, H, I] float8_e4m3fn with 128 x 128 block scales
w1_scale [E/n, 2 I / 128, H / 128], w2_scale [E/n, H / 128, I / 128] fp32: this rank's
experts (as warpspec.quantize_fp8(w, block=(128, 128)) gives them per expert). The layer keeps
references to them. Every call is collective over the communicator's ranks, stream-ordered
and graph-capturable. path: "unfused" (dispatch, grouped GEMM, SwiGLU + FP8 requant, grouped
GEMM, combine), "fused_experts" (dispatch, one persistent kernel for both GEMMs and the SwiGLU,
combine), "fused_layer" (routing, the token transfer, both GEMMs, SwiGLU and the weighted
sums in one persistent kernel per rank) or "auto" (the default: ws_moe_layer_path_for's rule,
config.h); all give the same bits.

The functional form keeps one layer per communicator, weights and path:

    out = warpspec.moe(comm, x, topk_idx, topk_weights, w1, w1_scale, w2, w2_scale,
                       max_tokens=4096)"""

import ctypes
import weakref

from . import _lib, _ops
from ._lib import invalid
from ._handle import Handle, require_communicator
from ._tensor import BF16, F32, FP8, I32, on_device, stream_arg, stream_handle, torch_or_raise, view

PATHS = {"auto": 0, "unfused": 1, "fused_experts": 2, "fused_layer": 3}  # ws_moe_path


MoeLayerConfig = _lib.MoeLayerConfig


_LAYERS = {}  # id -> weak reference: the custom op names a layer by an int (a graph constant)
_NEXT_ID = [1]


def _register_layer(layer):
    i = _NEXT_ID[0]
    _NEXT_ID[0] += 1
    _LAYERS[i] = weakref.ref(layer, lambda _, i=i: _LAYERS.pop(i, None))
    return i


def layer_by_id(i):
    """The live MoeLayer the custom op torch.ops.warpspec.moe_layer names."""
    ref = _LAYERS.get(i)
    layer = ref() if ref is not None else None
    if layer is None:
        raise invalid(f"moe_layer: layer {i} no longer exists (destroyed or collected)")
    return layer


class MoeLayer(Handle):
    _free = "ws_moe_layer_destroy"

    def __init__(self, comm, *, hidden, inter, experts, topk, max_tokens, w1, w1_scale, w2, w2_scale, num_sms=0,
                 path="auto"):
        if not isinstance(path, str) or path not in PATHS:  # a list would not even hash
            raise invalid(f"MoeLayer: path {path!r}, one of {sorted(PATHS)}")
        require_communicator(comm, "MoeLayer")
        n = comm.size
        experts = _lib.as_int(experts, "experts", 1)
        if experts % n:
            raise invalid(f"MoeLayer: {experts} experts over {n} ranks: must divide")
        L = experts // n
        i = _lib.as_int
        self.cfg = MoeLayerConfig(i(hidden, "hidden", 1), i(inter, "inter", 1), i(experts, "experts", 1),
                                  i(topk, "topk", 1), i(max_tokens, "max_tokens", 1), i(num_sms, "num_sms", 0), PATHS[path])
        H, I = self.cfg.hidden, self.cfg.inter
        if H % 128 or I % 128:
            raise invalid(f"MoeLayer: hidden {H} and inter {I} must be multiples of 128")
        self._w = [view(w1, "w1").expect(FP8, shape=(L, 2 * I, H)),
                   view(w1_scale, "w1_scale").expect(F32, shape=(L, 2 * I // 128, H // 128)),
                   view(w2, "w2").expect(FP8, shape=(L, H, I)),
                   view(w2_scale, "w2_scale").expect(F32, shape=(L, H // 128, I // 128))]
        self._keep = (w1, w1_scale, w2, w2_scale)  # the C layer uses them in place
        self.comm, self.device = comm, comm.device
        for v in self._w:
            if v.device is not None and v.device != self.device:
                raise invalid(f"{v.name}: on cuda:{v.device}, the communicator is on cuda:{self.device}")
        h = ctypes.c_void_p()
        with on_device(self.device):
            _lib.check(_lib.lib.ws_moe_layer_create(ctypes.byref(h), comm._handle(), ctypes.byref(self.cfg),
                                                    self._w[0].ptr, self._w[1].ptr, self._w[2].ptr, self._w[3].ptr))
        self._h = h
        self._id = _register_layer(self)

    def path_for(self, tokens):
        """The path a call with `tokens` tokens takes: "unfused", "fused_experts" or "fused_layer"."""
        p = ctypes.c_int()
        _lib.check(_lib.lib.ws_moe_layer_path_for(self._handle(), _lib.as_int(tokens, "tokens", 0), ctypes.byref(p)))
        return {v: k for k, v in PATHS.items()}[p.value]

    def __call__(self, x, topk_idx, topk_weights, *, x_scale=None, out=None, stream=None, check=False):
        """out [T, H] bf16 = sum_k topk_weights[t, k] * expert_{topk_idx[t, k]}(x[t]).
        x: [T, H] bf16 (quantised to FP8 1 x 128 inside), or float8_e4m3fn with x_scale
        [T, H / 128] fp32 row-major. topk_idx int32 (int64 converted), -1 skips a slot.
        T may be 0 (an idle rank: it still serves its experts to the others; every rank
        calls). check=True (or WARPSPEC_CHECK=1): topk_idx entries other than -1 and 0 ..
        experts - 1 raise before the call (without it they are skipped); it waits for the
        GPU, so not inside graph capture, and a rank that raises leaves its peers waiting
        into their timeout."""
        if out is None and stream is None and check is False:
            op = _ops.routed(x, x_scale, topk_idx, topk_weights)
            if op is not None:  # torch tensors: the custom op (torch.compile, CUDA graphs)
                return op.moe_layer(self._id, x, x_scale, topk_idx, topk_weights)
        return self._call_direct(x, topk_idx, topk_weights, x_scale=x_scale, out=out, stream=stream, check=check)

    def _call_direct(self, x, topk_idx, topk_weights, *, x_scale=None, out=None, stream=None, check=False):
        """The call without the custom op: the checks and the C call (the op's implementation)."""
        stream = stream_arg(stream)  # checked before anything asks the device
        handle = self._handle()
        torch = torch_or_raise("MoeLayer")
        H, K = self.cfg.hidden, self.cfg.topk
        if getattr(topk_idx, "dtype", None) is torch.int64:
            topk_idx = topk_idx.to(torch.int32)
        vx = view(x, "x").expect(BF16 if x_scale is None else FP8, ndim=2)
        T = vx.shape[0]
        if vx.shape[1] != H:
            raise invalid(f"x: shape {vx.shape}, expected (tokens, {H})")
        if T > self.cfg.max_tokens:
            raise invalid(f"x: {T} tokens, the layer was made for at most {self.cfg.max_tokens}")
        vs = view(x_scale, "x_scale").expect(F32, shape=(T, H // 128)) if x_scale is not None else None
        vi = view(topk_idx, "topk_idx").expect(I32, shape=(T, K))
        vw = view(topk_weights, "topk_weights").expect(F32, shape=(T, K))
        if out is None:
            out = torch.empty((T, H), dtype=torch.bfloat16, device=f"cuda:{self.device}")
        vo = view(out, "out").expect(BF16, shape=(T, H))
        with on_device(self.device):
            s = stream_handle(stream, self.device)
            with _lib.checking(check):
                _lib.check(_lib.lib.ws_moe_layer_forward(handle, vx.ptr, vs.ptr if vs else None, vi.ptr, vw.ptr, T,
                                                         vo.ptr, ctypes.c_void_p(s)))
        return out


def moe(comm, x, topk_idx, topk_weights, w1, w1_scale, w2, w2_scale, *, x_scale=None, max_tokens=None, path="auto",
        num_sms=0, out=None, stream=None, check=False):
    """out [T, H] bf16 = sum_k topk_weights[t, k] * expert_{topk_idx[t, k]}(x[t]): the whole
    MoE layer, as MoeLayer(...)(x, topk_idx, topk_weights) (same arguments, same checks).
    H, I, the experts (comm.size x w1.shape[0]) and top-k come from the tensors. The first
    call with a communicator, these weights (their addresses and shapes), path, num_sms and
    max_tokens creates the layer (collective: every rank calls with its own weights and the
    same max_tokens); later calls reuse it, and comm.destroy() destroys it. max_tokens: the
    most tokens a rank passes; by default this call's tokens rounded up to a power of two,
    which with several ranks only agrees across ranks if they pass the same number of
    tokens, so pass it there."""
    if not isinstance(path, str) or path not in PATHS:
        raise invalid(f"MoeLayer: path {path!r}, one of {sorted(PATHS)}")
    vw1, vw2 = view(w1, "w1").expect(FP8, ndim=3), view(w2, "w2").expect(FP8, ndim=3)
    vx = view(x, "x").expect(BF16 + FP8, ndim=2)
    vi = view(topk_idx, "topk_idx").expect(I32 + ("int64",), ndim=2)
    T = vx.shape[0]
    view(topk_weights, "topk_weights").expect(F32, ndim=2)  # before a layer is made for a call that cannot run
    view(x_scale, "x_scale", optional=True)
    if max_tokens is None:
        max_tokens = 1 << max(T - 1, 0).bit_length()
    max_tokens, num_sms = _lib.as_int(max_tokens, "max_tokens", 1), _lib.as_int(num_sms, "num_sms", 0)
    if T > max_tokens:
        raise invalid(f"x: {T} tokens, more than max_tokens {max_tokens}")
    key = (vw1.ptr, vw1.shape, view(w1_scale, "w1_scale").ptr, vw2.ptr, vw2.shape, view(w2_scale, "w2_scale").ptr,
           path, num_sms, max_tokens)
    require_communicator(comm, "moe")
    comm._handle()  # raises if destroyed
    layers = comm.__dict__.setdefault("_moe_layers", {})
    layer = layers.get(key)
    if layer is None:
        layer = MoeLayer(comm, hidden=vx.shape[1], inter=vw2.shape[2], experts=comm.size * vw1.shape[0],
                         topk=vi.shape[1], max_tokens=max_tokens, w1=w1, w1_scale=w1_scale, w2=w2,
                         w2_scale=w2_scale, num_sms=num_sms, path=path)
        layers[key] = layer
    return layer(x, topk_idx, topk_weights, x_scale=x_scale, out=out, stream=stream, check=check)
