"""The communicator from Python on 2 GPUs: two processes (torch.multiprocessing), a
communicator made from a torch.distributed process group, sendrecv in both directions
(staged and zero-copy), allgather, barrier; and the same through `python -m warpspec run`
with Communicator.from_env. Fresh random data, receive buffers poisoned; every process
runs under a deadline (a hang fails the test, never the CI job)."""

import os
import socket
import subprocess
import sys
import time

import pytest

pytestmark = pytest.mark.multi_gpu
torch = pytest.importorskip("torch")

DEADLINE_S = 240
SIZES = [16, 1000, 1 << 20, (9 << 20) + 16]  # small, not a multiple of 16, staged, zero-copy range


def _free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _data(rank, nbytes, salt):
    g = torch.Generator().manual_seed(1000 * rank + salt)
    return torch.randint(0, 256, (nbytes,), dtype=torch.uint8, generator=g)


def _worker(rank, nranks, port):
    import torch.distributed as dist

    import warpspec
    torch.cuda.set_device(rank)
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=nranks)
    comm = warpspec.Communicator.from_process_group()
    assert (comm.rank, comm.size, comm.device) == (rank, nranks, rank)
    nxt, prv = (rank + 1) % nranks, (rank - 1) % nranks
    for salt, nbytes in enumerate(SIZES):
        send = _data(rank, nbytes, salt).cuda()
        recv = torch.full((nbytes,), 0xA5, dtype=torch.uint8, device="cuda")
        comm.sendrecv(send, nxt, recv, prv)
        warpspec.sync()
        assert torch.equal(recv.cpu(), _data(prv, nbytes, salt)), f"rank {rank}: sendrecv of {nbytes} bytes"
    # typed tensors, zero-copy into a symmetric buffer
    n = (12 << 20) // 4
    sym = comm.alloc((n,), torch.float32)
    assert sym.device.index == rank and sym.dtype == torch.float32 and not sym.any()
    for it in range(3):
        g = torch.Generator().manual_seed(77 + 10 * rank + it)
        x = torch.randn(n, generator=g).cuda()
        sym.fill_(float("nan"))
        comm.barrier()
        comm.sendrecv(x, nxt, sym, prv, zero_copy=True)
        warpspec.sync()
        gp = torch.Generator().manual_seed(77 + 10 * prv + it)
        assert torch.equal(sym.cpu(), torch.randn(n, generator=gp)), f"rank {rank}: zero-copy round {it}"
    comm.free(sym)
    # allgather of bf16 rows
    rows = torch.randn(33, 128, generator=torch.Generator().manual_seed(5 + rank)).to(torch.bfloat16).cuda()
    out = comm.allgather(rows)
    warpspec.sync()
    for r in range(nranks):
        want = torch.randn(33, 128, generator=torch.Generator().manual_seed(5 + r)).to(torch.bfloat16)
        assert torch.equal(out[r].cpu(), want), f"rank {rank}: allgather slot {r}"
    # one-sided use: rank 0 sends, rank 1 receives
    if rank == 0:
        comm.send(torch.arange(4096, dtype=torch.int32, device="cuda"), 1)
    elif rank == 1:
        got = torch.zeros(4096, dtype=torch.int32, device="cuda")
        comm.recv(got, 0)
        warpspec.sync()
        assert torch.equal(got.cpu(), torch.arange(4096, dtype=torch.int32))
    warpspec.sync()
    with pytest.raises(warpspec.InvalidArgumentError):
        comm.sendrecv(torch.zeros(16, device="cuda"), 5, None, None)
    comm.destroy()
    dist.destroy_process_group()


def test_two_ranks_from_process_group():
    import torch.multiprocessing as mp
    ctx = mp.start_processes(_worker, args=(2, _free_port()), nprocs=2, join=False, start_method="spawn")
    deadline = time.time() + DEADLINE_S
    while not ctx.join(timeout=5):
        if time.time() > deadline:
            for p in ctx.processes:
                p.kill()
            pytest.fail(f"the 2-rank test did not finish in {DEADLINE_S} s")


FROM_ENV = r"""
import torch, warpspec
comm = warpspec.Communicator.from_env()
torch.cuda.set_device(comm.device)
r, n = comm.rank, comm.size
x = torch.full((1 << 20,), r + 1, dtype=torch.int32, device="cuda")
y = torch.zeros_like(x)
comm.sendrecv(x, (r + 1) % n, y, (r - 1) % n)
warpspec.sync()
assert bool((y == ((r - 1) % n) + 1).all()), y[:4]
comm.destroy()
print("rank", r, "ok")
"""


def test_two_ranks_from_env_launcher():
    from warpspec.__main__ import cli_path
    if cli_path() is None:
        pytest.skip("the CLI is not built here (set WARPSPEC_CLI)")
    r = subprocess.run([sys.executable, "-m", "warpspec", "run", "-n", "2", "--timeout", "180", "--",
                        sys.executable, "-c", FROM_ENV], capture_output=True, text=True, timeout=DEADLINE_S,
                       env=dict(os.environ))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "rank 0 ok" in r.stdout and "rank 1 ok" in r.stdout
