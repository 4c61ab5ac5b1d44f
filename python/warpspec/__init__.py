"""warpspec: warp-specialized GPU kernels for Hopper (sm_90a), from Python.

A thin layer over the C library (ctypes): arguments are torch tensors (or anything with
__cuda_array_interface__), checked for shape, dtype, device and layout before the C
call; work runs on the current PyTorch stream; a failing call raises a WarpspecError
subclass carrying the library's message (ws_last_error()).

    gemm(a, b, ...)                  BF16 / FP8 GEMM, dense or grouped (MoE experts)
    quantize_fp8(x, block=...)       FP8 E4M3 with 1x128 or 128x128 block scales
    plan(roles), gemm_plan(dtype)    the role budget planner (no GPU needed)
    Communicator                     NVSHMEM communicator: sendrecv, allgather, alloc
    MoeDispatcher                    MoE dispatch / combine straight into gemm's grouped layout
    MoeLayer(comm, ...)(x, idx, w)    a whole MoE layer in one call (dispatch, experts, combine)
    moe(comm, x, idx, w, w1, ...)    the same as a function (the layer kept on the communicator)
    attention(q, k, v, causal=...)   flash attention forward (BF16; GQA, causal, varlen)
    mla_sparse_prefill(q, kv, idx)   DeepSeek-V3.2 sparse MLA prefill (BF16)
    mla_decode(q, cache, table, lens) DeepSeek-V3 MLA decode over a paged cache
    mla_sparse_decode(q, cache, idx)  DeepSeek-V3.2 sparse MLA decode (top-k rows of a paged cache)
    mla_kv_quantize_fp8(kv)           BF16 latent cache rows into FlashMLA-style FP8 rows
    nsa_attention(q, k, v, sel)       NSA selected-block attention, forward (BF16)
    sync(stream)                     wait for the stream; device-side errors raise here
    reload_knobs()                   read the WARPSPEC_* environment variables again
    trace(csv, block=0)              role timeline of one block of the kernels run inside
    nn.MoEBlock, nn.MLAAttention     torch.nn modules of a DeepSeek-V3-style model (warpspec.nn,
                                     imported on first use: it needs PyTorch, the rest does not)
"""

import os

from . import _lib
from ._lib import (BudgetError, CudaError, InvalidArgumentError, InvalidTypeError, MismatchError, NoDeviceError,
                   OutOfMemoryError, UnsupportedError, WarpspecError, WarpspecTimeoutError)
from .attention import attention, mla_decode, mla_kv_quantize_fp8, mla_sparse_decode, mla_sparse_prefill, nsa_attention
from .comm import Communicator, get_unique_id
from .comm import available as comm_available
from .gemm import gemm, gemm_tile, gemm_workspace_size, quantize_fp8
from .moe_dispatch import MoeDispatcher, MoeReceived
from .moe_dispatch import check_config as moe_check_config
from .moe_dispatch import swiglu_quant
from .moe_layer import MoeLayer, moe
from .plan import Plan, PlacedRole, gemm_plan, plan

__version__ = _lib.lib.ws_version().decode()
library_path = _lib.library_path


def sync(stream=None):
    """Wait for `stream` (default: the current PyTorch stream). A bounded wait that ran
    out on the device raises WarpspecTimeoutError naming role / peer, stage and phase."""
    import ctypes

    from ._tensor import current_device, stream_arg, stream_handle
    s = stream_handle(stream_arg(stream), current_device())
    _lib.check(_lib.lib.ws_sync(ctypes.c_void_p(s)))


class trace:
    """Record the role timeline of one block (`block`; -1: every block, told apart by the
    CSV's sm column) of the library kernels launched inside the `with` block, and write it
    to `csv` (times in ns, one row per event: item begin / end, wait begin / end and what
    for). bench/plot_trace.py draws one block, bench/plot_trace_grid.py all of them.

        with warpspec.trace("layer.csv", block=3):
            layer(x, idx, w)

    Kernels with marks record (the MoE layer's dispatch, fused experts and combine
    kernels); the rest record nothing."""

    def __init__(self, csv, block=0, max_events=1 << 16):
        if not isinstance(csv, (str, os.PathLike)):
            raise _lib.wrong_type(f"trace: csv {csv!r} ({type(csv).__name__}) is not a path (str or os.PathLike)")
        self.csv = os.fsdecode(csv)
        self.block = _lib.as_int(block, "trace: block", -1)
        self.max_events = _lib.as_int(max_events, "trace: max_events", 1)
        self.events = 0

    def __enter__(self):
        _lib.check(_lib.lib.ws_trace_start(self.block, self.max_events))
        return self

    def __exit__(self, *exc):
        import ctypes

        n = ctypes.c_size_t(0)
        _lib.check(_lib.lib.ws_trace_stop(self.csv.encode(), ctypes.byref(n)))
        self.events = int(n.value)
        return False


def set_timeout_ms(ms):
    """Bound of every device-side wait of this process (default 4000 ms, or
    $WARPSPEC_TIMEOUT_MS)."""
    _lib.check(_lib.lib.ws_set_timeout_ms(_lib.as_int(ms, "set_timeout_ms: ms", 0)))


def timeout_ms():
    return int(_lib.lib.ws_timeout_ms())


def reload_knobs():
    """Read the library's WARPSPEC_* environment variables again (docs/knobs.md). The
    library reads them once, at the first call that needs one; after changing one in
    os.environ inside the process, call this for the change to take effect."""
    _lib.check(_lib.lib.ws_knobs_reload())


def info():
    """The library, its build and the GPUs it sees, as a dict."""
    from ._tensor import device_count, device_limits
    devices = []
    for d in range(device_count()):
        lim = device_limits(d)
        devices.append({"index": d, "name": lim.name.decode(), "sm": f"{lim.cc_major}{lim.cc_minor}",
                        "sms": lim.sm_count, "memory_gib": round(lim.global_mem / 2**30, 1),
                        "smem_optin": lim.smem_optin, "supported": lim.cc_major == 9})
    return {"version": __version__, "library": library_path, "nvshmem": comm_available(), "devices": devices}


__all__ = ["gemm", "gemm_tile", "gemm_workspace_size", "quantize_fp8", "plan", "gemm_plan", "Plan", "PlacedRole",
           "Communicator", "get_unique_id", "MoeDispatcher", "MoeReceived", "MoeLayer", "moe", "moe_check_config",
           "swiglu_quant", "comm_available", "attention", "mla_sparse_prefill", "mla_decode", "mla_sparse_decode",
           "mla_kv_quantize_fp8", "nsa_attention", "sync", "trace", "set_timeout_ms", "timeout_ms", "reload_knobs", "info",
           "WarpspecError", "InvalidArgumentError", "InvalidTypeError", "BudgetError", "MismatchError", "NoDeviceError",
           "CudaError", "WarpspecTimeoutError", "OutOfMemoryError", "UnsupportedError", "__version__"]


def __getattr__(name):
    """warpspec.nn on first use (PEP 562): its modules need PyTorch, the rest of the package not."""
    if name == "nn":
        import importlib
        return importlib.import_module(".nn", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def _guard_public_api():
    """Every public function and every public method of the public classes raises only
    the WarpspecError family for bad arguments (_lib.api): wrapped once, here."""
    import inspect
    g = globals()
    for name in __all__:
        obj = g[name]
        if inspect.isclass(obj):
            if issubclass(obj, BaseException):
                continue
            for attr, member in list(vars(obj).items()):
                public = attr in ("__init__", "__call__") or not attr.startswith("_")
                if public and inspect.isfunction(member):
                    setattr(obj, attr, _lib.api(member))
                elif public and isinstance(member, classmethod):
                    setattr(obj, attr, classmethod(_lib.api(member.__func__)))
        elif inspect.isfunction(obj):
            g[name] = _lib.api(obj)


_guard_public_api()

# the custom ops (torch.compile, CUDA graphs), registered now if PyTorch is already loaded,
# else at the first call on torch tensors (_ops.py)
if "torch" in __import__("sys").modules:
    from . import _ops as _custom_ops
    _custom_ops.ops()
