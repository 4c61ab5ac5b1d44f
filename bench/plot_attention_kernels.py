"""plot_attention_kernels.py LOG [LOG_BEFORE] PNG - the kernels' own timings from
`warpspec bench attn-kernels` logs (or the older `test_attention bench` / `nsa` ones: the
same rows) as bars: MLA decode, sparse decode and sparse prefill TFLOPS (with an earlier
log: before and after), and NSA against the dense causal flash kernel of the same run.
Each log may be FILE:PREFIX, for logs whose lines carry the build's name in front
("b_main bench ..."): only the lines with that prefix are read. The first timing of a
row name counts (the default schedule, which `bench attn-kernels` times first)."""
import re
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def parse(spec):
    path, _, prefix = spec.partition(":")
    mla, nsa = {}, []
    for line in open(path):
        if prefix:
            if not line.startswith(prefix + " "):
                continue
            line = line[len(prefix) + 1:]
        m = re.match(r"bench ((?:decode|sparse decode|mla) .*?)\s+([\d.]+) ms\s+([\d.]+) TFLOPS", line)
        if m:
            mla.setdefault(m.group(1).strip(), float(m.group(3)))
        m = re.match(r"bench (nsa .*?)\s+([\d.]+) ms\s+([\d.]+) TFLOPS \| dense causal flash\s+([\d.]+) ms\s+([\d.]+) TFLOPS",
                     line)
        if m:
            nsa.append((m.group(1).replace("nsa ", "").replace(" Hq 64 Hkv 4", ""), float(m.group(3)), float(m.group(5))))
    return mla, nsa


def main(argv):
    if len(argv) not in (3, 4):
        print(__doc__)
        return 2
    log, png = argv[1], argv[-1]
    mla, nsa = parse(log)
    before = parse(argv[2])[0] if len(argv) == 4 else {}
    fig, axes = plt.subplots(1, 2 if nsa else 1, figsize=(14 if nsa else 8, 5), squeeze=False)
    ax = axes[0][0]
    names = list(mla)
    y = range(len(names))
    if before:
        ax.barh([i + 0.2 for i in y], [before.get(n, 0) for n in names], 0.4, label="before", color="#bbbbbb")
    ax.barh([i - 0.2 if before else i for i in y], [mla[n] for n in names], 0.4 if before else 0.8, label="now",
            color="#3b75af")
    ax.set_yticks(list(y))
    ax.set_yticklabels(names, fontsize=7)
    ax.invert_yaxis()
    ax.set_xlabel("TFLOPS")
    ax.set_title("MLA kernels alone (warpspec bench attn-kernels)")
    ax.legend(loc="lower right")
    if nsa:
        ax = axes[0][1]
        y = range(len(nsa))
        ax.barh([i - 0.2 for i in y], [r[1] for r in nsa], 0.4, label="NSA (useful work)", color="#3b75af")
        ax.barh([i + 0.2 for i in y], [r[2] for r in nsa], 0.4, label="dense causal flash", color="#bbbbbb")
        for i, r in enumerate(nsa):
            ax.text(r[1] + 5, i - 0.2, f"{100 * r[1] / r[2]:.0f}%", va="center", fontsize=8)
        ax.set_yticks(list(y))
        ax.set_yticklabels([r[0] for r in nsa], fontsize=7)
        ax.invert_yaxis()
        ax.set_xlabel("TFLOPS")
        ax.set_title("NSA selected blocks against the dense kernel")
        ax.legend()
    fig.tight_layout()
    fig.savefig(png, dpi=110)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
