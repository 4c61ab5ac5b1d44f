"""warpspec.nn on an sm_90 GPU against its float64 references (forward(reference=True)),
on random data with the package's bounds: 1e-2 for MLA attention (BF16 operands, as
test_gpu_attention) and 4e-2 for the MoE block (FP8, the SwiGLU output requantised; as
test_gpu_moe_layer).

MLAAttention: prefill (dense and latent), then decode steps of one and two tokens over a
paged cache whose pages are shuffled, BF16 and FP8; the reference decodes over a copy of
the kernel path's cache. torch.compile(fullgraph=True) of a decode step, and a CUDA graph
of one replayed on new inputs. MoEBlock runs in a subprocess (its communicator is
NVSHMEM's, once per process): one GPU with 0, some and many tokens, BF16 and FP8 input,
compiled, and after its weights moved; on two GPUs expert parallel with an idle rank.
The example runs end to end."""

import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.gpu
torch = pytest.importorskip("torch")
import warpspec.nn as wnn  # noqa: E402
from warpspec import _nn_reference as ref  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))
EXAMPLE = os.path.join(HERE, "..", "..", "examples", "deepseek_stack.py")


def rel_err(got, want):
    got, want = got.double(), want.double()
    return ((got - want).norm() / want.norm().clamp_min(1e-30)).item()


def _shuffled_cache(batch, max_len, fp8, page=64):
    cache, _ = wnn.paged_cache(batch, max_len, page_size=page, fp8=fp8, device="cuda")
    n = cache.shape[0] // batch
    table = torch.randperm(cache.shape[0], device="cuda", dtype=torch.int32).view(batch, n).contiguous()
    return cache, table


# heads 16 / 32: a tensor-parallel shard of 128 heads (the MLA kernels' padding rows)
@pytest.mark.parametrize("nope,q_lora,fp8,heads", [(128, None, False, 64), (64, 96, True, 64), (32, None, False, 64),
                                                   (128, 64, True, 64), (128, None, False, 16), (32, None, True, 32)])
def test_mla_prefill_then_decode(nope, q_lora, fp8, heads):
    torch.manual_seed(nope + bool(fp8) + heads)
    m = wnn.MLAAttention(512, heads, q_lora_rank=q_lora, qk_nope_head_dim=nope, device="cuda")
    assert m.prefill == ("latent" if nope == 32 else "dense")
    B, P = 3, 70  # the prompt crosses a page
    x = torch.randn(B, P + 4, 512, device="cuda").to(torch.bfloat16)
    cache, table = _shuffled_cache(B, P + 4, fp8)
    mirror = cache.clone()
    got, want = m(x[:, :P], cache, table), m(x[:, :P], mirror, table, reference=True)
    assert got.dtype == torch.bfloat16 and rel_err(got, want) < 1e-2
    # the rows written, against the reference's (FP8: both dequantised; nearly equal values
    # can round to neighbouring e4m3 values)
    rows = [ref._gather_cache(c, table, P) for c in (cache, mirror)]
    assert rel_err(rows[0], rows[1]) < (5e-2 if fp8 else 1e-2)
    pos = P
    for s in (1, 1, 2):  # one token, again, then two (causal among them)
        lens = torch.full((B,), pos, dtype=torch.int32, device="cuda")
        mirror = cache.clone()
        got = m(x[:, pos:pos + s], cache, table, lens, max_seqlen=pos + s)
        want = m(x[:, pos:pos + s], mirror, table, lens, reference=True)
        assert rel_err(got, want) < 1e-2, (pos, s)
        pos += s


@pytest.mark.parametrize("fp8", [False, True])
def test_mla_decode_compiles_and_replays_in_a_graph(fp8):
    torch.manual_seed(5)
    m = wnn.MLAAttention(512, 64, qk_nope_head_dim=64, device="cuda")
    B = 4
    cache, table = _shuffled_cache(B, 256, fp8)
    m(torch.randn(B, 100, 512, device="cuda").to(torch.bfloat16), cache, table)  # a prompt in the cache
    x = torch.randn(B, 1, 512, device="cuda").to(torch.bfloat16)
    lens = torch.tensor([100, 100, 100, 100], dtype=torch.int32, device="cuda")

    def step(x, c, t, n):
        return m(x, c, t, n, max_seqlen=256)

    c1, c2 = cache.clone(), cache.clone()
    with torch.no_grad():  # inference: the kernels have no backward (the module's weights require grad)
        eager = step(x, c1, table, lens)
        compiled = torch.compile(step, fullgraph=True)(x, c2, table, lens)
    assert rel_err(compiled, eager) < 5e-3
    # with grad on, a backward through the op says what to do instead of AOT autograd's error
    with pytest.raises(RuntimeError, match="no backward.*torch.no_grad"):
        step(x, cache.clone(), table, lens).float().sum().backward()
    with torch.no_grad():
        # a CUDA graph of the eager step, replayed on new tokens and lengths
        s = torch.cuda.Stream()
        s.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(s):
            step(x, cache.clone(), table, lens)
        torch.cuda.current_stream().wait_stream(s)
        g = torch.cuda.CUDAGraph()
        with torch.cuda.graph(g):
            out = step(x, cache, table, lens)
        for n in (100, 101, 102):
            x.copy_(torch.randn_like(x, dtype=torch.float32))
            lens.fill_(n)
            before = cache.clone()
            out.fill_(float("nan"))
            g.replay()
            assert torch.equal(out, step(x, before, table, lens)), n
            assert torch.equal(cache, before)  # the same row written at the same place


MOE_ONE_GPU = r"""
import torch, warpspec, warpspec.nn as wnn
torch.cuda.set_device(0)
H, I, E, K = 512, 256, 8, 2
block = wnn.MoEBlock.random(H, I, E, K, max_tokens=300, seed=7, device="cuda")

def rel(a, b):
    return ((a.double() - b.double()).norm() / b.double().norm()).item()

g = torch.Generator().manual_seed(1)
x = ((torch.rand(300, H, generator=g) * 2 - 1) * 2).to(torch.bfloat16).cuda()
idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(300)]).cuda()
idx[::5, 1] = -1
w = torch.rand(300, K, generator=g).cuda()
for T in (0, 1, 37, 300):
    out = block(x[:T], idx[:T], w[:T])
    assert out.shape == (T, H) and out.dtype == torch.bfloat16
    if T:
        err = rel(out, block(x[:T], idx[:T], w[:T], reference=True))
        print("tokens", T, "rel err", err)
        assert err < 4e-2, err
xq, xs = warpspec.quantize_fp8(x)
err = rel(block((xq, xs), idx, w), block(x, idx, w, reference=True))
assert err < 4e-2, err
assert block(x.view(3, 100, H), idx.view(3, 100, K), w.view(3, 100, K)).shape == (3, 100, H)
eager = block(x, idx, w)
compiled = torch.compile(lambda x, i, w: block(x, i, w), fullgraph=True)(x, idx, w)
assert torch.equal(eager, compiled), "compiled differs"
first = block._layer
block.cpu()
block.cuda()  # the weights moved: the next forward makes the layer again
assert torch.equal(block(x, idx, w), eager) and block._layer is not first
try:
    block(torch.cat([x, x[:1]]), torch.cat([idx, idx[:1]]), torch.cat([w, w[:1]]))
    raise SystemExit("301 tokens passed")
except warpspec.InvalidArgumentError as e:
    assert "at most 300" in str(e)
wnn.shared_communicator().destroy()
print("ok")
"""


def test_moe_block_one_gpu():
    r = subprocess.run([sys.executable, "-c", MOE_ONE_GPU], capture_output=True, text=True, timeout=300,
                       env=dict(os.environ))
    assert r.returncode == 0 and "ok" in r.stdout, r.stdout + r.stderr


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _moe_worker(rank, nranks, port):
    import torch.distributed as dist

    import warpspec.nn as wnn
    torch.cuda.set_device(rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nranks)
    H, I, E, K = 512, 256, 4 * nranks, 2
    block = wnn.MoEBlock.random(H, I, E, K, max_tokens=128, group=dist.group.WORLD, seed=9, device="cuda")
    assert block.local_experts == 4 and block.rank == rank
    w1, w2 = wnn.MoEBlock.random_weights(H, I, E, seed=9, device="cuda")  # every expert, for the reference
    every = wnn.MoEBlock.quantize_weights(w1, w2)
    for tokens in ([96] + [0] * (nranks - 1), [0] * nranks, [128] * nranks):
        T = tokens[rank]
        g = torch.Generator().manual_seed(50 + rank)
        x = torch.randn(T, H, generator=g).to(torch.bfloat16).cuda()
        idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).cuda() if T else \
            torch.empty(0, K, dtype=torch.long, device="cuda")
        w = torch.rand(T, K, generator=g).cuda()
        out = block(x, idx, w)
        assert out.shape == (T, H)
        if T:
            ref = wnn.moe_reference(x, idx, w, *every)
            err = ((out.double() - ref).norm() / ref.norm()).item()
            assert err < 4e-2, f"rank {rank}, {tokens}: rel err {err}"
    wnn.shared_communicator(dist.group.WORLD).destroy()
    dist.destroy_process_group()


@pytest.mark.multi_gpu
def test_moe_block_expert_parallel_two_gpus():
    import torch.multiprocessing as mp
    ctx = mp.start_processes(_moe_worker, args=(2, _free_port()), nprocs=2, join=False, start_method="spawn")
    deadline = time.time() + 300
    while not ctx.join(timeout=5):
        if time.time() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail("the 2-rank MoEBlock test did not finish in 300 s")


SMALL = ["--layers", "2", "--hidden", "512", "--batch", "2", "--prompt", "96", "--decode", "4", "--vocab", "1024"]


@pytest.mark.parametrize("fp8", [False, True])
def test_example_one_gpu(fp8):
    r = subprocess.run([sys.executable, EXAMPLE] + SMALL + (["--fp8-cache"] if fp8 else []), capture_output=True,
                       text=True, timeout=300, env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "prefill" in r.stdout and "tokens/s" in r.stdout, r.stdout


@pytest.mark.multi_gpu
def test_example_under_torchrun():
    env = dict(os.environ, MASTER_PORT=str(_free_port()))
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", "2",
                        "--master-port", env["MASTER_PORT"], EXAMPLE] + SMALL, capture_output=True, text=True,
                       timeout=300, env=env)
    assert r.returncode == 0, r.stdout + r.stderr
    assert "over 2 GPU(s)" in r.stdout, r.stdout
