#!/usr/bin/env python3
"""plot_pipe.py CSV PNG - bar chart of `warpspec bench pipe --csv` output:
copy bandwidth of each variant against cudaMemcpy, and the pipe hand-off times."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    rows = list(csv.DictReader(open(src)))
    copies = [r for r in rows if not r["variant"].startswith("handoff")]
    hand = [r for r in rows if r["variant"].startswith("handoff")]
    fig, (a, b) = plt.subplots(1, 2, figsize=(15, 6), gridspec_kw={"width_ratios": [3, 1]})
    names = [r["variant"] for r in copies]
    gbs = [float(r["gbps_rw"]) for r in copies]
    colors = ["tab:gray" if "Memcpy" in n else "tab:blue" for n in names]
    a.barh(names, gbs, color=colors)
    a.axvline(0.9 * gbs[0], color="tab:red", ls="--", label="90% of cudaMemcpy")
    for i, (g, r) in enumerate(zip(gbs, copies)):
        a.text(g, i, f" {float(r['ratio_vs_memcpy']):.3f}x", va="center", fontsize=8)
    a.invert_yaxis()
    a.set_xlabel("GB/s (bytes read + bytes written)")
    a.set_title(f"device-to-device copy, {int(copies[0]['bytes']) >> 20} MiB")
    a.legend(loc="lower right")
    hn = [r["variant"].replace("handoff_", "") for r in hand]
    b.barh(hn, [float(r["ms"]) for r in hand], color="tab:green")
    b.invert_yaxis()
    b.set_xlabel("ns per item")
    b.set_title("pipe hand-off")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
