#!/usr/bin/env python3
"""plot_moe.py CSV PNG [TITLE [TC_TFLOPS]] - the MoE layer's time per call against tokens per
rank from `warpspec bench moe --csv`: one panel per shape, every path in the CSV (unfused,
fused experts, whole layer), and, where the CSV has it (floor_us), the HBM floor: the
touched experts' weights read once at the read bandwidth measured in the same run. With
TC_TFLOPS (the grouped FP8 GEMM's rate measured in the same run), the tensor-core bound
too: a rank's expert math (tokens x topk rows, 6 H I FLOPs each: L1 2 H x 2I, L2 2 I x H)
at that rate. The whole layer's (else the fused path's) time over the unfused one is
written under each point."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

PATHS = (("unfused", "o-", "unfused path"), ("fused", "s-", "fused experts"), ("layer", "^-", "whole layer, one kernel"),
         ("pairs", "d-", "fused experts, CTA pairs"), ("unfused_rule", "o:", "unfused path, a later tile rule"))


def main(src, dst, title=None, tc_tflops=None):
    rows = list(csv.DictReader(open(src)))
    shapes = list(dict.fromkeys(r["shape"] for r in rows))
    fig, axes = plt.subplots(1, len(shapes), figsize=(6.5 * len(shapes), 4.8), squeeze=False)
    for ax, sh in zip(axes[0], shapes):
        mine = [r for r in rows if r["shape"] == sh]
        sel = {p: sorted((int(r["tokens"]), float(r["layer_us"])) for r in mine if r["path"] == p) for p, _, _ in PATHS}
        for p, style, label in PATHS:
            if sel[p]:
                ax.plot([t for t, _ in sel[p]], [u for _, u in sel[p]], style, label=label)
        floor = sorted({(int(r["tokens"]), float(r["floor_us"])) for r in mine if r.get("floor_us") and r["path"] == "unfused"})
        if floor:
            ax.plot([t for t, _ in floor], [f for _, f in floor], "k--", alpha=0.6, label="HBM floor (weights read once)")
        if tc_tflops:
            r0 = mine[0]
            flops = 6.0 * int(r0["topk"]) * int(r0["hidden"]) * int(r0["inter"])
            ts = sorted({int(r["tokens"]) for r in mine})
            ax.plot(ts, [t * flops / (float(tc_tflops) * 1e12) * 1e6 for t in ts], "k:", alpha=0.6,
                    label=f"tensor-core bound ({float(tc_tflops):.0f} TFLOPS)")
        best = "layer" if sel["layer"] else "fused"
        for (t, u), (_, f) in zip(sel["unfused"], sel[best]):
            ax.annotate(f"{f / u:.2f}x", (t, f), textcoords="offset points", xytext=(0, -14), ha="center", fontsize=8)
        r0 = mine[0]
        ax.set_title(f'{sh}: H {r0["hidden"]}, I {r0["inter"]}, E {r0["experts"]}, top-{r0["topk"]}, EP{r0["ranks"]}')
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_xlabel("tokens per rank")
        ax.set_ylabel("layer time per call (us)")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    fig.suptitle(title or "ws_moe_layer_forward (time of the whole layer over the unfused path's below each point)")
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(*sys.argv[1:5])
