#!/usr/bin/env python3
"""plot_trace_grid.py CSV PNG [--bounds PRE,L2,AFTER] - every block of a persistent kernel
on one picture (a trace taken with `--trace-block -1`, WS_TRACE_ALL_BLOCKS): one row per SM,
the first math replica's work items as bars coloured by kind, its waits for the loader's
next stage, and the loader's waits for rows other blocks produce. Also prints, per kind,
how many items ran, when the first began, and when the last began and ended.

Item kinds come from the item numbers (the experts kernel numbers them in claim order):
numbers below PRE are route / send / expand items, PRE .. L2 - 1 are L1 tiles, L2 .. AFTER
- 1 are L2 tiles, and from AFTER on combine (reduce, gather) items. Without --bounds every
item is drawn in one colour."""
import csv
import statistics
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from plot_trace import spans  # noqa: E402  (this folder: run as python3 bench/plot_trace_grid.py)

KINDS = [("route/expand", "#2ca02c"), ("L1 tile", "#1f77b4"), ("L2 tile", "#ff7f0e"), ("combine", "#9467bd")]


def kind_of(t, bounds):
    if bounds is None:
        return 1
    pre, l2, after = bounds
    return 0 if t < pre else 1 if t < l2 else 2 if t < after else 3


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--bounds")]
    bounds = None
    if "--bounds" in argv:
        i = argv.index("--bounds")
        bounds = tuple(int(v) for v in argv[i + 1].split(","))
        args = [a for a in args if a != argv[i + 1]]
    if len(args) != 2:
        print(__doc__)
        return 2
    rows = list(csv.DictReader(open(args[0])))
    for r in rows:
        r["t"] = int(r["t_ns"]) / 1000.0
    rows.sort(key=lambda r: r["t"])
    sms = sorted({int(r["sm"]) for r in rows})
    y = {sm: i for i, sm in enumerate(sms)}
    fig, ax = plt.subplots(figsize=(14, 2 + 0.06 * len(sms)))
    by_kind = {k: [] for k in range(len(KINDS))}
    for sm in sms:
        math = [r for r in rows if int(r["sm"]) == sm and r["role_name"].endswith("MATH") and r["replica"] == "0"]
        loader = [r for r in rows if int(r["sm"]) == sm and r["role_name"].endswith("LOADER")]
        for b, e in spans(math, "item_begin", "item_end", lambda r: "item"):
            k = kind_of(int(b["arg"]), bounds)
            by_kind[k].append((b["t"], e["t"]))
            ax.barh(y[sm], e["t"] - b["t"], left=b["t"], height=0.8, color=KINDS[k][1], linewidth=0)
        for b, e in spans(math, "wait_begin", "wait_end", lambda r: r["what"]):
            ax.barh(y[sm], e["t"] - b["t"], left=b["t"], height=0.3, color="#d62728", linewidth=0)
        for b, e in spans([r for r in loader if r["what"] == "rows"], "wait_begin", "wait_end", lambda r: "rows"):
            ax.barh(y[sm] + 0.3, e["t"] - b["t"], left=b["t"], height=0.25, color="#8c564b", linewidth=0)
    for k, (name, _) in enumerate(KINDS):
        s = by_kind[k]
        if not s:
            continue
        begins, ends = [b for b, _ in s], [e for _, e in s]
        print(f"{name:13s}: {len(s):5d} items, first begins {min(begins):8.1f} us, median begin {statistics.median(begins):8.1f}, "
              f"last begins {max(begins):8.1f}, last ends {max(ends):8.1f}, median length {statistics.median(e - b for b, e in s):7.1f} us")
    ends = [max(e for _, e in by_kind[k]) for k in by_kind if by_kind[k]]
    if ends:
        print(f"last item ends at {max(ends):.1f} us (time 0: the first event of any block)")
    handles = [plt.Rectangle((0, 0), 1, 1, color=c) for _, c in KINDS]
    labels = [n for n, _ in KINDS]
    handles += [plt.Rectangle((0, 0), 1, 1, color="#d62728"), plt.Rectangle((0, 0), 1, 1, color="#8c564b")]
    labels += ["math waits for the loader's stage", "loader waits for rows of other blocks"]
    ax.legend(handles, labels, loc="upper right", fontsize=7, ncol=3)
    ax.set_yticks([])
    ax.set_ylabel(f"{len(sms)} SMs, one block each")
    ax.set_xlabel("microseconds from the first event")
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(args[1], dpi=120)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
