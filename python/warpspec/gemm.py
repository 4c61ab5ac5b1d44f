"""GEMMs and FP8 quantisation over tensors: warpspec/gemm.h and warpspec/fp8.h.

D = A @ B^T, B holding one [n, k] matrix per group (expert). The layout follows from
the arguments:
    dense                a [m, k],    b [n, k] (or [1, n, k])      -> d [m, n]
    grouped contiguous   a [m, k],    b [g, n, k], group_offsets   -> d [m, n]
                         (int32 [g + 1] on the device: group i owns rows
                         group_offsets[i] .. group_offsets[i + 1])
                         with group_rows too (int32 [g]): only the first group_rows[i]
                         rows of each span are in use, the rest is padding (skipped, or
                         computed where whole tiles are faster: its rows of d unspecified)
    grouped masked       a [g, m, k], b [g, n, k], group_rows      -> d [g, m, n]
                         (int32 [g] on the device: group i has group_rows[i] valid rows;
                         the rest of d is left as it was)
BF16: a and b bfloat16. FP8: a and b float8_e4m3fn (or uint8 bytes) with float32 block
scales, a_scale [rows, k / 128] (1 x 128 blocks) and b_scale [g, n / 128, k / 128]
(128 x 128 blocks). a_scale's layout is read from its strides: row-major (contiguous),
or K-block-major, the faster one for large problems: strides (1, ld), ld >= rows and a
multiple of 4, as quantize_fp8(..., scale_layout="kmajor") returns it (the transpose of
a [k / 128, ld] tensor).
"""

import ctypes

from . import _lib, _ops
from ._lib import invalid, wrong_type
from ._tensor import BF16, F32, FP8, I32, empty, on_device, require_hopper, stream_arg, stream_handle, view

WS_GEMM_BF16, WS_GEMM_FP8 = 0, 1
WS_GEMM_DENSE, WS_GEMM_GROUPED_CONTIGUOUS, WS_GEMM_GROUPED_MASKED = 0, 1, 2
_INT_MAX = 2**31 - 1


def _scale_rows_view(sa, rows, kb):
    """a_scale_ld of the activation scales: 0 for row-major [rows, kb] (or [g, m, kb] in
    the masked layout), ld for K-block-major ones (strides (1, ld))."""
    shape, st = sa.shape, sa.strides
    if len(shape) == 3:  # masked: [g, m, kb], the rows of all groups evenly spaced
        if shape[0] * shape[1] != rows or shape[2] != kb or (shape[0] > 1 and st[0] != shape[1] * st[1]):
            raise invalid(f"a_scale: shape {shape} strides {st}: expected [groups, m, k / 128] with "
                          f"{rows} rows in all and k / 128 = {kb}, rows evenly spaced")
        shape, st = (rows, kb), (st[1], st[2])
    if len(shape) != 2 or tuple(shape) != (rows, kb):
        raise invalid(f"a_scale: shape {sa.shape}, expected ({rows}, {kb}) = (rows, k / 128)")
    row_st, col_st = st
    if kb == 1:
        if rows == 1 or row_st == 1:
            return 0  # one scale per row: both layouts are the same array
    elif (rows == 1 or row_st == kb) and col_st == 1:
        return 0
    if (rows == 1 or row_st == 1) and kb > 1 and col_st >= rows and col_st % 4 == 0:
        return col_st
    raise invalid(f"a_scale: strides {sa.strides} for shape {sa.shape}: expected row-major ({kb}, 1) or "
                  f"K-block-major (1, ld) with ld >= {rows} and a multiple of 4")


def _problem(a, b, out, a_scale, b_scale, group_offsets, group_rows, what):
    """Views and the ws_gemm_problem of a call (every Python-side check; the C checks
    follow in ws_gemm_check)."""
    va, vb = view(a, "a"), view(b, "b")
    fp8 = va.dtype in FP8
    kinds = FP8 if fp8 else BF16
    if group_rows is not None and group_offsets is None:
        layout = WS_GEMM_GROUPED_MASKED
        va.expect(kinds, ndim=3, what=" (masked layout: a is [groups, m, k])")
        groups, m, k = va.shape
        vb.expect(kinds, shape=(groups, None, k), what=" (b is [groups, n, k])")
        n = vb.shape[1]
        rows, d_shape = groups * m, (groups, m, n)
    else:
        va.expect(kinds, ndim=2, what=" (a is [m, k])")
        m, k = va.shape
        if group_offsets is not None:
            layout = WS_GEMM_GROUPED_CONTIGUOUS
            vb.expect(kinds, ndim=3, what=" (b is [groups, n, k])")
            groups = vb.shape[0]
        else:
            layout = WS_GEMM_DENSE
            vb.expect(kinds, ndim=(2, 3))
            if len(vb.shape) == 3 and vb.shape[0] != 1:
                raise invalid(f"{what}: b has {vb.shape[0]} groups but neither group_offsets nor group_rows is given")
            groups = 1
        n = vb.shape[-2]
        if vb.shape[-1] != k:
            raise invalid(f"{what}: a has k = {k}, b has k = {vb.shape[-1]} (b is [groups, n, k])")
        rows, d_shape = m, (m, n)
    if (vb.dtype in FP8) != fp8:
        raise invalid(f"{what}: a is {va.dtype}, b is {vb.dtype}: both bf16 or both fp8")
    for name, val in (("m", m), ("n", n), ("k", k), ("groups", groups), ("rows", rows)):
        if val > _INT_MAX:
            raise invalid(f"{what}: {name} = {val} exceeds the C API's int range")
    vo = view(group_offsets, "group_offsets", optional=True)
    vr = view(group_rows, "group_rows", optional=True)
    if vo is not None:
        vo.expect(I32, shape=(groups + 1,))
    if vr is not None:
        vr.expect(I32, shape=(groups,))
    vsa = vsb = None
    a_scale_ld = 0
    if fp8:
        if a_scale is None or b_scale is None:
            raise invalid(f"{what}: FP8 operands need a_scale and b_scale (float32 block scales)")
        if k % 128 or n % 128:
            raise invalid(f"{what}: FP8 needs k and n multiples of 128 (k = {k}, n = {n})")
        kb = k // 128
        vsa = view(a_scale, "a_scale").expect(F32, contiguous=False)
        a_scale_ld = _scale_rows_view(vsa, rows, kb)
        _lib.as_ints(what, a_scale_ld=a_scale_ld)
        vsb = view(b_scale, "b_scale")
        if len(vsb.shape) == 2 and groups == 1:
            vsb.expect(F32, shape=(n // 128, kb), what=" (b_scale is [n / 128, k / 128])")
        else:
            vsb.expect(F32, shape=(groups, n // 128, kb), what=" (b_scale is [groups, n / 128, k / 128])")
    elif a_scale is not None or b_scale is not None:
        raise invalid(f"{what}: a_scale / b_scale are for FP8 operands; a and b are bf16")
    vd = None
    if out is not None:
        vd = view(out, "out").expect(BF16, shape=d_shape)
    p = _lib.GemmProblem()
    p.type = WS_GEMM_FP8 if fp8 else WS_GEMM_BF16
    p.layout, p.m, p.n, p.k, p.groups = layout, m, n, k, groups
    p.a, p.b = va.ptr, vb.ptr
    p.d = vd.ptr if vd is not None else 0x100  # checked for alignment only until the output exists
    p.a_scale = vsa.ptr if vsa is not None else None
    p.b_scale = vsb.ptr if vsb is not None else None
    p.group_offsets = vo.ptr if vo is not None else None
    p.group_rows = vr.ptr if vr is not None else None
    p.a_scale_ld = a_scale_ld
    return p, [va, vb, vd, vsa, vsb, vo, vr], d_shape


def gemm(a, b, *, a_scale=None, b_scale=None, group_offsets=None, group_rows=None, out=None, workspace=None,
         stream=None, check=False):
    """D = A @ B^T (bf16 out) on the GPU, on the current PyTorch stream (or `stream`).

    The layout is dense, grouped contiguous (group_offsets) or grouped masked
    (group_rows); see the module's text. Returns `out` (allocated when not given).
    Dense problems with few rows split K when a workspace is available: one is
    allocated here unless `workspace` (a uint8 device tensor) is given (BF16 with at most
    64 rows sums its K slices on chip and needs none). check=True (or
    WARPSPEC_CHECK=1): scan group_offsets (>= 0, never decreasing, the last <= m) or
    group_rows (0 .. m) on the GPU first and raise naming the first bad entry; it waits
    for the GPU, so not inside graph capture."""
    if out is None and workspace is None and stream is None and check is False:
        op = _ops.routed(a, b, a_scale, b_scale, group_offsets, group_rows)
        if op is not None:  # torch tensors: the custom op (torch.compile sees one op, not ctypes)
            return op.gemm(a, b, a_scale, b_scale, group_offsets, group_rows)
    return gemm_direct(a, b, a_scale=a_scale, b_scale=b_scale, group_offsets=group_offsets, group_rows=group_rows,
                       out=out, workspace=workspace, stream=stream, check=check)


def gemm_direct(a, b, *, a_scale=None, b_scale=None, group_offsets=None, group_rows=None, out=None, workspace=None,
                stream=None, check=False):
    """gemm() without the custom op: the checks and the C call (the op's implementation)."""
    what = "warpspec.gemm"
    stream = stream_arg(stream)
    p, views, d_shape = _problem(a, b, out, a_scale, b_scale, group_offsets, group_rows, what)
    vw = view(workspace, "workspace", optional=True)
    if vw is not None:
        vw.expect(("uint8",) + F32 + I32)
        p.workspace, p.workspace_bytes = vw.ptr, vw.nbytes
    _lib.check(_lib.lib.ws_gemm_check(ctypes.byref(p)))
    dev = require_hopper(views + [vw], what)
    if out is None:
        out = empty(d_shape, "bfloat16", dev, what)
        p.d = view(out, "out").ptr
    with on_device(dev):
        s = stream_handle(stream, dev)
        if vw is None and p.layout == WS_GEMM_DENSE:
            need = ctypes.c_size_t(0)
            _lib.check(_lib.lib.ws_gemm_workspace_size(ctypes.byref(p), ctypes.byref(need)))
            if need.value:
                ws = empty((need.value,), "uint8", dev, what)
                p.workspace, p.workspace_bytes = view(ws, "workspace").ptr, need.value
        with _lib.checking(check):
            _lib.check(_lib.lib.ws_gemm(ctypes.byref(p), ctypes.c_void_p(s)))
    return out


def gemm_workspace_size(a, b, *, a_scale=None, b_scale=None, group_offsets=None, group_rows=None):
    """Bytes of split-K workspace gemm() would use for this problem (0: no split)."""
    p, views, _ = _problem(a, b, None, a_scale, b_scale, group_offsets, group_rows, "warpspec.gemm_workspace_size")
    _lib.check(_lib.lib.ws_gemm_check(ctypes.byref(p)))
    dev = require_hopper(views, "warpspec.gemm_workspace_size")
    need = ctypes.c_size_t(0)
    with on_device(dev):
        _lib.check(_lib.lib.ws_gemm_workspace_size(ctypes.byref(p), ctypes.byref(need)))
    return need.value


def gemm_tile(a, b, *, a_scale=None, b_scale=None, group_offsets=None, group_rows=None, sms=0):
    """The output tile (rows, cols) gemm() picks for this problem on a GPU with `sms`
    SMs (0: the current device's). Needs no GPU when sms > 0."""
    sms = _lib.as_int(sms, "sms", 0)
    p, views, _ = _problem(a, b, None, a_scale, b_scale, group_offsets, group_rows, "warpspec.gemm_tile")
    _lib.check(_lib.lib.ws_gemm_check(ctypes.byref(p)))
    if sms == 0:
        require_hopper(views, "warpspec.gemm_tile")
    r, c = ctypes.c_int(0), ctypes.c_int(0)
    _lib.check(_lib.lib.ws_gemm_tile(ctypes.byref(p), sms, ctypes.byref(r), ctypes.byref(c)))
    return r.value, c.value


def fp8_outputs(out, out_scale, rows, cols, s_rows, kmajor):
    """Check the FP8 outputs a caller gave (None: to be allocated): q [rows, cols] e4m3 and
    fp32 scales [s_rows, cols / 128], row-major or, kmajor, strides (1, ld) with ld >= s_rows
    and a multiple of 4. Returns (vq, vs, ld); ld is 0 for row-major scales."""
    kb = cols // 128
    vq = view(out, "out", optional=True)
    if vq is not None:
        vq.expect(FP8, shape=(rows, cols))
    ld = (s_rows + 3) // 4 * 4 if kmajor else 0
    vs = view(out_scale, "out_scale", optional=True)
    if vs is not None:
        vs.expect(F32, shape=(s_rows, kb), contiguous=not kmajor)
        if kmajor:
            if vs.strides[0] != 1 or (kb > 1 and (vs.strides[1] < s_rows or vs.strides[1] % 4)):
                raise invalid(f"out_scale: strides {vs.strides}: K-block-major scales have strides (1, ld), "
                              f"ld >= {s_rows} and a multiple of 4")
            if kb > 1:
                ld = vs.strides[1]
    return vq, vs, ld


def fp8_allocate(out, out_scale, vq, vs, rows, cols, s_rows, ld, dev, what):
    """Allocate the FP8 outputs fp8_outputs found missing; K-block-major scales (ld > 0)
    come back as the transpose of a [cols / 128, ld] tensor. Returns (out, out_scale,
    vq, vs), vs viewing the scales' storage."""
    if vq is None:
        out = empty((rows, cols), "float8_e4m3fn", dev, what)
        vq = view(out, "out")
    if vs is None:
        kb = cols // 128
        store = empty((kb, ld) if ld else (s_rows, kb), "float32", dev, what)
        out_scale = store.t()[:s_rows] if ld else store
        vs = view(store, "out_scale")
    return out, out_scale, vq, vs


def quantize_fp8(x, *, block=(1, 128), scale_layout="row", out=None, out_scale=None, stream=None):
    """FP8 E4M3 and float32 block scales of a bf16 matrix x [rows, cols] (cols a multiple
    of 128; x's rows may be strided), bit-identical to the library's host definition:
    scale = amax of the block / 448 (1 for an all-zero block), q = round(x / scale).

    block (1, 128): scales [rows, cols / 128], gemm()'s a_scale. scale_layout "row" is
    row-major; "kmajor" returns the transpose of a [cols / 128, ld] tensor (ld = rows
    rounded up to 4), the layout gemm() reads fastest.
    block (128, 128): scales [ceil(rows / 128), cols / 128], gemm()'s b_scale of one group.
    Returns (q, scale); q is float8_e4m3fn [rows, cols]."""
    what = "warpspec.quantize_fp8"
    stream = stream_arg(stream)
    if isinstance(block, int) and not isinstance(block, bool):
        block = (1, block)
    elif not isinstance(block, (tuple, list)):
        raise wrong_type(f"{what}: block {block!r} ({type(block).__name__}), expected (1, 128) or (128, 128)")
    block = tuple(block)
    if block not in ((1, 128), (128, 128)):
        raise invalid(f"{what}: block {block}, expected (1, 128) or (128, 128)")
    if scale_layout not in ("row", "kmajor"):
        raise invalid(f"{what}: scale_layout {scale_layout!r}, expected 'row' or 'kmajor'")
    if scale_layout == "kmajor" and block != (1, 128):
        raise invalid(f"{what}: scale_layout 'kmajor' is for (1, 128) blocks")
    vx = view(x, "x").expect(BF16, ndim=2, contiguous=False)
    rows, cols = vx.shape
    if vx.strides[1] != 1 and cols > 1:
        raise invalid(f"x: strides {vx.strides}: the columns must be contiguous (stride 1)")
    ld = vx.strides[0] if rows > 1 else cols
    if cols % 128:
        raise invalid(f"{what}: cols = {cols} is not a multiple of 128")
    s_rows = (rows + 127) // 128 if block == (128, 128) else rows
    vq, vs, s_ld = fp8_outputs(out, out_scale, rows, cols, s_rows, scale_layout == "kmajor")
    if rows == 0:
        raise invalid(f"{what}: x has no rows")
    dev = require_hopper([vx, vq, vs], what)
    out, out_scale, vq, vs = fp8_allocate(out, out_scale, vq, vs, rows, cols, s_rows, s_ld, dev, what)
    with on_device(dev):
        s = ctypes.c_void_p(stream_handle(stream, dev))
        L = _lib.lib
        if block == (128, 128):
            _lib.check(L.ws_fp8_quantize_128x128(vx.ptr, rows, cols, ld, vq.ptr, vs.ptr, s))
        elif scale_layout == "row":
            _lib.check(L.ws_fp8_quantize_1x128(vx.ptr, rows, cols, ld, vq.ptr, vs.ptr, s))
        else:
            _lib.check(L.ws_fp8_quantize_1x128_kmajor(vx.ptr, rows, cols, ld, vq.ptr, vs.ptr, s_ld, s))
    return out, out_scale
