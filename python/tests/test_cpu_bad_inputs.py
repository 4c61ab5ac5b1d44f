"""Every public function, fed wrong types and values without a GPU: it raises a
WarpspecError subclass, and the TypeError or ValueError one the mistake calls for, never
AttributeError, KeyError, ZeroDivisionError, OverflowError or ctypes.ArgumentError, and
never lets an integer wrap at 32 or 64 bits on its way to C. A meta-test keeps the table
complete: a new public callable without a case here fails it."""

import inspect

import pytest

import warpspec
from conftest import FakeArray

BF16, FP8, F32, I32 = "<V2", "|u1", "<f4", "<i4"
TYPE, VALUE = TypeError, ValueError


class Raw:
    """An object whose __cuda_array_interface__ is whatever the test says."""

    def __init__(self, cai):
        self.__cuda_array_interface__ = cai


def arr(shape, typestr=BF16):
    return FakeArray(shape, typestr)


def negative(typestr=BF16):
    return Raw({"shape": (-1, 128), "typestr": typestr, "data": (0x7F0000001000, False), "version": 3})


def layer_args(comm=None, **over):
    a = dict(hidden=128, inter=128, experts=2, topk=1, max_tokens=8, w1=arr((2, 256, 128), FP8),
             w1_scale=arr((2, 2, 1), F32), w2=arr((2, 128, 128), FP8), w2_scale=arr((2, 1, 1), F32))
    a.update(over)
    return (comm,), a


# name -> [(args, kwargs, the standard exception class the mistake calls for)]
CASES = {
    "gemm": [((None, None), {}, TYPE), ((arr((64, 128)), "b"), {}, TYPE), ((negative(), arr((128, 128))), {}, VALUE),
             ((arr((64, 128)), arr((128, 128))), {"check": "yes", "out": 5}, TYPE)],
    "gemm_tile": [((None, None), {}, TYPE), ((arr((64, 128)), arr((128, 128))), {"sms": "many"}, TYPE),
                  ((arr((64, 128)), arr((128, 128))), {"sms": 2**32 + 4}, VALUE)],
    "gemm_workspace_size": [((None, None), {}, TYPE), ((negative(), arr((128, 128))), {}, VALUE)],
    "quantize_fp8": [(("x",), {}, TYPE), ((arr((4, 128)),), {"block": (3, 3)}, VALUE),
                     ((arr((4, 100)),), {}, VALUE), ((negative(),), {}, VALUE)],
    "plan": [((None,), {}, TYPE), (([("a", 2**32 + 4, "rest")],), {}, VALUE), (([("a", 4, "rest")],), {"smem": -1}, VALUE),
             (([("a", True, 80)],), {}, TYPE), (([("a", 4, 80.5)],), {}, TYPE), ((["a:4:4294967528"],), {}, VALUE),
             (([{"warps": 4}],), {}, VALUE), (([("a", 4, "rest")],), {"entry_regs": "abc"}, TYPE),
             (([("a", 4, 80, 2**31)],), {}, VALUE)],
    "gemm_plan": [(("int4",), {}, VALUE), ((None,), {}, VALUE)],
    "Communicator": [((0, 2, b"short"), {}, VALUE), ((0, "2", bytes(128)), {}, TYPE), ((5, 2, bytes(128)), {}, VALUE),
                     ((0, 2**32 + 2, bytes(128)), {}, VALUE)],
    "MoeDispatcher": [((None,), dict(hidden=128, experts=2, topk=1, max_tokens=8), TYPE),
                      (("comm",), dict(hidden=128, experts=2, topk=1, max_tokens=8), TYPE)],
    "MoeLayer": [(layer_args()[0], layer_args()[1], TYPE), (layer_args(comm=object())[0], layer_args()[1], TYPE)],
    "moe": [((None, arr((4, 128)), arr((4, 1), I32), arr((4, 1), F32), arr((2, 256, 128), FP8), arr((2, 2, 1), F32),
              arr((2, 128, 128), FP8), arr((2, 1, 1), F32)), {}, TYPE),
            ((None, None, None, None, None, None, None, None), {}, TYPE)],
    "moe_check_config": [((2,), dict(hidden=-1, experts=2, topk=1, max_tokens=8), VALUE),
                         (("2",), dict(hidden=128, experts=2, topk=1, max_tokens=8), TYPE),
                         ((2,), dict(hidden=128, experts=2, topk=1, max_tokens=2**32 + 8), VALUE),
                         ((2,), dict(hidden=128, experts=2, topk=1.5, max_tokens=8), TYPE),
                         ((2,), dict(hidden=128, experts=2, topk=1, max_tokens=8, payload="int4"), VALUE)],
    "swiglu_quant": [((None,), {}, TYPE), ((arr((4, 100)),), {}, VALUE), ((negative(),), {}, VALUE)],
    "attention": [((None, None, None), {}, TYPE), ((arr((1, 8, 2, 64)), arr((1, 8, 2, 64)), "v"), {}, TYPE),
                  ((arr((8, 2, 64)), arr((8, 2, 64)), arr((8, 2, 64))),
                   dict(cu_seqlens_q=arr((2,), I32), cu_seqlens_k=arr((2,), I32)), TYPE),
                  ((arr((8, 2, 64)), arr((8, 2, 64)), arr((8, 2, 64))),
                   dict(cu_seqlens_q=arr((2,), I32), cu_seqlens_k=arr((2,), I32), max_seqlen_q=-3, max_seqlen_k=8), VALUE),
                  ((negative(), arr((1, 8, 2, 64)), arr((1, 8, 2, 64))), {}, VALUE),
                  ((arr((1, 8, 2, 64)), arr((1, 8, 2, 64)), arr((1, 8, 2, 64))), {"causal_align": "middle"}, VALUE)],
    "mla_sparse_prefill": [((None, None, None), {}, TYPE), ((negative(), arr((4, 576)), arr((4, 8), I32)), {}, VALUE)],
    "mla_decode": [((None, None, None, None), {}, TYPE),
                   ((arr((1, 1, 64, 576)), arr((2, 64, 576)), arr((1, 2), I32), arr((1,), I32)), {"max_seqlen": "long"}, TYPE),
                   ((arr((1, 1, 64, 576)), arr((2, 64, 576)), arr((1, 2), I32), arr((1,), I32)), {"max_seqlen": -1}, VALUE),
                   ((arr((1, 1, 48, 576)), arr((2, 64, 576)), arr((1, 2), I32), arr((1,), I32)), {}, VALUE)],
    "mla_sparse_decode": [((None, None, None), {}, TYPE),
                          ((negative(), arr((2, 64, 576)), arr((1, 1, 8), I32)), {}, VALUE),
                          ((arr((1, 1, 48, 576)), arr((2, 64, 576)), arr((1, 1, 8), I32)), {}, VALUE),
                          ((arr((1, 1, 64, 576)), arr((2, 64, 576)), arr((1, 2, 8), I32)), {}, VALUE)],
    "mla_kv_quantize_fp8": [(("kv",), {}, TYPE), ((arr((2, 500)),), {}, VALUE),
                            ((arr((2, 576)),), {"out": arr((2, 600), FP8)}, VALUE)],
    "nsa_attention": [((None, None, None, None), {}, TYPE),
                      ((arr((4, 16, 128)), arr((4, 0, 128)), arr((4, 0, 128)), arr((4, 0, 1), I32)), {}, VALUE),
                      ((arr((4, 16, 128)), arr((4, 1, 128)), arr((4, 1, 128)), arr((4, 1, 2), I32)), {"block": "64"}, TYPE)],
    "sync": [(("not a stream",), {}, TYPE)],
    "trace": [(("t.csv",), {"block": "b"}, TYPE), (("t.csv",), {"max_events": 0}, VALUE)],
    "set_timeout_ms": [(("a",), {}, TYPE), ((-5,), {}, VALUE), ((2**40,), {}, VALUE)],
}
# Functions without arguments to get wrong, and the result types users do not construct.
NO_ARGUMENTS = {"get_unique_id", "comm_available", "timeout_ms", "reload_knobs", "info"}
RESULTS = {"Plan", "PlacedRole", "MoeReceived"}


def public_callables():
    out = []
    for name in warpspec.__all__:
        obj = getattr(warpspec, name)
        if inspect.isclass(obj) and issubclass(obj, BaseException):
            continue
        if callable(obj):
            out.append(name)
    return out


def test_every_public_callable_has_bad_input_cases():
    missing = [n for n in public_callables() if n not in CASES and n not in NO_ARGUMENTS and n not in RESULTS]
    assert not missing, f"public callables without bad-input cases in CASES: {missing}"
    # and everything callable the package exposes is in __all__ (nothing public slips past the table)
    stray = [n for n, o in vars(warpspec).items() if not n.startswith("_") and callable(o) and not inspect.ismodule(o)
             and n not in warpspec.__all__]
    assert not stray, f"public names missing from warpspec.__all__: {stray}"


@pytest.mark.parametrize("name,i", [(n, i) for n in CASES for i in range(len(CASES[n]))])
def test_bad_input_raises_a_warpspec_error(name, i):
    args, kwargs, kind = CASES[name][i]
    fn = getattr(warpspec, name)
    with pytest.raises(warpspec.WarpspecError) as e:
        fn(*args, **kwargs)
    err = e.value
    # a NoDeviceError is the honest answer when the arguments pass every check that needs
    # no GPU; every case here is wrong before that point
    assert isinstance(err, kind), f"{name}{args}: {type(err).__name__} is not a {kind.__name__}: {err}"
    assert str(err), name


@pytest.mark.parametrize("cai", [
    {"shape": (2,)},                                                            # no typestr, no data
    {"shape": (2,), "typestr": "<f4"},                                           # no data
    {"shape": "two", "typestr": "<f4", "data": (0x7F0000002000, False)},         # shape not a tuple
    {"shape": (2, -3), "typestr": "<f4", "data": (0x7F0000002000, False)},       # a negative extent
    {"shape": (2,), "typestr": "<f4", "data": "nowhere"},                        # data not (ptr, ro)
    {"shape": (2,), "typestr": "<f4", "data": (0x7F0000002000, False), "strides": (4, 4)},  # one stride too many
    {"shape": (2,), "typestr": "<c16", "data": (0x7F0000002000, False)},         # a type we do not take
])
def test_malformed_array_interface(cai):
    with pytest.raises(warpspec.InvalidArgumentError):
        warpspec.quantize_fp8(Raw(cai))


def test_interface_that_is_not_a_dict():
    with pytest.raises(warpspec.InvalidTypeError):
        warpspec.quantize_fp8(Raw("not a dict"))


def test_integer_ranges_before_ctypes():
    # the probe's cases: a 32-bit wrap turned 2**32 + 4 warps into 4, smem -1 into 2**64 - 1
    with pytest.raises(warpspec.InvalidArgumentError, match="out of range"):
        warpspec.plan([("a", 2**32 + 4, "rest")])
    with pytest.raises(warpspec.InvalidArgumentError, match="smem"):
        warpspec.plan([("a", 4, "rest")], smem=-1)
    with pytest.raises(warpspec.InvalidTypeError):
        warpspec.plan([("a", 4, "rest")], smem=1.5)
    # numpy-style integers and 0-d integer tensors still pass (anything with __index__)
    class Idx:
        def __index__(self):
            return 4
    assert warpspec.plan([("a", Idx(), "rest")]).threads == 128
