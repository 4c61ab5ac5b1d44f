"""The budget planner (warpspec/plan.h) from Python: lay out a role table and check it
against the hardware before anything launches. Needs no GPU unless asked to check a
device.

    >>> import warpspec
    >>> p = warpspec.plan([("dispatch", 4, "rest"), ("receiver", 4, 80), ("compute", 4, 184)])
    >>> p.threads, [r.regs for r in p.roles]
    (384, [240, 80, 184])

A plan that does not fit raises BudgetError naming the real limit and a value that fits
(the seed's 3 x 4-warp kernel at 240 entry registers: registers, not threads).
"""

import ctypes
from dataclasses import dataclass

from . import _lib
from ._lib import invalid, wrong_type


@dataclass(frozen=True)
class PlacedRole:
    """A role as the layout placed it."""
    name: str
    warps: int          # per replica
    replicas: int
    regs: int           # registers per thread after setmaxnreg (the entry cap if unchanged)
    first_warp: int
    end_warp: int       # one past the role's last warp, padding included
    barrier: int        # named barrier id of replica 0 (replica k: + k); 0 for one-warp roles


def _regs_of(value, where):
    if isinstance(value, str):
        v = value.strip().lower()
        if v == "rest":
            return _lib.WS_REGS_REST
        if v == "entry":
            return _lib.WS_REGS_ENTRY
        try:
            return _lib.as_int(int(v), f"{where}: registers", 0, 1 << 16)
        except ValueError:
            raise invalid(f"{where}: registers {value!r}: a number (24..256, multiple of 8), 'rest' or 'entry'")
    return _lib.as_int(value, f"{where}: registers", -1, 1 << 16)


def _role_of(spec, i):
    """(name, warps, regs, replicas) from a tuple, a dict or a CLI string
    'name:warps:regs[xreplicas]'."""
    where = f"roles[{i}]"
    if isinstance(spec, str):
        parts = spec.split(":")
        if len(parts) != 3:
            raise invalid(f"{where}: {spec!r}: expected 'name:warps:regs[xreplicas]'")
        name, warps, regs = parts
        replicas = 1
        if "x" in regs:
            regs, rep = regs.split("x", 1)
            try:
                replicas = int(rep)
            except ValueError:
                raise invalid(f"{where}: {spec!r}: replicas {rep!r} is not a number")
        try:
            warps = int(warps)
        except ValueError:
            raise invalid(f"{where}: {spec!r}: warps {warps!r} is not a number")
        return name, _lib.as_int(warps, f"{where}: warps", 1, 32), _regs_of(regs, where), \
            _lib.as_int(replicas, f"{where}: replicas", 1, 32)
    if isinstance(spec, dict):
        if "name" not in spec or "warps" not in spec:
            raise invalid(f"{where}: {spec!r}: a dict needs 'name' and 'warps' (and 'regs', 'replicas')")
        return (_lib.as_str(spec["name"], f"{where}: name"), _lib.as_int(spec["warps"], f"{where}: warps", 1, 32),
                _regs_of(spec.get("regs", "entry"), where),
                _lib.as_int(spec.get("replicas", 1), f"{where}: replicas", 1, 32))
    if isinstance(spec, (tuple, list)) and len(spec) in (3, 4):
        return (_lib.as_str(spec[0], f"{where}: name"), _lib.as_int(spec[1], f"{where}: warps", 1, 32),
                _regs_of(spec[2], where), _lib.as_int(spec[3], f"{where}: replicas", 1, 32) if len(spec) == 4 else 1)
    raise invalid(f"{where}: {spec!r}: expected (name, warps, regs[, replicas]), a dict or 'name:warps:regs'")


def _print_to_string(plan_struct):
    libc = ctypes.CDLL(None)
    libc.open_memstream.restype = ctypes.c_void_p
    libc.open_memstream.argtypes = [ctypes.POINTER(ctypes.c_char_p), ctypes.POINTER(ctypes.c_size_t)]
    libc.fclose.argtypes = [ctypes.c_void_p]
    libc.free.argtypes = [ctypes.c_void_p]
    buf, size = ctypes.c_char_p(), ctypes.c_size_t(0)
    f = libc.open_memstream(ctypes.byref(buf), ctypes.byref(size))
    if not f:
        return "(open_memstream failed)"
    try:
        _lib.check(_lib.lib.ws_plan_print(ctypes.byref(plan_struct), ctypes.c_void_p(f)))
    finally:
        libc.fclose(ctypes.c_void_p(f))
    text = ctypes.string_at(buf, size.value).decode(errors="replace")
    libc.free(ctypes.cast(buf, ctypes.c_void_p))
    return text


class Plan:
    """A checked role layout (ws_plan). str(plan) is the planner's table."""

    def __init__(self, struct, names=()):
        self._s = struct
        self._names = names  # keeps the role names the C struct points to alive
        L = struct.layout
        self.kernel = struct.kernel.decode()
        self.threads, self.warps, self.warpgroups = L.threads, L.warps, L.nwarpgroups
        self.entry_regs, self.pool_regs, self.pool_used = L.entry_regs, L.pool_regs, L.pool_used
        self.setmaxnreg = bool(L.setmaxnreg)
        self.barriers = L.nbarriers
        self.smem_bytes = struct.smem_bytes
        self.roles = [PlacedRole(L.role_name[r].value.decode(), L.role_warps[r], L.role_replicas[r], L.role_regs[r],
                                 L.role_first_warp[r], L.role_end_warp[r], L.role_barrier[r])
                      for r in range(L.nroles)]

    def check_device(self, device=None):
        """Check against a GPU (sm_90, shared memory); raises on failure, returns self."""
        from ._tensor import current_device, require_hopper
        dev = current_device() if device is None else _lib.as_int(device, "device", 0, 1 << 16)
        require_hopper([], f"plan '{self.kernel}'")
        _lib.check(_lib.lib.ws_plan_check_device(ctypes.byref(self._s), dev))
        return self

    def table(self):
        return _print_to_string(self._s)

    def __str__(self):
        return self.table()

    def __repr__(self):
        roles = ", ".join(f"{r.name}:{r.warps}x{r.replicas}@{r.regs}" for r in self.roles)
        return f"Plan({self.kernel!r}, {self.threads} threads, {roles})"


def plan(roles, *, entry_regs=0, smem=0, name="python", device=None):
    """Lay out and check a role table; returns a Plan or raises BudgetError /
    InvalidArgumentError with the planner's message.

    roles: (name, warps, regs[, replicas]) tuples, dicts, or CLI strings
    'name:warps:regs[xreplicas]'; regs is 24..256 (a multiple of 8), 'rest' (share
    what the others leave) or 'entry' (keep the kernel's entry cap). entry_regs: 0 for
    kernels built with WS_KERNEL, or the cap the kernel was built with. smem: dynamic
    shared memory per CTA. device: also check against that GPU."""
    if isinstance(roles, (str, bytes, dict)) or not hasattr(roles, "__iter__"):
        raise wrong_type(f"plan: roles is a {type(roles).__name__}, expected a list of role specs")
    roles = list(roles)
    if not roles:
        raise invalid("plan: no roles")
    if len(roles) > _lib.WS_MAX_ROLES:
        raise invalid(f"plan: {len(roles)} roles, at most {_lib.WS_MAX_ROLES}")
    parsed = [_role_of(r, i) for i, r in enumerate(roles)]
    names = [p[0].encode() for p in parsed]
    arr = (_lib.Role * len(parsed))()
    for i, (nm, warps, regs, rep) in enumerate(parsed):
        arr[i] = _lib.Role(names[i], warps, regs, rep)
    s = _lib.Plan()
    entry_regs = _lib.as_int(entry_regs, "plan: entry_regs", 0, 255)
    smem = _lib.as_int(smem, "plan: smem", 0, 1 << 40)
    name = _lib.as_str(name, "plan: name")
    _lib.check(_lib.lib.ws_plan_init(ctypes.byref(s), name.encode(), arr, len(parsed), entry_regs))
    if smem:
        _lib.check(_lib.lib.ws_plan_set_smem(ctypes.byref(s), smem))
    p = Plan(s, (names, arr))
    if device is not None:
        p.check_device(device)
    return p


def gemm_plan(dtype="fp8"):
    """The role plan of the library's GEMM kernel for 'bf16' or 'fp8'."""
    t = {"bf16": 0, "bfloat16": 0, "fp8": 1, "float8_e4m3fn": 1}.get(str(dtype).replace("torch.", ""))
    if t is None:
        raise invalid(f"gemm_plan: dtype {dtype!r}, expected 'bf16' or 'fp8'")
    s = _lib.Plan()
    _lib.check(_lib.lib.ws_gemm_plan(t, ctypes.byref(s)))
    return Plan(s)
