"""MoE expert-parallel dispatch and combine (warpspec/moe.h) over torch tensors.

    ep = warpspec.MoeDispatcher(comm, hidden=7168, experts=256, topk=8, max_tokens=4096,
                                payload="fp8", row_align=128)
    q, s = warpspec.quantize_fp8(x)                        # [T, H] fp8, [T, H / 128] scales
    r = ep.dispatch(q, topk_idx, topk_weights, x_scale=s)  # rows grouped by local expert
    h = warpspec.gemm(r.x, w1, a_scale=r.x_scale, b_scale=w1_scale,
                      group_offsets=r.expert_offsets)      # the experts, straight on the layout
    ...
    out = ep.combine(y)                                    # [T, H] bf16: sum_k w_k y_k

Every call is collective over the communicator's ranks. The receive tensors are views of
the handle's buffers, valid until the next dispatch; their row count is the worst case
(max_rows) and expert_offsets (on the device) says which rows are real, so the whole
sequence captures in a CUDA graph. sync_counts=True waits for the stream and returns
the exact offsets on the host too (and reports expert ids out of range)."""

import copy
import ctypes
from dataclasses import dataclass

from . import _lib
from ._lib import invalid
from ._handle import Handle, require_communicator
from ._tensor import BF16, F32, FP8, I32, empty, on_device, stream_arg, stream_handle, torch_or_raise, view, wrap_device

_PAYLOADS = {"bf16": 0, "bfloat16": 0, "fp8": 1, "float8_e4m3fn": 1}
_MODES = {"normal": 0, "low_latency": 1}
_RECEIVES = {"copy": 0, "index": 1}


def _config(hidden, experts, topk, max_tokens, payload, row_align, num_sms, mode="normal", receive="copy"):
    p = _PAYLOADS.get(str(payload).replace("torch.", ""))
    if p is None:
        raise invalid(f"MoeDispatcher: payload {payload!r}, expected 'fp8' or 'bf16'")
    md = _MODES.get(str(mode))
    if md is None:
        raise invalid(f"MoeDispatcher: mode {mode!r}, expected 'normal' or 'low_latency'")
    rc = _RECEIVES.get(str(receive))
    if rc is None:
        raise invalid(f"MoeDispatcher: receive {receive!r}, expected 'copy' or 'index'")
    i = _lib.as_int
    return _lib.EpConfig(i(hidden, "hidden", 1), i(experts, "experts", 1), i(topk, "topk", 1),
                         i(max_tokens, "max_tokens", 1), p, i(row_align, "row_align", 1), i(num_sms, "num_sms", 0), md,
                         rc)


def check_config(nranks, *, hidden, experts, topk, max_tokens, payload="fp8", row_align=1, num_sms=0, mode="normal",
                 receive="copy"):
    """Validate a dispatcher config for `nranks` ranks without a GPU; returns the
    worst-case receive rows (ws_gemm's m for the layout)."""
    cfg = _config(hidden, experts, topk, max_tokens, payload, row_align, num_sms, mode, receive)
    nranks = _lib.as_int(nranks, "nranks", 1)
    _lib.check(_lib.lib.ws_ep_config_check(ctypes.byref(cfg), nranks))
    return int(_lib.lib.ws_ep_max_rows(ctypes.byref(cfg), nranks))


@dataclass
class MoeReceived:
    """What a dispatch delivered to this rank (views of the handle's buffers)."""
    x: object               # [max_rows, hidden] fp8 or bf16 (low latency: [local_experts, m, hidden])
    x_scale: object         # [max_rows, hidden / 128] fp32, K-block-major (strides (1, ld)); None for bf16
    expert_offsets: object  # [local_experts + 1] int32 on the device: gemm's group_offsets
    expert_counts: object   # [local_experts] int32: real rows per expert (low latency: gemm's group_rows)
    src_rank: object        # [max_rows] int32 (-1: padding)
    src_token: object       # [max_rows] int32
    src_slot: object        # [max_rows] int32: the top-k slot
    weight: object          # [max_rows] fp32
    max_rows: int
    local_experts: int
    host_offsets: list = None  # exact offsets, with sync_counts=True
    # receive="index" (x and x_scale are then None): layout row r is row row_index[r] (-1:
    # padding) of `rows`, the receive buffer as bytes [rows_total, row_bytes]: the payload
    # first (hidden fp8 or bf16), then (fp8) its hidden / 128 fp32 scales
    row_index: object = None
    rows: object = None


class MoeDispatcher(Handle):
    """A dispatch/combine handle on a Communicator (collective to create and destroy)."""

    _free = "ws_ep_destroy"

    def __init__(self, comm, *, hidden, experts, topk, max_tokens, payload="fp8", row_align=1, num_sms=0,
                 mode="normal", receive="copy"):
        """mode "normal": rows grouped-contiguous by local expert (gemm with group_offsets);
        "low_latency": x is BF16 (quantised on the fly for the fp8 payload), rows in the
        masked layout [local_experts, nranks x max_tokens, hidden] (gemm with group_rows =
        expert_counts). receive "copy": the rows copied into that layout (x); "index":
        they stay where they arrived, the layout is row_index into `rows` (no copy on the
        receiver; the C API's ws_gemm reads them in place)."""
        require_communicator(comm, "MoeDispatcher")
        self.cfg = _config(hidden, experts, topk, max_tokens, payload, row_align, num_sms, mode, receive)
        self.index = self.cfg.receive == 1
        self.ll = self.cfg.mode == 1
        _lib.check(_lib.lib.ws_ep_config_check(ctypes.byref(self.cfg), comm.size))
        self.comm, self.device = comm, comm.device
        self.fp8 = self.cfg.payload == 1
        self.local_experts = self.cfg.experts // comm.size
        self.max_rows = int(_lib.lib.ws_ep_max_rows(ctypes.byref(self.cfg), comm.size))
        h = ctypes.c_void_p()
        with on_device(self.device):
            _lib.check(_lib.lib.ws_ep_create(ctypes.byref(h), comm._handle(), ctypes.byref(self.cfg)))
        self._h = h
        self._recv = None
        self._tokens = 0

    def _received(self, r):
        torch = torch_or_raise("MoeDispatcher.dispatch")
        R, H, L, dev = r.max_rows, self.cfg.hidden, r.local_experts, self.device
        xdt = torch.float8_e4m3fn if self.fp8 else torch.bfloat16
        i32 = lambda p, n: wrap_device(p, n * 4, torch.int32, (n,), dev)  # noqa: E731
        x = xs = row_index = rows = None
        if self.index:
            row_index = i32(r.row_index, R)
            rows = wrap_device(r.rows, r.rows_total * r.row_bytes, torch.uint8, (r.rows_total, r.row_bytes), dev)
        else:
            x = wrap_device(r.x, R * H * (1 if self.fp8 else 2), xdt, (R, H), dev)
            if self.ll:
                x = x.view(L, R // L, H)
            if self.fp8:
                kb = H // 128
                xs = wrap_device(r.x_scale, kb * r.scale_ld * 4, torch.float32, (kb, r.scale_ld), dev).t()[:R]
        return MoeReceived(x, xs, i32(r.expert_offsets, L + 1), i32(r.expert_counts, L), i32(r.src_rank, R),
                           i32(r.src_token, R), i32(r.src_slot, R),
                           wrap_device(r.weight, R * 4, torch.float32, (R,), dev), R, L, row_index=row_index, rows=rows)

    def dispatch(self, x, topk_idx, topk_weights, *, x_scale=None, sync_counts=False, stream=None, check=False):
        """Send each token once to every rank hosting one of its experts. x [T, hidden]
        (bf16, or fp8 with x_scale [T, hidden / 128] row-major fp32), topk_idx [T, topk]
        int32 (-1 skips a slot; int64 is converted), topk_weights [T, topk] fp32. T may be
        0 (empty tensors: an idle rank still takes part). check=True: as MoeLayer's."""
        torch = torch_or_raise("MoeDispatcher.dispatch")
        H, K = self.cfg.hidden, self.cfg.topk
        if getattr(topk_idx, "dtype", None) is torch.int64:
            topk_idx = topk_idx.to(torch.int32)
        vx = view(x, "x").expect(FP8 if self.fp8 and not self.ll else BF16, ndim=2)
        T = vx.shape[0]
        if vx.shape[1] != H:
            raise invalid(f"x: shape {vx.shape}, expected (tokens, {H})")
        if T > self.cfg.max_tokens:
            raise invalid(f"x: {T} tokens, the dispatcher was made for at most {self.cfg.max_tokens}")
        vi = view(topk_idx, "topk_idx").expect(I32, shape=(T, K))
        vw = view(topk_weights, "topk_weights").expect(F32, shape=(T, K))
        vs = None
        if self.fp8 and not self.ll:
            if x_scale is None:
                raise invalid("dispatch: the fp8 payload needs x_scale [tokens, hidden / 128] (row-major fp32)")
            vs = view(x_scale, "x_scale").expect(F32, shape=(T, H // 128))
        elif x_scale is not None:
            raise invalid("dispatch: x_scale is for the normal-mode fp8 payload (low latency quantises BF16 rows itself)")
        for v in (vx, vi, vw, vs):
            if v is not None and v.device is not None and v.device != self.device:
                raise invalid(f"{v.name}: on cuda:{v.device}, the dispatcher is on cuda:{self.device}")
        r = _lib.EpRecv()
        self._last = r  # the layout expert_gemm works on
        offs = (ctypes.c_int * (self.local_experts + 1))() if sync_counts else None
        with on_device(self.device):
            s = stream_handle(stream, self.device)
            with _lib.checking(check):
                _lib.check(_lib.lib.ws_ep_dispatch(self._handle(), vx.ptr, vs.ptr if vs else None, vi.ptr, vw.ptr, T,
                                                       ctypes.byref(r), offs, ctypes.c_void_p(s)))
        if self._recv is None:
            self._recv = self._received(r)
        self._tokens = T
        out = copy.copy(self._recv)  # the same views each call; a fresh object for host_offsets
        if sync_counts:
            out.host_offsets = list(offs)
        return out

    def expert_gemm(self, b, b_scale=None, *, out=None, stream=None):
        """D = A @ B^T per local expert over the latest dispatch's rows, whichever the receive
        (the index receive's rows are read where they arrived: no copy). b [local_experts,
        n, hidden] (fp8 with b_scale [local_experts, n / 128, hidden / 128] fp32, as the
        payload), out [max_rows, n] bf16 (low latency: [local_experts, m, n]); rows of
        padding hold values no one reads. The gathered rows need the fp8 payload."""
        what = "MoeDispatcher.expert_gemm"
        stream = stream_arg(stream)
        r = getattr(self, "_last", None)
        if r is None:
            raise invalid(f"{what}: no dispatch on this handle yet (it works on the latest one's rows)")
        L, H = self.local_experts, self.cfg.hidden
        vb = view(b, "b").expect(FP8 if self.fp8 else BF16, ndim=3)
        if vb.shape[0] != L or vb.shape[2] != H:
            raise invalid(f"b: shape {vb.shape}, expected ({L}, n, {H}): one [n, hidden] matrix per local expert")
        n = vb.shape[1]
        vs = None
        if self.fp8:
            if b_scale is None:
                raise invalid(f"{what}: fp8 weights need b_scale [{L}, n / 128, {H // 128}] (128 x 128 blocks)")
            vs = view(b_scale, "b_scale").expect(F32, shape=(L, n // 128, H // 128))
        elif b_scale is not None:
            raise invalid(f"{what}: b_scale is for fp8 weights; this dispatcher carries bf16 rows")
        rows = self.max_rows
        d_shape = (L, rows // L, n) if self.ll else (rows, n)
        p = _lib.GemmProblem()
        p.type = 1 if self.fp8 else 0
        _lib.check(_lib.lib.ws_ep_recv_gemm(ctypes.byref(r), ctypes.byref(p)))
        p.n, p.k, p.b, p.b_scale = n, H, vb.ptr, vs.ptr if vs else None
        vo = view(out, "out", optional=True)
        if vo is not None:
            vo.expect(BF16, shape=d_shape)
            p.d = vo.ptr
        else:
            p.d = p.a  # d is allocated below, after the checks; they only ask for an aligned address
        _lib.check(_lib.lib.ws_gemm_check(ctypes.byref(p)))
        for v in (vb, vs, vo):
            if v is not None and v.device is not None and v.device != self.device:
                raise invalid(f"{v.name}: on cuda:{v.device}, the dispatcher is on cuda:{self.device}")
        if out is None:
            out = empty(d_shape, "bfloat16", self.device, what)
            p.d = view(out, "out").ptr
        with on_device(self.device):
            s = stream_handle(stream, self.device)
            _lib.check(_lib.lib.ws_gemm(ctypes.byref(p), ctypes.c_void_p(s)))
        return out

    def combine(self, y, out=None, *, stream=None):
        """out[t] = sum_k topk_weights[t][k] * y[row of (t, k)] for the latest dispatch's
        tokens. y: [max_rows, hidden] bf16 in the received layout."""
        torch = torch_or_raise("MoeDispatcher.combine")
        H = self.cfg.hidden
        vy = view(y, "y")
        if self.ll and len(vy.shape) == 3:  # the masked layout as dispatch gave it
            vy.expect(BF16, shape=(self.local_experts, self.max_rows // self.local_experts, H))
        else:
            vy.expect(BF16, shape=(self.max_rows, H))
        if out is None:
            out = torch.empty((self._tokens, H), dtype=torch.bfloat16, device=f"cuda:{self.device}")
        vo = view(out, "out").expect(BF16, shape=(self._tokens, H))
        with on_device(self.device):
            s = stream_handle(stream, self.device)
            _lib.check(_lib.lib.ws_ep_combine(self._handle(), vy.ptr, vo.ptr,
                                              ctypes.c_void_p(s)))
        return out

    def __repr__(self):
        c = self.cfg
        return (f"MoeDispatcher(rank {self.comm.rank} of {self.comm.size}, H {c.hidden}, E {c.experts}, "
                f"top-{c.topk}, {'fp8' if self.fp8 else 'bf16'}, max {c.max_tokens} tokens)")


def swiglu_quant(h, *, scale_layout="kmajor", out=None, out_scale=None, stream=None):
    """The L1 epilogue of an expert: h [rows, 2 x inter] bf16 (gate, then up) ->
    silu(gate) x up in fp32 -> (q [rows, inter] float8_e4m3fn, scale [rows, inter / 128]
    fp32), 1 x 128 blocks; scale_layout "kmajor" (strides (1, ld): what gemm reads
    fastest) or "row"."""
    from ._tensor import require_hopper
    from .gemm import fp8_allocate, fp8_outputs
    stream = stream_arg(stream)
    vh = view(h, "h").expect(BF16, ndim=2)
    rows, two_i = vh.shape
    if two_i % 256:
        raise invalid(f"swiglu_quant: h has {two_i} columns; 2 x inter with inter a multiple of 128")
    inter = two_i // 2
    if scale_layout not in ("row", "kmajor"):
        raise invalid(f"swiglu_quant: scale_layout {scale_layout!r}, expected 'row' or 'kmajor'")
    vq, vs, ld = fp8_outputs(out, out_scale, rows, inter, rows, scale_layout == "kmajor")
    dev = require_hopper([vh, vq, vs], "warpspec.swiglu_quant")
    out, out_scale, vq, vs = fp8_allocate(out, out_scale, vq, vs, rows, inter, rows, ld, dev, "warpspec.swiglu_quant")
    with on_device(dev):
        s = stream_handle(stream, dev)
        _lib.check(_lib.lib.ws_moe_swiglu_quant(vh.ptr, rows, inter, vq.ptr, vs.ptr, ld, ctypes.c_void_p(s)))
    return out, out_scale
