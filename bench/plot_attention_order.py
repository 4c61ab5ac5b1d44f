"""plot_attention_order.py LOG PNG - the causal flash rows of an A/B log (lines
`[VALUE rN] B.. S.. H.. dD causal X TF cuDNN Y xR`, as tests/gpu scripts print them from
`bench attention --only flash`) as TFLOPS per shape: each value's mean over its rounds
beside cuDNN's mean, one panel per head dim. VALUE `auto` is labelled as the library's
default, any other as WARPSPEC_ATTN_HEAD_GROUP=VALUE."""
import re
import sys
from collections import defaultdict

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

LINE = re.compile(r"\[(\S+) r\d+\] B(\d+) S(\d+) H(\d+) d(\d+) causal ([0-9.]+) TF cuDNN ([0-9.]+)")


def main(argv):
    if len(argv) != 3:
        print(__doc__)
        return 2
    runs = defaultdict(list)  # (value, d, shape) -> TFLOPS
    cudnn = defaultdict(list)  # (d, shape) -> TFLOPS
    for line in open(argv[1]):
        m = LINE.search(line)
        if not m:
            continue
        value, b, s, h, d = m.group(1), *map(int, m.group(2, 3, 4, 5))
        shape = (s, h, b)
        runs[(value, d, shape)].append(float(m.group(6)))
        cudnn[(d, shape)].append(float(m.group(7)))
    values = sorted({k[0] for k in runs}, key=lambda v: (v != "auto", v))
    dims = sorted({k[0] for k in cudnn}, reverse=True)
    fig, axes = plt.subplots(len(dims), 1, figsize=(13, 4.2 * len(dims)), squeeze=False)
    colors = ["#3b75af", "#9fb8d6", "#2ca02c", "#ff7f0e"]
    for i, d in enumerate(dims):
        ax = axes[i][0]
        shapes = sorted({k[1] for k in cudnn if k[0] == d})
        width = 0.8 / (len(values) + 1)
        for j, v in enumerate(values):
            ys = [sum(runs[(v, d, sh)]) / max(1, len(runs[(v, d, sh)])) for sh in shapes]
            label = "warpspec, head groups (default)" if v == "auto" else f"warpspec, WARPSPEC_ATTN_HEAD_GROUP={v}"
            if v == "1000000":
                label = "warpspec, one group (the order before)"
            ax.bar([x + j * width for x in range(len(shapes))], ys, width, label=label, color=colors[j % len(colors)])
        ys = [sum(cudnn[(d, sh)]) / len(cudnn[(d, sh)]) for sh in shapes]
        ax.bar([x + len(values) * width for x in range(len(shapes))], ys, width, label="SDPA cuDNN", color="#d62728")
        ax.set_xticks([x + len(values) * width / 2 for x in range(len(shapes))])
        ax.set_xticklabels([f"S{s}\nH{h} B{b}" for s, h, b in shapes], fontsize=8)
        ax.set_ylabel("TFLOPS")
        ax.set_title(f"flash forward, causal, d {d}")
        ax.grid(axis="y", alpha=0.3)
        ax.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    fig.savefig(argv[2], dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
