#!/usr/bin/env python3
"""plot_gemm.py CSV PNG - TFLOPS of ws_gemm and cuBLASLt per shape from
`warpspec bench gemm --csv`, one panel per type, the ratio above each pair."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(src, dst):
    rows = list(csv.DictReader(open(src)))
    types = [t for t in ("bf16", "fp8") if any(r["type"] == t for r in rows)]
    fig, axes = plt.subplots(len(types), 1, figsize=(13, 4.2 * len(types)), squeeze=False)
    for ax, t in zip(axes[:, 0], types):
        sel = [r for r in rows if r["type"] == t]
        labels = [f'{r["groups"]}x{r["m_per_group"]}\n{r["n"]}x{r["k"]}' + (f'\ntile {r["tile"]}' if r.get("tile") else "")
                  for r in sel]
        ws = [float(r["ws_tflops"]) for r in sel]
        lt = [float(r["cublaslt_tflops"]) for r in sel]
        x = range(len(sel))
        ax.bar([i - 0.2 for i in x], ws, 0.4, label="warpspec ws_gemm")
        ax.bar([i + 0.2 for i in x], lt, 0.4, label="cuBLASLt (loop over experts when G > 1)")
        for i, r in enumerate(sel):
            ax.text(i, max(ws[i], lt[i]) * 1.02, f'{float(r["ratio"]):.2f}x', ha="center", fontsize=8)
        ax.set_xticks(list(x))
        ax.set_xticklabels(labels, fontsize=7)
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"{t.upper()} GEMM, D = A B^T, bf16 out (G experts x M rows, N x K)")
        ax.set_ylim(0, max(ws + lt) * 1.12)
        ax.legend(fontsize=8, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncol=2)
        ax.grid(axis="y", alpha=0.3)
    fig.tight_layout()
    fig.savefig(dst, dpi=110)


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
