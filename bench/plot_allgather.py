#!/usr/bin/env python3
"""plot_allgather.py PNG LABEL=FILE... - all-gather time relative to NCCL against bytes per
rank, from the tables `warpspec bench allgather` prints (one file per rank count or path,
e.g. "4 ranks=ag4.txt"): the ratio NCCL time / ours (above 1: faster than NCCL), a dashed
line at 1 and a dotted one at the issue's goal of 1.1. Log x. Tables with the symmetric and
registered-buffer columns (session 24 on) give the faster of each library's two forms."""
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def load(path):
    """[(bytes per rank, ws us, nccl us)] from the printed table's rows: the old five
    columns (bytes, path, ws, nccl, ratio) or the new eight (bytes, path, ws, ws_sym, nccl,
    nccl_reg, ratio, best), where each library's faster form counts."""
    rows = []
    for line in open(path):
        f = line.split()
        if len(f) == 5 and f[0].isdigit():
            rows.append((int(f[0]), float(f[2]), float(f[3])))
        elif len(f) == 8 and f[0].isdigit():
            rows.append((int(f[0]), min(float(f[2]), float(f[3])), min(float(f[4]), float(f[5]))))
    return rows


def main():
    png = sys.argv[1]
    fig, ax = plt.subplots(figsize=(7.5, 4.2))
    for arg in sys.argv[2:]:
        label, path = arg.split("=", 1)
        rows = load(path)
        ax.plot([r[0] for r in rows], [r[2] / r[1] for r in rows], marker="o", label=label)
    ax.axhline(1.0, color="gray", linestyle="--", linewidth=1)
    ax.axhline(1.1, color="gray", linestyle=":", linewidth=1)
    ax.set_xscale("log", base=2)
    ax.set_xlabel("bytes per rank")
    ax.set_ylabel("NCCL time / warpspec time")
    ax.set_title("ws_allgather against ncclAllGather (same run)")
    ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=120)


if __name__ == "__main__":
    main()
