"""The communicator (warpspec/comm.h) over tensors: NVSHMEM underneath, one process per
GPU, transfers on the current PyTorch stream.

    import torch.distributed as dist, warpspec
    dist.init_process_group("nccl")                 # or gloo: only the id travels through it
    torch.cuda.set_device(local_rank)
    comm = warpspec.Communicator.from_process_group()
    comm.sendrecv(x, (rank + 1) % n, y, (rank - 1) % n)
    warpspec.sync()                                 # transfer errors surface here
    comm.destroy()

Errors of a transfer (a peer that never comes, sizes that disagree) are found on the
device and raised by warpspec.sync() as WarpspecTimeoutError / MismatchError naming the
peer and the block. Keep one stream per communicator.
"""

import ctypes
import sys

from . import _lib
from ._lib import invalid, wrong_type
from ._handle import Handle
from ._tensor import on_device, require_hopper, stream_arg, stream_handle, torch_or_raise, view, wrap_device

WS_NO_PEER = -1


def available():
    """True if the library was built with NVSHMEM."""
    return _lib.lib.ws_comm_available() == _lib.WS_OK


def get_unique_id():
    """The bootstrap id (128 bytes) rank 0 makes and hands to every rank."""
    uid = _lib.CommId()
    _lib.check(_lib.lib.ws_comm_get_unique_id(ctypes.byref(uid)))
    return bytes(uid.bytes)


class Communicator(Handle):
    """A warpspec communicator on the current CUDA device (one rank per GPU)."""

    _free = "ws_comm_destroy"

    def __init__(self, rank, nranks, unique_id, device=None):
        """Collective over all `nranks` processes: each passes its rank and the same
        128-byte unique_id (from get_unique_id() on rank 0). device: the CUDA device
        of this rank (default: the current one)."""
        if not isinstance(unique_id, (bytes, bytearray)) or len(unique_id) != 128:
            raise invalid("Communicator: unique_id must be the 128 bytes of get_unique_id()")
        nranks = _lib.as_int(nranks, "Communicator: nranks", 1, 1 << 16)
        rank = _lib.as_int(rank, "Communicator: rank", 0, nranks - 1)
        dev = None if device is None else _lib.as_int(device, "Communicator: device", 0, 1 << 16)
        if not available():  # after the arguments: a wrong argument is named first, with or without NVSHMEM
            _lib.check(_lib.lib.ws_comm_available())
        from ._tensor import current_device
        dev = current_device() if dev is None else dev
        require_hopper([], "Communicator")
        uid = _lib.CommId()
        ctypes.memmove(uid.bytes, bytes(unique_id), 128)
        handle = ctypes.c_void_p()
        with on_device(dev):
            _lib.check(_lib.lib.ws_comm_init(ctypes.byref(handle), int(rank), int(nranks), ctypes.byref(uid)))
        self._h = handle
        self.rank, self.size, self.device = int(rank), int(nranks), dev
        self._buffers = {}

    @classmethod
    def from_process_group(cls, group=None, device=None):
        """Collective over a torch.distributed process group (default: the world):
        rank 0 of the group makes the unique id and broadcasts it through the group."""
        if device is not None:
            device = _lib.as_int(device, "Communicator.from_process_group: device", 0, 1 << 16)
        try:
            import torch.distributed as dist
        except ImportError:
            raise invalid("Communicator.from_process_group: needs PyTorch (torch.distributed)") from None
        if not dist.is_available() or not dist.is_initialized():
            raise invalid("Communicator.from_process_group: torch.distributed is not initialised "
                          "(call dist.init_process_group first)")
        rank, size = dist.get_rank(group), dist.get_world_size(group)
        src = dist.get_global_rank(group, 0) if group is not None else 0
        box = [get_unique_id() if rank == 0 else None]
        dist.broadcast_object_list(box, src=src, group=group)
        return cls(rank, size, box[0], device=device)

    @classmethod
    def from_env(cls):
        """Collective: rank, size and device from `warpspec run` or mpirun
        (ws_comm_init_from_env; the id travels through the rendezvous folder)."""
        self = cls.__new__(cls)
        handle = ctypes.c_void_p()
        _lib.check(_lib.lib.ws_comm_init_from_env(ctypes.byref(handle)))
        self._h = handle
        r, n, d = ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
        _lib.check(_lib.lib.ws_comm_rank(handle, ctypes.byref(r)))
        _lib.check(_lib.lib.ws_comm_size(handle, ctypes.byref(n)))
        _lib.check(_lib.lib.ws_comm_device(handle, ctypes.byref(d)))
        self.rank, self.size, self.device = r.value, n.value, d.value
        self._buffers = {}
        return self

    # ---- lifetime -------------------------------------------------------------------
    def destroy(self):
        """Collective: waits for the device, frees the symmetric memory (tensors from
        alloc() are invalid after this), finalizes NVSHMEM."""
        super().destroy()

    def _before_destroy(self):
        layers = getattr(self, "_moe_layers", {})  # warpspec.moe's layers on this communicator
        for layer in layers.values():
            layer.destroy()
        layers.clear()
        self._buffers.clear()

    # ---- symmetric memory -------------------------------------------------------------
    def alloc(self, shape, dtype=None):
        """Collective: a zeroed tensor in symmetric memory (the same size on every rank),
        which peers can write into directly (sendrecv's zero_copy). It lives until
        free() or destroy()."""
        what = "Communicator.alloc"
        if isinstance(shape, (tuple, list)):
            shape = tuple(_lib.as_int(s, f"{what}: shape[{i}]", 0, _lib.SIZE_MAX) for i, s in enumerate(shape))
        else:
            shape = (_lib.as_int(shape, f"{what}: shape", 0, _lib.SIZE_MAX),)
        numel = 1
        for s in shape:
            numel *= s
        if numel == 0:
            raise invalid(f"{what}: shape {shape} has no elements")
        _lib.as_int(numel, f"{what}: elements of shape {shape}", 1, _lib.SIZE_MAX)
        torch = torch_or_raise(what)
        dtype = torch.uint8 if dtype is None else dtype
        if not isinstance(dtype, torch.dtype):
            raise wrong_type(f"{what}: dtype {dtype!r} is not a torch.dtype")
        nbytes = _lib.as_int(numel * torch.empty((), dtype=dtype).element_size(), f"{what}: bytes of shape {shape}", 1,
                             _lib.SIZE_MAX)
        ptr = ctypes.c_void_p()
        with on_device(self.device):
            _lib.check(_lib.lib.ws_comm_alloc(self._handle(), nbytes, ctypes.byref(ptr)))
        t = wrap_device(ptr.value, nbytes, dtype, shape, self.device)
        self._buffers[ptr.value] = nbytes
        return t

    def free(self, tensor):
        """Collective: release a tensor from alloc()."""
        torch = sys.modules.get("torch")  # an alloc() tensor may have any dtype, which View does not take
        is_torch = torch is not None and isinstance(tensor, torch.Tensor)
        ptr = tensor.data_ptr() if is_torch else view(tensor, "tensor").ptr
        if ptr not in self._buffers:
            raise invalid("Communicator.free: not a tensor from this communicator's alloc()")
        del self._buffers[ptr]
        with on_device(self.device):
            _lib.check(_lib.lib.ws_comm_free(self._handle(), ctypes.c_void_p(ptr)))

    # ---- transfers --------------------------------------------------------------------
    def _bytes_view(self, t, name):
        if t is None:
            return None
        v = view(t, name)
        if not v.contiguous():
            raise invalid(f"{name}: must be contiguous")
        if v.ptr % 16 and v.nbytes:
            raise invalid(f"{name}: address 0x{v.ptr:x} is not 16-byte aligned")
        return v

    def _peer(self, peer, name):
        if peer is None:
            return WS_NO_PEER
        peer = _lib.as_int(peer, name)
        if peer != WS_NO_PEER and not 0 <= peer < self.size:
            raise invalid(f"{name}: {peer} out of range for {self.size} ranks (or None)")
        return peer

    def sendrecv(self, send, send_peer, recv, recv_peer, *, ctas=0, zero_copy=False, copy_engine=0, stream=None):
        """Send `send` to send_peer and receive into `recv` from recv_peer in one kernel
        (either side may be None). The receiver must expect exactly the bytes the
        sender sends. zero_copy: every rank's `recv` is the same alloc() tensor, and
        large messages are written straight into it. ctas: CTAs per direction (0 tuned)."""
        stream = stream_arg(stream)
        sp, rp = self._peer(send_peer, "send_peer"), self._peer(recv_peer, "recv_peer")
        vs = self._bytes_view(send, "send") if sp != WS_NO_PEER else None
        vr = self._bytes_view(recv, "recv") if rp != WS_NO_PEER else None
        for side, peer, v in (("send", sp, vs), ("recv", rp, vr)):
            if peer != WS_NO_PEER and v is None:
                raise invalid(f"sendrecv: {side} is None, but {side}_peer is {peer}")
        for v in (vs, vr):
            if v is not None and v.device is not None and v.device != self.device:
                raise invalid(f"{v.name}: on cuda:{v.device}, the communicator is on cuda:{self.device}")
        opts = _lib.SendrecvOpts(_lib.as_int(ctas, "ctas", 0), 1 if zero_copy else 0,
                                 _lib.as_int(copy_engine, "copy_engine", -1, 1))
        with on_device(self.device):
            s = stream_handle(stream, self.device)
            _lib.check(_lib.lib.ws_sendrecv(self._handle(), vs.ptr if vs else None, vs.nbytes if vs else 0, sp,
                                            vr.ptr if vr else None, vr.nbytes if vr else 0, rp, ctypes.byref(opts),
                                            ctypes.c_void_p(s)))

    def send(self, tensor, peer, **kw):
        self.sendrecv(tensor, peer, None, None, **kw)

    def recv(self, tensor, peer, **kw):
        self.sendrecv(None, None, tensor, peer, **kw)

    def allgather(self, tensor, out=None, *, stream=None):
        """out[r] = rank r's tensor for every rank: on 2-8 ranks every block goes to every
        rank in one launch (a ring past 8). out: [size, *tensor.shape], allocated when not
        given; an out from alloc() on every rank makes blocks from 16 MiB
        (WARPSPEC_AG_ZC_MIN_BYTES) up to, not including, 64 MiB zero-copy: stored once,
        straight into each peer's out (past WARPSPEC_AG_DIRECT_MAX_BYTES, the ring)."""
        stream = stream_arg(stream)
        v = self._bytes_view(view(tensor, "tensor"), "tensor")
        if out is None:
            torch = torch_or_raise("Communicator.allgather")
            if not isinstance(tensor, torch.Tensor):
                raise invalid("Communicator.allgather: out is needed when tensor is not a torch tensor")
            out = torch.empty((self.size,) + tuple(tensor.shape), dtype=tensor.dtype, device=f"cuda:{self.device}")
        vo = self._bytes_view(out, "out")
        if vo.nbytes != v.nbytes * self.size:
            raise invalid(f"allgather: out has {vo.nbytes} bytes, expected {self.size} x {v.nbytes}")
        with on_device(self.device):
            s = stream_handle(stream, self.device)
            _lib.check(_lib.lib.ws_allgather(self._handle(), v.ptr, v.nbytes, vo.ptr, ctypes.c_void_p(s)))
        return out

    def barrier(self, stream=None):
        """All ranks reach this point on the stream before any goes on (device-side)."""
        stream = stream_arg(stream)
        with on_device(self.device):
            _lib.check(_lib.lib.ws_comm_barrier(self._handle(), ctypes.c_void_p(stream_handle(stream, self.device))))

    def __repr__(self):
        state = "destroyed" if self._h is None else f"cuda:{self.device}"
        return f"Communicator(rank {self.rank} of {self.size}, {state})"
