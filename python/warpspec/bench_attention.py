"""warpspec bench attention: ws_attn_forward against PyTorch's scaled_dot_product_attention
with the cuDNN backend and with the flash backend, in the same run on the same GPU.

    python -m warpspec bench attention [--csv FILE] [--quick] [--iters 20]

Shapes (issue 14): batch x seq = 16k tokens (S 512 .. 16384), heads 16 and 32, head dim
64 and 128, causal and not. Every backend's output is first checked against ours
(relative error; a backend that fails or is unavailable is reported as such). Times are
medians of CUDA-event timings after warm-ups, with an L2 flush (a 256 MB write) before
each. TFLOPS = 4 x B x H x Sq x Sk x D / t (halved for causal), as FlashAttention counts.
"""

import argparse
import csv
import statistics
import sys


def _time(fn, iters, torch, flush):
    for _ in range(3):
        fn()
    ts = []
    for _ in range(iters):
        flush.zero_()
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        ts.append(a.elapsed_time(b))
    return statistics.median(ts)


def main(argv=None):
    ap = argparse.ArgumentParser(prog="warpspec bench attention")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--quick", action="store_true", help="only S 4096 and 8192, d 128")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import warpspec
    if not torch.cuda.is_available():
        print("bench attention: no GPU", file=sys.stderr)
        return 1
    dev = torch.cuda.get_device_name()
    print(f"device: {dev}; torch {torch.__version__}; warpspec {warpspec.__version__}")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    shapes = []
    for d in (128,) if args.quick else (64, 128):
        for s in (4096, 8192) if args.quick else (512, 1024, 2048, 4096, 8192, 16384):
            for h in (16,) if args.quick else (16, 32):
                shapes.append((16384 // s, s, h, d))
    rows = []
    for (b, s, h, d) in shapes:
        q, k, v = ((torch.rand(b, s, h, d, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # SDPA's [B, H, S, D] views of the same data
        for causal in (False, True):
            flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            ours = warpspec.attention(q, k, v, causal=causal)
            res = {"B": b, "S": s, "H": h, "D": d, "causal": int(causal)}
            t = _time(lambda: warpspec.attention(q, k, v, causal=causal, out=ours), args.iters, torch, flush)
            res["warpspec_ms"], res["warpspec_tflops"] = t, flops / t / 1e9
            for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                try:
                    with sdpa_kernel(backend):
                        ref = F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal).transpose(1, 2)
                        err = ((ours.double() - ref.double()).norm() / ref.double().norm()).item()
                        t = _time(lambda: F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal), args.iters,
                                  torch, flush)
                    res[f"{name}_ms"], res[f"{name}_tflops"], res[f"{name}_relerr"] = t, flops / t / 1e9, err
                except Exception as e:  # not available for this shape or build: say so
                    res[f"{name}_ms"] = res[f"{name}_tflops"] = float("nan")
                    res[f"{name}_relerr"] = float("nan")
                    print(f"  {name} unavailable at B{b} S{s} H{h} d{d}: {type(e).__name__}: {str(e)[:120]}")
            rows.append(res)
            print(f"B{b:<3d} S{s:<6d} H{h:<3d} d{d:<4d} {'causal' if causal else 'full  '}  "
                  f"warpspec {res['warpspec_ms']:8.3f} ms {res['warpspec_tflops']:6.1f} TF | "
                  f"cuDNN {res['cudnn_ms']:8.3f} ms {res['cudnn_tflops']:6.1f} TF (x{res['cudnn_ms'] / res['warpspec_ms']:.2f}, "
                  f"err {res['cudnn_relerr']:.1e}) | flash {res['flash_ms']:8.3f} ms {res['flash_tflops']:6.1f} TF "
                  f"(x{res['flash_ms'] / res['warpspec_ms']:.2f})", flush=True)
    if args.csv and rows:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
