"""warpspec bench attention: ws_attn_forward against PyTorch's scaled_dot_product_attention
with the cuDNN backend and with the flash backend, in the same run on the same GPU.

    python -m warpspec bench attention [--csv FILE] [--quick] [--iters 20]

Shapes (issue 14): batch x seq = 16k tokens (S 512 .. 16384), heads 16 and 32, head dim
64 and 128, causal and not. Then sparse MLA prefill at the seed's shape (S 4096, H 128,
dims 576 / 512, topk 2048, S_kv 8192 .. 131072; TFLOPS = 2 S H topk (576 + 512) / t)
against a PyTorch composite (gather, bmm, fp32 softmax, bmm; 256 queries at a time so the
gathered rows fit), with the seed's published H800 figures printed beside it. Then MLA
decode (128 heads, pages of 64) against a PyTorch composite, with the bytes moved per
second next to a 1 GiB device-to-device copy measured in the same run, with the BF16
cache and with the FP8 one (656-byte rows, mla_kv_quantize_fp8). Then NSA selected-block
attention (T 16384, 64 / 4 heads, d 128, top-16 blocks of 64, selections shared by the 64
tokens of a block, and random per token) against a PyTorch composite (gather the selected
keys, bmm, masked fp32 softmax, bmm; 256 tokens at a time) and the dense causal flash kernel
on the same q, k, v (TFLOPS on the useful work). --only picks one part (flash, mla, decode,
nsa). Every backend's output is first checked against ours
(relative error; a backend that fails or is unavailable is reported as such). Times are
medians of CUDA-event timings after warm-ups, with an L2 flush (a 256 MB write) before
each; the flash rows time our default, each schedule, cuDNN and flash in rotation (one
call of each per iteration, starting one further each time, each timed call after an
untimed call of itself), so that neither the GPU's clock drift over the run nor the
candidate run just before favours one of them (session 28: timed one after the other,
our default schedule, first, read up to 10% above the same kernel timed fifth; session
29: in rotation without the lead-in call, the candidate after cuDNN read up to 13% below
the same kernel timed after ours). TFLOPS = 4 x B x H x Sq x Sk x D / t (halved for causal), as FlashAttention counts.
"""

import argparse
import csv
import os
import statistics
import sys


def _time_rotated(cands, iters, torch, flush):
    """Medians of several candidates timed in rotation: cands is a list of (setup, fn);
    every iteration times each fn once (its setup first, outside the timing), starting one
    candidate further each time, so that the clock's drift over a long run (power, heat)
    falls on all of them alike instead of on the ones timed last. Each timed call follows
    an untimed call of the same fn (then the L2 flush): a call timed right after another
    candidate's ran up to 13% slow (session 29, H200: the candidate after cuDNN's kernel,
    the same kernel timed elsewhere in the rotation faster), so each is timed after
    itself, as a user's repeated calls run."""
    for setup, fn in cands:
        setup()
        for _ in range(3):
            fn()
    ts = [[] for _ in cands]
    for i in range(iters):
        for j in range(len(cands)):
            c = (i + j) % len(cands)
            setup, fn = cands[c]
            setup()
            fn()  # the lead-in: the call before the timed one is the same op
            flush.zero_()
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            fn()
            b.record()
            b.synchronize()
            ts[c].append(a.elapsed_time(b))
    return [statistics.median(t) for t in ts]


def _knobs(warpspec, env):
    """A setup for _time_rotated: the WARPSPEC_* variables in env set (a value of None:
    unset, the default), then read again by the library."""
    def setup():
        for name, value in env.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = str(value)
        warpspec.reload_knobs()  # the library reads its knobs once
    return setup


def _schedule(warpspec, sched):
    """_knobs for WARPSPEC_ATTN_SCHEDULE alone (None: the default)."""
    return _knobs(warpspec, {"WARPSPEC_ATTN_SCHEDULE": sched})


def _time(fn, iters, torch, flush):
    """The median of one candidate's timings (_time_rotated of one)."""
    return _time_rotated([(lambda: None, fn)], iters, torch, flush)[0]


# The seed's table (H800, another GPU; ../shared/seeds, tle.md): ms per S_kv for FlashMLA,
# TileLang seesaw and TLE-FlashMLA-Prefill (the TLE pipe kernel).
SEED_H800_MS = {8192: (3.850, 5.160, 4.273), 32768: (4.117, 5.577, 4.834), 65536: (4.348, 5.786, 5.305),
                98304: (4.447, 5.873, 5.599), 131072: (4.534, 5.916, 5.887)}


def _mla_composite(q, kv, idx, scale, torch, chunk=256):
    """The PyTorch user's sparse MLA: per 256 queries, gather their rows, S = q K^T (bf16
    bmm), masked fp32 softmax, O = P V (bf16 bmm)."""
    s_q, h, _ = q.shape
    out = torch.empty(s_q, h, 512, dtype=torch.bfloat16, device=q.device)
    s_kv = kv.shape[0]
    for c0 in range(0, s_q, chunk):
        ii = idx[c0:c0 + chunk]
        valid = (ii >= 0) & (ii < s_kv)
        rows = kv[ii.clamp(0, s_kv - 1).long()]                       # [c, topk, 576]
        sc = torch.bmm(q[c0:c0 + chunk], rows.transpose(1, 2)).float() * scale
        sc.masked_fill_(~valid[:, None, :], float("-inf"))
        p = torch.softmax(sc, dim=-1).nan_to_num_(0.0).to(torch.bfloat16)
        out[c0:c0 + chunk] = torch.bmm(p, rows[..., :512])
    return out


def _bench_mla(args, torch, warpspec, flush):
    s_q, h, topk = 4096, 128, 2048
    rows = []
    for s_kv in (8192, 32768) if args.quick else (8192, 32768, 65536, 98304, 131072):
        q = (torch.rand(s_q, h, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
        kv = (torch.rand(s_kv, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
        idx = torch.stack([torch.randperm(s_kv, device="cuda")[:topk] for _ in range(s_q)]).to(torch.int32)
        scale = 1.0 / 576 ** 0.5
        flops = 2.0 * s_q * h * topk * (576 + 512)
        res = {"S": s_q, "H": h, "topk": topk, "S_kv": s_kv}
        try:
            ours = warpspec.mla_sparse_prefill(q, kv, idx)
            t = _time(lambda: warpspec.mla_sparse_prefill(q, kv, idx, out=ours), max(5, args.iters // 4), torch, flush)
            res["warpspec_ms"], res["warpspec_tflops"] = t, flops / t / 1e9
        except Exception as e:
            res["warpspec_ms"] = res["warpspec_tflops"] = float("nan")
            print(f"  warpspec mla failed: {type(e).__name__}: {str(e)[:200]}")
            ours = None
        ref = _mla_composite(q, kv, idx, scale, torch)
        res["relerr"] = (((ours.double() - ref.double()).norm() / ref.double().norm()).item()
                         if ours is not None else float("nan"))
        t = _time(lambda: _mla_composite(q, kv, idx, scale, torch), 3, torch, flush)
        res["torch_ms"], res["torch_tflops"] = t, flops / t / 1e9
        fm, tl, tle = SEED_H800_MS[s_kv]
        res.update({"flashmla_h800_ms": fm, "tilelang_h800_ms": tl, "tle_h800_ms": tle})
        rows.append(res)
        print(f"mla S{s_q} H{h} topk{topk} S_kv {s_kv:<6d}  warpspec {res['warpspec_ms']:7.3f} ms "
              f"{res['warpspec_tflops']:6.1f} TF | PyTorch composite {res['torch_ms']:8.3f} ms "
              f"(x{res['torch_ms'] / res['warpspec_ms']:.1f}, err {res['relerr']:.1e}) | seed's H800 table, "
              f"another GPU: FlashMLA {fm} ms, TileLang {tl}, TLE {tle}", flush=True)
        del q, kv, idx, ref, ours
        torch.cuda.empty_cache()
    return rows


def _decode_composite(q, cache, table, lens, torch, scale):
    """The PyTorch user's MLA decode: per sequence, gather its pages, S = q K^T, softmax
    (causal over the s_q speculative tokens), O = P V."""
    b, s_q, h, _ = q.shape
    page = cache.shape[1]
    out = torch.empty(b, s_q, h, 512, dtype=torch.bfloat16, device=q.device)
    for i in range(b):
        n = int(lens[i])
        kv = cache[table[i, :(n + page - 1) // page].long()].reshape(-1, 576)[:n]      # [n, 576]
        sc = torch.matmul(q[i].reshape(s_q * h, 576), kv.T).float().view(s_q, h, n) * scale
        if s_q > 1:
            j = torch.arange(n, device=q.device)
            lim = n - s_q + torch.arange(s_q, device=q.device)
            sc.masked_fill_((j[None, :] > lim[:, None])[:, None, :], float("-inf"))
        p = torch.softmax(sc, dim=-1).to(torch.bfloat16)
        out[i] = torch.matmul(p.view(s_q * h, n), kv[:, :512]).view(s_q, h, 512)
    return out


def _bench_decode(args, torch, warpspec, flush):
    """MLA decode (DeepSeek-V3: 128 heads, 576 / 512, pages of 64) against a PyTorch
    composite, and the HBM bandwidth of a device-to-device copy in the same run."""
    big = torch.empty(1 << 30, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(big)
    t = _time(lambda: dst.copy_(big), 10, torch, flush)
    copy_gbs = 2 * big.numel() / t / 1e6
    del big, dst
    print(f"HBM: device-to-device copy of 1 GiB {copy_gbs:.0f} GB/s (read + write)")
    rows = []
    page = 64
    for (b, s_q, n, fp8) in ((64, 1, 4096, 0), (128, 1, 4096, 0), (128, 2, 8192, 0), (8, 1, 32768, 0),
                             (1, 1, 65536, 0), (128, 1, 4096, 1), (128, 2, 8192, 1), (8, 1, 32768, 1)):
        if args.quick and b * n > 128 * 4096:
            continue
        h = 128
        pages = b * ((n + page - 1) // page)
        cache = (torch.rand(pages, page, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
        table = torch.randperm(pages, device="cuda").to(torch.int32).view(b, -1)
        lens = torch.full((b,), n, dtype=torch.int32, device="cuda")
        q = (torch.rand(b, s_q, h, 576, device="cuda") * 2 - 1).to(torch.bfloat16)
        scale = 1.0 / 576 ** 0.5
        res = {"B": b, "s_q": s_q, "len": n, "H": h, "cache": "fp8" if fp8 else "bf16", "copy_gbs": copy_gbs}
        moved = b * n * (656 if fp8 else 576 * 2) + q.numel() * 2 + b * s_q * h * 512 * 2
        call_cache = cache
        if fp8:  # the FP8 rows; the composite gets their exact BF16 values
            call_cache = warpspec.mla_kv_quantize_fp8(cache)
            r = call_cache.view(-1, 656)
            sc8 = r[:, 512:528].contiguous().view(torch.float32).repeat_interleave(128, dim=1)
            lat = r[:, :512].contiguous().view(torch.float8_e4m3fn).float() * sc8
            cache = torch.cat([lat, r[:, 528:].contiguous().view(torch.bfloat16).float()], 1).to(torch.bfloat16)
            cache = cache.view(pages, page, 576)
            del r, sc8, lat
        flops = 2.0 * b * n * s_q * h * (576 + 512)
        try:
            ours = warpspec.mla_decode(q, call_cache, table, lens, max_seqlen=n)
            t = _time(lambda: warpspec.mla_decode(q, call_cache, table, lens, max_seqlen=n, out=ours), args.iters, torch,
                      flush)
            res.update(warpspec_ms=t, warpspec_gbs=moved / t / 1e6, warpspec_tflops=flops / t / 1e9)
        except Exception as e:
            ours = None
            res.update(warpspec_ms=float("nan"), warpspec_gbs=float("nan"), warpspec_tflops=float("nan"))
            print(f"  warpspec mla_decode failed: {type(e).__name__}: {str(e)[:200]}")
        ref = _decode_composite(q, cache, table, lens, torch, scale)
        res["relerr"] = (((ours.double() - ref.double()).norm() / ref.double().norm()).item()
                         if ours is not None else float("nan"))
        t = _time(lambda: _decode_composite(q, cache, table, lens, torch, scale), 3, torch, flush)
        res.update(torch_ms=t, torch_gbs=moved / t / 1e6)
        rows.append(res)
        print(f"decode {res['cache']} B{b:<4d} s_q{s_q} len {n:<6d} warpspec {res['warpspec_ms']:7.3f} ms "
              f"{res['warpspec_gbs']:6.0f} GB/s ({100 * res['warpspec_gbs'] / copy_gbs:.0f}% of the copy) "
              f"{res['warpspec_tflops']:5.1f} TF | PyTorch composite {res['torch_ms']:8.3f} ms "
              f"(x{res['torch_ms'] / res['warpspec_ms']:.1f}, err {res['relerr']:.1e})", flush=True)
        del cache, call_cache, table, q, ref, ours
        torch.cuda.empty_cache()
    try:
        import flashinfer  # noqa: F401  (its MLA decode would be the second baseline)
        print("flashinfer is installed; its MLA decode baseline is not wired in yet")
    except ImportError:
        print("flashinfer: not installed on this machine (no baseline from it)")
    return rows


def _nsa_select(t, hkv, topn, shared, torch):
    """Top-n blocks of 64 per token and kv head: the first and the own block, then earlier
    ones; shared: one selection per 64-token block (NSA's neighbours mostly agree)."""
    own = torch.arange(t, device="cuda") // 64
    draw = own * 64 if shared else torch.arange(t, device="cuda")  # whose random numbers a token uses
    g = torch.Generator(device="cuda").manual_seed(5)
    r = torch.rand(t, hkv, topn, device="cuda", generator=g)[draw]
    sel = (r * (own[:, None, None] + 1).float()).long().clamp(max=own[:, None, None])  # an earlier or the own block
    sel[:, :, 0] = 0
    sel[:, :, 1] = own[:, None]
    return sel.to(torch.int32)


def _nsa_composite(q, k, v, sel, torch, scale, chunk=256):
    """The PyTorch user's NSA selected-block attention: per 256 tokens, gather each token's
    selected keys (topn x 64 per kv head), S = q K^T (bf16 bmm), masked fp32 softmax
    (blocks past the end, keys after the token), O = P V."""
    t, hq, d = q.shape
    hkv, topn = k.shape[1], sel.shape[2]
    grp = hq // hkv
    out = torch.empty(t, hq, v.shape[2], dtype=torch.bfloat16, device=q.device)
    u = torch.arange(64, device=q.device)
    for c0 in range(0, t, chunk):
        c = min(chunk, t - c0)
        keys = (sel[c0:c0 + c].long()[..., None] * 64 + u).view(c, hkv, topn * 64)        # [c, hkv, n]
        tok = torch.arange(c0, c0 + c, device=q.device)[:, None, None]
        valid = (sel[c0:c0 + c].long()[..., None] >= 0).expand(-1, -1, -1, 64).reshape(c, hkv, -1) & (keys <= tok)
        kk = keys.clamp(0, t - 1)
        head = torch.arange(hkv, device=q.device)[None, :, None]
        kr, vr = k[kk, head], v[kk, head]                                                  # [c, hkv, n, d]
        qq = q[c0:c0 + c].view(c, hkv, grp, d)
        sc = torch.matmul(qq, kr.transpose(-1, -2)).float() * scale                         # [c, hkv, grp, n]
        sc.masked_fill_(~valid[:, :, None, :], float("-inf"))
        p = torch.softmax(sc, dim=-1).nan_to_num_(0.0).to(torch.bfloat16)
        out[c0:c0 + c] = torch.matmul(p, vr).view(c, hq, -1)
    return out


def _bench_nsa(args, torch, warpspec, flush):
    rows = []
    t, hq, hkv, d, topn = 16384, 64, 4, 128, 16
    q = (torch.rand(t, hq, d, device="cuda") * 2 - 1).to(torch.bfloat16)
    k = (torch.rand(t, hkv, d, device="cuda") * 2 - 1).to(torch.bfloat16)
    v = (torch.rand(t, hkv, d, device="cuda") * 2 - 1).to(torch.bfloat16)
    scale = 1.0 / d ** 0.5
    dense_flops = 4.0 * hq * t * t * d / 2
    dense = warpspec.attention(q[None], k[None], v[None], causal=True)
    t_dense = _time(lambda: warpspec.attention(q[None], k[None], v[None], causal=True, out=dense), args.iters, torch, flush)
    for shared in (True, False):
        sel = _nsa_select(t, hkv, topn, shared, torch)
        kv_len = torch.clamp(torch.arange(t, device="cuda")[:, None, None] - sel.long() * 64 + 1, 0, 64)
        useful = 2.0 * (hq // hkv) * kv_len.sum().item() * (d + d)
        ours = warpspec.nsa_attention(q, k, v, sel)
        tw = _time(lambda: warpspec.nsa_attention(q, k, v, sel, out=ours), args.iters, torch, flush)
        ref = _nsa_composite(q, k, v, sel, torch, scale)
        err = ((ours.double() - ref.double()).norm() / ref.double().norm()).item()
        tc = _time(lambda: _nsa_composite(q, k, v, sel, torch, scale), 3, torch, flush)
        res = {"T": t, "Hq": hq, "Hkv": hkv, "D": d, "topn": topn, "selection": "shared" if shared else "random",
               "warpspec_ms": tw, "warpspec_tflops": useful / tw / 1e9, "torch_ms": tc, "relerr": err,
               "dense_flash_ms": t_dense, "dense_flash_tflops": dense_flops / t_dense / 1e9}
        rows.append(res)
        print(f"nsa T {t} Hq {hq}/{hkv} d{d} top-{topn} {res['selection']:6s}: warpspec {tw:7.3f} ms "
              f"{res['warpspec_tflops']:6.1f} TF ({100 * res['warpspec_tflops'] / res['dense_flash_tflops']:.0f}% of "
              f"dense causal flash {res['dense_flash_tflops']:.1f} TF) | PyTorch composite {tc:8.3f} ms "
              f"(x{tc / tw:.1f}, err {err:.1e})", flush=True)
    return rows


def main(argv=None):
    ap = argparse.ArgumentParser(prog="warpspec bench attention")
    ap.add_argument("--csv", default=None)
    ap.add_argument("--quick", action="store_true", help="only S 4096 and 8192, d 128")
    ap.add_argument("--iters", type=int, default=20)
    ap.add_argument("--only", choices=("flash", "mla", "decode", "nsa"), default=None)
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
    if args.only not in (None, "flash"):
        shapes = []
    for (b, s, h, d) in shapes:
        q, k, v = ((torch.rand(b, s, h, d, device="cuda") * 2 - 1).to(torch.bfloat16) for _ in range(3))
        qt, kt, vt = (x.transpose(1, 2) for x in (q, k, v))  # SDPA's [B, H, S, D] views of the same data
        for causal in (False, True):
            flops = 4.0 * b * h * s * s * d / (2 if causal else 1)
            ours = warpspec.attention(q, k, v, causal=causal)
            res = {"B": b, "S": s, "H": h, "D": d, "causal": int(causal)}
            # the default, every schedule forced, cuDNN and flash: each checked, then all
            # timed in rotation (_time_rotated)
            names, cands = ["warpspec"], [(_schedule(warpspec, None), lambda: warpspec.attention(q, k, v, causal=causal, out=ours))]
            try:
                for sched in ("plain", "pingpong", "overlap", "overlap-pingpong"):
                    _schedule(warpspec, sched)()
                    pp = warpspec.attention(q, k, v, causal=causal)
                    res[f"{sched}_relerr"] = ((pp.double() - ours.double()).norm() / ours.double().norm()).item()
                    names.append(sched)
                    cands.append((_schedule(warpspec, sched),
                                  lambda pp=pp: warpspec.attention(q, k, v, causal=causal, out=pp)))
                for name, backend in (("cudnn", SDPBackend.CUDNN_ATTENTION), ("flash", SDPBackend.FLASH_ATTENTION)):
                    def sdpa(backend=backend):
                        with sdpa_kernel(backend):
                            return F.scaled_dot_product_attention(qt, kt, vt, is_causal=causal)
                    try:
                        ref = sdpa().transpose(1, 2)
                        res[f"{name}_relerr"] = ((ours.double() - ref.double()).norm() / ref.double().norm()).item()
                        names.append(name)
                        cands.append((_schedule(warpspec, None), sdpa))
                    except Exception as e:  # not available for this shape or build: say so
                        res[f"{name}_ms"] = res[f"{name}_tflops"] = res[f"{name}_relerr"] = float("nan")
                        print(f"  {name} unavailable at B{b} S{s} H{h} d{d}: {type(e).__name__}: {str(e)[:120]}")
                for name, t in zip(names, _time_rotated(cands, args.iters, torch, flush)):
                    res[f"{name}_ms"], res[f"{name}_tflops"] = t, flops / t / 1e9
            finally:
                _schedule(warpspec, None)()
            rows.append(res)
            print(f"B{b:<3d} S{s:<6d} H{h:<3d} d{d:<4d} {'causal' if causal else 'full  '}  "
                  f"warpspec {res['warpspec_ms']:8.3f} ms {res['warpspec_tflops']:6.1f} TF "
                  f"(plain {res['plain_tflops']:6.1f}, ping-pong {res['pingpong_tflops']:6.1f}, "
                  f"overlap {res['overlap_tflops']:6.1f}, both {res['overlap-pingpong_tflops']:6.1f} TF) | "
                  f"cuDNN {res['cudnn_ms']:8.3f} ms {res['cudnn_tflops']:6.1f} TF (x{res['cudnn_ms'] / res['warpspec_ms']:.2f}, "
                  f"err {res['cudnn_relerr']:.1e}) | flash {res['flash_ms']:8.3f} ms {res['flash_tflops']:6.1f} TF "
                  f"(x{res['flash_ms'] / res['warpspec_ms']:.2f})", flush=True)
    mla_rows = _bench_mla(args, torch, warpspec, flush) if args.only in (None, "mla") else []
    dec_rows = _bench_decode(args, torch, warpspec, flush) if args.only in (None, "decode") else []
    nsa_rows = _bench_nsa(args, torch, warpspec, flush) if args.only in (None, "nsa") else []
    if args.csv and nsa_rows:
        with open(args.csv.replace(".csv", "_nsa.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(nsa_rows[0].keys()))
            w.writeheader()
            w.writerows(nsa_rows)
    if args.csv and dec_rows:
        with open(args.csv.replace(".csv", "_decode.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(dec_rows[0].keys()))
            w.writeheader()
            w.writerows(dec_rows)
    if args.csv and mla_rows:
        with open(args.csv.replace(".csv", "_mla.csv"), "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(mla_rows[0].keys()))
            w.writeheader()
            w.writerows(mla_rows)
    if args.csv and rows:
        with open(args.csv, "w", newline="") as f:
            w = csv.DictWriter(f, fieldnames=list(rows[0].keys()))
            w.writeheader()
            w.writerows(rows)
    return 0


if __name__ == "__main__":
    sys.exit(main())
