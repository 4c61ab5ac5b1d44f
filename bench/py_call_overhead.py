"""Host time of one Python-level MoE dispatch / combine call (the arguments' checks, the
views, the ctypes call and the launches), against the GPU time of the same call: where a
single-call timing through Python (events around fn(), as bench moe-a2a and outside
harnesses time) exceeds the C one. Run on 2 ranks: python -m warpspec run -n 2 -- python3
bench/py_call_overhead.py"""
import statistics
import time

import torch
import warpspec

comm = warpspec.Communicator.from_env()
torch.cuda.set_device(comm.device)
H, E, K, T = 7168, 256, 8, 128
ep = warpspec.MoeDispatcher(comm, hidden=H, experts=E, topk=K, max_tokens=T, payload="fp8", num_sms=24)
g = torch.Generator(device="cuda").manual_seed(comm.rank)
x = torch.randn(T, H, device="cuda", generator=g).to(torch.bfloat16)
q, s = warpspec.quantize_fp8(x)
idx = torch.stack([torch.randperm(E, device="cuda", generator=g)[:K] for _ in range(T)]).to(torch.int32)
w = torch.rand(T, K, device="cuda", generator=g)
r = ep.dispatch(q, idx, w, x_scale=s)
y = torch.zeros(r.x.shape, dtype=torch.bfloat16, device="cuda")
ep.combine(y)
torch.cuda.synchronize()


def host_us(fn, n=200):
    """Mean host microseconds per call, calls back to back (the GPU runs behind)."""
    comm.barrier()
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(n):
        fn()
    t1 = time.perf_counter()
    torch.cuda.synchronize()
    return (t1 - t0) / n * 1e6


def event_us(fn, n=30):
    """Median event time of one call after a barrier (as bench moe-a2a times it)."""
    out = []
    for _ in range(n):
        comm.barrier()
        torch.cuda.synchronize()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        out.append(a.elapsed_time(b) * 1e3)
    return statistics.median(out)


def pair():
    ep.dispatch(q, idx, w, x_scale=s)
    ep.combine(y)


hd = host_us(lambda: ep.dispatch(q, idx, w, x_scale=s))
ep.combine(y)
hp = host_us(pair)
ed = event_us(pair)
# the same pair captured in a CUDA graph: no host work inside the timed span
st = torch.cuda.Stream()
with torch.cuda.stream(st):
    pair()
torch.cuda.synchronize()
graph = torch.cuda.CUDAGraph()
with torch.cuda.graph(graph, stream=st):
    pair()
eg = event_us(graph.replay)
print(f"rank {comm.rank}: 128 tokens, DeepSeek-V3, 24 SMs: host per dispatch+combine {hp:.1f} us "
      f"(dispatch alone {hd:.1f}); one eager pair {ed:.1f} us by events; one graph replay {eg:.1f} us", flush=True)
ep.destroy()
comm.destroy()
