"""torch.compile takes the public ops without graph breaks, on the CPU: dynamo traces each
function with fake tensors (torch._dynamo.export refuses a graph break), the ops appear as
torch.ops.warpspec.* with the output shapes their fake implementations give, and nothing
runs on a GPU. The compiled functions' bits against eager are a GPU test
(test_gpu_compile.py)."""
import pytest

torch = pytest.importorskip("torch")
import warpspec  # noqa: E402
from warpspec import _ops  # noqa: E402


def _export(fn, *args):
    """The graph dynamo captures for fn(*args) (raises on a graph break), and its ops."""
    gm, _ = torch._dynamo.export(fn)(*args)
    return gm, [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def _fake_call(op, *args):
    """op(*args) with every tensor argument a fake one: the op's fake implementation."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode() as mode:
        return op(*[mode.from_tensor(a) if isinstance(a, torch.Tensor) else a for a in args])


def test_ops_registered():
    ops = _ops.ops()
    for name in ("gemm", "attention", "mla_decode", "mla_sparse_decode", "moe_layer"):
        assert hasattr(ops, name), name


def test_ops_have_a_backward_that_says_inference_only():
    """A weight that requires grad (grad mode on) reaches the op's backward: it names the
    remedy, where AOT autograd's own error (no formula registered) names none."""
    from torch._subclasses.fake_tensor import FakeTensorMode
    with FakeTensorMode():
        a = torch.empty(64, 256, dtype=torch.bfloat16)
        b = torch.empty(128, 256, dtype=torch.bfloat16, requires_grad=True)
        d = _ops.ops().gemm(a, b, None, None, None, None)
        assert d.requires_grad
        with pytest.raises(RuntimeError, match=r"warpspec.gemm is an inference kernel.*torch.no_grad"):
            d.float().sum().backward()


def test_gemm_compiles():
    f8 = torch.float8_e4m3fn
    a, b = torch.zeros(256, 512, dtype=f8), torch.zeros(4, 384, 512, dtype=f8)
    sa, sb = torch.ones(256, 4), torch.ones(4, 3, 4)
    off = torch.tensor([0, 64, 128, 192, 256], dtype=torch.int32)

    def f(a, b, sa, sb, off):
        return warpspec.gemm(a, b, a_scale=sa, b_scale=sb, group_offsets=off).float() * 2

    gm, ops = _export(f, a, b, sa, sb, off)
    assert any(o.startswith("warpspec.gemm") for o in ops), ops
    # masked layout: [groups, m, n]
    am, rows = torch.zeros(4, 64, 512, dtype=f8), torch.tensor([64, 0, 3, 64], dtype=torch.int32)

    def g(a, b, sa, sb, rows):
        return warpspec.gemm(a, b, a_scale=sa, b_scale=sb, group_rows=rows)

    gm, ops = _export(g, am, b, torch.ones(256, 4), sb, rows)
    assert any(o.startswith("warpspec.gemm") for o in ops), ops
    fake = _fake_call(_ops.ops().gemm, am, b, torch.ones(256, 4), sb, None, rows)
    assert tuple(fake.shape) == (4, 64, 384) and fake.dtype == torch.bfloat16
    assert tuple(_fake_call(_ops.ops().gemm, a, b, sa, sb, off, None).shape) == (256, 384)


def test_attention_compiles():
    q, k, v = (torch.zeros(2, 128, 8, 128, dtype=torch.bfloat16) for _ in range(3))

    def f(q, k, v):
        o, lse = warpspec.attention(q, k, v, causal=True, return_lse=True)
        return o.float().sum() + lse.sum()

    gm, ops = _export(f, q, k, v)
    assert any(o.startswith("warpspec.attention") for o in ops), ops
    o, lse = _fake_call(_ops.ops().attention, q, k, v, True, "top_left", None, None, None, None, None)
    assert tuple(o.shape) == (2, 128, 8, 128) and tuple(lse.shape) == (8, 256)


def test_mla_decode_compiles():
    q = torch.zeros(4, 1, 64, 576, dtype=torch.bfloat16)
    cache = torch.zeros(16, 64, 576, dtype=torch.bfloat16)
    table, lens = torch.zeros(4, 4, dtype=torch.int32), torch.full((4,), 100, dtype=torch.int32)

    def f(q, cache, table, lens):
        return warpspec.mla_decode(q, cache, table, lens, max_seqlen=256)

    gm, ops = _export(f, q, cache, table, lens)
    assert any(o.startswith("warpspec.mla_decode") for o in ops), ops
    o, lse = _fake_call(_ops.ops().mla_decode, q, cache, table, lens, 256, None)
    assert tuple(o.shape) == (4, 1, 64, 512) and tuple(lse.shape) == (4, 1, 64) and lse.dtype == torch.float32


def test_mla_sparse_decode_compiles():
    q = torch.zeros(4, 2, 128, 576, dtype=torch.bfloat16)
    idx = torch.full((4, 2, 2048), -1, dtype=torch.int32)
    for cache in (torch.zeros(16, 64, 576, dtype=torch.bfloat16), torch.zeros(16, 64, 656, dtype=torch.uint8)):
        def f(q, cache, idx):
            return warpspec.mla_sparse_decode(q, cache, idx, return_lse=True)

        gm, ops = _export(f, q, cache, idx)
        assert any(o.startswith("warpspec.mla_sparse_decode") for o in ops), ops
        o, lse = _fake_call(_ops.ops().mla_sparse_decode, q, cache, idx, None)
        assert tuple(o.shape) == (4, 2, 128, 512) and o.dtype == torch.bfloat16
        assert tuple(lse.shape) == (4, 2, 128) and lse.dtype == torch.float32


def test_moe_layer_compiles():
    from warpspec import moe_layer
    layer = warpspec.MoeLayer.__new__(warpspec.MoeLayer)  # no GPU: the op only names it
    layer._id = moe_layer._register_layer(layer)
    x = torch.zeros(8, 256, dtype=torch.bfloat16)
    idx, w = torch.zeros(8, 2, dtype=torch.int32), torch.ones(8, 2)

    def f(x, idx, w):
        return layer(x, idx, w) + 1

    gm, ops = _export(f, x, idx, w)
    assert any(o.startswith("warpspec.moe_layer") for o in ops), ops
    with pytest.raises(warpspec.InvalidArgumentError, match="no longer exists"):
        moe_layer.layer_by_id(10 ** 9)


def test_non_torch_arguments_stay_direct(fake):
    # arrays that are not torch tensors (here: __cuda_array_interface__ only) take the direct path
    assert _ops.routed(fake((4, 4), "<f4")) is None
    assert _ops.routed(torch.zeros(1), None) is not None


def test_real_implementations_reach_the_package_checks():
    """Each op's real implementation calls the package's own function (not a name that
    __init__ rebinds): on CPU tensors it fails in the package's checks, and the message
    says so, never an AttributeError from the op's wiring."""
    ops = _ops.ops()
    f8 = torch.float8_e4m3fn
    bf = torch.bfloat16
    calls = [
        lambda: ops.gemm(torch.zeros(256, 512, dtype=f8), torch.zeros(4, 384, 512, dtype=f8), torch.ones(256, 4),
                         torch.ones(4, 3, 4), torch.tensor([0, 64, 128, 192, 256], dtype=torch.int32), None),
        lambda: ops.attention(*(torch.zeros(1, 128, 2, 128, dtype=bf) for _ in range(3)), True, "top_left", None,
                              None, None, None, None),
        lambda: ops.mla_decode(torch.zeros(1, 1, 16, 576, dtype=bf), torch.zeros(1, 64, 1, 576, dtype=bf),
                               torch.zeros(1, 1, dtype=torch.int32), torch.ones(1, dtype=torch.int32), None, None),
        lambda: ops.mla_sparse_decode(torch.zeros(1, 1, 64, 576, dtype=bf), torch.zeros(1, 64, 576, dtype=bf),
                                      torch.zeros(1, 1, 8, dtype=torch.int32), None),
    ]
    for call in calls:
        with pytest.raises(warpspec.WarpspecError) as e:
            call()
        assert "AttributeError" not in str(e.value), str(e.value)
