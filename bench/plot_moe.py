#!/usr/bin/env python3
"""plot_moe.py CSV PNG - the MoE layer's time per call against tokens per rank from
`warpspec bench moe --csv`: one panel per shape, the unfused and fused-experts paths, the
fused path's speedup over the unfused one above each point."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    rows = list(csv.DictReader(open(src)))
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(6.5 * len(shapes), 4.5), squeeze=False)
    for ax, sh in zip(axes[0], shapes):
        sel = {p: sorted(((int(r["tokens"]), float(r["layer_us"])) for r in rows if r["shape"] == sh and r["path"] == p))
               for p in ("unfused", "fused")}
        for p, style in (("unfused", "o-"), ("fused", "s-")):
            if sel[p]:
                ax.plot([t for t, _ in sel[p]], [u for _, u in sel[p]], style, label=f"{p} path")
        for (t, u), (_, f) in zip(sel["unfused"], sel["fused"]):
            ax.annotate(f"{u / f:.2f}x", (t, f), textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8)
        r0 = next(r for r in rows if r["shape"] == sh)
        ax.set_title(f'{sh}: H {r0["hidden"]}, I {r0["inter"]}, E {r0["experts"]}, top-{r0["topk"]}, EP{r0["ranks"]}')
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens per rank")
        ax.set_ylabel("layer time per call (us)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend()
    fig.suptitle("ws_moe_layer_forward, one H200 (speedup of fused experts over unfused below each point)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
