"""The custom ops on the GPU: torch.compile(fullgraph=True) of functions that call
warpspec.gemm, warpspec.attention and warpspec.mla_decode gives the same bits as eager, and
a CUDA graph captured around the decode-time ops replays on new inputs written into the
captured ones (the inputs fresh random data each time, the outputs poisoned first)."""
import pytest

import warpspec

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")


def rand_bf16(*shape, scale=1.0):
    return ((torch.rand(*shape, device="cuda") * 2 - 1) * scale).to(torch.bfloat16)


def _gemm_inputs(groups=4, m=256, n=384, k=512):
    a, sa = warpspec.quantize_fp8(rand_bf16(m, k))
    bs = [warpspec.quantize_fp8(rand_bf16(n, k), block=(128, 128)) for _ in range(groups)]
    b, sb = torch.stack([q for q, _ in bs]), torch.stack([s for _, s in bs])
    off = torch.tensor([0, 40, 40, 200, m], dtype=torch.int32, device="cuda")
    return a, b, sa, sb, off


def test_gemm_compiled_equals_eager():
    a, b, sa, sb, off = _gemm_inputs()

    def f(a, b, sa, sb, off):
        return warpspec.gemm(a, b, a_scale=sa, b_scale=sb, group_offsets=off) * 2

    eager = f(a, b, sa, sb, off)
    compiled = torch.compile(f, fullgraph=True)(a, b, sa, sb, off)
    assert torch.equal(eager, compiled)


def test_attention_compiled_equals_eager():
    q, k, v = (rand_bf16(2, 256, 8, 128) for _ in range(3))

    def f(q, k, v):
        o, lse = warpspec.attention(q, k, v, causal=True, return_lse=True)
        return o, lse

    o1, l1 = f(q, k, v)
    o2, l2 = torch.compile(f, fullgraph=True)(q, k, v)
    assert torch.equal(o1, o2) and torch.equal(l1, l2)


def _decode_inputs(b=4, pages=32, page=64, heads=64):
    q = rand_bf16(b, 1, heads, 576)
    cache = rand_bf16(pages, page, 576)
    table = torch.randperm(pages, device="cuda", dtype=torch.int32)[: b * 4].view(b, 4)
    lens = torch.randint(1, 4 * page + 1, (b,), device="cuda", dtype=torch.int32)
    return q, cache, table, lens


def test_mla_decode_compiled_and_graph_replay():
    q, cache, table, lens = _decode_inputs()

    def f(q, cache, table, lens):
        return warpspec.mla_decode(q, cache, table, lens, max_seqlen=256)

    eager = f(q, cache, table, lens)
    assert torch.equal(eager, torch.compile(f, fullgraph=True)(q, cache, table, lens))
    # a CUDA graph around the call, replayed on new inputs copied into the captured ones
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        f(q, cache, table, lens)  # warm-up on the side stream (allocations, plans)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = f(q, cache, table, lens)
    for _ in range(3):
        nq, ncache, ntable, nlens = _decode_inputs()
        q.copy_(nq); cache.copy_(ncache); table.copy_(ntable); lens.copy_(nlens)
        out.fill_(float("nan"))
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, f(q, cache, table, lens))
