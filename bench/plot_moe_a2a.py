#!/usr/bin/env python3
"""plot_moe_a2a.py CSV PNG - `warpspec bench moe-a2a --csv` as bars: per case, dispatch and
combine time (the slowest rank) of ours at each SM count, the low-latency mode where timed,
the NCCL composite and the PyTorch version; log scale, lower is better."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst, title="MoE dispatch / combine (warpspec N = SMs; -index: rows read in place)"):
    worst = {}
    for r in csv.DictReader(open(src)):
        k = (r["case"], r["impl"], int(r["sms"]))
        d, c = float(r["dispatch_us"]), float(r["combine_us"])
        w = worst.get(k, (0.0, 0.0))
        worst[k] = (max(w[0], d), max(w[1], c))
    cases = list(dict.fromkeys(k[0] for k in worst))
    fig, axes = plt.subplots(1, len(cases), figsize=(5.2 * len(cases), 4.6), squeeze=False)
    for ax, case in zip(axes[0], cases):
        keys = sorted((k for k in worst if k[0] == case), key=lambda k: (k[1] != "warpspec", k[1], k[2]))
        labels = [f"{k[1]} {k[2]}" if k[1] in ("warpspec", "warpspec-index") else k[1] for k in keys]
        xs = range(len(keys))
        ax.bar([x - 0.2 for x in xs], [worst[k][0] for k in keys], 0.4, label="dispatch")
        ax.bar([x + 0.2 for x in xs], [worst[k][1] for k in keys], 0.4, label="combine")
        ax.set_yscale("log")
        ax.set_xticks(list(xs))
        ax.set_xticklabels(labels, rotation=45, ha="right", fontsize=8)
        ax.set_title(case, fontsize=10)
        ax.set_ylabel("us (slowest rank)")
        ax.grid(axis="y", alpha=0.3)
    axes[0][0].legend()
    fig.suptitle(title)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:4])
