"""The lifetime the Python layer's handles share (Communicator, MoeDispatcher, MoeLayer):
the C handle in self._h, destroy() once (later calls do nothing), a context manager, and
one message for a call after destroy()."""

from . import _lib
from ._lib import invalid, wrong_type
from ._tensor import on_device


def require_communicator(comm, what):
    """comm must be a live warpspec.Communicator (not None, not a torch process group)."""
    from .comm import Communicator
    if not isinstance(comm, Communicator):
        raise wrong_type(f"{what}: comm is {type(comm).__name__}, expected a warpspec.Communicator "
                         "(Communicator.from_env() or .from_process_group())")
    comm._handle()  # raises if destroyed


class Handle:
    _h = None     # the C handle: None until created, and after destroy()
    _free = None  # the name of the C function that destroys it

    def _handle(self):
        if self._h is None:
            raise invalid(f"{type(self).__name__}: already destroyed")
        return self._h

    def _before_destroy(self):
        """What a subclass lets go of before its C handle goes."""

    def destroy(self):
        if self._h is None:
            return
        self._before_destroy()
        h, self._h = self._h, None
        with on_device(self.device):
            _lib.check(getattr(_lib.lib, self._free)(h))

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.destroy()
        return False
