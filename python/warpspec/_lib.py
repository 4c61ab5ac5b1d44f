"""Loading the C library and declaring its functions (ctypes).

The shared library is looked for, in order: $WARPSPEC_LIBRARY (a build tree's
libwarpspec.so, how `make test` runs these tests), the package's own lib/ folder (a
wheel), a build/ folder beside the source package (a developer's checkout).

What it links besides the system's libraries: the CUDA runtime (libcudart.so.13) and
NVSHMEM's host library (libnvshmem_host.so.3), from the nvidia-* wheels the package
declares (nvidia-cuda-runtime, nvidia-nvshmem-cu13; PyTorch's CUDA 13 wheels install the
same). A wheel's library finds them through its RPATH when they sit in the same
site-packages ($ORIGIN/../../nvidia/{nvshmem,cu13,nccl}/lib); for a package installed
apart from them (a --user install over a system PyTorch, layered environments) they are
loaded here first, by full path, from every nvidia/ folder on sys.path, so that the
library's DT_NEEDED entries are met by soname. No LD_LIBRARY_PATH is needed. PyTorch,
when present, is imported first so that the process holds one CUDA runtime, the one
PyTorch uses.
"""

import ctypes
import functools
import importlib.util
import operator
import os
import sys

# ---- status codes (warpspec/status.h) --------------------------------------------
WS_OK = 0
WS_ERR_INVALID = 1
WS_ERR_BUDGET = 2
WS_ERR_MISMATCH = 3
WS_ERR_NO_DEVICE = 4
WS_ERR_CUDA = 5
WS_ERR_TIMEOUT = 6
WS_ERR_NOMEM = 7
WS_ERR_UNSUPPORTED = 8


class WarpspecError(RuntimeError):
    """A warpspec call failed. `status` is the C status name ("WS_ERR_TIMEOUT"),
    `code` its number; the message is the library's ws_last_error()."""

    def __init__(self, message, status="WS_ERR_INVALID", code=WS_ERR_INVALID):
        super().__init__(f"{status}: {message}" if status else message)
        self.status = status
        self.code = code
        self.message = message


class InvalidArgumentError(WarpspecError, ValueError):
    """An argument is out of range, of the wrong shape, dtype or device (WS_ERR_INVALID)."""


class InvalidTypeError(InvalidArgumentError, TypeError):
    """An argument of the wrong type: a string or None where a tensor or an integer goes
    (WS_ERR_INVALID; also a TypeError, as Python's own calls raise)."""


class BudgetError(WarpspecError):
    """A role plan does not fit the hardware (WS_ERR_BUDGET)."""


class MismatchError(WarpspecError):
    """The sides of a transfer, or a kernel and its plan, disagree (WS_ERR_MISMATCH)."""


class NoDeviceError(WarpspecError):
    """No CUDA device, or not an sm_90 (Hopper) one (WS_ERR_NO_DEVICE)."""


class CudaError(WarpspecError):
    """A CUDA runtime or driver call failed (WS_ERR_CUDA)."""


class WarpspecTimeoutError(WarpspecError, TimeoutError):
    """A bounded wait on the device ran out (WS_ERR_TIMEOUT): the message names the
    role, pipe or peer, the stage and the phase."""


class OutOfMemoryError(WarpspecError, MemoryError):
    """An allocation failed (WS_ERR_NOMEM)."""


class UnsupportedError(WarpspecError, NotImplementedError):
    """A valid request this build cannot serve, e.g. no NVSHMEM (WS_ERR_UNSUPPORTED)."""


_ERRORS = {
    WS_ERR_INVALID: InvalidArgumentError,
    WS_ERR_BUDGET: BudgetError,
    WS_ERR_MISMATCH: MismatchError,
    WS_ERR_NO_DEVICE: NoDeviceError,
    WS_ERR_CUDA: CudaError,
    WS_ERR_TIMEOUT: WarpspecTimeoutError,
    WS_ERR_NOMEM: OutOfMemoryError,
    WS_ERR_UNSUPPORTED: UnsupportedError,
}


def error_for(code, message):
    cls = _ERRORS.get(code, WarpspecError)
    return cls(message, status=_status_name(code), code=code)


def _status_name(code):
    if lib is None:
        return f"WS_ERR_{code}"
    return lib.ws_strerror(code).decode()


def check(code):
    """Raise the exception of a failed status, carrying ws_last_error()."""
    if code != WS_OK:
        raise error_for(code, lib.ws_last_error().decode(errors="replace"))


def invalid(message):
    return InvalidArgumentError(message, status="WS_ERR_INVALID", code=WS_ERR_INVALID)


def wrong_type(message):
    return InvalidTypeError(message, status="WS_ERR_INVALID", code=WS_ERR_INVALID)


INT_MIN, INT_MAX = -(1 << 31), (1 << 31) - 1


def as_int(value, name, lo=INT_MIN, hi=INT_MAX):
    """value as a Python int in lo .. hi, checked before ctypes sees it (ctypes wraps
    silently: 2**32 + 4 becomes 4, -1 as a size_t becomes 2**64 - 1). Integers of any
    kind (numpy, a 0-d integer tensor) pass; bool, float, str and None are refused."""
    if isinstance(value, bool) or not hasattr(type(value), "__index__"):
        raise wrong_type(f"{name}: {value!r} ({type(value).__name__}) is not an integer")
    v = operator.index(value)
    if not lo <= v <= hi:
        raise invalid(f"{name}: {v} is out of range {lo} .. {hi}")
    return v


SIZE_MAX = PTR_MAX = (1 << 64) - 1
FLT_MAX = 3.4028234663852886e38


def as_ints(what, **values):
    """Extents and counts bound for the C structs' int fields, each checked to 0 .. INT_MAX
    (a q of 2**32 + 64 rows would otherwise be planned as 64)."""
    for name, v in values.items():
        as_int(v, f"{what}: {name}", 0)


def as_float(value, name, lo=-FLT_MAX, hi=FLT_MAX):
    """value as a finite Python float in lo .. hi, for a C float: str (which float()
    parses), bool and complex are refused, NaN and what c_float would turn into inf too."""
    if isinstance(value, (bool, str, bytes)) or not hasattr(type(value), "__float__"):
        raise wrong_type(f"{name}: {value!r} ({type(value).__name__}) is not a number")
    try:
        v = float(value)
    except (TypeError, ValueError):
        raise wrong_type(f"{name}: {value!r} ({type(value).__name__}) is not a real number") from None
    except OverflowError:
        raise invalid(f"{name}: {value!r} is out of range {lo:g} .. {hi:g}") from None
    if not lo <= v <= hi:
        raise invalid(f"{name}: {v!r} is out of range {lo:g} .. {hi:g}")
    return v


def as_str(value, name):
    if not isinstance(value, str):
        raise wrong_type(f"{name}: {value!r} ({type(value).__name__}) is not a str")
    return value


def api(fn):
    """The public functions' last guard: whatever a Python-level mistake in the arguments
    raises below (a missing key of an array interface, an attribute a non-tensor lacks, a
    ctypes conversion) leaves as InvalidTypeError or InvalidArgumentError naming the
    function, so callers catch one family (WarpspecError). Checks with their own
    messages come first, in each function."""
    qual = getattr(fn, "__qualname__", getattr(fn, "__name__", "warpspec"))

    @functools.wraps(fn)
    def guarded(*args, **kwargs):
        try:
            return fn(*args, **kwargs)
        except WarpspecError:
            raise
        except (TypeError, AttributeError, ctypes.ArgumentError) as e:
            raise wrong_type(f"{qual}: {type(e).__name__}: {e}") from e
        except (ValueError, KeyError, IndexError, ZeroDivisionError, OverflowError) as e:
            raise invalid(f"{qual}: {type(e).__name__}: {e}") from e

    return guarded


class checking:
    """`with checking(check):` the C library's validation mode (warpspec/check.h) on for the
    calls inside when check is true, as WARPSPEC_CHECK=1 turns it on for the process:
    index tensors are scanned on the device before each kernel that reads them, and the
    first bad entry raises InvalidArgumentError. Restores the process's mode after."""

    def __init__(self, check):
        self.on = bool(check) and not lib.ws_check_mode()

    def __enter__(self):
        if self.on:
            check(lib.ws_set_check_mode(1))

    def __exit__(self, *exc):
        if self.on:
            lib.ws_set_check_mode(-1)


# ---- struct mirrors (sizes checked against ws_abi_sizeof at load) -------------------
WS_MAX_ROLES = 8
WS_NAME_LEN = 24
WS_MAX_USER_BARRIERS = 8
WS_REGS_ENTRY = 0
WS_REGS_REST = -1


class Role(ctypes.Structure):
    _fields_ = [("name", ctypes.c_char_p), ("warps", ctypes.c_int), ("regs", ctypes.c_int), ("replicas", ctypes.c_int)]


_R = WS_MAX_ROLES


class Layout(ctypes.Structure):
    _fields_ = [
        ("error", ctypes.c_int), ("err_role", ctypes.c_int), ("nroles", ctypes.c_int), ("warps", ctypes.c_int),
        ("threads", ctypes.c_int), ("nwarpgroups", ctypes.c_int), ("setmaxnreg", ctypes.c_int),
        ("entry_regs", ctypes.c_int), ("pool_regs", ctypes.c_int), ("pool_used", ctypes.c_int),
        ("nbarriers", ctypes.c_int),
        ("role_first_warp", ctypes.c_int * _R), ("role_end_warp", ctypes.c_int * _R), ("role_warps", ctypes.c_int * _R),
        ("role_replicas", ctypes.c_int * _R), ("role_regs", ctypes.c_int * _R), ("role_barrier", ctypes.c_int * _R),
        ("role_name", (ctypes.c_char * WS_NAME_LEN) * _R),
    ]


class Plan(ctypes.Structure):
    _fields_ = [
        ("kernel", ctypes.c_char * (2 * WS_NAME_LEN)), ("roles", Role * _R), ("layout", Layout),
        ("smem_bytes", ctypes.c_size_t), ("local_bytes_allowed", ctypes.c_size_t), ("nuser_barriers", ctypes.c_int),
        ("user_barrier", (ctypes.c_char * WS_NAME_LEN) * WS_MAX_USER_BARRIERS), ("checked_func", ctypes.c_void_p),
        ("clusters_width", ctypes.c_int), ("clusters_max", ctypes.c_int),
    ]


class DeviceLimits(ctypes.Structure):
    _fields_ = [
        ("device", ctypes.c_int), ("name", ctypes.c_char * 256), ("cc_major", ctypes.c_int), ("cc_minor", ctypes.c_int),
        ("sm_count", ctypes.c_int), ("smem_optin", ctypes.c_size_t), ("regs_per_block", ctypes.c_int),
        ("max_threads", ctypes.c_int), ("l2_bytes", ctypes.c_size_t), ("global_mem", ctypes.c_size_t),
    ]


class GemmProblem(ctypes.Structure):
    _fields_ = [
        ("type", ctypes.c_int), ("layout", ctypes.c_int), ("m", ctypes.c_int), ("n", ctypes.c_int), ("k", ctypes.c_int),
        ("groups", ctypes.c_int), ("a", ctypes.c_void_p), ("b", ctypes.c_void_p), ("d", ctypes.c_void_p),
        ("a_scale", ctypes.c_void_p), ("b_scale", ctypes.c_void_p), ("group_offsets", ctypes.c_void_p),
        ("group_rows", ctypes.c_void_p), ("workspace", ctypes.c_void_p), ("workspace_bytes", ctypes.c_size_t),
        ("a_scale_ld", ctypes.c_int), ("a_rows", ctypes.c_void_p), ("a_rows_total", ctypes.c_int),
        ("a_scale_stride", ctypes.c_int), ("a_row_bytes", ctypes.c_size_t), ("rows_hint", ctypes.c_int),
    ]


class CommId(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_ubyte * 128)]


class SendrecvOpts(ctypes.Structure):
    _fields_ = [("ctas", ctypes.c_int), ("zero_copy", ctypes.c_int), ("copy_engine", ctypes.c_int)]


class EpConfig(ctypes.Structure):
    _fields_ = [("hidden", ctypes.c_int), ("experts", ctypes.c_int), ("topk", ctypes.c_int), ("max_tokens", ctypes.c_int),
                ("payload", ctypes.c_int), ("row_align", ctypes.c_int), ("num_sms", ctypes.c_int),
                ("mode", ctypes.c_int), ("receive", ctypes.c_int)]


class EpRecv(ctypes.Structure):
    _fields_ = [("x", ctypes.c_void_p), ("x_scale", ctypes.c_void_p), ("scale_ld", ctypes.c_int),
                ("max_rows", ctypes.c_int), ("local_experts", ctypes.c_int), ("expert_offsets", ctypes.c_void_p),
                ("expert_counts", ctypes.c_void_p), ("src_rank", ctypes.c_void_p), ("src_token", ctypes.c_void_p),
                ("src_slot", ctypes.c_void_p), ("weight", ctypes.c_void_p), ("row_index", ctypes.c_void_p),
                ("rows", ctypes.c_void_p), ("row_scales", ctypes.c_void_p), ("row_bytes", ctypes.c_size_t),
                ("rows_total", ctypes.c_int), ("fp8", ctypes.c_int), ("masked", ctypes.c_int),
                ("expected_rows", ctypes.c_int)]


class AttnProblem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("seqlen_q", ctypes.c_int), ("seqlen_k", ctypes.c_int),
                ("cu_seqlens_q", ctypes.c_void_p), ("cu_seqlens_k", ctypes.c_void_p), ("heads_q", ctypes.c_int),
                ("heads_kv", ctypes.c_int), ("dim_qk", ctypes.c_int), ("dim_v", ctypes.c_int), ("mask", ctypes.c_int),
                ("softmax_scale", ctypes.c_float), ("q", ctypes.c_void_p), ("k", ctypes.c_void_p),
                ("v", ctypes.c_void_p), ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p), ("total_q", ctypes.c_int),
                ("total_k", ctypes.c_int)]


class MlaSparseProblem(ctypes.Structure):
    _fields_ = [("s_q", ctypes.c_int), ("heads", ctypes.c_int), ("s_kv", ctypes.c_int), ("topk", ctypes.c_int),
                ("dim_qk", ctypes.c_int), ("dim_v", ctypes.c_int), ("softmax_scale", ctypes.c_float),
                ("q", ctypes.c_void_p), ("kv", ctypes.c_void_p), ("indices", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("lse", ctypes.c_void_p)]


class MlaDecodeProblem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("s_q", ctypes.c_int), ("heads", ctypes.c_int), ("dim_qk", ctypes.c_int),
                ("dim_v", ctypes.c_int), ("page_size", ctypes.c_int), ("num_pages", ctypes.c_int),
                ("max_pages", ctypes.c_int), ("max_seqlen", ctypes.c_int), ("softmax_scale", ctypes.c_float),
                ("q", ctypes.c_void_p), ("kv_cache", ctypes.c_void_p), ("block_table", ctypes.c_void_p),
                ("seqlens", ctypes.c_void_p), ("o", ctypes.c_void_p), ("lse", ctypes.c_void_p),
                ("kv_fp8", ctypes.c_int)]


class MlaSparseDecodeProblem(ctypes.Structure):
    _fields_ = [("batch", ctypes.c_int), ("s_q", ctypes.c_int), ("heads", ctypes.c_int), ("dim_qk", ctypes.c_int),
                ("dim_v", ctypes.c_int), ("page_size", ctypes.c_int), ("num_pages", ctypes.c_int),
                ("topk", ctypes.c_int), ("softmax_scale", ctypes.c_float), ("q", ctypes.c_void_p),
                ("kv_cache", ctypes.c_void_p), ("indices", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("lse", ctypes.c_void_p), ("kv_fp8", ctypes.c_int)]


class NsaProblem(ctypes.Structure):
    _fields_ = [("tokens", ctypes.c_int), ("heads_q", ctypes.c_int), ("heads_kv", ctypes.c_int),
                ("dim_qk", ctypes.c_int), ("dim_v", ctypes.c_int), ("block", ctypes.c_int), ("topn", ctypes.c_int),
                ("softmax_scale", ctypes.c_float), ("q", ctypes.c_void_p), ("k", ctypes.c_void_p),
                ("v", ctypes.c_void_p), ("block_indices", ctypes.c_void_p), ("o", ctypes.c_void_p),
                ("lse", ctypes.c_void_p)]


class MoeLayerConfig(ctypes.Structure):
    _fields_ = [("hidden", ctypes.c_int), ("inter", ctypes.c_int), ("experts", ctypes.c_int), ("topk", ctypes.c_int),
                ("max_tokens", ctypes.c_int), ("num_sms", ctypes.c_int), ("path", ctypes.c_int)]


_MIRRORS = {"ws_role": Role, "ws_layout": Layout, "ws_plan": Plan, "ws_device_limits": DeviceLimits,
            "ws_gemm_problem": GemmProblem, "ws_comm_id": CommId, "ws_sendrecv_opts": SendrecvOpts,
            "ws_ep_config": EpConfig, "ws_ep_recv": EpRecv, "ws_attn_problem": AttnProblem,
            "ws_moe_layer_config": MoeLayerConfig, "ws_mla_sparse_problem": MlaSparseProblem,
            "ws_mla_decode_problem": MlaDecodeProblem, "ws_mla_sparse_decode_problem": MlaSparseDecodeProblem}

# ---- loading -------------------------------------------------------------------------
_here = os.path.dirname(os.path.abspath(__file__))
lib = None
cudart = None
library_path = None


def _candidates():
    env = os.environ.get("WARPSPEC_LIBRARY")
    if env:
        return [env]
    return [os.path.join(_here, "lib", "libwarpspec.so"),
            os.path.join(os.path.dirname(os.path.dirname(_here)), "build", "libwarpspec.so")]


# The nvidia-* wheels' library folders: cu13 (nvidia-cuda-runtime, nvidia-cublas),
# nvshmem (nvidia-nvshmem-cu13), nccl (nvidia-nccl-cu13).
_NVIDIA_SUBDIRS = ("cu13", "nvshmem", "nccl")
# The libraries libwarpspec.so links beyond the system's, in load order, and the wheel
# that provides each (the CLI also links libcublas/libcublasLt.so.13 and libnccl.so.2).
_NEEDED = (("libcudart.so.13", "nvidia-cuda-runtime"), ("libnvshmem_host.so.3", "nvidia-nvshmem-cu13"))


def _nvidia_lib_dirs():
    """lib/ folders of the nvidia-* wheels: first those beside this package (the ones its
    RPATH names), then those of every other sys.path entry, then the locations of the
    `nvidia` package if it was set up otherwise (a regular package, a .pth file)."""
    roots = [os.path.dirname(_here)] + [p or os.getcwd() for p in sys.path if isinstance(p, str)]
    try:
        spec = importlib.util.find_spec("nvidia")
    except (ImportError, ValueError):
        spec = None
    roots += [os.path.dirname(p) for p in (spec.submodule_search_locations or [])] if spec else []
    dirs, seen = [], set()
    for root in roots:
        for sub in _NVIDIA_SUBDIRS:
            d = os.path.join(root, "nvidia", sub, "lib")
            key = os.path.realpath(d)
            if key not in seen and os.path.isdir(d):
                seen.add(key)
                dirs.append(d)
    return dirs


def _loaded(name):
    """Whether the process already holds a library of soname `name` (PyTorch's runtime)."""
    try:
        ctypes.CDLL(name, mode=os.RTLD_NOLOAD | ctypes.RTLD_GLOBAL)
        return True
    except (OSError, AttributeError):
        return False


def _preload(name, dirs):
    """Load `name` from the first folder that has it, so the library's DT_NEEDED entry
    is met by soname whatever its RPATH says; nothing if the process holds one already
    (a second copy by full path would load beside it, unused). Returns the path loaded,
    or None (loaded before, none has it, or it did not load: the library's own load
    then reports it)."""
    if _loaded(name):
        return None
    for d in dirs:
        p = os.path.join(d, name)
        if os.path.exists(p):
            try:
                ctypes.CDLL(p, mode=ctypes.RTLD_GLOBAL)
                return p
            except OSError:
                pass
    return None


def _declare(L):
    c_int, c_size_t, c_void_p, c_char_p = ctypes.c_int, ctypes.c_size_t, ctypes.c_void_p, ctypes.c_char_p
    P = ctypes.POINTER
    sigs = {
        "ws_strerror": (c_char_p, [c_int]),
        "ws_last_error": (c_char_p, []),
        "ws_clear_error": (None, []),
        "ws_version": (c_char_p, []),
        "ws_abi_sizeof": (c_size_t, [c_char_p]),
        "ws_device_limits_query": (c_int, [c_int, P(DeviceLimits)]),
        "ws_plan_init": (c_int, [P(Plan), c_char_p, P(Role), c_int, c_int]),
        "ws_plan_set_smem": (c_int, [P(Plan), c_size_t]),
        "ws_plan_check_device": (c_int, [P(Plan), c_int]),
        "ws_gemm_plan": (c_int, [c_int, P(Plan)]),
        "ws_plan_print": (c_int, [P(Plan), c_void_p]),
        "ws_set_timeout_ms": (c_int, [ctypes.c_uint]),
        "ws_trace_start": (c_int, [c_int, c_size_t]),
        "ws_trace_stop": (c_int, [c_char_p, P(c_size_t)]),
        "ws_timeout_ms": (ctypes.c_uint, []),
        "ws_knobs_reload": (c_int, []),
        "ws_sync": (c_int, [c_void_p]),
        "ws_gemm_check": (c_int, [P(GemmProblem)]),
        "ws_gemm": (c_int, [P(GemmProblem), c_void_p]),
        "ws_ep_recv_gemm": (c_int, [P(EpRecv), P(GemmProblem)]),
        "ws_gemm_tile": (c_int, [P(GemmProblem), c_int, P(c_int), P(c_int)]),
        "ws_gemm_workspace_size": (c_int, [P(GemmProblem), P(c_size_t)]),
        "ws_fp8_quantize_1x128": (c_int, [c_void_p, c_size_t, c_size_t, c_size_t, c_void_p, c_void_p, c_void_p]),
        "ws_fp8_quantize_128x128": (c_int, [c_void_p, c_size_t, c_size_t, c_size_t, c_void_p, c_void_p, c_void_p]),
        "ws_fp8_quantize_1x128_kmajor": (c_int, [c_void_p, c_size_t, c_size_t, c_size_t, c_void_p, c_void_p, c_size_t,
                                                 c_void_p]),
        "ws_comm_available": (c_int, []),
        "ws_comm_get_unique_id": (c_int, [P(CommId)]),
        "ws_comm_init": (c_int, [P(c_void_p), c_int, c_int, P(CommId)]),
        "ws_comm_init_from_env": (c_int, [P(c_void_p)]),
        "ws_comm_rank": (c_int, [c_void_p, P(c_int)]),
        "ws_comm_size": (c_int, [c_void_p, P(c_int)]),
        "ws_comm_device": (c_int, [c_void_p, P(c_int)]),
        "ws_comm_alloc": (c_int, [c_void_p, c_size_t, P(c_void_p)]),
        "ws_comm_free": (c_int, [c_void_p, c_void_p]),
        "ws_comm_peer_ptr": (c_int, [c_void_p, c_void_p, c_int, P(c_void_p)]),
        "ws_comm_barrier": (c_int, [c_void_p, c_void_p]),
        "ws_comm_destroy": (c_int, [c_void_p]),
        "ws_sendrecv": (c_int, [c_void_p, c_void_p, c_size_t, c_int, c_void_p, c_size_t, c_int, P(SendrecvOpts),
                                c_void_p]),
        "ws_allgather": (c_int, [c_void_p, c_void_p, c_size_t, c_void_p, c_void_p]),
        "ws_ep_config_check": (c_int, [P(EpConfig), c_int]),
        "ws_ep_max_rows": (c_size_t, [P(EpConfig), c_int]),
        "ws_ep_create": (c_int, [P(c_void_p), c_void_p, P(EpConfig)]),
        "ws_ep_destroy": (c_int, [c_void_p]),
        "ws_ep_dispatch": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int, P(EpRecv), P(c_int),
                                   c_void_p]),
        "ws_ep_combine": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p]),
        "ws_ep_check": (c_int, [c_void_p, c_void_p]),
        "ws_moe_swiglu_quant": (c_int, [c_void_p, c_size_t, c_size_t, c_void_p, c_void_p, c_size_t, c_void_p]),
        "ws_moe_layer_create": (c_int, [P(c_void_p), c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_void_p]),
        "ws_moe_layer_destroy": (c_int, [c_void_p]),
        "ws_moe_layer_forward": (c_int, [c_void_p, c_void_p, c_void_p, c_void_p, c_void_p, c_int, c_void_p, c_void_p]),
        "ws_moe_layer_path_for": (c_int, [c_void_p, c_int, P(c_int)]),
        "ws_attn_check": (c_int, [P(AttnProblem)]),
        "ws_attn_validate": (c_int, [P(AttnProblem), c_void_p]),
        "ws_mla_decode_validate": (c_int, [P(MlaDecodeProblem), c_void_p]),
        "ws_mla_sparse_decode_validate": (c_int, [P(MlaSparseDecodeProblem), c_void_p]),
        "ws_gemm_validate": (c_int, [P(GemmProblem), c_void_p]),
        "ws_set_check_mode": (c_int, [c_int]),
        "ws_check_mode": (c_int, []),
        "ws_attn_forward": (c_int, [P(AttnProblem), c_void_p]),
        "ws_mla_sparse_forward": (c_int, [P(MlaSparseProblem), c_void_p]),
        "ws_mla_decode_workspace_size": (c_int, [P(MlaDecodeProblem), P(c_size_t)]),
        "ws_mla_decode_forward": (c_int, [P(MlaDecodeProblem), c_void_p, c_size_t, c_void_p]),
        "ws_mla_sparse_decode_workspace_size": (c_int, [P(MlaSparseDecodeProblem), P(c_size_t)]),
        "ws_mla_sparse_decode_forward": (c_int, [P(MlaSparseDecodeProblem), c_void_p, c_size_t, c_void_p]),
        "ws_mla_kv_quantize_fp8": (c_int, [c_void_p, c_size_t, c_void_p, c_void_p]),
        "ws_nsa_forward": (c_int, [P(NsaProblem), c_void_p]),
    }
    for name, (res, args) in sigs.items():
        f = getattr(L, name)
        f.restype = res
        f.argtypes = args


def _load():
    global lib, cudart, library_path
    # One CUDA runtime per process: PyTorch's, when it is installed.
    if "torch" not in sys.modules and importlib.util.find_spec("torch") is not None:
        try:
            import torch  # noqa: F401
        except Exception:  # a broken torch must not hide the library's own errors
            pass
    dirs = _nvidia_lib_dirs()
    # a build tree's library without the nvidia-* wheels: the toolkit's runtime
    cuda_home = os.environ.get("CUDA_HOME") or os.environ.get("CUDA_PATH") or "/usr/local/cuda"
    extra = {"libcudart.so.13": [os.path.join(cuda_home, "lib64"), os.path.join(cuda_home, "lib")]}
    for name, _ in _NEEDED:
        _preload(name, dirs + extra.get(name, []))
    tried = []
    for path in _candidates():
        if not os.path.exists(path):
            tried.append(f"{path} (absent)")
            continue
        try:
            L = ctypes.CDLL(path)
        except OSError as e:
            tried.append(f"{path} ({e})")
            continue
        _declare(L)
        lib, library_path = L, path
        break
    if lib is None:
        missing = [f"{name} (pip install {wheel})" for name, wheel in _NEEDED if any(name in t for t in tried)]
        hint = (" A CUDA library it links is missing: " + ", ".join(missing) + "; looked in " +
                (", ".join(dirs) if dirs else "no nvidia/*/lib folder on sys.path") + ".") if missing else ""
        raise ImportError("warpspec: the C library libwarpspec.so was not found or did not load; tried: " +
                          "; ".join(tried) + "." + hint + " Install the package (pip install warpspec-*.whl, or "
                          "pip install . from the source tree) or set WARPSPEC_LIBRARY to a build's libwarpspec.so.")
    for name, mirror in _MIRRORS.items():
        want = lib.ws_abi_sizeof(name.encode())
        if want != ctypes.sizeof(mirror):
            raise ImportError(f"warpspec: {library_path} has sizeof({name}) = {want}, the Python layer expects "
                              f"{ctypes.sizeof(mirror)}: the package and the library are from different versions")
    # The runtime the library links (already loaded: this finds it by soname).
    try:
        cudart = ctypes.CDLL("libcudart.so.13")
    except OSError as e:
        raise ImportError(f"warpspec: libcudart.so.13 did not load: {e}")
    cudart.cudaGetDeviceCount.argtypes = [ctypes.POINTER(ctypes.c_int)]
    cudart.cudaGetDevice.argtypes = [ctypes.POINTER(ctypes.c_int)]
    cudart.cudaSetDevice.argtypes = [ctypes.c_int]
    cudart.cudaGetErrorString.restype = ctypes.c_char_p
    cudart.cudaGetErrorString.argtypes = [ctypes.c_int]
    cudart.cudaGetLastError.argtypes = []


_load()
