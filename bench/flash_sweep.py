"""flash_sweep.py WHAT [--quick] [--iters N] - flash attention under several knob settings,
every setting timed in rotation with the bench's own timing (bench_attention._time_rotated:
one call of each per iteration, each timed call after an untimed call of itself, an L2
flush before it), cuDNN SDPA beside where WHAT asks for it. The sweeps behind session 29's
tables (docs/benchmarks.md, attention):

  o-store     WARPSPEC_ATTN_O_STORE tma / rows under the default schedule, tma again (the
              rotation's own spread), the overlap schedule with both stores, plain with
              tma, and cuDNN; d 128 and 64, S 512-8192 (batch x S = 16384), both masks.
              Every output is checked against the rows form's (bit-equal expected for
              the same schedule; any difference is printed).
  head-group  WARPSPEC_ATTN_HEAD_GROUP forced to 12, 17, 24, 33, 48, 66 and 1000000 (one
              group) beside the default, causal only, the shapes where the groups matter.
  tile-rows   d 64: the default kernel against WARPSPEC_ATTN_TILE_ROWS=192 (the tall tile,
              three math warpgroups, opt-in since session 29) and cuDNN, S 512-16384,
              both masks; outputs checked against the default's.
  wg-blocks   WARPSPEC_ATTN_WG_BLOCKS tile / own (each warpgroup computes only the key
              blocks its own rows see, of the last one only its first 64 keys where they
              suffice: no work on the rows past a sequence's end in its last tile, less on
              the causal diagonal; opt-in since session 30) and cuDNN: d 64 on the tall tile
              (and the 128-row kernel beside), S 512-16384, both masks; d 128 causal, plain
              schedule, S 512-2048. Own's output against tile's: any difference printed.

Needs PyTorch and the package (PYTHONPATH=python WARPSPEC_LIBRARY=BUILD/libwarpspec.so).
Prints one line per shape: TFLOPS per setting, then ratios."""
import argparse
import sys

from warpspec.bench_attention import _knobs, _time_rotated


def _rel_err(a, ref):
    return ((a.double() - ref.double()).norm() / ref.double().norm()).item()


def _rotation(lib, q, k, v, causal, envs, reset):
    """One shape's candidates for _time_rotated: our kernel under each env of envs (its
    output written once first into a NaN-filled tensor, returned in order), then cuDNN's
    SDPA with the knobs of reset. lib: (torch, warpspec, F, sdpa_kernel, SDPBackend)."""
    torch, warpspec, F, sdpa_kernel, SDPBackend = lib
    outs, cands = [], []
    for env in envs:
        _knobs(warpspec, env)()
        out = torch.full(q.shape[:-1] + v.shape[-1:], float("nan"), dtype=q.dtype, device=q.device)
        warpspec.attention(q, k, v, causal=causal, out=out)
        outs.append(out)
        cands.append((_knobs(warpspec, env), lambda out=out: warpspec.attention(q, k, v, causal=causal, out=out)))
    qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))

    def cudnn():
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
    cands.append((_knobs(warpspec, reset), cudnn))
    return outs, cands


def _o_store(args, lib, flush, time_rotated):
    torch, warpspec = lib[:2]
    shapes = []
    for d in (128, 64):
        for s in (1024, 4096) if args.quick else (512, 1024, 2048, 4096, 8192):
            for h in (32,) if d == 64 or args.quick else (16, 32):
                shapes.append((16384 // s, s, h, d))
    st, sc = "WARPSPEC_ATTN_O_STORE", "WARPSPEC_ATTN_SCHEDULE"
    cfg = [("tma", {st: "tma", sc: None}), ("rows", {st: "rows", sc: None}), ("tma-again", {st: "tma", sc: None}),
           ("overlap-tma", {st: "tma", sc: "overlap"}), ("overlap-rows", {st: "rows", sc: "overlap"}),
           ("plain-tma", {st: "tma", sc: "plain"})]
    print("B S H d causal | " + " ".join(n for n, _ in cfg) + " cudnn | tma/rows cudnn/tma (time ratios)")
    for b, s, h, d in shapes:
        q, k, v = ((torch.rand(b, s, h, d, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
        for causal in (False, True):
            flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            _knobs(warpspec, {st: "rows", sc: None})()
            ref = warpspec.attention(q, k, v, causal=causal)
            outs, cands = _rotation(lib, q, k, v, causal, [env for _, env in cfg], {st: None, sc: None})
            for (name, env), out in zip(cfg, outs):
                err = _rel_err(out, ref)
                if err >= 1e-2:
                    raise SystemExit(f"{name} at B{b} S{s} H{h} d{d} causal {causal}: relative error {err:.1e}")
                if err and env[sc] is None:
                    print(f"  {name}: not bit-equal to rows (relative error {err:.1e})")
            ts = time_rotated(cands, args.iters, torch, flush)
            print(f"{b} {s} {h} {d} {int(causal)} | " + " ".join(f"{flops / t / 1e9:.0f}" for t in ts) +
                  f" | {ts[1] / ts[0]:.3f} {ts[-1] / ts[0]:.3f}", flush=True)
    _knobs(warpspec, {st: None, sc: None})()


def _head_group(args, torch, warpspec, flush, time_rotated):
    shapes = [(4, 4096, 16, 64), (4, 4096, 32, 64), (2, 8192, 16, 64), (2, 8192, 32, 64), (8, 2048, 32, 64),
              (4, 4096, 16, 128), (2, 8192, 16, 128), (16, 1024, 32, 128), (8, 2048, 32, 128), (1, 16384, 32, 64),
              (4, 4096, 32, 128), (2, 8192, 32, 128)]
    if args.quick:
        shapes = shapes[5:7]
    sizes = [None, 12, 17, 24, 33, 48, 66, 1000000]
    hg = "WARPSPEC_ATTN_HEAD_GROUP"
    print("causal, B S H d | " + " ".join("default" if v is None else str(v) for v in sizes) + " (TFLOPS)")
    for b, s, h, d in shapes:
        q, k, v = ((torch.rand(b, s, h, d, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
        out = warpspec.attention(q, k, v, causal=True)
        flops = 4.0 * b * h * s * s * d / 2
        cands = [(_knobs(warpspec, {hg: x}), lambda: warpspec.attention(q, k, v, causal=True, out=out)) for x in sizes]
        ts = time_rotated(cands, args.iters, torch, flush)
        print(f"{b} {s} {h} {d} | " + " ".join(f"{flops / t / 1e9:.0f}" for t in ts), flush=True)
    _knobs(warpspec, {hg: None})()


def _tile_rows(args, lib, flush, time_rotated):
    torch, warpspec = lib[:2]
    tr = "WARPSPEC_ATTN_TILE_ROWS"
    print("d 64, B S H causal | default tall cudnn | tall/default cudnn/tall (time ratios)")
    for s in (1024, 4096) if args.quick else (512, 1024, 2048, 4096, 8192, 16384):
        for h in (16, 32):
            b = 16384 // s
            q, k, v = ((torch.rand(b, s, h, 64, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
            for causal in (False, True):
                flops = 4.0 * b * h * s * s * 64 / (2 if causal else 1)
                (ref, tall), cands = _rotation(lib, q, k, v, causal, [{tr: None}, {tr: 192}], {tr: None})
                err = _rel_err(tall, ref)
                if not err < 1e-2:
                    raise SystemExit(f"tall tile at B{b} S{s} H{h} causal {causal}: relative error {err:.1e}")
                ts = time_rotated(cands, args.iters, torch, flush)
                print(f"{b} {s} {h} {int(causal)} | " + " ".join(f"{flops / t / 1e9:.0f}" for t in ts) +
                      f" | {ts[0] / ts[1]:.3f} {ts[2] / ts[1]:.3f}", flush=True)
    _knobs(warpspec, {tr: None})()


def _wg_blocks(args, lib, flush, time_rotated):
    torch, warpspec = lib[:2]
    wb, tr = "WARPSPEC_ATTN_WG_BLOCKS", "WARPSPEC_ATTN_TILE_ROWS"
    cfg = [("tile", {wb: "tile", tr: 192}), ("own", {wb: "own", tr: 192}), ("128", {wb: None, tr: 128})]
    print("d 64, B S H causal | tall-tile tall-own 128-rows cudnn | own/tile own/128 cudnn/own (time ratios)")
    for s in (512, 1024) if args.quick else (512, 1000, 1024, 2048, 4096, 8192, 16384):
        for h in (16, 32):
            b = max(1, 16384 // s)
            q, k, v = ((torch.rand(b, s, h, 64, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
            for causal in (False, True):
                flops = 4.0 * b * h * s * s * 64 / (2 if causal else 1)
                outs, cands = _rotation(lib, q, k, v, causal, [env for _, env in cfg], {wb: None, tr: None})
                _same(torch, outs[0], outs[1], f"d 64 B{b} S{s} H{h} causal {causal}")
                ts = time_rotated(cands, args.iters, torch, flush)
                print(f"{b} {s} {h} {int(causal)} | " + " ".join(f"{flops / t / 1e9:.0f}" for t in ts) +
                      f" | {ts[0] / ts[1]:.3f} {ts[2] / ts[1]:.3f} {ts[3] / ts[1]:.3f}", flush=True)
    sc = "WARPSPEC_ATTN_SCHEDULE"
    print("d 128 causal, plain schedule, B S H | tile own cudnn | own/tile cudnn/own (time ratios)")
    for s in (512,) if args.quick else (512, 1000, 1024, 2048):
        for h in (16, 32):
            b = max(1, 16384 // s)
            q, k, v = ((torch.rand(b, s, h, 128, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
            flops = 4.0 * b * h * s * s * 128 / 2
            outs, cands = _rotation(lib, q, k, v, True, [{wb: mode, sc: "plain"} for mode in ("tile", "own")],
                                    {wb: None, sc: None})
            _same(torch, outs[0], outs[1], f"d 128 B{b} S{s} H{h} causal")
            ts = time_rotated(cands, args.iters, torch, flush)
            print(f"{b} {s} {h} | " + " ".join(f"{flops / t / 1e9:.0f}" for t in ts) +
                  f" | {ts[0] / ts[1]:.3f} {ts[2] / ts[1]:.3f}", flush=True)
    _knobs(warpspec, {wb: None, tr: None, sc: None})()


def _same(torch, a, b, what):
    """Print where two outputs differ (own against tile: equal up to the order of sums); stop
    on a relative error of 1e-2 or more."""
    if torch.equal(a, b):
        return
    err = ((a.double() - b.double()).norm() / a.double().norm()).item()
    print(f"  {what}: own differs from tile, relative error {err:.1e}")
    if not err < 1e-2:
        raise SystemExit(f"{what}: own against tile, relative error {err:.1e}")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("what", choices=("o-store", "head-group", "tile-rows", "wg-blocks"))
    ap.add_argument("--quick", action="store_true", help="a few shapes only")
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args(argv)
    import torch
    import torch.nn.functional as F
    from torch.nn.attention import SDPBackend, sdpa_kernel

    import warpspec
    print(f"device: {torch.cuda.get_device_name()}; {args.what}")
    flush = torch.empty(256 << 20, dtype=torch.uint8, device="cuda")
    lib = (torch, warpspec, F, sdpa_kernel, SDPBackend)
    sweeps = {"o-store": _o_store, "tile-rows": _tile_rows, "wg-blocks": _wg_blocks}
    if args.what == "head-group":
        _head_group(args, torch, warpspec, flush, _time_rotated)
    else:
        sweeps[args.what](args, lib, flush, _time_rotated)
    return 0


if __name__ == "__main__":
    sys.exit(main())
