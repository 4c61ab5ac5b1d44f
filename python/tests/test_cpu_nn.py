"""warpspec.nn without a GPU: the modules are made on the CPU, every bad argument raises
the package's errors before anything runs, the float64 references hold together (decode
after prefill equals one longer prefill; the MoE reference equals a per-token loop), the
kernel path's own math (absorbed weights, rotary embedding, cache writes) matches the
reference with torch stand-ins for the kernels, and dynamo traces the forwards into the
custom ops without a graph break. The kernels themselves: test_gpu_nn.py."""

import os
import subprocess
import sys

import pytest

torch = pytest.importorskip("torch")
import warpspec  # noqa: E402
import warpspec.nn as wnn  # noqa: E402
from warpspec import _nn_reference as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
ERR = warpspec.InvalidArgumentError


def rel_err(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def test_import_needs_no_cuda():
    code = "import warpspec, warpspec.nn as n; assert warpspec.nn is n; print(n.MoEBlock.__name__)"
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env, timeout=120)
    assert r.returncode == 0 and "MoEBlock" in r.stdout, r.stdout + r.stderr


# ---- MoEBlock --------------------------------------------------------------------------
H, I, E, K = 256, 128, 8, 2


@pytest.fixture(scope="module")
def block():
    return wnn.MoEBlock.random(H, I, E, K, max_tokens=64, seed=3)


def _route(T, seed=0):
    g = torch.Generator().manual_seed(seed)
    x = torch.randn(T, H, generator=g).to(torch.bfloat16)
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]) if T else torch.empty(0, K).long()
    if T:
        idx[::3, 1] = -1
    return x, idx, torch.rand(T, K, generator=g)


def test_moe_block_construction(block):
    assert (block.rank, block.ranks, block.local_experts) == (0, 1, E)
    assert block.w1.dtype == torch.float8_e4m3fn and block.w1.shape == (E, 2 * I, H)
    assert block.w1_scale.shape == (E, 2 * I // 128, H // 128) and block.w2_scale.shape == (E, H // 128, I // 128)
    assert set(block.state_dict()) == {"w1", "w1_scale", "w2", "w2_scale"}
    assert "experts=8" in repr(block)
    # the same expert, the same weights, however the experts are split
    w1a, _ = wnn.MoEBlock.random_weights(H, I, 4, first=0, seed=3)
    w1b, _ = wnn.MoEBlock.random_weights(H, I, 2, first=2, seed=3)
    assert torch.equal(w1a[2:], w1b)


def test_quantize_weights_round_trip():
    w1, w2 = wnn.MoEBlock.random_weights(H, I, 2)
    q1, s1, q2, s2 = wnn.MoEBlock.quantize_weights(w1, w2)
    assert q1.dtype == torch.float8_e4m3fn and s1.shape == (2, 2, 2) and s2.shape == (2, 2, 1)
    for q, s, w in ((q1, s1, w1), (q2, s2, w2)):
        for e in range(2):
            assert rel_err(ref.dequantize_blocks(q[e], s[e], (128, 128)), w[e]) < 0.05


def test_moe_reference_against_a_token_loop(block):
    x, idx, w = _route(20)
    got = block(x, idx, w, reference=True)
    xq, xs = ref.quantize_blocks(x)
    xd = ref.dequantize_blocks(xq, xs)
    want = torch.zeros(20, H, dtype=torch.float64)
    for t in range(20):
        for k in range(K):
            e = int(idx[t, k])
            if e < 0:
                continue
            h = (ref.dequantize_blocks(block.w1[e], block.w1_scale[e], (128, 128)) @ xd[t]).to(torch.bfloat16).double()
            a = torch.nn.functional.silu(h[:I]) * h[I:]
            y = (ref.dequantize_blocks(block.w2[e], block.w2_scale[e], (128, 128)) @ a).to(torch.bfloat16).double()
            want[t] += float(w[t, k]) * y
    assert rel_err(got, want) < 1e-12
    # FP8 in, as a pair: the same; leading dims kept; 0 tokens
    assert torch.equal(block((xq, xs), idx, w, reference=True), got)
    assert block(x.view(4, 5, H), idx.view(4, 5, K), w.view(4, 5, K), reference=True).shape == (4, 5, H)
    x0, i0, w0 = _route(0)
    assert block(x0, i0, w0, reference=True).shape == (0, H)


@pytest.mark.parametrize("change,match", [
    (lambda b: dict(hidden=200), "multiples of 128"), (lambda b: dict(intermediate=200), "multiples of 128"),
    (lambda b: dict(topk=17), "out of range"), (lambda b: dict(topk=9), "topk 9 > 8 experts"),
    (lambda b: dict(max_tokens=0), "out of range"), (lambda b: dict(path="fast"), "path 'fast'"),
    (lambda b: dict(w1="w"), "expected a torch.Tensor"), (lambda b: dict(w2=b.w2.float()), "w2 has dtype"),
    (lambda b: dict(w1_scale=torch.ones(8, 2, 3)), r"expected \(8, 2, 2\)"),
    (lambda b: dict(experts=12), r"w1 has shape .* expected \(12, 256, 256\)"),
    (lambda b: dict(comm=object()), "expected a warpspec.Communicator"),
])
def test_moe_block_bad_construction(block, change, match):
    kw = dict(hidden=H, intermediate=I, experts=E, topk=K, max_tokens=64, w1=block.w1, w1_scale=block.w1_scale,
              w2=block.w2, w2_scale=block.w2_scale)
    kw.update(change(block))
    with pytest.raises(warpspec.WarpspecError, match=match):
        wnn.MoEBlock(**kw)


def test_moe_block_process_group_arguments():
    with pytest.raises(ERR, match="not initialised"):
        wnn.MoEBlock.random(H, I, E, K, 64, group=object())
    with pytest.raises(ERR, match="not both"):
        wnn.MoEBlock.random(H, I, E, K, 64, group=object(), comm=object())


def test_moe_block_bad_calls(block):
    x, idx, w = _route(4)
    xq, xs = ref.quantize_blocks(x)
    bad = [((x[:, :128], idx, w), "expected \\(..., 256\\)"), ((x, idx[:, :1], w), "topk_idx has shape"),
           ((x, idx.int().float(), w), "topk_idx has dtype"), ((x, idx, w[:3]), "topk_weights has shape"),
           ((xq, idx, w), "FP8 x with it"), ((x.float(), idx, w), "x has dtype"),
           (((xq, xs[:, :1]), idx, w), "x_scale has shape"), (((xq,), idx, w), "as a pair"),
           ((torch.zeros(65, H, dtype=torch.bfloat16), torch.zeros(65, K).long(), torch.ones(65, K)), "at most 64")]
    for args, match in bad:
        with pytest.raises(ERR, match=match):
            block(*args, reference=True)
    with pytest.raises(ERR, match="sm_90 GPU"):
        block(x, idx, w)  # the kernel path on CPU tensors
    with pytest.raises(ERR, match="weights are on cpu"):
        block.prepare()


# ---- MLAAttention -------------------------------------------------------------------------
D = 256


def _mla(**kw):
    torch.manual_seed(kw.pop("seed", 0))
    return wnn.MLAAttention(D, 64, qk_nope_head_dim=kw.pop("nope", 64), **kw)


def test_mla_construction():
    m = _mla()
    assert m.prefill == "dense" and abs(m.softmax_scale - 128 ** -0.5) < 1e-12
    assert _mla(nope=32).prefill == "latent" and _mla(nope=128).prefill == "dense"
    assert _mla(q_lora_rank=96).wq_b.weight.shape == (64 * 128, 96)
    for kw, match in [(dict(heads=48), "multiple of 64"), (dict(prefill="fast"), "prefill 'fast'"),
                      (dict(prefill="dense", qk_nope_head_dim=32), "use 'latent'"),
                      (dict(softmax_scale=-1.0), "out of range"), (dict(hidden="a"), "not an integer")]:
        args = dict(hidden=D, heads=64)
        args.update(kw)
        with pytest.raises(warpspec.WarpspecError, match=match):
            wnn.MLAAttention(**args)


def test_paged_cache():
    c, t = wnn.paged_cache(3, 100, page_size=16, fp8=True)
    assert c.shape == (21, 16, 656) and c.dtype == torch.uint8 and t.tolist()[1] == list(range(7, 14))
    c, t = wnn.paged_cache(2, 64)
    assert c.shape == (2, 64, 576) and c.dtype == torch.bfloat16 and t.shape == (2, 1)


@pytest.mark.parametrize("fp8", [False, True])
def test_mla_reference_decode_after_prefill(fp8):
    """Token by token through the cache is one longer prefill (to the cache's rounding)."""
    m = _mla(q_lora_rank=64)
    B, P, N = 2, 9, 3
    x = torch.randn(B, P + N, D).to(torch.bfloat16)
    cache, table = wnn.paged_cache(B, 40, page_size=8, fp8=fp8)
    table = table.flip(1).contiguous()  # pages in another order than the positions
    outs = [m(x[:, :P], cache, table, reference=True)]
    for n in range(N):
        lens = torch.full((B,), P + n, dtype=torch.int32)
        outs.append(m(x[:, P + n:P + n + 1], cache, table, lens, reference=True))
    whole = m(x, wnn.paged_cache(B, 40, page_size=8, fp8=fp8)[0], table, reference=True)
    assert outs[0].dtype == torch.float64 and torch.allclose(outs[0], whole[:, :P])
    assert rel_err(torch.cat(outs[1:], 1), whole[:, P:]) < (5e-2 if fp8 else 5e-3)
    # the cache holds every row written, in the pages the table names
    rows = ref._gather_cache(cache, table, P + N)
    assert rows[:, :P + N].abs().sum(-1).min() > 0


def test_mla_rows_fp8_round_trip():
    rows = torch.randn(5, 576).to(torch.bfloat16) * 3
    rows[1, :128] = 0
    back = ref.mla_rows_from_fp8(ref.mla_rows_to_fp8(rows))
    assert torch.equal(back[:, 512:], rows[:, 512:].double()) and (back[1, :128] == 0).all()
    assert rel_err(back[:, :512], rows[:, :512]) < 0.05


def _fake_kernels(monkeypatch):
    """torch stand-ins for the kernels (float32), so that the module's own math runs on the CPU."""
    def mla_decode(q, cache, table, seqlens, *, max_seqlen=None, softmax_scale=None):
        B, S = q.shape[:2]
        L = table.shape[1] * cache.shape[1]
        keys = ref._gather_cache(cache, table, L).float()
        s = torch.einsum("bshd,bld->bhsl", q.float(), keys) * softmax_scale
        seen = torch.arange(L)[None, None] <= (seqlens.long()[:, None] - S + torch.arange(S))[:, :, None]
        p = torch.softmax(s.masked_fill(~seen[:, None], float("-inf")), -1)
        return torch.einsum("bhsl,blc->bshc", p, keys[..., :512]).to(torch.bfloat16)

    def attention(q, k, v, *, causal, softmax_scale):
        t = [a.transpose(1, 2).float() for a in (q, k, v)]
        o = torch.nn.functional.scaled_dot_product_attention(*t, is_causal=causal, scale=softmax_scale)
        return o.transpose(1, 2).to(torch.bfloat16)

    def mla_sparse_prefill(q, kv, idx, *, softmax_scale):
        rows = kv[idx.long().clamp_min(0)].float()
        s = torch.einsum("nhd,nkd->nhk", q.float(), rows) * softmax_scale
        p = torch.softmax(s.masked_fill((idx < 0)[:, None], float("-inf")), -1)
        return torch.einsum("nhk,nkc->nhc", p, rows[..., :512]).to(torch.bfloat16)

    for name, f in (("mla_decode", mla_decode), ("attention", attention), ("mla_sparse_prefill", mla_sparse_prefill),
                    ("mla_kv_quantize_fp8", ref.mla_rows_to_fp8), ("_require_gpu", lambda *a: None)):
        monkeypatch.setattr(wnn.mla, name, f)  # the names as MLAAttention looks them up


@pytest.mark.parametrize("nope,fp8", [(64, False), (32, False), (64, True)])
def test_mla_kernel_path_math_on_cpu(monkeypatch, nope, fp8):
    """Absorbed decode, dense (nope 64) or latent (nope 32) prefill and the cache writes,
    with the kernels replaced by torch: the module's path against the reference, which
    decodes over a copy of the same cache (FP8 rows of nearly equal values can round
    apart)."""
    _fake_kernels(monkeypatch)
    m = _mla(nope=nope, seed=1)
    B, P = 2, 12
    x = torch.randn(B, P + 2, D).to(torch.bfloat16)
    table = wnn.paged_cache(B, 32, page_size=8)[1].flip(0).contiguous()
    c_k, c_r = (wnn.paged_cache(B, 32, page_size=8, fp8=fp8)[0] for _ in range(2))
    got, want = m(x[:, :P], c_k, table), m(x[:, :P], c_r, table, reference=True)
    assert got.dtype == torch.bfloat16 and rel_err(got, want) < 1e-2
    rows = [ref._gather_cache(c, table, P) for c in (c_k, c_r)]
    assert rel_err(rows[0], rows[1]) < (5e-2 if fp8 else 1e-2)
    lens = torch.full((B,), P, dtype=torch.int32)
    c_r = c_k.clone()
    got, want = m(x[:, P:], c_k, table, lens, max_seqlen=P + 2), m(x[:, P:], c_r, table, lens, reference=True)
    assert rel_err(got, want) < 1e-2


def test_mla_bad_calls():
    m = _mla()
    cache, table = wnn.paged_cache(2, 32, page_size=8)
    x = torch.zeros(2, 3, D, dtype=torch.bfloat16)
    lens = torch.zeros(2, dtype=torch.int32)
    bad = [((x[..., :128], cache, table), {}, "x has shape"), ((x[0], cache, table), {}, "x has shape"),
           ((x, cache[..., :512], table), {}, "kv_cache has shape"),
           ((x, cache.float(), table), {}, "kv_cache has dtype"),
           ((x, cache.transpose(0, 1), table), {}, "contiguous"),
           ((x, cache, table.long()), {}, "block_table has dtype"),
           ((x, cache, table[:1]), {}, "block_table has shape"),
           ((x, cache, table, lens[:1]), {}, "cache_seqlens has shape"),
           ((x, cache, table, lens.float()), {}, "cache_seqlens has dtype"),
           ((torch.zeros(2, 33, D, dtype=torch.bfloat16), cache, table), {}, "holds 32"),
           ((x, cache, table, lens), {"max_seqlen": 40}, "> 32 positions"), ((x, "cache", table), {}, "torch.Tensor")]
    for args, kw, match in bad:
        with pytest.raises(ERR, match=match):
            m(*args, reference=True, **kw)
    with pytest.raises(ERR, match="sm_90 GPU"):
        m(x, cache, table)
    with pytest.raises(ERR, match="x has dtype"):
        m(x.float(), cache, table)
    assert m(x[:0], cache, table[:0], reference=True).shape == (0, 3, D)  # an idle rank


# ---- torch.compile: no graph breaks ----------------------------------------------------------
def _export(fn, *args):
    gm, _ = torch._dynamo.export(fn)(*args)
    return [str(n.target) for n in gm.graph.nodes if n.op == "call_function"]


def test_forwards_trace_into_the_custom_ops(monkeypatch, block):
    from warpspec import moe_layer
    layer = warpspec.MoeLayer.__new__(warpspec.MoeLayer)  # no GPU: the op only names it
    layer._id = moe_layer._register_layer(layer)
    monkeypatch.setattr(block, "_layer", layer)
    x, idx, w = _route(6)
    ops = _export(lambda x, i, w: block(x, i, w) * 2, x, idx, w)
    assert any(o.startswith("warpspec.moe_layer") for o in ops), ops
    monkeypatch.setattr(wnn.mla, "_require_gpu", lambda *a: None)
    m = _mla()
    for fp8 in (False, True):
        cache, table = wnn.paged_cache(2, 128, fp8=fp8)
        x, lens = torch.zeros(2, 1, D, dtype=torch.bfloat16), torch.full((2,), 5, dtype=torch.int32)
        ops = _export(lambda x, c, t, n: m(x, c, t, n, max_seqlen=128), x, cache, table, lens)
        assert any(o.startswith("warpspec.mla_decode") for o in ops), ops
    ops = _export(lambda x, c, t: m(x, c, t), torch.zeros(2, 64, D, dtype=torch.bfloat16), *wnn.paged_cache(2, 128))
    assert any(o.startswith("warpspec.attention") for o in ops), ops


# ---- the example -------------------------------------------------------------------------------
def test_example_says_it_needs_a_gpu():
    if torch.cuda.is_available():
        pytest.skip("a GPU is here: test_gpu_nn.py runs the example")
    script = os.path.join(HERE, "..", "..", "examples", "deepseek_stack.py")
    r = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    assert r.returncode != 0 and "Traceback" not in r.stderr, r.stderr
    assert "GPU" in r.stderr, r.stderr
