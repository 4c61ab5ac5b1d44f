"""plot_attention_sdpa.py CSV PNG - `warpspec bench attention --csv` (the flash rows) as
TFLOPS against sequence length: our default schedule and the plain one beside PyTorch
SDPA's cuDNN and flash (FA2) backends, one panel per head dim and mask, heads 16."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    rows = [r for r in csv.DictReader(open(argv[1])) if r.get("H") == "16"]
    dims = sorted({int(r["D"]) for r in rows})
    fig, axes = plt.subplots(len(dims), 2, figsize=(12, 4 * len(dims)), squeeze=False)
    series = (("warpspec_tflops", "warpspec (default schedule)", "#3b75af", "-"),
              ("plain_tflops", "warpspec, plain schedule", "#3b75af", ":"),
              ("cudnn_tflops", "SDPA cuDNN", "#d62728", "-"),
              ("flash_tflops", "SDPA flash (FA2)", "#7f7f7f", "-"))
    for i, d in enumerate(dims):
        for j, causal in enumerate(("0", "1")):
            ax = axes[i][j]
            sel = sorted((r for r in rows if int(r["D"]) == d and r["causal"] == causal), key=lambda r: int(r["S"]))
            xs = [int(r["S"]) for r in sel]
            for key, label, color, style in series:
                ax.plot(xs, [float(r[key]) for r in sel], style, marker="o", color=color, label=label)
            ax.set_xscale("log", base=2)
            ax.set_xlabel("sequence length (batch x seq = 16384)")
            ax.set_ylabel("TFLOPS")
            ax.set_title(f"d {d}, H 16, {'causal' if causal == '1' else 'no mask'}")
            ax.grid(alpha=0.3)
            ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
