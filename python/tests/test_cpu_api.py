"""The Python layer without a GPU (runs in CI): loading and ABI, version, the planner,
and every argument check that happens before the GPU is touched, with device arrays
described by __cuda_array_interface__ at made-up addresses."""

import ctypes
import os
import re
import subprocess
import sys

import pytest

import warpspec
from warpspec import _lib
from conftest import hopper_count

BF16, FP8, F32, I32 = "<V2", "|u1", "<f4", "<i4"
HERE = os.path.dirname(os.path.abspath(__file__))


def test_version_matches_cmake():
    """The source tree's version, or (tests copied beside an installed wheel, no tree)
    the installed distribution's, which the wheel took from CMakeLists.txt."""
    cmakelists = os.path.join(HERE, "..", "..", "CMakeLists.txt")
    if os.path.exists(cmakelists):
        want = re.search(r"project\(warpspec VERSION ([0-9.]+)", open(cmakelists).read()).group(1)
    else:
        from importlib.metadata import version
        want = version("warpspec")
    assert warpspec.__version__ == want


def test_struct_mirrors_match_the_library():
    for name, mirror in _lib._MIRRORS.items():
        assert _lib.lib.ws_abi_sizeof(name.encode()) == ctypes.sizeof(mirror), name
    assert _lib.lib.ws_abi_sizeof(b"no_such_struct") == 0


def test_error_classes():
    assert issubclass(warpspec.InvalidArgumentError, ValueError)
    assert issubclass(warpspec.WarpspecTimeoutError, TimeoutError)
    assert issubclass(warpspec.BudgetError, warpspec.WarpspecError)
    e = _lib.error_for(_lib.WS_ERR_TIMEOUT, "role 'math' pipe 'ab' stage 2 phase 1")
    assert isinstance(e, warpspec.WarpspecTimeoutError) and e.status == "WS_ERR_TIMEOUT"
    assert "stage 2" in str(e)


def test_info_without_gpu_is_a_dict():
    i = warpspec.info()
    assert i["version"] == warpspec.__version__
    assert isinstance(i["devices"], list)


def test_plan_seed_fits():
    p = warpspec.plan(["dispatch:4:rest", ("receiver", 4, 80), {"name": "compute", "warps": 4, "regs": 184}])
    assert p.threads == 384 and p.warpgroups == 3 and p.entry_regs == 168
    assert [r.regs for r in p.roles] == [240, 80, 184]
    assert [r.barrier for r in p.roles] == [1, 2, 3]
    assert p.pool_used <= p.pool_regs
    assert "384 threads" in str(p)


def test_plan_seed_twin_names_registers():
    with pytest.raises(warpspec.BudgetError) as e:
        warpspec.plan([("dispatch", 4, "rest"), ("receiver", 4, 80), ("compute", 4, 184)], entry_regs=240)
    assert "registers, not threads" in str(e.value) and "<= 168" in str(e.value)
    assert e.value.status == "WS_ERR_BUDGET"


@pytest.mark.parametrize("roles", [["producer:1:40x"], ["p:one:40"], [("p", 1)], ["a:1:24"] * 9, [],
                                   [("a", 1, 40, 2**31 - 1)], [("a", 1, "entry", 33)]])
def test_plan_bad_specs(roles):
    with pytest.raises(warpspec.InvalidArgumentError):
        warpspec.plan(roles)


def test_plan_register_pool_overflow():
    with pytest.raises(warpspec.WarpspecError) as e:
        warpspec.plan([("a", 4, 256), ("b", 4, 256), ("c", 4, 256)])
    assert e.value.status in ("WS_ERR_BUDGET", "WS_ERR_INVALID")


def test_gemm_plans():
    assert warpspec.gemm_plan("fp8").threads == 288
    assert warpspec.gemm_plan("bf16").threads > 0
    with pytest.raises(warpspec.InvalidArgumentError):
        warpspec.gemm_plan("fp16")


# ---- gemm: checks before the GPU --------------------------------------------------------
def _no_gpu_or_skip():
    if hopper_count() > 0:
        pytest.skip("a GPU is present: the call would run")


def test_gemm_valid_problem_reaches_the_device_check(fake):
    _no_gpu_or_skip()
    with pytest.raises(warpspec.NoDeviceError) as e:
        warpspec.gemm(fake((64, 128), BF16), fake((256, 128), BF16), out=fake((64, 256), BF16))
    assert "no CUDA device" in str(e.value)


def test_gemm_c_checks_reach_python(fake):
    # k = 100: the library's own check, its message carried over
    with pytest.raises(warpspec.InvalidArgumentError) as e:
        warpspec.gemm(fake((64, 100), BF16), fake((256, 100), BF16), out=fake((64, 256), BF16))
    assert "k 100 is not a multiple of 64" in str(e.value)
    with pytest.raises(warpspec.InvalidArgumentError) as e:
        warpspec.gemm(fake((64, 128), BF16), fake((250, 128), BF16), out=fake((64, 250), BF16))
    assert "n 250 is not a multiple of 8" in str(e.value)


@pytest.mark.parametrize("case", ["dtype_mix", "k_mismatch", "out_shape", "noncontig", "misaligned", "fp32_a",
                                  "groups_no_offsets", "counts_len", "offsets_dtype", "offsets_len",
                                  "masked_2d", "scales_on_bf16"])
def test_gemm_bad_arguments(fake, case):
    a, b, out = fake((64, 128), BF16), fake((256, 128), BF16), fake((64, 256), BF16)
    kw = {}
    if case == "dtype_mix":
        b = fake((256, 128), FP8)
    elif case == "k_mismatch":
        b = fake((256, 192), BF16)
    elif case == "out_shape":
        out = fake((64, 128), BF16)
    elif case == "noncontig":
        a = fake((64, 128), BF16, strides=(1, 64))
    elif case == "misaligned":
        a = fake((64, 128), BF16, ptr=0x7E0000000002)
    elif case == "fp32_a":
        a = fake((64, 128), F32)
    elif case == "groups_no_offsets":
        b = fake((4, 256, 128), BF16)
    elif case == "counts_len":  # contiguous with counts: one count a group
        b = fake((4, 256, 128), BF16)
        kw = {"group_offsets": fake((5,), I32), "group_rows": fake((3,), I32)}
    elif case == "offsets_dtype":
        b = fake((4, 256, 128), BF16)
        kw = {"group_offsets": fake((5,), F32)}
    elif case == "offsets_len":
        b = fake((4, 256, 128), BF16)
        kw = {"group_offsets": fake((4,), I32)}
    elif case == "masked_2d":
        b = fake((4, 256, 128), BF16)
        kw = {"group_rows": fake((4,), I32)}
    elif case == "scales_on_bf16":
        kw = {"a_scale": fake((64, 1), F32), "b_scale": fake((2, 1), F32)}
    with pytest.raises(warpspec.InvalidArgumentError):
        warpspec.gemm(a, b, out=out, **kw)


def _fp8_args(fake, m=300, n=256, k=512, scale=None):
    kb = k // 128
    return (fake((m, k), FP8), fake((n, k), FP8)), {
        "a_scale": scale if scale is not None else fake((m, kb), F32), "b_scale": fake((n // 128, kb), F32),
        "out": fake((m, n), BF16)}


def test_gemm_fp8_scale_layouts(fake):
    _no_gpu_or_skip()
    m, k = 300, 512
    kb = k // 128
    for sa in (fake((m, kb), F32),                   # row-major
               fake((m, kb), F32, strides=(1, 304)),  # K-block-major, ld = rows rounded up to 4
               fake((m, kb), F32, strides=(1, 308))):
        (a, b), kw = _fp8_args(fake, scale=sa)
        with pytest.raises(warpspec.NoDeviceError):
            warpspec.gemm(a, b, **kw)


@pytest.mark.parametrize("strides,shape", [((1, 302), None), ((1, 200), None), ((8, 1), None), (None, (300, 3)),
                                           (None, (299, 4))])
def test_gemm_fp8_bad_scales(fake, strides, shape):
    sa = fake(shape or (300, 4), F32, strides=strides)
    (a, b), kw = _fp8_args(fake, scale=sa)
    with pytest.raises(warpspec.InvalidArgumentError) as e:
        warpspec.gemm(a, b, **kw)
    assert "a_scale" in str(e.value)


def test_gemm_fp8_needs_scales_and_multiples_of_128(fake):
    (a, b), kw = _fp8_args(fake)
    del kw["b_scale"]
    with pytest.raises(warpspec.InvalidArgumentError, match="a_scale and b_scale"):
        warpspec.gemm(a, b, **kw)
    with pytest.raises(warpspec.InvalidArgumentError, match="multiples of 128"):
        warpspec.gemm(fake((64, 192), FP8), fake((256, 192), FP8), a_scale=fake((64, 1), F32),
                      b_scale=fake((2, 1), F32), out=fake((64, 256), BF16))


def test_gemm_masked_shapes(fake):
    _no_gpu_or_skip()
    g, m, n, k = 4, 256, 256, 512
    with pytest.raises(warpspec.NoDeviceError):
        warpspec.gemm(fake((g, m, k), FP8), fake((g, n, k), FP8), a_scale=fake((g, m, k // 128), F32),
                      b_scale=fake((g, n // 128, k // 128), F32), group_rows=fake((g,), I32),
                      out=fake((g, m, n), BF16))
    with pytest.raises(warpspec.InvalidArgumentError, match="b_scale"):
        warpspec.gemm(fake((g, m, k), FP8), fake((g, n, k), FP8), a_scale=fake((g, m, k // 128), F32),
                      b_scale=fake((n // 128, k // 128), F32), group_rows=fake((g,), I32),
                      out=fake((g, m, n), BF16))


def test_gemm_tile_needs_no_gpu_with_sms(fake):
    (a, b), kw = _fp8_args(fake, m=8192, n=7168, k=2048)
    kw.pop("out")
    rows, cols = warpspec.gemm_tile(a, b, sms=132, **kw)
    assert (rows, cols) in ((128, 128), (192, 128))


def test_gemm_contiguous_with_counts(fake):
    # group_offsets and group_rows together: the contiguous layout, the counts bounding each
    # span's rows in use (d keeps the 2-D shape); the tile choice needs no GPU with sms
    g, m, n, k = 8, 8 * 256, 512, 1024
    a, b = fake((m, k), FP8), fake((g, n, k), FP8)
    kw = {"a_scale": fake((m, k // 128), F32), "b_scale": fake((g, n // 128, k // 128), F32),
          "group_offsets": fake((g + 1,), I32), "group_rows": fake((g,), I32)}
    assert warpspec.gemm_tile(a, b, sms=132, **kw) in ((128, 128), (192, 128))
    with pytest.raises(warpspec.InvalidArgumentError, match="shape"):
        warpspec.gemm(a, b, out=fake((g, 256, n), BF16), **kw)  # not the masked [g, m, n]


def test_gemm_rejects_non_arrays():
    with pytest.raises(warpspec.InvalidArgumentError, match="__cuda_array_interface__"):
        warpspec.gemm([1, 2], [3, 4])


def test_quantize_checks(fake):
    with pytest.raises(warpspec.InvalidArgumentError, match="multiple of 128"):
        warpspec.quantize_fp8(fake((64, 100), BF16))
    with pytest.raises(warpspec.InvalidArgumentError, match="block"):
        warpspec.quantize_fp8(fake((64, 128), BF16), block=(64, 64))
    with pytest.raises(warpspec.InvalidArgumentError, match="kmajor"):
        warpspec.quantize_fp8(fake((64, 128), BF16), block=(128, 128), scale_layout="kmajor")
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):
        warpspec.quantize_fp8(fake((64, 128), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="out_scale"):
        warpspec.quantize_fp8(fake((64, 256), BF16), out=fake((64, 256), FP8), out_scale=fake((64, 3), F32))


# ---- communication ------------------------------------------------------------------------
def test_comm_bad_unique_id():
    with pytest.raises(warpspec.InvalidArgumentError):
        warpspec.Communicator(0, 2, b"short")
    with pytest.raises(warpspec.InvalidArgumentError):
        warpspec.Communicator(2, 2, bytes(128))


@pytest.mark.parametrize("cls", [warpspec.Communicator, warpspec.MoeDispatcher, warpspec.MoeLayer])
def test_handles_share_one_lifetime(cls):
    """Every handle class destroys through a C function that exists, and one that was
    never created (or was destroyed) says so by name, destroys as a no-op, and works as
    a context manager."""
    assert hasattr(_lib.lib, cls._free), cls._free
    h = cls.__new__(cls)
    with pytest.raises(warpspec.InvalidArgumentError, match=f"{cls.__name__}: already destroyed"):
        h._handle()
    h.destroy()
    with h as same:
        assert same is h


def test_comm_available_is_a_bool():
    assert warpspec.comm_available() in (True, False)


def test_comm_from_process_group_needs_an_initialised_group():
    torch = pytest.importorskip("torch")
    import torch.distributed as dist
    if dist.is_available() and dist.is_initialized():
        pytest.skip("a process group exists")
    with pytest.raises(warpspec.InvalidArgumentError, match="init_process_group"):
        warpspec.Communicator.from_process_group()
    del torch


# ---- the command line ---------------------------------------------------------------------
def _cli(*args):
    from warpspec.__main__ import cli_path
    if cli_path() is None:
        pytest.skip("the CLI is not built here (set WARPSPEC_CLI)")
    return subprocess.run([sys.executable, "-m", "warpspec"] + list(args), capture_output=True, text=True, timeout=120)


def test_cli_version():
    r = _cli("version")
    assert r.returncode == 0 and r.stdout.strip() == warpspec.__version__


def test_cli_plan_seed():
    r = _cli("plan", "dispatch:4:rest", "receiver:4:80", "compute:4:184")
    assert r.returncode == 0 and "384 threads" in r.stdout and "OK" in r.stdout


# ---- MoE dispatcher -----------------------------------------------------------------------
def test_moe_check_config():
    rows = warpspec.moe_check_config(2, hidden=7168, experts=256, topk=8, max_tokens=4096, row_align=128)
    assert rows == 2 * 4096 * 8 + 128 * 127
    with pytest.raises(warpspec.InvalidArgumentError, match="hidden 7000"):
        warpspec.moe_check_config(2, hidden=7000, experts=256, topk=8, max_tokens=16)
    with pytest.raises(warpspec.InvalidArgumentError, match="multiple of the 3 ranks"):
        warpspec.moe_check_config(3, hidden=128, experts=256, topk=8, max_tokens=16)
    with pytest.raises(warpspec.InvalidArgumentError, match="topk"):
        warpspec.moe_check_config(2, hidden=128, experts=256, topk=17, max_tokens=16)
    with pytest.raises(warpspec.InvalidArgumentError, match="payload"):
        warpspec.moe_check_config(2, hidden=128, experts=256, topk=2, max_tokens=16, payload="fp16")
    # the index receive: same rows; an unknown receive is refused before the C library
    assert warpspec.moe_check_config(2, hidden=7168, experts=256, topk=8, max_tokens=4096, row_align=128,
                                     receive="index") == rows
    with pytest.raises(warpspec.InvalidArgumentError, match="receive 'gather'"):
        warpspec.moe_check_config(2, hidden=128, experts=256, topk=2, max_tokens=16, receive="gather")


def _stub_dispatcher(mode="normal", payload="fp8"):
    """A MoeDispatcher without a GPU: the config and the argument checks only (no handle)."""
    from warpspec import moe_dispatch as moe_mod
    d = warpspec.MoeDispatcher.__new__(warpspec.MoeDispatcher)
    d.cfg = moe_mod._config(256, 8, 2, 16, payload, 1, 0, mode)
    d.fp8, d.ll = d.cfg.payload == 1, d.cfg.mode == 1
    d.local_experts, d.max_rows, d.device, d._h, d._recv, d._tokens = 4, 64, 0, None, None, 0
    return d


def test_moe_dispatch_argument_checks(fake):
    pytest.importorskip("torch")
    d = _stub_dispatcher()
    idx, w = fake((16, 2), I32), fake((16, 2), F32)
    with pytest.raises(warpspec.InvalidArgumentError, match="x_scale"):
        d.dispatch(fake((16, 256), FP8), idx, w)  # fp8 without scales
    with pytest.raises(warpspec.InvalidArgumentError, match="at most 16"):
        d.dispatch(fake((17, 256), FP8), fake((17, 2), I32), fake((17, 2), F32), x_scale=fake((17, 2), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="topk_idx"):
        d.dispatch(fake((16, 256), FP8), fake((16, 3), I32), w, x_scale=fake((16, 2), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):
        d.dispatch(fake((16, 256), BF16), idx, w, x_scale=fake((16, 2), F32))  # bf16 rows to an fp8 normal handle
    ll = _stub_dispatcher(mode="low_latency")
    with pytest.raises(warpspec.InvalidArgumentError, match="low latency quantises"):
        ll.dispatch(fake((16, 256), BF16), idx, w, x_scale=fake((16, 2), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):
        ll.dispatch(fake((16, 256), FP8), idx, w)  # low latency takes bf16
    with pytest.raises(warpspec.InvalidArgumentError, match="mode"):
        warpspec.moe_check_config(2, hidden=128, experts=8, topk=2, max_tokens=16, mode="fast")
    assert warpspec.moe_check_config(2, hidden=128, experts=8, topk=2, max_tokens=16, mode="low_latency") == 4 * 2 * 16


def test_moe_expert_gemm_checks(fake):
    d = _stub_dispatcher()
    with pytest.raises(warpspec.InvalidArgumentError, match="no dispatch on this handle yet"):
        d.expert_gemm(fake((4, 128, 256), FP8), fake((4, 1, 2), F32))
    from warpspec import _lib
    r = _lib.EpRecv()  # the layout a dispatch would have left: copy receive, 4 experts, 64 rows
    r.x, r.x_scale, r.scale_ld, r.max_rows, r.local_experts = 0x7E0000000000, 0x7E0000100000, 64, 64, 4
    r.expert_offsets, r.fp8 = 0x7E0000200000, 1
    d._last = r
    with pytest.raises(warpspec.InvalidArgumentError, match=r"b: shape \(3, 128, 256\), expected \(4, n, 256\)"):
        d.expert_gemm(fake((3, 128, 256), FP8), fake((3, 1, 2), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="need b_scale"):
        d.expert_gemm(fake((4, 128, 256), FP8))
    with pytest.raises(warpspec.InvalidArgumentError, match="b_scale: shape"):
        d.expert_gemm(fake((4, 128, 256), FP8), fake((4, 2, 2), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="n 100 is not a multiple of 128"):
        d.expert_gemm(fake((4, 100, 256), FP8), fake((4, 0, 2), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="out: shape"):
        d.expert_gemm(fake((4, 128, 256), FP8), fake((4, 1, 2), F32), out=fake((63, 128), BF16))
    # the index receive: the gathered problem goes to ws_gemm_check (a bad stride is the C library's message)
    r.x, r.x_scale, r.scale_ld = None, None, 0
    r.row_index, r.rows, r.row_scales, r.row_bytes, r.rows_total = 0x7E0000300000, 0x7E0000400000, 0x7E0000400100, 250, 32
    with pytest.raises(warpspec.InvalidArgumentError, match="a_row_bytes 250"):
        d.expert_gemm(fake((4, 128, 256), FP8), fake((4, 1, 2), F32))


def test_moe_layer_path_checks():
    import types
    comm = types.SimpleNamespace(size=1, device=0)  # the path is checked before anything else
    with pytest.raises(warpspec.InvalidArgumentError, match="path 'fast'"):
        warpspec.MoeLayer(comm, hidden=128, inter=128, experts=2, topk=1, max_tokens=2, w1=None, w1_scale=None,
                          w2=None, w2_scale=None, path="fast")
    from warpspec.moe_layer import PATHS
    assert PATHS == {"auto": 0, "unfused": 1, "fused_experts": 2, "fused_layer": 3}


def test_moe_function_checks(fake):
    import types
    comm = types.SimpleNamespace(size=1, device=0, _handle=lambda: 1)
    w1, w1s, w2, w2s = fake((2, 256, 128), FP8), fake((2, 2, 1), F32), fake((2, 128, 128), FP8), fake((2, 1, 1), F32)
    x, idx, w = fake((4, 128), BF16), fake((4, 1), I32), fake((4, 1), F32)
    with pytest.raises(warpspec.InvalidArgumentError, match="w1: dtype"):
        warpspec.moe(comm, x, idx, w, fake((2, 256, 128), F32), w1s, w2, w2s)
    with pytest.raises(warpspec.InvalidArgumentError, match="more than max_tokens 2"):
        warpspec.moe(comm, x, idx, w, w1, w1s, w2, w2s, max_tokens=2)
    with pytest.raises(warpspec.InvalidArgumentError, match="path 'fast'"):  # from MoeLayer, before the GPU
        warpspec.moe(comm, x, idx, w, w1, w1s, w2, w2s, path="fast")
    assert not getattr(comm, "_moe_layers", {})  # nothing kept from a failed create


def test_swiglu_quant_checks(fake):
    with pytest.raises(warpspec.InvalidArgumentError, match="2 x inter"):
        warpspec.swiglu_quant(fake((4, 300), BF16))
    with pytest.raises(warpspec.InvalidArgumentError, match="scale_layout"):
        warpspec.swiglu_quant(fake((4, 256), BF16), scale_layout="col")
    with pytest.raises(warpspec.InvalidArgumentError, match="out"):
        warpspec.swiglu_quant(fake((4, 256), BF16), out=fake((4, 256), FP8))


def test_attention_checks(fake):
    q, k = fake((2, 16, 4, 128), BF16), fake((2, 16, 2, 128), BF16)
    with pytest.raises(warpspec.InvalidArgumentError, match="head dims"):
        warpspec.attention(fake((2, 16, 4, 96), BF16), fake((2, 16, 2, 96), BF16), fake((2, 16, 2, 96), BF16))
    with pytest.raises(warpspec.InvalidArgumentError, match="multiple of"):
        warpspec.attention(fake((2, 16, 3, 128), BF16), k, k)
    with pytest.raises(warpspec.InvalidArgumentError, match="share all but the last"):
        warpspec.attention(q, k, fake((2, 17, 2, 128), BF16))
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):
        warpspec.attention(fake((2, 16, 4, 128), F32), k, k)
    with pytest.raises(warpspec.InvalidArgumentError, match="go together"):
        warpspec.attention(fake((32, 4, 128), BF16), fake((32, 2, 128), BF16), fake((32, 2, 128), BF16),
                           cu_seqlens_q=fake((3,), I32))
    with pytest.raises(warpspec.InvalidArgumentError, match="causal_align"):
        warpspec.attention(q, k, k, causal=True, causal_align="diagonal")
    with pytest.raises(warpspec.InvalidArgumentError, match="out"):
        warpspec.attention(q, k, k, out=fake((2, 16, 4, 64), BF16))


def test_mla_sparse_checks(fake):
    q, kv, idx = fake((4, 128, 576), BF16), fake((1000, 576), BF16), fake((4, 256), I32)
    with pytest.raises(warpspec.InvalidArgumentError, match="multiple of 64"):
        warpspec.mla_sparse_prefill(fake((4, 96, 576), BF16), kv, idx)
    with pytest.raises(warpspec.InvalidArgumentError, match="576"):
        warpspec.mla_sparse_prefill(fake((4, 128, 512), BF16), fake((1000, 512), BF16), idx)
    with pytest.raises(warpspec.InvalidArgumentError, match="one latent head"):
        warpspec.mla_sparse_prefill(q, fake((1000, 2, 576), BF16), idx)
    with pytest.raises(warpspec.InvalidArgumentError, match="indices"):
        warpspec.mla_sparse_prefill(q, kv, fake((5, 256), I32))
    with pytest.raises(warpspec.InvalidArgumentError, match="out"):
        warpspec.mla_sparse_prefill(q, kv, idx, out=fake((4, 128, 576), BF16))


def test_mla_decode_checks(fake):
    q, table, lens = fake((2, 1, 128, 576), BF16), fake((2, 4), I32), fake((2,), I32)
    with pytest.raises(warpspec.InvalidArgumentError, match="656"):  # FP8 rows of the wrong size
        warpspec.mla_decode(q, fake((8, 64, 576), FP8), table, lens)
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):
        warpspec.mla_decode(q, fake((8, 64, 576), F32), table, lens)
    with pytest.raises(warpspec.InvalidArgumentError, match="multiple of 64"):
        warpspec.mla_decode(fake((2, 1, 100, 576), BF16), fake((8, 64, 656), FP8), table, lens)
    with pytest.raises(warpspec.InvalidArgumentError, match="divisor of 64"):  # neither: 48
        warpspec.mla_decode(fake((2, 1, 48, 576), BF16), fake((8, 64, 656), FP8), table, lens)


def test_mla_sparse_decode_checks(fake):
    q, cache, idx = fake((2, 1, 128, 576), BF16), fake((8, 64, 576), BF16), fake((2, 1, 2048), I32)
    with pytest.raises(warpspec.InvalidArgumentError, match="656"):  # FP8 rows of the wrong size
        warpspec.mla_sparse_decode(q, fake((8, 64, 576), FP8), idx)
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):
        warpspec.mla_sparse_decode(q, fake((8, 64, 576), F32), idx)
    with pytest.raises(warpspec.InvalidArgumentError, match="multiple of 64"):
        warpspec.mla_sparse_decode(fake((2, 1, 100, 576), BF16), cache, fake((2, 1, 2048), I32))
    with pytest.raises(warpspec.InvalidArgumentError, match="indices"):  # not [B, s_q, topk]
        warpspec.mla_sparse_decode(q, cache, fake((2, 2, 2048), I32))
    with pytest.raises(warpspec.InvalidArgumentError, match="dtype"):  # int32 indices
        warpspec.mla_sparse_decode(q, cache, fake((2, 1, 2048), F32))
    with pytest.raises(warpspec.InvalidArgumentError, match="576"):
        warpspec.mla_sparse_decode(fake((2, 1, 128, 512), BF16), cache, idx)
    with pytest.raises(warpspec.InvalidArgumentError, match="out"):
        warpspec.mla_sparse_decode(q, cache, idx, out=fake((2, 1, 128, 576), BF16))
    with pytest.raises(warpspec.InvalidArgumentError, match="one latent head"):
        warpspec.mla_sparse_decode(q, fake((8, 64, 2, 576), BF16), idx)


def test_nsa_checks(fake):
    q, k, v, sel = fake((64, 32, 128), BF16), fake((64, 2, 128), BF16), fake((64, 2, 128), BF16), fake((64, 2, 8), I32)
    with pytest.raises(warpspec.InvalidArgumentError, match="kv heads"):
        warpspec.nsa_attention(fake((64, 31, 128), BF16), k, v, sel)
    with pytest.raises(warpspec.InvalidArgumentError, match="block_indices"):
        warpspec.nsa_attention(q, k, v, fake((64, 4, 8), I32))
    with pytest.raises(warpspec.InvalidArgumentError, match="expected k"):
        warpspec.nsa_attention(q, fake((63, 2, 128), BF16), v, sel)


def test_trace_checks():
    with pytest.raises(warpspec.InvalidArgumentError, match="no trace is running"):
        _lib.check(_lib.lib.ws_trace_stop(None, None))
    with pytest.raises(warpspec.InvalidArgumentError, match="block: -2"):
        with warpspec.trace("unused.csv", block=-2):
            pass
    with pytest.raises(warpspec.InvalidArgumentError, match="max_events"):
        with warpspec.trace("unused.csv", max_events=0):
            pass
