#!/usr/bin/env python3
"""plot_moe_rows.py PNG LABEL=LOG ... - the EP1 layer's unfused and fused-experts times
against the rows per expert, one panel per shape, one line per LOG (`bench moe --ranks 1`
output, plain or under run_ab.sh; the median over a log's rounds of each point). Rows per
expert: tokens x topk / 256 (DeepSeek-V3 topk 8, Flash 6). Example (session 47):
  python3 bench/plot_moe_rows.py docs/img/moe_rows_s47.png \\
      start=docs/results/h200_s47_start_sweep.txt new=docs/results/h200_s47_routed_rule.txt"""
import re
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt

TOPK = {"DeepSeekV3": 8, "Flash": 6}
LINE = re.compile(r"(DeepSeekV3|Flash)\s+T\s+(\d+)\s+(unfused|fused)\s*:\s+layer\s+([\d.]+) us")


def read(path):
    """{(shape, path): {rows: [us, ...]}} from every matching line of the log."""
    out = {}
    for line in open(path):
        m = LINE.search(line)
        if m:
            shape, tokens, kind, us = m.group(1), int(m.group(2)), m.group(3), float(m.group(4))
            rows = tokens * TOPK[shape] / 256
            out.setdefault((shape, kind), {}).setdefault(rows, []).append(us)
    return out


def main():
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    png, logs = sys.argv[1], [a.split("=", 1) for a in sys.argv[2:]]
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for ax, shape in zip(axes, ("DeepSeekV3", "Flash")):
        for i, (label, path) in enumerate(logs):
            data = read(path)
            for kind, style in (("unfused", "-o"), ("fused", ":s")):
                pts = sorted(data.get((shape, kind), {}).items())
                if pts:
                    ax.plot([r for r, _ in pts], [statistics.median(v) / 1000 for _, v in pts], style, color=f"C{i}",
                            label=f"{label}: {kind if kind == 'unfused' else 'fused experts'}")
        ax.set_title(f"{shape}, one H200 (EP1)")
        ax.set_xlabel("rows per expert (mean)")
        ax.set_ylabel("layer ms (median of rounds)")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(png, dpi=110)


if __name__ == "__main__":
    main()
