"""warpspec.bench_moe - MoE dispatch and combine on N GPUs (one process each): warpspec's
MoeDispatcher against (a) an NCCL composite written as well as NCCL allows (counts to the
host, one all-to-all of packed rows, Triton permutation and reduction kernels) and (b) a
PyTorch user's version (all_to_all_single for counts and rows, index_select / index_add_
for the permutations), same run, same routing and data.

    python -m warpspec bench moe-a2a [--ranks 2] [--csv FILE] [--iters 20] [--sms 8,16,24,32,64]
    (or `warpspec bench moe-a2a ...`, which runs this)

Per case and implementation: median microseconds of dispatch (routing in, rows grouped by
local expert out) and of combine (expert outputs in, weighted sums at the tokens' ranks
out), the largest over ranks; NVLink GB/s = token rows this rank sends to other ranks
per second (each token once per destination rank); logical GB/s = rows received, own
rank's included, per second (DeepEP's convention). Before timing, both implementations
run the same "experts" (y = x * (expert + 1)) and their combined outputs are compared.
"""

import argparse
import csv
import os
import socket
import statistics
import sys

os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
os.environ.setdefault("NVSHMEM_DISABLE_NVLS", "1")
os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402

LL_MAX_TOKENS = 128  # cases up to this many tokens per rank also time the low-latency mode
CASES = [  # name, hidden, experts, topk, tokens per rank
    ("DeepSeek-V3, 4096 tok", 7168, 256, 8, 4096),
    ("DeepSeek-V3, 2048 tok", 7168, 256, 8, 2048),
    ("DeepSeek-V3, 1024 tok", 7168, 256, 8, 1024),
    ("DeepSeek-V3, 128 tok", 7168, 256, 8, 128),
    ("H4096 top-6, 512 tok", 4096, 256, 6, 512),
    ("H4096 top-6, 8192 tok", 4096, 256, 6, 8192),
]


def timed(fn, iters, barrier):
    """Median ms of fn() over iters runs after 3 warm-ups, each after a barrier."""
    out = []
    for i in range(iters + 3):
        barrier()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        if i >= 3:
            out.append(a.elapsed_time(b))
    return statistics.median(out)


def rank_hits(idx, L, n):
    """[tokens, n] int32, 1 where a token needs rank d: one of its experts lives there
    (experts d L .. d L + L - 1); -1 slots need none. A token goes once to each such rank."""
    valid = idx >= 0
    dst = torch.where(valid, idx // L, torch.full_like(idx, n))  # -1 slots: a spare column
    hit = torch.zeros(idx.shape[0], n + 1, dtype=torch.int32, device=idx.device)
    hit.scatter_(1, dst.long(), 1)
    return hit[:, :n]


class TorchMoE:
    """What a PyTorch user writes: counts all-to-all (to the host), rows all-to-all,
    permutations with index_select / index_add_."""

    def __init__(self, rank, nranks, experts, fp8):
        self.rank, self.n, self.L, self.fp8 = rank, nranks, experts // nranks, fp8

    def dispatch(self, x, scale, idx, w):
        hit = rank_hits(idx, self.L, self.n)
        order = hit.t().nonzero()  # (rank, token), rank-major
        tok = order[:, 1]
        send_counts = hit.sum(0)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        sc, rc = send_counts.tolist(), recv_counts.tolist()  # the host needs the sizes
        xs = x.view(torch.uint8) if self.fp8 else x
        parts = [xs.index_select(0, tok), idx.index_select(0, tok), w.index_select(0, tok)]
        if self.fp8:
            parts.append(scale.index_select(0, tok))
        recv = []
        for p in parts:
            r = torch.empty((sum(rc),) + tuple(p.shape[1:]), dtype=p.dtype, device=p.device)
            dist.all_to_all_single(r, p, rc, sc)
            recv.append(r)
        rx, ridx, rw = recv[0], recv[1], recv[2]
        local = ridx - self.rank * self.L
        mine = (ridx >= 0) & (local >= 0) & (local < self.L)
        rows_t, rows_k = mine.nonzero(as_tuple=True)
        e = local[rows_t, rows_k]
        perm = torch.argsort(e, stable=True)
        rows = rows_t[perm]
        gx = rx.index_select(0, rows)
        if self.fp8:
            gx = gx.view(torch.float8_e4m3fn)
        gs = recv[3].index_select(0, rows) if self.fp8 else None
        self.state = (tok, sc, rc, rows, rw[rows_t, rows_k][perm], rx.shape[0], x.shape[0])
        return gx, gs, torch.bincount(e, minlength=self.L), e[perm]

    def combine(self, y):
        tok, sc, rc, rows, we, nrecv, T = self.state
        acc = torch.zeros(nrecv, y.shape[1], dtype=torch.float32, device=y.device)
        acc.index_add_(0, rows, y.float() * we[:, None])
        back = torch.empty(sum(sc), y.shape[1], dtype=torch.bfloat16, device=y.device)
        dist.all_to_all_single(back, acc.to(torch.bfloat16), sc, rc)
        out = torch.zeros(T, y.shape[1], dtype=torch.float32, device=y.device)
        out.index_add_(0, tok, back.float())
        return out.to(torch.bfloat16)


# ---- the NCCL composite: what NCCL allows when the permutations are written well ------
# One packed row per (token, destination rank) carrying payload, scales, top-k ids and
# weights (one all-to-all of rows instead of four), the counts to the host (the sizes of
# the all-to-all), and fused Triton kernels for the permutations and the weighted sums.
try:
    import triton
    import triton.language as tl
except ImportError:  # the composite needs Triton; the rest of the bench does not
    triton = None

if triton is not None:
    @triton.jit
    def _pack_kernel(src_ptr, dst_ptr, send_row_ptr, n, W: tl.constexpr, BLOCK: tl.constexpr):
        """Row t of src (W int32 words) to every destination row send_row[t][d] >= 0."""
        t = tl.program_id(0)
        d = tl.program_id(1)
        r = tl.load(send_row_ptr + t * n + d)
        if r >= 0:
            for c in range(0, W, BLOCK):
                cols = c + tl.arange(0, BLOCK)
                v = tl.load(src_ptr + t * W + cols, mask=cols < W)
                tl.store(dst_ptr + r * W + cols, v, mask=cols < W)

    @triton.jit
    def _reduce_kernel(y_ptr, rows_ptr, w_ptr, out_ptr, H: tl.constexpr, K: tl.constexpr, BLOCK: tl.constexpr):
        """out[i] = sum_j w[i][j] y[rows[i][j]] (rows -1: none), fp32 sums, bf16 out."""
        i = tl.program_id(0)
        for c in range(0, H, BLOCK):
            cols = c + tl.arange(0, BLOCK)
            acc = tl.zeros([BLOCK], dtype=tl.float32)
            for j in range(K):
                r = tl.load(rows_ptr + i * K + j)
                wj = tl.load(w_ptr + i * K + j)
                if r >= 0:
                    acc += wj * tl.load(y_ptr + r * H + cols, mask=cols < H, other=0.0).to(tl.float32)
            tl.store(out_ptr + i * H + cols, acc.to(tl.bfloat16), mask=cols < H)


class NcclMoE:
    """Counts all-to-all (to the host), one all-to-all of packed rows (NCCL's grouped
    send/recv per peer), Triton permutation and reduction kernels."""

    def __init__(self, rank, nranks, experts, hidden, topk):
        if triton is None:
            raise RuntimeError("the NCCL composite needs Triton")
        self.rank, self.n, self.L, self.H, self.K = rank, nranks, experts // nranks, hidden, topk
        self.kb = hidden // 128
        w = hidden // 4 + self.kb + 2 * topk  # payload, scales, ids, weights: int32 words
        self.W = (w + 3) // 4 * 4

    def dispatch(self, q, s, idx, w):
        T, K, n, L, W = idx.shape[0], self.K, self.n, self.L, self.W
        hit = rank_hits(idx, L, n)
        send_counts = hit.sum(0).long()
        seg = torch.cumsum(send_counts, 0) - send_counts
        pos = torch.cumsum(hit, 0) - 1
        send_row = torch.where(hit > 0, seg[None, :] + pos, torch.full_like(pos, -1)).to(torch.int32).contiguous()
        packed = torch.zeros(T, W, dtype=torch.int32, device=q.device)
        c0 = self.H // 4
        packed[:, :c0] = q.view(torch.uint8).view(T, self.H).view(torch.int32)
        packed[:, c0:c0 + self.kb] = s.view(torch.int32)
        packed[:, c0 + self.kb:c0 + self.kb + K] = idx
        packed[:, c0 + self.kb + K:c0 + self.kb + 2 * K] = w.view(torch.int32)
        nsend = int(send_counts.sum())
        send = torch.empty(nsend, W, dtype=torch.int32, device=q.device)
        if T:
            _pack_kernel[(T, n)](packed, send, send_row, n, W=W, BLOCK=256)
        recv_counts = torch.empty_like(send_counts)
        dist.all_to_all_single(recv_counts, send_counts)
        sc, rc = send_counts.tolist(), recv_counts.tolist()
        recv = torch.empty(sum(rc), W, dtype=torch.int32, device=q.device)
        dist.all_to_all_single(recv, send, rc, sc)
        ridx = recv[:, c0 + self.kb:c0 + self.kb + K]
        rw = recv[:, c0 + self.kb + K:c0 + self.kb + 2 * K].contiguous().view(torch.float32)
        local = ridx - self.rank * L
        mine = (ridx >= 0) & (local >= 0) & (local < L)
        rows_t, rows_k = mine.nonzero(as_tuple=True)
        e = local[rows_t, rows_k]
        perm = torch.argsort(e, stable=True)
        rows = rows_t[perm]
        gx = recv[:, :c0].index_select(0, rows).view(torch.uint8).view(-1, self.H).view(torch.float8_e4m3fn)
        gs = recv[:, c0:c0 + self.kb].index_select(0, rows).view(torch.float32)
        # each received token's grouped rows and weights, for combine
        nrecv = recv.shape[0]
        tok_rows = torch.full((nrecv, K), -1, dtype=torch.int32, device=q.device)
        tok_w = torch.zeros(nrecv, K, dtype=torch.float32, device=q.device)
        gpos = torch.empty_like(perm)
        gpos[perm] = torch.arange(perm.numel(), device=q.device)
        tok_rows[rows_t, rows_k] = gpos.to(torch.int32)
        tok_w[rows_t, rows_k] = rw[rows_t, rows_k]
        self.state = (send_row, sc, rc, tok_rows, tok_w, T)
        return gx, gs, torch.bincount(e, minlength=L), e[perm]

    def combine(self, y):
        send_row, sc, rc, tok_rows, tok_w, T = self.state
        H = y.shape[1]
        back = torch.empty(tok_rows.shape[0], H, dtype=torch.bfloat16, device=y.device)
        if tok_rows.shape[0]:
            _reduce_kernel[(tok_rows.shape[0],)](y, tok_rows, tok_w, back, H=H, K=self.K, BLOCK=512)
        ret = torch.empty(sum(sc), H, dtype=torch.bfloat16, device=y.device)
        dist.all_to_all_single(ret, back, sc, rc)
        out = torch.empty(T, H, dtype=torch.bfloat16, device=y.device)
        if T:  # out[t] = sum over ranks d of ret[send_row[t][d]]: the same reduction kernel, weights 1
            if getattr(self, "_ones", None) is None or self._ones.shape != send_row.shape:
                self._ones = torch.ones_like(send_row, dtype=torch.float32)
            _reduce_kernel[(T,)](ret, send_row, self._ones, out, H=H, K=self.n, BLOCK=512)
        return out


def rank_setup(rank, n, port):
    """A worker's start: its GPU, the NCCL process group on the run_ranks port, and our
    communicator from it."""
    import warpspec
    torch.cuda.set_device(rank)
    dist.init_process_group("nccl", init_method=f"tcp://127.0.0.1:{port}", rank=rank, world_size=n,
                            device_id=torch.device("cuda", rank))
    return warpspec.Communicator.from_process_group()


def worker(rank, n, port, args, queue):
    import warpspec
    comm = rank_setup(rank, n, port)
    rows = []
    sms_list = [int(s) for s in args.sms.split(",")]
    for name, H, E, K, T in CASES:
        L = E // n
        g = torch.Generator(device="cuda").manual_seed(1000 + rank)
        x = (torch.rand(T, H, device="cuda", generator=g) * 2 - 1).to(torch.bfloat16)
        idx = torch.rand(T, E, device="cuda", generator=g).topk(K, dim=1).indices.to(torch.int32)
        w = torch.rand(T, K, device="cuda", generator=g)
        q, s = warpspec.quantize_fp8(x)
        hit = rank_hits(idx, L, n)
        rows_out = int(hit.sum()) - int(hit[:, rank].sum())
        rows_in_est = int(hit.sum())  # rows this rank receives, by symmetry of the routing
        row_d = H + H // 128 * 4  # fp8 payload + scales
        row_c = 2 * H
        # the reference "experts": y = x * (expert + 1); both implementations must agree
        tm = TorchMoE(rank, n, E, fp8=True)
        gx, gs, gcnt, gexp = tm.dispatch(q, s, idx, w)
        y_t = ((gx.float() * gs.repeat_interleave(128, 1)) * (rank * L + gexp[:, None] + 1).float()).to(torch.bfloat16)
        out_t = tm.combine(y_t)
        results = []
        for sms, receive in [(sms, rc) for sms in sms_list for rc in ("copy", "index")]:
            ep = warpspec.MoeDispatcher(comm, hidden=H, experts=E, topk=K, max_tokens=T, payload="fp8", num_sms=sms,
                                        receive=receive)
            r = ep.dispatch(q, idx, w, x_scale=s, sync_counts=True)
            offs = r.host_offsets
            y = torch.zeros(r.max_rows, H, dtype=torch.bfloat16, device="cuda")
            if receive == "index":  # the rows where they arrived, read through the index
                used = r.rows[r.row_index.clamp(min=0).long()]
                xr = used[:, :H].contiguous().view(torch.float8_e4m3fn).float() * \
                    used[:, H:H + 4 * (H // 128)].contiguous().view(torch.float32).repeat_interleave(128, 1)
            else:
                xr = r.x.float() * r.x_scale.repeat_interleave(128, 1)
            for l in range(L):
                a, b = offs[l], offs[l] + int(r.expert_counts[l])
                y[a:b] = (xr[a:b] * (rank * L + l + 1)).to(torch.bfloat16)
            out = ep.combine(y)
            torch.cuda.synchronize()
            err = ((out.float() - out_t.float()).norm() / out_t.float().norm().clamp_min(1e-30)).item()
            td = timed(lambda: ep.dispatch(q, idx, w, x_scale=s), args.iters, comm.barrier)
            tc = timed(lambda: ep.combine(y), args.iters, comm.barrier)
            results.append(("warpspec" if receive == "copy" else "warpspec-index", sms, td, tc, err))
            ep.destroy()
        if T <= LL_MAX_TOKENS:  # the low-latency mode (decode): BF16 rows in, quantised on the fly, masked layout
            ep = warpspec.MoeDispatcher(comm, hidden=H, experts=E, topk=K, max_tokens=T, payload="fp8",
                                        mode="low_latency")
            r = ep.dispatch(x, idx, w)
            m = r.x.shape[1]
            xs = r.x_scale.reshape(L, m, H // 128).repeat_interleave(128, 2)
            y = (r.x.float() * xs * (rank * L + torch.arange(L, device="cuda")[:, None, None] + 1).float()).to(torch.bfloat16)
            out = ep.combine(y)
            torch.cuda.synchronize()
            err = ((out.float() - out_t.float()).norm() / out_t.float().norm().clamp_min(1e-30)).item()
            td = timed(lambda: ep.dispatch(x, idx, w), args.iters, comm.barrier)
            tc = timed(lambda: ep.combine(y), args.iters, comm.barrier)
            results.append(("warpspec-LL", 0, td, tc, err))
            ep.destroy()
        td = timed(lambda: tm.dispatch(q, s, idx, w), args.iters, dist.barrier)
        tc = timed(lambda: tm.combine(y_t), args.iters, dist.barrier)
        results.append(("pytorch", 0, td, tc, 0.0))
        if triton is not None:
            nm = NcclMoE(rank, n, E, H, K)
            gx2, gs2, _, gexp2 = nm.dispatch(q, s, idx, w)
            y2 = ((gx2.float() * gs2.repeat_interleave(128, 1)) * (rank * L + gexp2[:, None] + 1).float()).to(torch.bfloat16)
            out2 = nm.combine(y2)
            torch.cuda.synchronize()
            err2 = ((out2.float() - out_t.float()).norm() / out_t.float().norm().clamp_min(1e-30)).item()
            td = timed(lambda: nm.dispatch(q, s, idx, w), args.iters, dist.barrier)
            tc = timed(lambda: nm.combine(y2), args.iters, dist.barrier)
            results.append(("nccl", 0, td, tc, err2))
        for impl, sms, td, tc, err in results:
            rows.append({"case": name, "impl": impl, "sms": sms, "rank": rank, "dispatch_us": td * 1e3,
                         "combine_us": tc * 1e3, "nvlink_dispatch_GBs": rows_out * row_d / (td * 1e6),
                         "nvlink_combine_GBs": rows_out * row_c / (tc * 1e6),
                         "logical_dispatch_GBs": rows_in_est * row_d / (td * 1e6),
                         "logical_combine_GBs": rows_in_est * row_c / (tc * 1e6), "rel_err_vs_pytorch": err})
    comm.destroy()
    dist.destroy_process_group()
    queue.put(rows)


def run_ranks(worker, ranks, args, timeout):
    """worker(rank, ranks, port, args, queue) in one process per GPU (spawned: the worker
    is imported by its module's name); the rows every rank put on the queue, or None
    (said why) without enough GPUs."""
    if torch.cuda.device_count() < ranks:
        print(f"needs {ranks} GPUs, found {torch.cuda.device_count()}")
        return None
    import torch.multiprocessing as mp
    with socket.socket() as so:
        so.bind(("127.0.0.1", 0))
        port = so.getsockname()[1]
    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    procs = [ctx.Process(target=worker, args=(r, ranks, port, args, queue)) for r in range(ranks)]
    for p in procs:
        p.start()
    rows = []
    for _ in procs:
        rows += queue.get(timeout=timeout)
    for p in procs:
        p.join()
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="warpspec bench moe-a2a")
    ap.add_argument("--ranks", type=int, default=2)
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--sms", default="8,16,24,32,64")
    ap.add_argument("--csv", default=None)
    args = ap.parse_args(argv)
    rows = run_ranks(worker, args.ranks, args, 1800)
    if rows is None:
        return 1
    # the slowest rank of each (case, impl, sms)
    worst = {}
    for r in rows:
        k = (r["case"], r["impl"], r["sms"])
        if k not in worst or r["dispatch_us"] + r["combine_us"] > worst[k]["dispatch_us"] + worst[k]["combine_us"]:
            worst[k] = r
    print(f"{torch.cuda.get_device_name(0)} x {args.ranks}, torch {torch.__version__}")
    print(f"{'case':24} {'impl':9} {'SMs':>4} {'dispatch us':>12} {'combine us':>11} {'NVLink d/c GB/s':>16} "
          f"{'logical d/c GB/s':>17} {'vs torch d/c':>13} {'rel err':>8}")
    for (case, impl, sms), r in worst.items():
        t = worst[(case, "pytorch", 0)]  # ratios against the PyTorch version; the NCCL row is beside it
        print(f"{case:24} {impl:9} {sms or '-':>4} {r['dispatch_us']:12.1f} {r['combine_us']:11.1f} "
              f"{r['nvlink_dispatch_GBs']:7.1f}/{r['nvlink_combine_GBs']:<7.1f} "
              f"{r['logical_dispatch_GBs']:8.1f}/{r['logical_combine_GBs']:<8.1f} "
              f"{t['dispatch_us'] / r['dispatch_us']:6.2f}x/{t['combine_us'] / r['combine_us']:<5.2f}x "
              f"{r['rel_err_vs_pytorch']:8.1e}")
    if args.csv:
        with open(args.csv, "w", newline="") as f:
            wr = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            wr.writeheader()
            wr.writerows(sorted(rows, key=lambda r: (r["case"], r["impl"], r["sms"], r["rank"])))
    return 0


if __name__ == "__main__":
    sys.exit(main())
