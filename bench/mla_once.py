"""mla_once.py WHAT ARGS... [--calls N] - one MLA shape run N times (default 3) between
cudaProfilerStart and Stop, after one warm-up call, for a profiler to watch
(tests/gpu/profile_mla.sh: `ncu --profile-from-start off` sees only those calls):

  prefill S_KV           sparse prefill, the seed's shape: S_q 4096, H 128, top-2048 of
                         S_KV rows (indices drawn without -1)
  decode B LEN FP8 [H]   paged decode, H heads (default 128; 16 or 32: a tensor-parallel
                         shard, the memory-bound regime), s_q 1, B requests of LEN cached
                         tokens in pages of 64 (FP8 1: the 656-byte FP8 rows), pages in
                         random order
  sparse-decode B FP8    sparse decode (DeepSeek V3.2): H 128, s_q 1, top-2048 rows of a
                         cache of 16384 pages of 64 per request

Random data every run (torch's default generator, seeded 0 for repeatable shapes). The
knobs are the environment's (WARPSPEC_*, read once)."""
import sys


def main(argv):
    args, calls = list(argv[1:]), 3
    if "--calls" in args:
        i = args.index("--calls")
        calls = int(args[i + 1])
        del args[i:i + 2]
    if not args or calls < 1:
        print(__doc__)
        return 2
    import torch

    import warpspec
    torch.manual_seed(0)
    what, nums = args[0], [int(x) for x in args[1:]]
    bf = torch.bfloat16
    if what == "prefill" and len(nums) == 1:
        s_kv = nums[0]
        q = torch.randn(4096, 128, 576, device="cuda").to(bf)
        kv = torch.randn(s_kv, 576, device="cuda").to(bf)
        idx = torch.randint(0, s_kv, (4096, 2048), device="cuda", dtype=torch.int32)
        run = lambda: warpspec.mla_sparse_prefill(q, kv, idx)  # noqa: E731
    elif what == "decode" and len(nums) in (3, 4):
        b, n, fp8 = nums[:3]
        heads = nums[3] if len(nums) == 4 else 128
        pages = b * ((n + 63) // 64)
        cache = torch.randn(pages, 64, 576, device="cuda").to(bf)
        if fp8:
            cache = warpspec.mla_kv_quantize_fp8(cache)
        table = torch.randperm(pages, device="cuda").to(torch.int32).view(b, -1)
        lens = torch.full((b,), n, device="cuda", dtype=torch.int32)
        q = torch.randn(b, 1, heads, 576, device="cuda").to(bf)
        run = lambda: warpspec.mla_decode(q, cache, table, lens, max_seqlen=n)  # noqa: E731
    elif what == "sparse-decode" and len(nums) == 2:
        b, fp8 = nums
        cache = torch.randn(16384, 64, 576, device="cuda").to(bf)
        if fp8:
            cache = warpspec.mla_kv_quantize_fp8(cache)
        idx = torch.randint(0, 16384 * 64, (b, 1, 2048), device="cuda", dtype=torch.int32)
        q = torch.randn(b, 1, 128, 576, device="cuda").to(bf)
        run = lambda: warpspec.mla_sparse_decode(q, cache, idx)  # noqa: E731
    else:
        print(__doc__)
        return 2
    out = run()  # warm-up (plans, tensor maps), outside the profiled range
    torch.cuda.synchronize()
    torch.cuda.profiler.start()
    for _ in range(calls):
        out = run()
    torch.cuda.synchronize()
    torch.cuda.profiler.stop()
    o = out[0] if isinstance(out, (tuple, list)) else out
    print(f"mla_once {what} {' '.join(map(str, nums))}: {calls} calls, output finite: "
          f"{bool(torch.isfinite(o.float()).all())}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
