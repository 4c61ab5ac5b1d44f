#!/usr/bin/env python3
"""plot_ab_times.py KIND LOG PNG - an A/B of two builds or two settings, as bars of the
median time per shape, from the logs the session scripts keep in docs/results:

  gemm  lines "rR skinny=S   bf16   G x M  N  K  ours_ms  cublaslt_ms ..." (WARPSPEC_GEMM_SKINNY
        on / off, cuBLASLt from the same runs): three bars per shape
  mla   blocks "== V rR" followed by "bench decode NAME  T ms ..." lines (V: the build) and
        "bench d2d copy ... GB/s" lines: two bars per shape, each build's share of the
        same run's copy rate above it
  rounds lines "V rR[:] bench decode NAME  T ms ..." (V: the build, "old" / "new", or the
        knob's setting as tests/gpu/run_ab.sh prints it, "KNOB=0:"): one bar per V
  rounds-rel  the same, each shape's times divided by the median of the first V seen (the
        baseline), for shapes whose times differ by orders of magnitude
  moe-rel lines "V rR[:] bench moe rank 0: SHAPE T N layer  : layer X us ..." (`bench moe`
        under run_ab.sh): the whole-layer path's time per (shape, tokens), relative to the
        first V

Each bar is the median over the rounds; the thin line on it spans the rounds' minimum to
maximum."""
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def gemm_series(path):
    series = {}  # shape -> {"skinny": [], "128x256 split-K": [], "cuBLASLt": []}
    pat = re.compile(r"^r\d+ skinny=(\d)\s+bf16\s+(\d+) x\s+(\d+)\s+(\d+)\s+(\d+)\s+([\d.]+)\s+([\d.]+)")
    for line in open(path):
        m = pat.match(line.strip())
        if not m:
            continue
        on, g, rows, n, k, ours, lt = m.groups()
        shape = f"{rows} x ({n}, {k})"
        d = series.setdefault(shape, {"skinny kernel": [], "128 x 256 tile, split-K": [], "cuBLASLt": []})
        d["skinny kernel" if on == "1" else "128 x 256 tile, split-K"].append(float(ours) * 1000)
        d["cuBLASLt"].append(float(lt) * 1000)
    return series, "us per call", None


def mla_series(path):
    series, shares, build, d2d = {}, {}, None, None
    for line in open(path):
        line = line.strip()
        m = re.match(r"^== (\S+) r\d+", line)
        if m:
            build = m.group(1)
            continue
        m = re.match(r"^bench d2d copy .*?([\d.]+) GB/s", line)
        if m:
            d2d = float(m.group(1))
            continue
        m = re.match(r"^bench (decode .*?)\s+([\d.]+) ms .*?([\d.]+) GB/s", line)
        if m and build:
            name, ms, gbs = m.group(1).strip(), float(m.group(2)), float(m.group(3))
            series.setdefault(name, {}).setdefault(build, []).append(ms * 1000)
            if d2d:
                shares.setdefault(name, {}).setdefault(build, []).append(gbs / d2d)
    return series, "us per call", shares


def rounds_series(path):
    series = {}
    for line in open(path):
        m = re.match(r"^(\S+?):? r\d+:? bench (.*?)\s+([\d.]+) ms", line.strip())
        if m:
            series.setdefault(m.group(2).strip(), {}).setdefault(m.group(1), []).append(float(m.group(3)) * 1000)
    return series, "us per call", None


def moe_series(path):
    series = {}
    pat = re.compile(r"^(\S+?):? r\d+:? bench moe rank 0: (\S+)\s+T\s+(\d+) layer\s*:\s*layer\s+([\d.]+) us")
    for line in open(path):
        m = pat.match(line.strip())
        if m:
            name = f"{m.group(2)}, {m.group(3)} token{'s' if m.group(3) != '1' else ''}"
            series.setdefault(name, {}).setdefault(m.group(1), []).append(float(m.group(4)))
    return series, "us per call", None


def relative_series(path, source=None):
    series, _, _ = (source or rounds_series)(path)
    for d in series.values():
        base = statistics.median(next(iter(d.values())))
        for k in d:
            d[k] = [v / base for v in d[k]]
    return series, "time relative to the first build", None


def main(kind, src, dst, labels=None):
    kinds = {"gemm": gemm_series, "mla": mla_series, "rounds": rounds_series, "rounds-rel": relative_series,
             "moe-rel": lambda p: relative_series(p, moe_series)}
    series, unit, shares = kinds[kind](src)
    if not series:
        sys.exit(f"plot_ab_times: no {kind} lines in {src}")
    names = list(series)
    keys = list(next(iter(series.values())))
    for d in series.values():
        keys += [k for k in d if k not in keys]
    width = 0.8 / len(keys)
    fig, ax = plt.subplots(figsize=(max(6, 1.9 * len(names)), 4.2))
    for j, key in enumerate(keys):
        xs, meds, lo, hi = [], [], [], []
        for i, name in enumerate(names):
            v = series[name].get(key)
            if not v:
                continue
            xs.append(i + (j - (len(keys) - 1) / 2) * width)
            meds.append(statistics.median(v))
            lo.append(min(v))
            hi.append(max(v))
        label = labels.get(key, key) if labels else key
        ax.bar(xs, meds, width, label=label)
        ax.vlines(xs, lo, hi, colors="black", linewidth=0.8)
        for i, x in enumerate(xs):
            name = names[[n for n in range(len(names)) if series[names[n]].get(key)][i]]
            if shares and shares.get(name, {}).get(key):
                ax.text(x, hi[i] * 1.01, f"{statistics.median(shares[name][key]) * 100:.0f}%", ha="center", fontsize=7)
    if kind.endswith("-rel"):  # the differences are a few per cent: show that band, 1.0 marked
        vals = [v for d in series.values() for vs in d.values() for v in vs]
        ax.set_ylim(min(vals) - 0.02, max(vals) + 0.02)
        ax.axhline(1.0, color="gray", linewidth=0.8)
    ax.set_xticks(range(len(names)))
    ax.set_xticklabels([n.replace(" len", "\nlen").replace("decode ", "") for n in names], fontsize=7)
    ax.set_ylabel(unit)
    if shares:
        ax.set_title("median time; above each bar its share of the same run's D2D copy rate", fontsize=9)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    if len(sys.argv) < 4 or sys.argv[1] not in ("gemm", "mla", "rounds", "rounds-rel", "moe-rel"):
        sys.exit("usage: plot_ab_times.py gemm|mla|rounds|rounds-rel|moe-rel LOG PNG [KEY=LABEL ...]")
    main(sys.argv[1], sys.argv[2], sys.argv[3], dict(a.rsplit("=", 1) for a in sys.argv[4:]))
