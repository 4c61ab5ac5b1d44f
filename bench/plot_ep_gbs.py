#!/usr/bin/env python3
"""plot_ep_gbs.py [--receive copy|index] PNG CEILING LABEL=CSV... - NVLink GB/s of rank 0
against tokens per rank from `warpspec bench ep --csv` files (one per build or EP size,
e.g. "EP4 before=a.csv" "EP4 streamed=b.csv"): dispatch and combine side by side, one
receive (index unless --receive says), and a dashed line at CEILING GB/s (`warpspec bench
nvlink`'s SM-store figure). Log x."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path, receive):
    """{tokens: (dispatch GB/s, combine GB/s)} of rank 0's rows of that receive."""
    out = {}
    for r in csv.DictReader(open(path)):
        if r["receive"] == receive and r["rank"] == "0":
            out[int(r["tokens"])] = (float(r["nvlink_dispatch_GBs"]), float(r["nvlink_combine_GBs"]))
    return out


def main():
    args, receive = sys.argv[1:], "index"
    if args[:1] == ["--receive"]:
        receive, args = args[1], args[2:]
    png, ceiling = args[0], float(args[1])
    series = [(a.split("=", 1)[0], load(a.split("=", 1)[1], receive)) for a in args[2:]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2), sharey=True)
    for k, (ax, what) in enumerate(zip(axes, ("dispatch", "combine"))):
        for label, pts in series:
            t = sorted(pts)
            ax.plot(t, [pts[x][k] for x in t], "-o" if "before" not in label else "--o", label=label)
        ax.axhline(ceiling, color="gray", ls=":", label=f"SM-store ceiling {ceiling:.0f}")
        ax.axhline(250, color="red", ls="--", lw=0.8, label="goal 250 (4096 tokens)")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens per rank")
        ax.set_title(f"{what}, {receive} receive (SMs in the labels)")
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("NVLink GB/s out of rank 0")
    axes[1].legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
