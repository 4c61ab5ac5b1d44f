#!/usr/bin/env python3
"""check_includes.py - the include direction of docs/architecture.md, checked.

    python3 tools/check_includes.py              check the tree; exit 0 clean, 1 otherwise
    python3 tools/check_includes.py --graph      also print which folder includes which
    python3 tools/check_includes.py --self-test  check the checker on a tree it builds

Every #include "..." (and <warpspec/...>) of every C, CUDA and shell file under src/,
include/, testdata/, tests/ and bench/ is resolved the way the compiler would find it
(the including file's folder, then include/, then bench/, the bench library's
interface), and the folder it lands in must be one the including folder may use. Why
a script and not a review habit: a crossing costs one line to write and is invisible in
a diff of that line; once two areas include each other's private headers, neither can
change its internals alone. The rules are the table ALLOWED below; the crossings that exist on
purpose are EXCEPTIONS, each with its reason. An exception that matches nothing any
more is reported too, so the list stays the list of crossings that exist.
Standard library only: it runs first in CI, before anything is installed or built.
"""

import argparse
import fnmatch
import os
import re
import shutil
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCANNED = ("src", "include", "testdata", "tests", "bench")
# Shell files count: the CPU tests compile kernels from here-documents (check_*.sh).
SUFFIXES = (".c", ".h", ".cu", ".cuh", ".cc", ".cpp", ".hpp", ".inl", ".sh")
# Where a quoted include is looked for after the including file's own folder: include/
# for every target, bench/ for the CLI (warpspec_bench exports it, CMakeLists.txt).
SEARCH = ("include", "bench")
INCLUDE_RE = re.compile(r'^\s*#\s*include\s*(?:"([^"]+)"|<(warpspec/[^>]+)>)')

PUBLIC = "include/warpspec"          # the installed C API: plain C11 headers
DEVICE = "include/warpspec/device"   # the installed kernel-author headers (CUDA C)
OPS = ("src/gemm", "src/moe", "src/attention", "src/stream")
HEADERS = {PUBLIC, DEVICE}

# Which folders each folder may include, besides itself. Read it bottom-up: the public
# headers stand alone (a user compiles them with nothing else), core sees only them,
# comm and every op see core, the tools on top see what they drive: the CLI links the
# bench library (warpspec_bench) and includes its interface, bench.h. Tests alone may
# read the private headers of any src/ folder: they test internals (schedules walked
# on the host, argument checks, geometry) that the public API does not expose. testdata/
# is the data both tests and benchmarks draw (header-only generators): it sits beside
# them, under both, so neither includes the other to share one copy.
ALLOWED = {
    PUBLIC: set(),
    DEVICE: {PUBLIC},
    "src/core": HEADERS,
    "src/comm": HEADERS | {"src/core"},
    **{op: HEADERS | {"src/core"} for op in OPS},
    "src/cli": {PUBLIC, "src/core", "bench"},
    "testdata": HEADERS,
    "bench": HEADERS | {"testdata"},
    "tests": HEADERS | {"testdata"},  # and every src/ folder: rule_broken
}

# Crossings that exist on purpose: (including file, included file, reason), shell
# patterns on paths from the repository root. Add one only with its reason; removing
# the include means removing its line here.
EXCEPTIONS = [
    ("src/moe/layer/layer_*.cu*", "src/gemm/*.cuh",
     "the fused MoE kernel (layer_kernel.cu, its types, loader, math and schedule parts) runs the GEMM's FP8 "
     "wgmma issue (fp8_issue), TMA-store epilogue (gemm_store_fragment) and tile schedule (gemm_shape, "
     "gemm_tile_at) as they are, not copies"),
]


def unit_of(rel):
    """The folder a file belongs to, as the rules name it."""
    parts = rel.split("/")
    if parts[0] == "include":
        return DEVICE if rel.startswith(DEVICE + "/") else PUBLIC
    if parts[0] == "src" and len(parts) > 2:
        return "src/" + parts[1]
    return parts[0]  # testdata, tests, bench (tests/cpu and tests/gpu are one layer)


def rule_broken(src, dst):
    """None if folder src may include folder dst, else the rule it breaks, in words."""
    if src == dst or dst in ALLOWED.get(src, set()) or (src == "tests" and dst.startswith("src/")):
        return None
    if src not in ALLOWED:
        return ("a folder the rules do not know: give it a line in ALLOWED in tools/check_includes.py "
                "(a new op folder goes in OPS) and a place in docs/architecture.md")
    if src == PUBLIC and dst == DEVICE:
        return "host headers are plain C: include/warpspec/*.h never include device/*.cuh"
    if src in HEADERS:
        return "public headers are installed alone: they include only include/warpspec"
    if src == "src/core" and dst.startswith("src/"):
        return "src/core is the bottom layer: it includes no other src/ folder"
    if src.startswith("src/") and dst in ("testdata", "tests", "bench"):
        return ("nothing in src/ includes tests/, bench/ or testdata/ (the CLI alone includes bench.h, the bench "
                "library's interface)")
    if src in OPS and dst == "src/cli":
        return "ops do not include the CLI: it sits above them"
    if src in OPS + ("src/comm",) and dst.startswith("src/"):
        return "an area includes src/core and its own folder only; another area's private headers are a listed exception"
    if src == "src/cli":
        return "the CLI includes the public API, src/core and bench/; anything else is a listed exception"
    if src == "testdata":
        return ("testdata/ is shared by tests/ and bench/ and depends on neither: it includes only the public "
                "headers and testdata/")
    if src == "bench":
        return "benchmarks measure the public API: bench/ includes only include/warpspec, testdata/ and bench/"
    if src == "tests":
        return "tests include include/, src/, testdata/ and tests/, never bench/"
    return "'%s' may include only %s" % (src, ", ".join(sorted(ALLOWED[src] | {src})))


def scan(root):
    """Every include in the scanned folders: (file, line, text, resolved or None)."""
    found = []
    for top in SCANNED:
        for dirpath, dirnames, filenames in os.walk(os.path.join(root, top)):
            dirnames[:] = sorted(d for d in dirnames if not d.startswith((".", "build")) and d != "__pycache__")
            for name in sorted(filenames):
                if not name.endswith(SUFFIXES):
                    continue
                path = os.path.join(dirpath, name)
                rel = os.path.relpath(path, root).replace(os.sep, "/")
                with open(path, encoding="utf-8", errors="replace") as f:
                    for n, line in enumerate(f, 1):
                        m = INCLUDE_RE.match(line)
                        if m:
                            text = m.group(1) or m.group(2)
                            found.append((rel, n, text, resolve(root, rel, text, quoted=m.group(1) is not None)))
    return found


def resolve(root, rel, text, quoted):
    """The file an include reaches, relative to root, or None if none in the tree."""
    bases = ([os.path.dirname(rel)] if quoted else []) + list(SEARCH if quoted else ("include",))
    for base in bases:
        cand = os.path.normpath(os.path.join(base, text)).replace(os.sep, "/")
        if not cand.startswith("../") and os.path.isfile(os.path.join(root, cand)):
            return cand
    return None


def excepted(exceptions, rel, target, used):
    for i, (src, dst, _) in enumerate(exceptions):
        if fnmatch.fnmatchcase(rel, src) and fnmatch.fnmatchcase(target, dst):
            used.add(i)
            return True
    return False


def check(root, exceptions):
    """(problems, includes, graph): problems as 'file:line: ...' sentences; graph maps
    (from folder, to folder) to [count, how many of them are listed exceptions]."""
    problems, graph, used = [], {}, set()
    found = scan(root)
    for rel, n, text, target in found:
        if target is None:
            problems.append('%s:%d: #include "%s" reaches no file of the tree (looked beside the file, then in %s); '
                            "a system or external header goes in <...>" % (rel, n, text, ", ".join(SEARCH)))
            continue
        src, dst = unit_of(rel), unit_of(target)
        edge = graph.setdefault((src, dst), [0, 0])
        edge[0] += 1
        why = rule_broken(src, dst)
        if why is None:
            continue
        if excepted(exceptions, rel, target, used):
            edge[1] += 1
            continue
        problems.append('%s:%d: #include "%s" (%s) goes from %s to %s: %s' % (rel, n, text, target, src, dst, why))
    for i, (src, dst, _) in enumerate(exceptions):
        if i not in used:
            problems.append("tools/check_includes.py: the exception %s -> %s matches no include any more: remove it "
                            "from EXCEPTIONS (and from docs/architecture.md)" % (src, dst))
    return problems, found, graph


def print_graph(graph, out):
    order = [PUBLIC, DEVICE, "src/core", "src/comm", *OPS, "src/cli", "testdata", "bench", "tests"]
    rank = {u: i for i, u in enumerate(order)}
    units = sorted({s for s, _ in graph}, key=lambda u: (rank.get(u, len(order)), u))
    print("folder -> folders its includes reach (includes; listed exceptions marked)", file=out)
    for s in units:
        edges = sorted(((d, c) for (s2, d), c in graph.items() if s2 == s), key=lambda e: (rank.get(e[0], len(order)), e[0]))
        parts = ["%s (%d%s)" % (d, c[0], ", %d excepted" % c[1] if c[1] else "") for d, c in edges]
        print("  %-24s -> %s" % (s, ", ".join(parts)), file=out)


def self_test():
    """A small tree, first clean, then with violations: each must be reported with its
    file, line and rule, and the command must exit 1, so the check cannot pass
    everything without this test failing."""
    files = {
        "include/warpspec/status.h": "",
        "include/warpspec/plan.h": '#include "status.h"\n',
        "include/warpspec/device/role.cuh": '#include "../plan.h"\n#include "warpspec/status.h"\n',
        "src/core/internal.h": '#include "warpspec/plan.h"\n',
        "src/core/plan.c": '#include "internal.h"\n',
        "src/comm/comm_internal.h": '#include "../core/internal.h"\n',
        "src/gemm/gemm_args.h": '#include "warpspec/plan.h"\n',
        "src/gemm/gemm.cu": '#include "../core/internal.h"\n#include "gemm_args.h"\n#include <warpspec/device/role.cuh>\n',
        "src/moe/ep.cu": '#include "../core/internal.h"\n',
        "src/cli/cli.c": '#include "../core/internal.h"\n#include "bench.h"\n',
        "testdata/random.h": '#include "warpspec/status.h"\n',
        "testdata/attention.h": '#include "random.h"\n',
        "bench/bench.h": '#include "warpspec/status.h"\n',
        "bench/bench_attn.cu": '#include "../testdata/attention.h"\n#include "bench.h"\n',
        "tests/test.h": '#include "warpspec/plan.h"\n',
        "tests/cpu/test_gemm.c": '#include "../test.h"\n#include "../../src/gemm/gemm_args.h"\n',
        "tests/gpu/attention/nsa.cuh": '#include "../../../testdata/attention.h"\n',
    }
    bad = [  # (file, line appended, words the report must contain)
        ("include/warpspec/plan.h", '#include "../../src/core/internal.h"', "public headers are installed alone"),
        ("include/warpspec/status.h", '#include "device/role.cuh"', "host headers are plain C"),
        ("src/core/plan.c", '#include "../gemm/gemm_args.h"', "src/core is the bottom layer"),
        ("src/gemm/gemm.cu", '#include "../moe/ep.cu"', "an area includes src/core and its own folder only"),
        ("src/moe/ep.cu", '#include "../cli/cli.c"', "ops do not include the CLI"),
        ("src/moe/ep.cu", '  #  include "../../tests/test.h"', "nothing in src/ includes tests/, bench/"),
        ("src/gemm/gemm.cu", '#include "../../bench/bench.h"', "nothing in src/ includes tests/, bench/"),
        ("src/gemm/gemm.cu", '#include "../../testdata/random.h"', "nothing in src/ includes tests/, bench/ or testdata/"),
        ("testdata/random.h", '#include "../tests/test.h"', "testdata/ is shared by tests/ and bench/"),
        ("testdata/attention.h", '#include "bench.h"', "testdata/ is shared by tests/ and bench/"),
        ("testdata/attention.h", '#include "../src/core/internal.h"', "testdata/ is shared by tests/ and bench/"),
        ("src/cli/cli.c", '#include "../gemm/gemm_args.h"', "the CLI includes the public API, src/core and bench/"),
        ("bench/bench.h", '#include "../src/core/internal.h"', "benchmarks measure the public API"),
        ("tests/test.h", '#include "../bench/bench.h"', "never bench/"),
        ("src/gemm/gemm.cu", '#include "no_such_file.h"', "reaches no file of the tree"),
    ]
    failures = []
    tmp = tempfile.mkdtemp(prefix="check_includes.")
    try:
        for rel, text in files.items():
            os.makedirs(os.path.dirname(os.path.join(tmp, rel)), exist_ok=True)
            with open(os.path.join(tmp, rel), "w") as f:
                f.write(text)
        problems, found, _ = check(tmp, [])
        want = sum(text.count("#include") for text in files.values())
        if problems or len(found) != want:
            failures.append("the clean tree: expected %d includes and no problem, got %d and %s"
                            % (want, len(found), problems))
        lines = {}
        for rel, line, _ in bad:
            with open(os.path.join(tmp, rel), "a") as f:
                f.write(line + "\n")
            lines[(rel, line)] = sum(1 for _ in open(os.path.join(tmp, rel)))
        problems, _, _ = check(tmp, [])
        for rel, line, words in bad:
            where = "%s:%d:" % (rel, lines[(rel, line)])
            if not any(p.startswith(where) and words in p for p in problems):
                failures.append("not reported: %s %s (expected '%s')" % (where, line.strip(), words))
        if len(problems) != len(bad):
            failures.append("expected %d problems, got %d:\n    %s" % (len(bad), len(problems), "\n    ".join(problems)))
        # A listed exception silences its include and nothing else; a stale one is reported.
        exc = [("src/core/plan.c", "src/gemm/*.h", "test"), ("src/stream/*", "src/core/*", "stale")]
        problems2, _, graph = check(tmp, exc)
        if any(p.startswith("src/core/plan.c:") for p in problems2) or len(problems2) != len(bad):
            failures.append("the exception src/core/plan.c -> src/gemm/*.h was not applied as listed: %s" % problems2)
        if graph.get(("src/core", "src/gemm")) != [1, 1]:
            failures.append("the graph does not count the excepted include: %s" % graph.get(("src/core", "src/gemm")))
        if not any("src/stream/* -> src/core/* matches no include" in p for p in problems2):
            failures.append("a stale exception was not reported")
        # The command itself: exit status 1 and the file:line in its output.
        run = subprocess.run([sys.executable, os.path.abspath(__file__), "--root", tmp],
                             stdout=subprocess.PIPE, stderr=subprocess.STDOUT, universal_newlines=True)
        if run.returncode != 1 or "src/core/plan.c:2:" not in run.stdout:
            failures.append("the command on the bad tree: exit %d, output:\n%s" % (run.returncode, run.stdout))
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    for f in failures:
        print("check_includes self-test FAILED: " + f)
    if not failures:
        print("check_includes self-test: %d planted violations reported with file, line and rule; "
              "the clean tree passes; exceptions apply and go stale as listed" % len(bad))
    return 1 if failures else 0


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--graph", action="store_true", help="print the folder-level include graph")
    ap.add_argument("--self-test", action="store_true", help="check the checker on a tree it builds")
    ap.add_argument("--root", default=ROOT, help="the tree to check (default: this repository)")
    a = ap.parse_args()
    if a.self_test:
        return self_test()
    exceptions = EXCEPTIONS if os.path.abspath(a.root) == ROOT else []
    problems, found, graph = check(a.root, exceptions)
    if a.graph:
        print_graph(graph, sys.stdout)
    for p in problems:
        print(p)
    files = len({rel for rel, _, _, _ in found})
    if problems:
        print("check_includes: %d problem(s); the layering and its exceptions: docs/architecture.md" % len(problems))
        return 1
    print("check_includes: %d includes in %d files follow the layering (%d listed exceptions)"
          % (len(found), files, len(exceptions)))
    return 0


if __name__ == "__main__":
    sys.exit(main())
