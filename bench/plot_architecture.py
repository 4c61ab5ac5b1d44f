#!/usr/bin/env python3
"""plot_architecture.py [PNG] - the picture of docs/architecture.md: the layers as boxes,
an arrow from each folder to the folders it may #include (tools/check_includes.py
enforces the same table), the listed exceptions dashed. Default output:
docs/img/architecture.png. Drawn from coordinates here rather than by a graph layout
tool so that the layers stay in rows, bottom to top, as the text reads them."""
import os
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from matplotlib.patches import FancyArrowPatch, FancyBboxPatch  # noqa: E402

CORE, COMM, OPS, TOOLS, API = "#cfe2f3", "#d9ead3", "#fce5cd", "#eeeeee", "#e6d9f2"
W, GAP = 2.0, 0.55  # box width and the gap the arrows between boxes run in
COL = [i * (W + GAP) for i in range(4)]  # left edges of the four columns

# name: (x, y, width, height, colour, label)
BOXES = {
    "cli": (COL[0], 7.0, W, 1.15, TOOLS, "src/cli\nthe warpspec tool\n(info, plan, run, bench)"),
    "bench": (COL[1], 7.0, W, 1.15, TOOLS, "bench/\nwarpspec_bench: against\nthe baseline; plots"),
    "tests": (COL[2], 7.0, W, 1.15, TOOLS, "tests/\ncpu/ and gpu/ suites:\nbad inputs, poisoned outputs"),
    "python": (COL[3], 7.0, W, 1.15, TOOLS, "python/warpspec\nctypes over the C API\n(no #include)"),
    "testdata": (3.5, 8.5, 3.1, 0.75, TOOLS, "testdata/\nshared data generators, header-only"),
    "moe": (COL[0], 4.8, W, 1.1, OPS, "src/moe\ndispatch, combine, SwiGLU;\nlayer/: the fused layer"),
    "gemm": (COL[1], 4.8, W, 1.1, OPS, "src/gemm\nBF16 / FP8 GEMM,\nquantise, schedule"),
    "attention": (COL[2], 4.8, W, 1.1, OPS, "src/attention\nflash, sparse MLA,\nMLA decode, NSA"),
    "stream": (COL[3], 4.8, W, 1.1, OPS, "src/stream\nthe TMA-pipe copy"),
    "comm": (COL[0], 2.55, 1.75, 1.4, COMM, "src/comm\ncommunicator\n(NVSHMEM),\nsymmetric memory,\nsendrecv"),
    "core": (0.0, 0.6, COL[3] + W, 1.25, CORE,
             "src/core\nstatus + message, device limits, plans and the budget check, plan cache and launch,\n"
             "tensor maps, bounded waits (host side), traces, validation scans, host threads"),
    "device": (10.6, 5.75, 3.2, 2.4, API,
               "include/warpspec/device/\nkernel headers (CUDA C)\n\nrole.cuh  pipe.cuh  wait.cuh\n"
               "tma.cuh  wgmma.cuh  ptx.cuh\ntrace.cuh  fp8.cuh"),
    "host": (10.6, 0.6, 3.2, 2.4, API,
             "include/warpspec/\nthe C API (plain C11)\n\nstatus.h  plan.h  layout.h\ndiag.h  tma.h  trace.h\n"
             "gemm.h  moe.h  attention.h ..."),
}


def box(ax, name):
    x, y, w, h, colour, label = BOXES[name]
    ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.02,rounding_size=0.08", fc=colour, ec="#555555"))
    first, _, rest = label.partition("\n")
    ax.text(x + w / 2, y + h - 0.12, first, ha="center", va="top", fontsize=9.5, fontweight="bold", family="monospace")
    ax.text(x + w / 2, y + h - 0.42, rest, ha="center", va="top", fontsize=8, linespacing=1.25)


def arrow(ax, points, dashed=False, label=None, at=None, rad=0.0):
    """An include: from points[0] through the corners to the arrowhead at points[-1]."""
    colour, style = ("#c0392b", (0, (4, 3))) if dashed else ("#222222", "solid")
    for a, b in zip(points[:-2], points[1:-1]):
        ax.plot([a[0], b[0]], [a[1], b[1]], color=colour, lw=1.4, ls=style)
    ax.add_patch(FancyArrowPatch(points[-2], points[-1], arrowstyle="-|>", mutation_scale=13, color=colour, lw=1.4,
                                 linestyle=style, connectionstyle="arc3,rad=%g" % rad, shrinkA=0, shrinkB=0))
    if label:
        note(ax, at, label, colour)


def note(ax, at, text, colour="#222222", ha="left", va="center"):
    ax.text(at[0], at[1], text, fontsize=7.5, color=colour, ha=ha, va=va, style="italic",
            bbox=dict(fc="white", ec="none", alpha=0.85, pad=1.0))


def main(dst):
    fig, ax = plt.subplots(figsize=(14, 8.6))
    ax.set_xlim(-0.9, 14.0)
    ax.set_ylim(-0.35, 9.75)
    ax.axis("off")
    for name in BOXES:
        box(ax, name)
    top_core = 0.6 + 1.25
    # comm and every op include src/core (and their own folder); moe's arrow runs beside comm.
    arrow(ax, [(0.85, 2.55), (0.85, top_core)])
    arrow(ax, [(1.9, 4.8), (1.9, top_core)])
    for name in ("gemm", "attention", "stream"):
        x = BOXES[name][0] + W / 2
        arrow(ax, [(x, 4.8), (x, top_core)])
    # the CLI links the bench library and includes its interface (the bench subcommands).
    arrow(ax, [(W, 7.3), (W + GAP, 7.3)])
    note(ax, (W + GAP / 2, 8.25), "warpspec.c -> bench.h\n(links warpspec_bench)", ha="center", va="bottom")
    # the CLI includes src/core too, down the left margin.
    arrow(ax, [(0.0, 7.55), (-0.45, 7.55), (-0.45, 1.2), (0.0, 1.2)])
    # tests and bench share their data generators through testdata/, not through each other.
    arrow(ax, [(4.05, 8.15), (4.05, 8.5)])
    arrow(ax, [(5.85, 8.15), (5.85, 8.5)])
    # tests: any src/ folder (white box).
    tx = BOXES["tests"][0] + W / 2
    arrow(ax, [(tx, 7.0), (tx, 5.9)], label="tests may include every\nsrc/ folder (white box)", at=(tx + 0.08, 6.45))
    # The listed exceptions (tools/check_includes.py, EXCEPTIONS), dashed.
    red = "#c0392b"
    arrow(ax, [(W, 5.55), (W + GAP, 5.55)], dashed=True)
    note(ax, (2.3, 4.45), "moe/layer/layer_*.cu* (the fused MoE kernel) ->\ngemm's FP8 wgmma issue, epilogue, tile schedule",
         red, va="top")
    # Every folder on the left includes the public headers; the kernel headers include the host ones.
    ax.plot([10.05, 10.05], [0.6, 8.15], color="#222222", lw=1.4)
    arrow(ax, [(10.05, 6.95), (10.6, 6.95)])
    arrow(ax, [(10.05, 1.8), (10.6, 1.8)])
    note(ax, (10.2, 4.9), "every folder on the left may\ninclude the public headers\n(src/cli: the C API only)")
    arrow(ax, [(13.3, 5.75), (13.3, 3.0)])
    note(ax, (13.2, 3.55), "device headers include\n../tma.h, ../diag.h ...;\nnever the other way", ha="right")
    ax.text(-0.85, 9.6, "warpspec: layers and the include direction (an arrow points at what may be included; "
            "checked by tools/check_includes.py)", fontsize=11, fontweight="bold", ha="left", va="center")
    ax.plot([9.0, 9.5], [-0.15, -0.15], color="#222222", lw=1.4)
    ax.text(9.6, -0.15, "allowed", fontsize=8, va="center")
    ax.plot([10.6, 11.1], [-0.15, -0.15], color="#c0392b", lw=1.4, ls=(0, (4, 3)))
    ax.text(11.2, -0.15, "listed exception", fontsize=8, va="center")
    fig.savefig(dst, dpi=110, bbox_inches="tight")
    print("wrote", dst)


if __name__ == "__main__":
    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    main(sys.argv[1] if len(sys.argv) > 1 else os.path.join(root, "docs", "img", "architecture.png"))
