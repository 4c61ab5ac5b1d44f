#!/usr/bin/env python3
"""plot_moe_a2a_gbs.py PNG CEILING LABEL=CSV... - NVLink GB/s per rank against tokens per
rank for the DeepSeek-V3 cases of `warpspec bench moe-a2a --csv` (one CSV per EP size,
e.g. EP2=a2a_2.csv EP4=a2a_4.csv): dispatch and combine side by side, each
implementation's slowest rank (bytes this rank sends to other ranks over its time), and
a dashed line at CEILING GB/s (`warpspec bench nvlink`'s SM-store figure). Log x."""
import csv
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

STYLE = {"warpspec-index": "-o", "warpspec": "--o", "nccl": ":s", "pytorch": ":^"}


def load(path):
    """{(impl, sms): {tokens: (dispatch GB/s, combine GB/s)}}, the slowest rank of each."""
    out = {}
    for r in csv.DictReader(open(path)):
        m = re.match(r"DeepSeek-V3, (\d+) tok", r["case"])
        if not m or r["impl"] == "warpspec-LL":
            continue
        key, t = (r["impl"], int(r["sms"])), int(m.group(1))
        d, c = float(r["nvlink_dispatch_GBs"]), float(r["nvlink_combine_GBs"])
        old = out.setdefault(key, {}).get(t, (d, c))
        out[key][t] = (min(old[0], d), min(old[1], c))
    return out


def main(dst, ceiling, *sources):
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.4), sharey=True)
    for src in sources:
        label, path = src.split("=", 1)
        for (impl, sms), pts in sorted(load(path).items()):
            ts = sorted(pts)
            name = f"{label} {impl}" + (f" ({sms} SMs)" if impl.startswith("warpspec") else "")
            for i, ax in enumerate(axes):
                ax.plot(ts, [pts[t][i] for t in ts], STYLE.get(impl, "-"), label=name,
                        alpha=1.0 if label == "EP2" else 0.6)
    for ax, what in zip(axes, ("dispatch", "combine")):
        ax.axhline(float(ceiling), color="k", ls="--", lw=0.8)
        ax.text(130, float(ceiling) * 1.02, "NVLink SM-store ceiling", fontsize=7)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tokens per rank (DeepSeek-V3: H 7168, 256 experts, top-8, FP8)")
        ax.set_title(what)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("NVLink GB/s out per rank (slowest rank)")
    axes[1].legend(fontsize=7, loc="upper left")
    fig.suptitle("MoE dispatch / combine against tokens per rank (warpspec bench moe-a2a)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:])
