#!/usr/bin/env python3
"""torch_grouped_mm.py [CSV] - the extra baseline column of `warpspec bench gemm`:
PyTorch's grouped GEMMs on the same grouped shapes (8 experts x M rows, (N, K) =
(4096, 7168) and (7168, 2048)), BF16 through torch._grouped_mm and FP8 through
torch._scaled_grouped_mm where this PyTorch offers it. Medians of 20 CUDA-event timings
after warm-up; TFLOPS = 2 * G * M * N * K / t. Prints "skipped" for an op that is missing
or refuses the shape, so the GPU script never fails on it."""
import statistics
import sys

import torch


def timed(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        torch.cuda.synchronize()
        times.append(a.elapsed_time(b))
    return statistics.median(times)


def main():
    out = open(sys.argv[1], "w") if len(sys.argv) > 1 else None
    if out:
        out.write("op,groups,m_per_group,n,k,ms,tflops\n")
    dev = torch.device("cuda")
    print(f"torch {torch.__version__} on {torch.cuda.get_device_name(0)}")
    experts = 8
    for n, k in ((4096, 7168), (7168, 2048)):
        for m in (64, 512, 2048, 8192):
            offs = torch.arange(1, experts + 1, device=dev, dtype=torch.int32) * m
            flop = 2.0 * experts * m * n * k
            x = torch.randn(experts * m, k, device=dev, dtype=torch.bfloat16)
            w = torch.randn(experts, n, k, device=dev, dtype=torch.bfloat16)
            rows = []
            try:
                ms = timed(lambda: torch._grouped_mm(x, w.transpose(-2, -1), offs=offs))
                rows.append(("torch._grouped_mm bf16", ms))
            except Exception as e:  # noqa: BLE001 - report, do not fail
                print(f"  bf16 {experts}x{m} {n}x{k}: skipped ({type(e).__name__}: {str(e)[:80]})")
            try:
                xq = x.to(torch.float8_e4m3fn)
                wq = w.to(torch.float8_e4m3fn)
                sx = torch.ones(experts * m, device=dev, dtype=torch.float32)
                sw = torch.ones(experts, n, device=dev, dtype=torch.float32)
                ms = timed(lambda: torch._scaled_grouped_mm(xq, wq.transpose(-2, -1), sx, sw, offs=offs,
                                                           out_dtype=torch.bfloat16))
                rows.append(("torch._scaled_grouped_mm fp8 (row-wise scales)", ms))
            except Exception as e:  # noqa: BLE001
                print(f"  fp8 {experts}x{m} {n}x{k}: skipped ({type(e).__name__}: {str(e)[:80]})")
            for name, ms in rows:
                print(f"  {name:48s} {experts} x {m:5d} {n:5d} {k:5d} {ms:9.3f} ms {flop / ms / 1e9:8.1f} TFLOPS")
                if out:
                    out.write(f"{name},{experts},{m},{n},{k},{ms:.4f},{flop / ms / 1e9:.1f}\n")


if __name__ == "__main__":
    main()
