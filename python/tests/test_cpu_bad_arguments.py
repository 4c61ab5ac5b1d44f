"""Every argument of every public callable and method, fed each kind of wrong value
without a GPU (test_cpu_bad_inputs.py holds the probe's cases, one or two a function;
this file sweeps the arguments one at a time).

Each case must raise a WarpspecError subclass naming the argument before the GPU is
asked anything: InvalidTypeError (also a TypeError) for a value of the wrong Python type,
InvalidArgumentError (a ValueError) for a wrong value; never AttributeError, KeyError,
ZeroDivisionError, ctypes.ArgumentError or OverflowError, and never a silent wrap of an
integer into a C int, size_t or pointer. A target is a call right in every argument but
the one replaced; test_every_public_callable_has_cases fails when a public callable or
method has no target here.

Handles are stand-ins made without a GPU, with a NULL C handle, so that a case which
slipped through the Python checks ends in the library's own NULL check."""

import ctypes
import importlib.util
import inspect
import math
import re
import types
from dataclasses import dataclass, field

import pytest

import warpspec
from conftest import FakeArray

BF16, FP8, F32, I32, F64 = "<V2", "|u1", "<f4", "<i4", "<f8"  # float64: an argument of no function
TYPE, VALUE, INVALID = "type", "value", "invalid"
HAS_TORCH = importlib.util.find_spec("torch") is not None


class Iface:
    """An object whose __cuda_array_interface__ is given verbatim (malformed ones too)."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def _cai(shape=(4, 128), typestr=BF16, **over):
    d = {"shape": shape, "typestr": typestr, "data": (0x7E0000000000, False), "version": 3, "strides": None}
    d.update(over)
    return d


def _without(key):
    d = _cai()
    del d[key]
    return d


MALFORMED = {
    "cai_list": [4, 128], "cai_no_shape": _without("shape"), "cai_no_typestr": _without("typestr"),
    "cai_no_data": _without("data"), "cai_typestr_int": _cai(typestr=2), "cai_data_none": _cai(data=None),
    "cai_data_short": _cai(data=(0x7E0000000000,)), "cai_ptr_negative": _cai(data=(-16, False)),
    "cai_ptr_huge": _cai(data=(2**64, False)), "cai_shape_str": _cai(shape="4x128"),
    "cai_shape_float": _cai(shape=(4.0, 128)), "cai_shape_negative": _cai(shape=(-4, 128)),
    "cai_shape_wraps": _cai(shape=(2**64 + 4, 128)), "cai_strides_short": _cai(strides=(256,)),
    "cai_strides_negative": _cai(strides=(-256, 2)), "cai_masked": _cai(mask=object()),
}
WRONG_TYPES = {"str": "abc", "float": 1.5, "bool": True, "list": [1, 2], "object": object()}


# ---- what a target is ------------------------------------------------------------------------
@dataclass
class Target:
    """One public callable: `call(**kwargs)` with `base` right in every argument;
    tensors: argument -> which kinds of bad array apply; ints / reals / choices /
    others: argument -> [(label, bad value, expected)]; torch_first: the call needs
    PyTorch before it reads its arguments (without it, InvalidArgumentError is all it
    can say)."""
    name: str
    call: object
    base: dict
    tensors: dict = field(default_factory=dict)
    scalars: dict = field(default_factory=dict)
    torch_first: bool = False


ALL_KINDS = ("none", "types", "malformed", "dtype", "rank", "negative")
OPTIONAL = ("types", "malformed", "dtype", "rank", "negative")  # None means "not given"
BYTES = ("none", "types", "malformed", "negative")               # any dtype and shape is right
BYTES_OR_NONE = ("types", "malformed", "negative")


def ints(lo=0, optional=False, negative_ok=False, size_t=False):
    """The bad values of an integer argument whose lowest value is `lo` (size_t: a C
    size_t, where 2**32 + 4 is a value, not a wrap)."""
    bad = [("str", "4", TYPE), ("float", 4.0, TYPE), ("bool", True, TYPE), ("wraps_size_t", 2**64, VALUE),
           ("neg_huge", -(2**64) + 4, VALUE)]
    if not size_t:
        bad.append(("wraps_int", 2**32 + 4, VALUE))
    if not optional:
        bad.append(("None", None, TYPE))
    if not negative_ok:
        bad.append(("below", lo - 1, VALUE))
    return bad


REALS = [("str", "0.1", TYPE), ("bool", True, TYPE), ("negative", -1.0, VALUE), ("nan", math.nan, VALUE),
         ("inf", math.inf, VALUE), ("above_float", 1e300, VALUE), ("int_overflow", 10**400, VALUE),
         ("complex", 1j, TYPE)]
STREAMS = [("str", "s", TYPE), ("float", 1.5, TYPE), ("bool", True, TYPE), ("object", object(), TYPE),
           ("negative", -1, VALUE), ("huge", 2**64, VALUE)]


def choices():
    """A str option: any refusal of a non-str does (InvalidTypeError or InvalidArgumentError)."""
    return [("None", None, INVALID), ("int", 5, INVALID), ("list", ["a"], INVALID), ("unknown", "bogus", VALUE)]


# ---- stand-ins for handles -----------------------------------------------------------------------
NULL = ctypes.c_void_p()


def _comm(size=2):
    c = warpspec.Communicator.__new__(warpspec.Communicator)
    c._h, c.rank, c.size, c.device, c._buffers = NULL, 0, size, 0, {}
    return c


def _dispatcher():
    from warpspec import moe_dispatch
    d = warpspec.MoeDispatcher.__new__(warpspec.MoeDispatcher)
    d.cfg = moe_dispatch._config(256, 8, 2, 16, "fp8", 1, 0, "normal")
    d.fp8, d.ll, d.comm = True, False, _comm()
    d.local_experts, d.max_rows, d.device, d._h, d._recv, d._tokens = 4, 64, 0, NULL, None, 16
    return d


def _dispatched():
    """A dispatcher stub as a dispatch leaves it: the copy receive's layout, 4 experts, 64 rows."""
    from warpspec import _lib
    d = _dispatcher()
    r = _lib.EpRecv()
    r.x, r.x_scale, r.scale_ld, r.max_rows, r.local_experts = 0x7E0000000000, 0x7E0000100000, 64, 64, 4
    r.expert_offsets, r.fp8 = 0x7E0000200000, 1
    d._last = r
    return d


def _layer():
    layer = warpspec.MoeLayer.__new__(warpspec.MoeLayer)
    layer.cfg = warpspec.moe_layer.MoeLayerConfig(128, 128, 2, 1, 16, 0, 0)
    layer.comm, layer.device, layer._h = _comm(1), 0, NULL
    return layer


A = FakeArray
BAD_COMMS = [("None", None, TYPE), ("str", "comm", TYPE), ("namespace", types.SimpleNamespace(), TYPE),
             ("zero_ranks", types.SimpleNamespace(size=0, device=0, _handle=lambda: NULL), TYPE)]


def _targets():
    t = []
    add = t.append
    gemm_base = {"a": A((64, 128), BF16), "b": A((256, 128), BF16), "out": A((64, 256), BF16)}
    gemm_tensors = {"a": ALL_KINDS, "b": ALL_KINDS, "out": OPTIONAL}
    fp8 = {"a": A((64, 256), FP8), "b": A((256, 256), FP8), "a_scale": A((64, 2), F32), "b_scale": A((2, 2), F32)}
    fp8_tensors = {"a_scale": OPTIONAL, "b_scale": OPTIONAL}
    add(Target("gemm", warpspec.gemm, gemm_base, gemm_tensors | {"workspace": BYTES_OR_NONE + ("dtype",)},
               {"stream": STREAMS}))
    add(Target("gemm", warpspec.gemm, fp8 | {"out": A((64, 256), BF16)}, fp8_tensors))
    add(Target("gemm", warpspec.gemm, gemm_base | {"b": A((4, 256, 128), BF16), "group_offsets": A((5,), I32)},
               {"group_offsets": OPTIONAL}))
    add(Target("gemm", warpspec.gemm, {"a": A((4, 64, 128), BF16), "b": A((4, 256, 128), BF16),
                                       "group_rows": A((4,), I32), "out": A((4, 64, 256), BF16)},
               {"group_rows": OPTIONAL}))
    add(Target("gemm_workspace_size", warpspec.gemm_workspace_size, fp8, {"a": ALL_KINDS, "b": ALL_KINDS} | fp8_tensors))
    add(Target("gemm_tile", warpspec.gemm_tile, fp8 | {"sms": 132}, {"a": ALL_KINDS, "b": ALL_KINDS} | fp8_tensors,
               {"sms": ints()}))
    add(Target("quantize_fp8", warpspec.quantize_fp8, {"x": A((64, 256), BF16)},
               {"x": ALL_KINDS, "out": OPTIONAL, "out_scale": OPTIONAL},
               {"stream": STREAMS, "scale_layout": choices(),
                "block": [("None", None, TYPE), ("float", 1.5, TYPE), ("str_pair", "ab", INVALID),
                          ("bool", True, TYPE), ("odd", (64, 64), VALUE)]}))
    add(Target("swiglu_quant", warpspec.swiglu_quant, {"h": A((4, 256), BF16)},
               {"h": ALL_KINDS, "out": OPTIONAL, "out_scale": OPTIONAL},
               {"stream": STREAMS, "scale_layout": choices()}))

    add(Target("plan", warpspec.plan, {"roles": [("p", 1, 40), ("c", 4, 232)]}, {},
               {"roles": [("None", None, TYPE), ("int", 3, TYPE), ("str", "p:1:40", TYPE), ("dict", {"p": 1}, TYPE),
                          ("spec_int", [5], INVALID), ("spec_short", [("p", 1)], VALUE),
                          ("warps_wraps", [("p", 2**32 + 4, 40)], VALUE), ("warps_float", [("p", 4.0, 40)], TYPE),
                          ("warps_bool", [("p", True, 40)], TYPE), ("regs_wraps", [("p", 1, 2**32 + 40)], VALUE),
                          ("replicas_wraps", [("p", 1, 40, 2**32 + 1)], VALUE), ("name_int", [(5, 1, 40)], TYPE),
                          ("dict_no_warps", [{"name": "p"}], VALUE), ("dict_no_name", [{"warps": 1}], VALUE),
                          ("cli_wraps", ["p:4294967300:40"], VALUE), ("cli_regs", ["p:1:forty"], VALUE)],
                "entry_regs": ints(), "smem": ints(size_t=True), "name": [("int", 5, TYPE), ("None", None, TYPE)],
                "device": ints(optional=True)}))
    add(Target("gemm_plan", warpspec.gemm_plan, {"dtype": "fp8"}, {},
               {"dtype": [("None", None, INVALID), ("int", 5, INVALID), ("fp16", "fp16", VALUE)]}))
    add(Target("Plan", warpspec.Plan, {"struct": None}, {},
               {"struct": [("None", None, TYPE), ("str", "plan", TYPE), ("Plan", warpspec.gemm_plan("fp8"), TYPE)]}))
    add(Target("Plan.check_device", warpspec.gemm_plan("fp8").check_device, {"device": 0}, {},
               {"device": ints(optional=True)}))

    add(Target("Communicator", warpspec.Communicator, {"rank": 0, "nranks": 2, "unique_id": bytes(128)}, {},
               {"rank": ints(), "nranks": ints(lo=1), "device": ints(optional=True),
                "unique_id": [("None", None, INVALID), ("str", "x" * 128, INVALID), ("short", b"short", VALUE)]}))
    add(Target("Communicator.from_process_group", warpspec.Communicator.from_process_group, {}, {},
               {"device": ints(optional=True)}))
    add(Target("Communicator.alloc", _comm().alloc, {"shape": (4, 4)}, {},
               {"shape": [("None", None, TYPE), ("str", "4", TYPE), ("float", 4.0, TYPE), ("entry_str", (4, "4"), TYPE),
                          ("negative", (4, -4), VALUE), ("empty", (0,), VALUE), ("huge", (2**40, 2**40), VALUE)]}))
    add(Target("Communicator.free", _comm().free, {"tensor": A((16,), FP8)}, {"tensor": BYTES},
               {"tensor": [("not_allocated", A((16,), FP8), VALUE)]}))
    sr = {"send": A((64,), FP8), "send_peer": 1, "recv": A((64,), FP8), "recv_peer": 1}
    add(Target("Communicator.sendrecv", _comm().sendrecv, sr, {"send": BYTES_OR_NONE, "recv": BYTES_OR_NONE},
               {"send": [("None_to_a_peer", None, VALUE)], "recv": [("None_from_a_peer", None, VALUE)],
                "send_peer": ints(optional=True, negative_ok=True) + [("beyond", 2, VALUE), ("below", -2, VALUE)],
                "recv_peer": ints(optional=True, negative_ok=True) + [("beyond", 2, VALUE)],
                "ctas": ints(), "copy_engine": ints(lo=-1) + [("above", 2, VALUE)], "stream": STREAMS}))
    add(Target("Communicator.send", _comm().send, {"tensor": A((64,), FP8), "peer": 1}, {"tensor": BYTES_OR_NONE},
               {"peer": ints(optional=True, negative_ok=True) + [("beyond", 2, VALUE)],
                "tensor": [("None_with_a_peer", None, VALUE)]}))
    add(Target("Communicator.recv", _comm().recv, {"tensor": A((64,), FP8), "peer": 1}, {"tensor": BYTES_OR_NONE},
               {"peer": ints(optional=True, negative_ok=True) + [("beyond", 2, VALUE)],
                "tensor": [("None_with_a_peer", None, VALUE)]}))
    add(Target("Communicator.allgather", _comm().allgather, {"tensor": A((64,), FP8), "out": A((2, 64), FP8)},
               {"tensor": BYTES, "out": BYTES_OR_NONE},
               {"stream": STREAMS, "out": [("wrong_size", A((3, 64), FP8), VALUE)]}))
    add(Target("Communicator.barrier", _comm().barrier, {}, {}, {"stream": STREAMS}))

    ep = {"comm": _comm(), "hidden": 256, "experts": 8, "topk": 2, "max_tokens": 16}
    ep_ints = {k: ints(lo=1) for k in ("hidden", "experts", "topk", "max_tokens", "row_align")}
    add(Target("MoeDispatcher", warpspec.MoeDispatcher, ep, {},
               ep_ints | {"num_sms": ints(), "comm": BAD_COMMS, "mode": choices(), "receive": choices(),
                          "payload": [("None", None, INVALID), ("fp16", "fp16", VALUE)]}))
    add(Target("moe_check_config", warpspec.moe_check_config, {k: v for k, v in ep.items() if k != "comm"} | {"nranks": 2},
               {}, ep_ints | {"nranks": ints(lo=1), "num_sms": ints(), "mode": choices(), "receive": choices()}))
    x, idx, w = A((16, 256), FP8), A((16, 2), I32), A((16, 2), F32)
    add(Target("MoeDispatcher.dispatch", _dispatcher().dispatch,
               {"x": x, "topk_idx": idx, "topk_weights": w, "x_scale": A((16, 2), F32)},
               {"x": ALL_KINDS, "topk_idx": ALL_KINDS, "topk_weights": ALL_KINDS, "x_scale": OPTIONAL},
               {"stream": STREAMS, "x_scale": [("None_for_fp8", None, VALUE)]}, torch_first=True))
    add(Target("MoeDispatcher.expert_gemm", _dispatched().expert_gemm,
               {"b": A((4, 128, 256), FP8), "b_scale": A((4, 1, 2), F32), "out": A((64, 128), BF16)},
               {"b": ALL_KINDS, "b_scale": OPTIONAL, "out": OPTIONAL}, {"stream": STREAMS}))
    add(Target("MoeDispatcher.combine", _dispatcher().combine, {"y": A((64, 256), BF16), "out": A((16, 256), BF16)},
               {"y": ALL_KINDS, "out": OPTIONAL}, {"stream": STREAMS}, torch_first=True))

    weights = {"w1": A((2, 256, 128), FP8), "w1_scale": A((2, 2, 1), F32), "w2": A((2, 128, 128), FP8),
               "w2_scale": A((2, 1, 1), F32)}
    layer = {"comm": _comm(1), "hidden": 128, "inter": 128, "experts": 2, "topk": 1, "max_tokens": 16} | weights
    add(Target("MoeLayer", warpspec.MoeLayer, layer, {k: ALL_KINDS for k in weights},
               {k: ints(lo=1) for k in ("hidden", "inter", "experts", "topk", "max_tokens")} |
               {"num_sms": ints(), "comm": BAD_COMMS, "path": choices()}))
    lx = {"x": A((4, 128), BF16), "topk_idx": A((4, 1), I32), "topk_weights": A((4, 1), F32)}
    add(Target("MoeLayer.__call__", _layer(), lx,
               {"x": ALL_KINDS, "topk_idx": ALL_KINDS, "topk_weights": ALL_KINDS, "out": OPTIONAL},
               {"stream": STREAMS}, torch_first=True))
    add(Target("MoeLayer.__call__", _layer(), lx | {"x": A((4, 128), FP8), "x_scale": A((4, 1), F32)},
               {"x_scale": OPTIONAL}, torch_first=True))
    add(Target("MoeLayer.path_for", _layer().path_for, {"tokens": 4}, {}, {"tokens": ints()}))
    add(Target("moe", warpspec.moe, {"comm": _comm(1)} | lx | weights,
               {k: ALL_KINDS for k in list(lx) + list(weights)},
               {"comm": BAD_COMMS, "max_tokens": ints(optional=True), "num_sms": ints(), "path": choices()}))

    q4, k4 = A((2, 16, 4, 128), BF16), A((2, 16, 2, 128), BF16)
    add(Target("attention", warpspec.attention, {"q": q4, "k": k4, "v": k4},
               {"q": ALL_KINDS, "k": ALL_KINDS, "v": ALL_KINDS, "out": OPTIONAL, "lse": OPTIONAL},
               {"softmax_scale": REALS, "causal_align": choices(), "stream": STREAMS}))
    var = {"q": A((32, 4, 128), BF16), "k": A((32, 2, 128), BF16), "v": A((32, 2, 128), BF16),
           "cu_seqlens_q": A((3,), I32), "cu_seqlens_k": A((3,), I32), "max_seqlen_q": 16, "max_seqlen_k": 16}
    add(Target("attention", warpspec.attention, var, {"cu_seqlens_q": OPTIONAL, "cu_seqlens_k": OPTIONAL},
               {"max_seqlen_q": ints(lo=1, optional=True) + [("unknown_offsets", None, INVALID)],
                "max_seqlen_k": ints(lo=1, optional=True) + [("unknown_offsets", None, INVALID)]}))
    mq, kv, ix = A((4, 128, 576), BF16), A((1000, 576), BF16), A((4, 256), I32)
    add(Target("mla_sparse_prefill", warpspec.mla_sparse_prefill, {"q": mq, "kv": kv, "indices": ix},
               {"q": ALL_KINDS, "kv": ALL_KINDS, "indices": ALL_KINDS, "out": OPTIONAL, "lse": OPTIONAL},
               {"softmax_scale": REALS, "stream": STREAMS}))
    dq = A((2, 1, 128, 576), BF16)
    dec = {"q": dq, "kv_cache": A((8, 64, 576), BF16), "block_table": A((2, 4), I32), "seqlens": A((2,), I32)}
    add(Target("mla_decode", warpspec.mla_decode, dec,
               {k: ALL_KINDS for k in dec} | {"out": OPTIONAL, "lse": OPTIONAL},
               {"softmax_scale": REALS, "max_seqlen": ints(optional=True), "stream": STREAMS}))
    sdec = {"q": dq, "kv_cache": A((8, 64, 576), BF16), "indices": A((2, 1, 2048), I32)}
    add(Target("mla_sparse_decode", warpspec.mla_sparse_decode, sdec,
               {k: ALL_KINDS for k in sdec} | {"out": OPTIONAL, "lse": OPTIONAL, "workspace": OPTIONAL},
               {"softmax_scale": REALS, "stream": STREAMS}))
    add(Target("mla_kv_quantize_fp8", warpspec.mla_kv_quantize_fp8, {"kv": A((8, 576), BF16)},
               {"kv": ALL_KINDS, "out": OPTIONAL}, {"stream": STREAMS}))
    nq, nk, sel = A((64, 32, 128), BF16), A((64, 2, 128), BF16), A((64, 2, 8), I32)
    add(Target("nsa_attention", warpspec.nsa_attention, {"q": nq, "k": nk, "v": nk, "block_indices": sel},
               {"q": ALL_KINDS, "k": ALL_KINDS, "v": ALL_KINDS, "block_indices": ALL_KINDS, "out": OPTIONAL,
                "lse": OPTIONAL},
               {"softmax_scale": REALS, "block": ints(lo=1), "stream": STREAMS,
                "k": [("no_kv_heads", A((64, 0, 128), BF16), VALUE)]}))

    add(Target("sync", warpspec.sync, {}, {}, {"stream": STREAMS}))
    add(Target("set_timeout_ms", warpspec.set_timeout_ms, {"ms": 100}, {}, {"ms": ints(lo=1)}))
    add(Target("trace", warpspec.trace, {"csv": "unused.csv"}, {},
               {"csv": [("None", None, TYPE), ("int", 5, TYPE)], "block": ints(negative_ok=True),
                "max_events": ints(size_t=True)}))
    return t


NO_ARGUMENTS = {"info", "timeout_ms", "reload_knobs", "comm_available", "get_unique_id", "Communicator.from_env",
                "Communicator.destroy", "MoeDispatcher.destroy", "MoeLayer.destroy", "Plan.table"}
DATA_RECORDS = {"PlacedRole", "MoeReceived"}  # dataclasses the package fills; they check nothing


def _bad_tensors(base_value, kinds):
    shape = tuple(base_value.__cuda_array_interface__["shape"]) if base_value is not None else (4, 128)
    typestr = base_value.__cuda_array_interface__["typestr"] if base_value is not None else BF16
    out = []
    if "none" in kinds:
        out.append(("None", None, TYPE))
    if "types" in kinds:
        out += [(k, v, TYPE) for k, v in WRONG_TYPES.items()]
    if "malformed" in kinds:
        out += [(k, Iface(v), INVALID) for k, v in MALFORMED.items()]
    if "dtype" in kinds:
        out.append(("float64", A(shape, F64), VALUE))
    if "rank" in kinds:
        out.append(("extra_dim", A(shape + (3,), typestr), VALUE))
    if "negative" in kinds:
        neg = (-max(shape[0], 1),) + shape[1:]
        out.append(("negative_extent", Iface(_cai(shape=neg, typestr=typestr)), VALUE))
    return out


def _cases():
    cases = []
    for target in _targets():
        for arg, kinds in target.tensors.items():
            for label, value, expect in _bad_tensors(target.base.get(arg), kinds):
                cases.append(pytest.param(target, arg, value, expect, id=f"{target.name}-{arg}-{label}"))
        for arg, bad in target.scalars.items():
            for label, value, expect in bad:
                cases.append(pytest.param(target, arg, value, expect, id=f"{target.name}-{arg}-{label}"))
    return cases


CASES = _cases()


@pytest.mark.parametrize("target,arg,value,expect", CASES)
def test_bad_input(target, arg, value, expect):
    kwargs = dict(target.base)
    kwargs[arg] = value
    try:
        target.call(**kwargs)
    except Exception as e:  # noqa: BLE001 - the class is what is checked
        err = e
    else:
        pytest.fail(f"{target.name}({arg}={value!r}) raised nothing")
    if target.torch_first and not HAS_TORCH:
        expect = INVALID  # "PyTorch is needed" comes first
    where = f"{target.name}({arg}={value!r}) raised {type(err).__name__}: {err}"
    assert isinstance(err, warpspec.WarpspecError), where
    if expect == TYPE:
        assert isinstance(err, warpspec.InvalidTypeError) and isinstance(err, TypeError), where
    elif expect == VALUE:
        assert isinstance(err, warpspec.InvalidArgumentError) and isinstance(err, ValueError), where
        assert not isinstance(err, TypeError), where
    elif expect == INVALID:
        assert isinstance(err, warpspec.InvalidArgumentError), where
    if not (target.torch_first and not HAS_TORCH):
        words = ALSO_NAMED.get(arg, (arg,))
        assert any(re.search(rf"(?<!\w){w}(?!\w)", str(err)) for w in words), f"{where}: does not name {arg}"


# how a message may name an argument besides by its own name
ALSO_NAMED = {"struct": ("Plan",), "nranks": ("nranks", "ranks"), "tensor": ("tensor", "send", "recv"),
              "peer": ("send_peer", "recv_peer")}


def _public_callables():
    """'name' for each public function and class, 'Class.method' for each public method
    (and __call__) a public class defines or inherits from the package."""
    names = set()
    for name in warpspec.__all__:
        obj = getattr(warpspec, name)
        if not callable(obj) or isinstance(obj, type) and issubclass(obj, BaseException):
            continue
        names.add(name)
        if not isinstance(obj, type):
            continue
        for klass in obj.__mro__:
            if not klass.__module__.startswith("warpspec"):
                continue
            for attr, member in vars(klass).items():
                public = not attr.startswith("_") or attr == "__call__"
                if public and (callable(member) or isinstance(member, (classmethod, staticmethod))):
                    names.add(f"{name}.{attr}")
    return names


def test_every_public_callable_has_cases():
    covered = {t.name for t in _targets()}
    missing = _public_callables() - covered - NO_ARGUMENTS - DATA_RECORDS
    assert not missing, f"public callables without bad-input cases in this file: {sorted(missing)}"
    stale = covered - _public_callables()
    assert not stale, f"cases for names that are not public callables: {sorted(stale)}"


def test_exempt_callables_take_no_arguments():
    for name in NO_ARGUMENTS:
        head, _, method = name.partition(".")
        obj = getattr(warpspec, head)
        fn = getattr(obj, method) if method else obj
        params = [p for p in inspect.signature(fn).parameters.values() if p.name != "self"]
        assert all(p.default is not inspect.Parameter.empty for p in params), (name, params)


def test_every_target_accepts_its_base_arguments():
    """Each replaced argument is a keyword of its target, so no case passes by a
    TypeError about the call itself."""
    for t in _targets():
        fn = t.call.__call__ if isinstance(t.call, warpspec.MoeLayer) else t.call
        params = inspect.signature(fn).parameters
        for arg in list(t.base) + list(t.tensors) + list(t.scalars):
            assert arg in params, f"{t.name} has no argument {arg}"


# ---- extents the C structs cannot hold ----------------------------------------------------------------
def _big(shape, typestr=BF16):
    return FakeArray(shape, typestr, ptr=0x7E0000000000)  # a fixed address: no room is made for it


BIG = 2**32 + 64  # a C int field would read 64


def _extent_cases():
    dense_q, dense_kv = _big((1, BIG, 4, 128)), _big((1, BIG, 2, 128))
    var_q, var_kv, cu = _big((2**31, 4, 128)), _big((2**31, 2, 128)), FakeArray((3,), I32)
    return {
        "attention_dense": lambda: warpspec.attention(dense_q, dense_kv, dense_kv),
        "attention_varlen": lambda: warpspec.attention(var_q, var_kv, var_kv, cu_seqlens_q=cu, cu_seqlens_k=cu,
                                                       max_seqlen_q=16, max_seqlen_k=16),
        "mla_sparse_prefill": lambda: warpspec.mla_sparse_prefill(_big((BIG, 128, 576)), FakeArray((1000, 576), BF16),
                                                                  _big((BIG, 256), I32)),
        "mla_decode": lambda: warpspec.mla_decode(_big((BIG, 1, 128, 576)), FakeArray((8, 64, 576), BF16),
                                                  _big((BIG, 4), I32), _big((BIG,), I32)),
        "mla_sparse_decode": lambda: warpspec.mla_sparse_decode(_big((BIG, 1, 128, 576)), FakeArray((8, 64, 576), BF16),
                                                                _big((BIG, 1, 2048), I32)),
        "nsa_attention": lambda: warpspec.nsa_attention(_big((BIG, 32, 128)), _big((BIG, 2, 128)), _big((BIG, 2, 128)),
                                                        _big((BIG, 2, 8), I32)),
        "gemm": lambda: warpspec.gemm(_big((BIG, 128)), FakeArray((256, 128), BF16), out=_big((BIG, 256))),
        "sendrecv_bytes": lambda: _comm().send(_big((2**64 + 64,), FP8), 1),
    }


@pytest.mark.parametrize("case", sorted(_extent_cases()))
def test_extents_beyond_the_c_types(case):
    """An extent past a C int (or bytes past a size_t) is refused before ctypes would
    wrap it into a small, valid-looking problem."""
    with pytest.raises(warpspec.InvalidArgumentError, match="out of range|2\\^63|int range"):
        _extent_cases()[case]()
