"""attn_once.py BACKEND B S H D CAUSAL [CALLS] - one flash-attention shape run CALLS times
(default 5) by BACKEND (`warpspec`: warpspec.attention; `cudnn` / `flash`: PyTorch SDPA with
that backend), on random BF16 data, for a profiler to watch (tests/gpu/profile_flash.sh):
the CALLS calls run between cudaProfilerStart and Stop, after one warm-up call.
Prints the backend's relative error against warpspec's output, so a profiled run is also a
checked one."""
import sys


def main(argv):
    if len(argv) not in (7, 8):
        print(__doc__)
        return 2
    backend, (b, s, h, d, causal) = argv[1], map(int, argv[2:7])
    calls = int(argv[7]) if len(argv) == 8 else 5
    if calls < 1:
        print("attn_once.py: CALLS must be at least 1")
        return 2
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import warpspec
    q, k, v = ((torch.rand(b, s, h, d, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
    ours = warpspec.attention(q, k, v, causal=bool(causal))
    if backend == "warpspec":
        run = lambda: warpspec.attention(q, k, v, causal=bool(causal), out=ours)  # noqa: E731
    else:
        which = {"cudnn": SDPBackend.CUDNN_ATTENTION, "flash": SDPBackend.FLASH_ATTENTION}[backend]
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

        def run():
            with sdpa_kernel(which):
                return F.scaled_dot_product_attention(qt, kt, vt, is_causal=bool(causal)).transpose(1, 2)
    out = run()  # warm-up (cuDNN builds its plan here), outside the profiled range
    torch.cuda.synchronize()
    torch.cuda.profiler.start()  # ncu --profile-from-start off sees these calls only
    for _ in range(calls):
        out = run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    err = ((out.double() - ours.double()).norm() / ours.double().norm()).item()
    print(f"{backend} B{b} S{s} H{h} d{d} causal {causal}: {calls} calls, relative error against warpspec {err:.1e}")
    return 0 if err < 1e-2 else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))
