"""Tensors in, pointers out: what the C API needs to know of an argument.

Accepted: torch tensors, and anything with __cuda_array_interface__ (CuPy, Numba, JAX
on one GPU). Other DLPack producers go through torch.from_dlpack when PyTorch is there.
Every check happens here, before the C call: device (CUDA, one device for all
arguments, sm_90), dtype, shape, strides. Outputs the caller does not give are
allocated with PyTorch.
"""

import ctypes
import sys

from . import _lib
from ._lib import invalid, wrong_type

# dtype names used throughout; FP8 operands may come as raw bytes (uint8), bf16 ones as
# raw 16-bit patterns (the CUDA array interface has no bf16 or fp8 type string).
_TORCH_DTYPES = {
    "torch.bfloat16": "bfloat16", "torch.float8_e4m3fn": "float8_e4m3fn", "torch.float32": "float32",
    "torch.int32": "int32", "torch.uint8": "uint8", "torch.int8": "int8", "torch.float16": "float16",
    "torch.int64": "int64", "torch.int16": "int16", "torch.float64": "float64",
}
_TYPESTR = {"f4": "float32", "i4": "int32", "u1": "uint8", "i1": "int8", "f2": "float16", "i8": "int64",
            "u2": "bf16_bits", "i2": "bf16_bits", "V2": "bf16_bits", "f8": "float64"}
_ITEMSIZE = {"bfloat16": 2, "bf16_bits": 2, "float8_e4m3fn": 1, "float32": 4, "int32": 4, "uint8": 1, "int8": 1,
             "float16": 2, "int64": 8, "int16": 2, "float64": 8}

# what each logical type accepts
BF16 = ("bfloat16", "bf16_bits")
FP8 = ("float8_e4m3fn", "uint8")
F32 = ("float32",)
I32 = ("int32",)
_SPAN_MAX = (1 << 63) - 1


_TORCH_DTYPE_OF = {}  # torch dtype object -> our name, filled as dtypes are seen


def _torch():
    return sys.modules.get("torch")


def torch_or_raise(what):
    t = _torch()
    if t is None:
        try:
            import torch as t
        except ImportError:
            raise invalid(f"{what}: PyTorch is needed to allocate the result; pass it preallocated instead")
    return t


class View:
    """Pointer, shape, strides (elements), dtype name and device of one argument."""

    __slots__ = ("name", "ptr", "shape", "strides", "dtype", "device", "obj")

    def __init__(self, obj, name):
        self.name = name
        self.obj = obj
        torch = _torch()
        if torch is not None and isinstance(obj, torch.Tensor):
            # every decode step comes through here several times: one device object, the
            # dtype looked up by the dtype object itself (str() of it is the slow part)
            device = obj.device
            if device.type != "cuda":
                raise invalid(f"{name}: a tensor on {device}, must be on a CUDA device")
            dt = _TORCH_DTYPE_OF.get(obj.dtype)
            if dt is None:
                dt = _TORCH_DTYPES.get(str(obj.dtype))
                if dt is None:
                    raise invalid(f"{name}: dtype {obj.dtype} is not supported here")
                _TORCH_DTYPE_OF[obj.dtype] = dt
            self.ptr = obj.data_ptr()
            self.shape = tuple(obj.shape)
            self.strides = obj.stride()
            self.dtype = dt
            self.device = device.index if device.index is not None else current_device()
            return
        cai = getattr(obj, "__cuda_array_interface__", None)
        if cai is None and hasattr(obj, "__dlpack__") and torch is not None:
            v = View(torch.from_dlpack(obj), name)
            for s in View.__slots__:
                setattr(self, s, getattr(v, s))
            return
        if cai is None:
            raise wrong_type(f"{name}: {type(obj).__name__} is neither a torch tensor nor has __cuda_array_interface__")
        self._from_interface(cai, name)

    def _from_interface(self, cai, name):
        """The CUDA array interface (version 2 or 3), every field checked: a malformed
        dict is an InvalidArgumentError naming the field, not a KeyError."""
        if not isinstance(cai, dict):
            raise wrong_type(f"{name}: __cuda_array_interface__ is a {type(cai).__name__}, not a dict")
        for key in ("shape", "typestr", "data"):
            if key not in cai:
                raise invalid(f"{name}: __cuda_array_interface__ has no '{key}'")
        typestr = cai["typestr"]
        dt = _TYPESTR.get(typestr[1:]) if isinstance(typestr, str) else None
        if dt is None:
            raise invalid(f"{name}: array type string {typestr!r} is not supported here")
        data = cai["data"]
        if not isinstance(data, (tuple, list)) or len(data) != 2 or not (data[0] is None or isinstance(data[0], int)):
            raise invalid(f"{name}: __cuda_array_interface__ 'data' {data!r}: expected (pointer, read_only)")
        if cai.get("mask") is not None:
            raise invalid(f"{name}: __cuda_array_interface__ has a mask; masked arrays are not supported")
        self.ptr = _lib.as_int(data[0] or 0, f"{name}: __cuda_array_interface__ data pointer", 0, _lib.PTR_MAX)
        shape = cai["shape"]
        if not isinstance(shape, (tuple, list)) or not all(isinstance(s, int) and not isinstance(s, bool) for s in shape):
            raise invalid(f"{name}: __cuda_array_interface__ 'shape' {shape!r}: expected a tuple of integers")
        if any(s < 0 for s in shape):
            raise invalid(f"{name}: shape {tuple(shape)} has a negative extent")
        self.shape = tuple(shape)
        item = _ITEMSIZE[dt]
        span = item
        for s in self.shape:
            span *= s
        if span > _SPAN_MAX:  # byte counts go to C as size_t
            raise invalid(f"{name}: shape {self.shape} spans {span} bytes, more than 2^63 - 1")
        st = cai.get("strides")
        if st is None:
            st, acc = [], 1
            for s in reversed(self.shape):
                st.append(acc)
                acc *= s
            self.strides = tuple(reversed(st))
        else:
            if (not isinstance(st, (tuple, list)) or len(st) != len(self.shape) or
                    not all(isinstance(s, int) and not isinstance(s, bool) for s in st)):
                raise invalid(f"{name}: __cuda_array_interface__ 'strides' {st!r}: expected one integer per dimension")
            if any(s % item for s in st):
                raise invalid(f"{name}: strides {tuple(st)} bytes are not whole {item}-byte elements")
            if any(s < 0 or s > _SPAN_MAX for s in st):  # the kernels read forward; strides go to C as size_t
                raise invalid(f"{name}: strides {tuple(st)} bytes: each must be 0 .. 2^63 - 1")
            self.strides = tuple(s // item for s in st)
        self.dtype = dt
        self.device = None  # the pointer's device, asked from CUDA when the call runs

    @property
    def itemsize(self):
        return _ITEMSIZE[self.dtype]

    @property
    def numel(self):
        n = 1
        for s in self.shape:
            n *= s
        return n

    @property
    def nbytes(self):
        return self.numel * self.itemsize

    def contiguous(self):
        acc = 1
        for s, st in zip(reversed(self.shape), reversed(self.strides)):
            if s != 1 and st != acc:
                return False
            acc *= s
        return True

    def expect(self, dtypes, ndim=None, shape=None, contiguous=True, what=""):
        """Check dtype, rank, shape (None entries: any) and contiguity."""
        if self.dtype not in dtypes:
            raise invalid(f"{self.name}: dtype {self.dtype}, expected {' or '.join(dtypes)}{what}")
        if ndim is not None and len(self.shape) not in (ndim if isinstance(ndim, tuple) else (ndim,)):
            raise invalid(f"{self.name}: {len(self.shape)} dimensions {self.shape}, expected {ndim}{what}")
        if shape is not None:
            if len(shape) != len(self.shape) or any(w is not None and w != g for w, g in zip(shape, self.shape)):
                want = tuple("*" if w is None else w for w in shape)
                raise invalid(f"{self.name}: shape {self.shape}, expected {want}{what}")
        if contiguous and not self.contiguous():
            raise invalid(f"{self.name}: strides {self.strides} for shape {self.shape}: must be contiguous "
                          f"(call .contiguous()){what}")
        if self.ptr % 16 and self.numel > 0:
            raise invalid(f"{self.name}: address 0x{self.ptr:x} is not 16-byte aligned")
        return self


def view(obj, name, optional=False):
    if obj is None:
        if optional:
            return None
        raise wrong_type(f"{name}: missing (None)")
    return obj if isinstance(obj, View) else View(obj, name)


# ---- devices and streams --------------------------------------------------------------
class _PtrAttr(ctypes.Structure):
    _fields_ = [("type", ctypes.c_int), ("device", ctypes.c_int), ("devicePointer", ctypes.c_void_p),
                ("hostPointer", ctypes.c_void_p), ("reserved", ctypes.c_long * 8)]


def device_count():
    n = ctypes.c_int(0)
    if _lib.cudart.cudaGetDeviceCount(ctypes.byref(n)) != 0:
        _lib.cudart.cudaGetLastError()
        return 0
    return n.value


def current_device():
    d = ctypes.c_int(0)
    if _lib.cudart.cudaGetDevice(ctypes.byref(d)) != 0:
        _lib.cudart.cudaGetLastError()
        return 0
    return d.value


_limits_cache = {}


def device_limits(dev):
    if dev not in _limits_cache:
        lim = _lib.DeviceLimits()
        _lib.check(_lib.lib.ws_device_limits_query(dev, ctypes.byref(lim)))
        _limits_cache[dev] = lim
    return _limits_cache[dev]


def _pointer_device(v):
    attr = _PtrAttr()
    err = _lib.cudart.cudaPointerGetAttributes(ctypes.byref(attr), ctypes.c_void_p(v.ptr))
    if err != 0:
        _lib.cudart.cudaGetLastError()
        raise invalid(f"{v.name}: CUDA does not know address 0x{v.ptr:x}: "
                      f"{_lib.cudart.cudaGetErrorString(err).decode()}")
    if attr.type not in (2, 3):  # cudaMemoryTypeDevice, cudaMemoryTypeManaged
        raise invalid(f"{v.name}: address 0x{v.ptr:x} is not device memory")
    return attr.device


def require_hopper(views, what):
    """The one CUDA device all arguments live on, checked to be an sm_90 GPU."""
    n = device_count()
    if n == 0:
        raise _lib.error_for(_lib.WS_ERR_NO_DEVICE, f"{what}: no CUDA device on this machine (warpspec's kernels "
                                                    f"need an sm_90 GPU: H100 / H200)")
    devs = set()
    for v in views:
        if v is None or v.numel == 0:
            continue
        if v.device is None:
            v.device = _pointer_device(v)
        devs.add(v.device)
    if len(devs) > 1:
        where = ", ".join(f"{v.name} on cuda:{v.device}" for v in views if v is not None and v.device is not None)
        raise invalid(f"{what}: arguments on different devices ({where})")
    dev = devs.pop() if devs else current_device()
    lim = device_limits(dev)
    if lim.cc_major != 9:
        raise _lib.error_for(_lib.WS_ERR_NO_DEVICE,
                             f"{what}: cuda:{dev} is {lim.name.decode()} (sm_{lim.cc_major}{lim.cc_minor}); warpspec's "
                             f"kernels need an sm_90 GPU (H100 / H200)")
    return dev


_torch_cuda = False  # PyTorch sees a GPU (once true, it stays true)


def stream_handle(stream, dev):
    """cudaStream_t for `stream`: None = PyTorch's current stream on dev (the default
    stream without PyTorch); an int; a torch.cuda.Stream; anything with
    __cuda_stream__ or .cuda_stream / .ptr."""
    if stream is None:
        global _torch_cuda
        torch = _torch()
        if torch is None:
            return 0
        if not _torch_cuda:  # asked until it is true (is_available asks NVML: microseconds a call)
            _torch_cuda = torch.cuda.is_available()
        return torch.cuda.current_stream(dev).cuda_stream if _torch_cuda else 0
    if isinstance(stream, int) and not isinstance(stream, bool):
        return _lib.as_int(stream, "stream", 0, _lib.PTR_MAX)
    if hasattr(stream, "__cuda_stream__"):
        pair = stream.__cuda_stream__()
        if not isinstance(pair, (tuple, list)) or len(pair) != 2:
            raise invalid(f"stream: __cuda_stream__() gave {pair!r}, expected (version, handle)")
        return _lib.as_int(pair[1], "stream: __cuda_stream__()[1]", 0, _lib.PTR_MAX)
    for attr in ("cuda_stream", "ptr", "handle"):
        if hasattr(stream, attr):
            return _lib.as_int(getattr(stream, attr), f"stream.{attr}", 0, _lib.PTR_MAX)
    raise wrong_type(f"stream: {type(stream).__name__} is not a CUDA stream")


def stream_arg(stream):
    """`stream` checked where a call starts, before the device is asked anything: None
    (the current stream, found when the call runs) or the handle as an int."""
    return None if stream is None else stream_handle(stream, None)


class on_device:
    """Make `dev` the current CUDA device for the C call (the C API uses the current
    one), and restore the previous one after."""

    def __init__(self, dev):
        self.dev = dev
        self.prev = None

    def __enter__(self):
        self.prev = current_device()
        if self.prev != self.dev:
            if _lib.cudart.cudaSetDevice(self.dev) != 0:
                _lib.cudart.cudaGetLastError()
                raise _lib.error_for(_lib.WS_ERR_CUDA, f"cudaSetDevice({self.dev}) failed")
        return self

    def __exit__(self, *exc):
        if self.prev is not None and self.prev != self.dev:
            _lib.cudart.cudaSetDevice(self.prev)
        return False


def empty(shape, dtype, dev, what):
    """A new torch tensor on cuda:dev (dtype: a name from this module)."""
    torch = torch_or_raise(what)
    tdt = {"bfloat16": torch.bfloat16, "float8_e4m3fn": torch.float8_e4m3fn, "float32": torch.float32,
           "uint8": torch.uint8, "int32": torch.int32}[dtype]
    return torch.empty(shape, dtype=tdt, device=f"cuda:{dev}")


class _DeviceBuffer:
    """Device memory the library owns (symmetric heap, a handle's buffers), seen through
    __cuda_array_interface__ so that torch wraps it without a copy."""

    def __init__(self, ptr, nbytes):
        self.__cuda_array_interface__ = {"shape": (nbytes,), "typestr": "|u1", "data": (ptr, False), "version": 3,
                                         "strides": None, "stream": None}


def wrap_device(ptr, nbytes, dtype, shape, dev):
    """A torch tensor of `dtype` and `shape` over nbytes of device memory at ptr on cuda:dev."""
    torch = torch_or_raise("wrapping device memory")
    raw = torch.as_tensor(_DeviceBuffer(ptr, nbytes), device=f"cuda:{dev}")
    return raw.view(dtype).view(shape)
