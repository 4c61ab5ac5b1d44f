#!/usr/bin/env python3
"""plot_sendrecv.py CSV PNG - latency and bandwidth per direction against message size
from `warpspec bench sendrecv --csv` output (one line per variant)."""
import collections
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    series = collections.defaultdict(dict)
    best = {}
    for r in csv.DictReader(open(src)):
        n, us = int(r["bytes"]), float(r["us"])
        if r["variant"] == "ws eager ctas":
            best[n] = min(best.get(n, 1e30), us)
            continue
        series[r["variant"]][n] = us
    for n, us in series["ws eager"].items():
        best[n] = min(best.get(n, 1e30), us)
    series["ws best CTA count"] = best
    fig, (a, b) = plt.subplots(1, 2, figsize=(14, 5.5))
    style = {"ws": "-", "nccl": "--", "copy": ":"}
    for name, pts in sorted(series.items()):
        xs = sorted(pts)
        ls = style[name.split()[0]]
        a.plot(xs, [pts[x] for x in xs], ls, marker="o", ms=3, label=name)
        b.plot(xs, [x / pts[x] / 1e3 for x in xs], ls, marker="o", ms=3, label=name)
    for ax in (a, b):
        ax.set_xscale("log", base=2)
        ax.set_xlabel("message bytes (each direction)")
        ax.grid(alpha=0.3)
    a.set_yscale("log")
    a.set_ylabel("us per bidirectional exchange (max over ranks)")
    b.set_ylabel("GB/s per direction")
    a.legend(fontsize=8)
    a.set_title("sendrecv latency")
    b.set_title("sendrecv bandwidth")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
