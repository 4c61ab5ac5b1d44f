"""The baselines of `warpspec bench moe-a2a` compute the right thing: on CPU (gloo), 1 and
2 processes, dispatch -> experts y = x (e + 1) -> combine gives x * sum_k w_k (e_k + 1)
for FP8 rows, for the PyTorch version and for the NCCL composite (its Triton kernels in
Triton's interpreter). Needs PyTorch (and Triton for the composite), no GPU."""

import os
import socket

import pytest

torch = pytest.importorskip("torch")


def _run(rank, n, port, impl):
    if impl == "nccl":
        os.environ["TRITON_INTERPRET"] = "1"  # before Triton is imported: kernels run on the CPU
    import torch.distributed as dist

    from warpspec import bench_moe
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n)
    H, E, K, T = 256, 8 * n, 3, 50
    L = E // n
    g = torch.Generator().manual_seed(10 + rank)
    x = torch.rand(T, H, generator=g) * 2 - 1
    idx = torch.rand(T, E, generator=g).topk(K, dim=1).indices.to(torch.int32)
    idx[::5, 1] = -1
    w = torch.rand(T, K, generator=g)
    xb = x.view(T, H // 128, 128)
    s = xb.abs().amax(-1) / 448.0
    q = (xb / s[..., None]).to(torch.float8_e4m3fn).view(T, H)
    tm = bench_moe.TorchMoE(rank, n, E, fp8=True) if impl == "torch" else bench_moe.NcclMoE(rank, n, E, H, K)
    gx, gs, gcnt, gexp = tm.dispatch(q, s, idx, w)
    assert int(gcnt.sum()) == gx.shape[0]
    y = ((gx.float() * gs.repeat_interleave(128, 1)) * (rank * L + gexp[:, None] + 1).float()).to(torch.bfloat16)
    out = tm.combine(y)
    ref = (q.float() * s.repeat_interleave(128, 1)) * (w * (idx.float() + 1) * (idx >= 0)).sum(1, keepdim=True)
    err = ((out.float() - ref).norm() / ref.norm()).item()
    assert err < 2e-2, err
    dist.destroy_process_group()


@pytest.mark.parametrize("impl", ["torch", "nccl"])
@pytest.mark.parametrize("n", [1, 2])
def test_baseline_round_trip(n, impl):
    if impl == "nccl":
        pytest.importorskip("triton")
    import torch.multiprocessing as mp
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    mp.spawn(_run, args=(n, port, impl), nprocs=n, join=True)
