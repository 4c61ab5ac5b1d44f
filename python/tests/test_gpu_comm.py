"""The communicator from Python on 2 GPUs: two processes (torch.multiprocessing), a
communicator made from a torch.distributed process group, sendrecv in both directions
(staged and zero-copy), allgather, barrier, a MoE dispatch -> experts -> combine round
trip (FP8 and BF16); and the same through `python -m warpspec run`
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
    # allgather into symmetric memory: 16 MiB blocks go zero-copy (stored straight into the peers' out)
    m = (16 << 20) // 4 + 4
    sym_out = comm.alloc((nranks, m), torch.float32)
    for it in range(2):
        mine = torch.randn(m, generator=torch.Generator().manual_seed(900 + 10 * rank + it)).cuda()
        sym_out.fill_(float("nan"))
        comm.barrier()  # not needed by the op (a peer stores once our call posted out): the fill stays ours
        comm.allgather(mine, sym_out)
        warpspec.sync()
        got = sym_out.cpu()
        for r in range(nranks):
            want = torch.randn(m, generator=torch.Generator().manual_seed(900 + 10 * r + it))
            if not torch.equal(got[r], want):
                wrong = (got[r] != want).nonzero()
                raise AssertionError(f"rank {rank}: zero-copy allgather slot {r}, round {it}: {wrong.numel()} of {m} "
                                     f"elements wrong ({int(got[r].isnan().sum())} still NaN), first at "
                                     f"{int(wrong[0])}, last at {int(wrong[-1])}; out at {sym_out.data_ptr():#x}")
        comm.barrier()  # everyone checked before the next round's fill
    comm.free(sym_out)
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
    _moe_round_trip(comm, rank, nranks)
    comm.destroy()
    dist.destroy_process_group()


def _moe_round_trip(comm, rank, nranks):
    """Dispatch (FP8 and BF16), an "expert" that scales each row by (its expert + 1),
    combine: out[t] = x[t] * sum_k w_k (e_k + 1), against PyTorch."""
    import warpspec
    H, E, K, T = 512, 8 * nranks, 4, 200
    L = E // nranks
    g = torch.Generator().manual_seed(1234 + rank)
    x = (torch.rand(T, H, generator=g) * 2 - 1).to(torch.bfloat16).cuda()
    idx = torch.stack([torch.randperm(E, generator=g)[:K] for _ in range(T)]).to(torch.int32)
    idx[::7, 1] = -1
    w = torch.rand(T, K, generator=g).cuda()
    idx = idx.cuda()
    for payload in ("fp8", "bf16", "ll", "fp8-index"):
        mode = "low_latency" if payload == "ll" else "normal"
        with warpspec.MoeDispatcher(comm, hidden=H, experts=E, topk=K, max_tokens=256,
                                    payload="bf16" if payload == "bf16" else "fp8", row_align=64, mode=mode,
                                    receive="index" if payload == "fp8-index" else "copy") as ep:
            if payload == "ll":  # BF16 in, quantised on the fly; the masked layout [L, m, H]
                r = ep.dispatch(x, idx, w, sync_counts=True)
                q, s = warpspec.quantize_fp8(x)
                xin = q.float() * s.repeat_interleave(128, dim=1)
                m = r.x.shape[1]
                xs = r.x.view(L * m, H).float() * r.x_scale.repeat_interleave(128, dim=1)
                y = torch.full((L, m, H), float("nan"), dtype=torch.bfloat16, device="cuda")
                for l in range(L):
                    n = int(r.expert_counts[l])
                    y[l, :n] = (xs[l * m:l * m + n] * (rank * L + l + 1)).to(torch.bfloat16)
                out = ep.combine(y)
                warpspec.sync()
                ref = xin.double() * (w * (idx.float() + 1) * (idx >= 0)).sum(1, keepdim=True).double()
                err = ((out.double() - ref).norm() / ref.norm()).item()
                assert err < 2e-2, f"rank {rank}: MoE low-latency round trip rel err {err}"
                continue
            if payload == "fp8":
                q, s = warpspec.quantize_fp8(x)
                r = ep.dispatch(q, idx, w, x_scale=s, sync_counts=True)
                xr = (r.x.float() * r.x_scale.repeat_interleave(128, dim=1)).to(torch.bfloat16)
                xin = (q.float() * s.repeat_interleave(128, dim=1))
            elif payload == "fp8-index":  # the rows stay in the receive buffer: read them through row_index
                q, s = warpspec.quantize_fp8(x)
                r = ep.dispatch(q, idx, w, x_scale=s, sync_counts=True)
                assert r.x is None and r.x_scale is None and r.row_index.shape == (r.max_rows,)
                used = r.rows[r.row_index.clamp(min=0).long()]
                rq = used[:, :H].contiguous().view(torch.float8_e4m3fn).float()
                rs = used[:, H:H + 4 * (H // 128)].contiguous().view(torch.float32)
                xr = (rq * rs.repeat_interleave(128, dim=1)).to(torch.bfloat16)
                xin = (q.float() * s.repeat_interleave(128, dim=1))
            else:
                r = ep.dispatch(x, idx.long(), w, sync_counts=True)
                xr, xin = r.x, x.float()
            offs = r.host_offsets
            assert offs == r.expert_offsets.tolist() and len(offs) == L + 1
            if payload in ("fp8", "fp8-index"):  # the experts' GEMM over the received rows (in place: index)
                gw = torch.Generator().manual_seed(4321)
                wq, ws = zip(*(warpspec.quantize_fp8((torch.rand(128, H, generator=gw) * 2 - 1).to(torch.bfloat16).cuda(),
                                                     block=(128, 128)) for _ in range(L)))
                wq, ws = torch.stack(wq), torch.stack(ws)
                h = ep.expert_gemm(wq, ws)
                warpspec.sync()
                wd = wq.float() * ws.repeat_interleave(128, dim=1).repeat_interleave(128, dim=2)
                num = den = 0.0
                for l in range(L):
                    a, n = offs[l], int(r.expert_counts[l])
                    ref = xr[a:a + n].double() @ wd[l].double().t()
                    num += (h[a:a + n].double() - ref).norm().item() ** 2
                    den += ref.norm().item() ** 2
                err = (num / max(den, 1e-30)) ** 0.5
                assert err < 2e-2, f"rank {rank}: expert_gemm over the {payload} receive: rel err {err}"

            y = torch.full((r.max_rows, H), float("nan"), dtype=torch.bfloat16, device="cuda")
            for l in range(L):
                n = int(r.expert_counts[l])
                y[offs[l]:offs[l] + n] = (xr[offs[l]:offs[l] + n].float() * (rank * L + l + 1)).to(torch.bfloat16)
            out = ep.combine(y)
            warpspec.sync()
            valid = idx >= 0
            factor = (w * (idx.float() + 1) * valid).sum(1, keepdim=True)
            ref = xin.double() * factor.double()
            err = ((out.double() - ref).norm() / ref.norm()).item()
            assert err < 2e-2, f"rank {rank}: MoE {payload} round trip rel err {err}"


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
