"""The trace readers in bench/ (no GPU): bench/trace_probes.py on a made-up probe trace of
the fused MoE kernel's layout (math: 4 points per tile, loader: 5; base 0 L1, 10 L2) gives
the time between consecutive points per role and kind, and says so when a trace has no
probe events."""

import csv
import os
import subprocess
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
PROBES = os.path.join(HERE, "..", "..", "bench", "trace_probes.py")
# bench/ is the source tree's, not the package's: tests copied beside a wheel skip these
pytestmark = pytest.mark.skipif(not os.path.exists(PROBES), reason="needs the source tree (bench/trace_probes.py)")
FIELDS = ["t_ns", "role_name", "role", "replica", "event", "arg", "what", "sm"]


def write(path, rows):
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=FIELDS)
        w.writeheader()
        for r in rows:
            w.writerow(r)


def probe(t, role, replica, arg):
    return dict(t_ns=t, role_name=role, role=0 if role == "X_MATH" else 1, replica=replica, event="probe", arg=arg,
                what="point", sm=5)


def test_trace_probes_reports_each_stretch(tmp_path):
    rows, t = [], 0
    for item in range(12):
        base = 0 if item < 6 else 10
        steps = [300, 40000, 2000] if base == 0 else [1600, 10000, 900]  # wait, K loop, epilogue (ns)
        t0 = t
        for k, dt in enumerate([0] + steps):
            t0 += dt
            rows.append(probe(t0, "X_MATH", 0, base + k))
        l0 = t
        for k, dt in enumerate([0, 200, 300, 500, 30000]):
            l0 += dt
            rows.append(probe(l0, "X_LOADER", 0, base + k))
        t = max(t0, l0) + 100
    rows.append(dict(t_ns=0, role_name="X_MATH", role=0, replica=0, event="item_begin", arg=0, what="item", sm=5))
    path = tmp_path / "p.csv"
    write(path, rows)
    out = subprocess.run([sys.executable, PROBES, str(path)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()[1:]
    assert any("L1 K loop" in l and " 40.00 " in l and "n 6" in l for l in lines), out
    assert any("L2 epilogue" in l and "  0.90 " in l for l in lines), out
    assert any("X_LOADER" in l and "act rows ready" in l and "  0.50 " in l for l in lines), out


def test_trace_probes_without_probes(tmp_path):
    path = tmp_path / "p.csv"
    write(path, [dict(t_ns=0, role_name="X_MATH", role=0, replica=0, event="item_begin", arg=0, what="item", sm=5)])
    out = subprocess.run([sys.executable, PROBES, str(path)], capture_output=True, text=True, check=True).stdout
    assert "no probe events" in out


NCU_STALLS = os.path.join(HERE, "..", "..", "bench", "ncu_stalls.py")


def test_ncu_stalls_ranks_lines_and_reasons(tmp_path):
    """bench/ncu_stalls.py on a made-up source-page CSV (ncu's preamble, metric-name
    columns): the totals by reason and the lines in order of their samples."""
    path = tmp_path / "src.csv"
    head = ["# Address", "Source", "smsp__pcsamp_warps_issue_stalled_long_scoreboard",
            "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued", "smsp__pcsamp_warps_issue_stalled_barrier",
            "smsp__pcsamp_warps_issue_stalled_wait"]
    rows = [["0x10", "LDG.E R2, [R4.64]", "600", "590", "0", "10"],
            ["0x20", "WARPGROUP.DEPBAR.LE gsb0, 0x0", "0", "0", "0", "300"],
            ["0x30", "BAR.SYNC 0x1", "0", "0", "90", "0"]]
    with open(path, "w", newline="") as f:
        f.write("==PROF== Connected to process 1\n  kernel_name (1, 1, 1)x(384, 1, 1)\n")
        w = csv.writer(f)
        w.writerow(head)
        w.writerows(rows)
    out = subprocess.run([sys.executable, NCU_STALLS, str(path), "2"], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0] == "total samples 1000"
    assert lines[1] == "by reason: long_scoreboard 60.0%, wait 31.0%, barrier 9.0%"
    assert lines[2].startswith(" 61.0%") and "LDG.E" in lines[2] and "long_scoreboard 60.0%" in lines[2]
    assert lines[3].startswith(" 30.0%") and "DEPBAR" in lines[3]
    assert len(lines) == 4


def test_ncu_stalls_one_summary_per_kernel(tmp_path):
    """Two kernels' tables in one file: a titled summary for each, never one mixed total."""
    path = tmp_path / "two.csv"
    head = ["# Address", "Source", "smsp__pcsamp_warps_issue_stalled_wait"]
    with open(path, "w", newline="") as f:
        w = csv.writer(f)
        for name, v in (("gemm_fp8_kernel (8, 1, 1)x(288, 1, 1)", "70"), ("sm90_xmma_gemm (8, 1, 1)x(384, 1, 1)", "30")):
            f.write(name + "\n")
            w.writerow(head)
            w.writerow(["0x10", "HGMMA.64x128x32", v])
    out = subprocess.run([sys.executable, NCU_STALLS, str(path)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines[0].startswith("== gemm_fp8_kernel") and lines[1] == "total samples 70"
    assert any(l.startswith("== sm90_xmma_gemm") for l in lines) and "total samples 30" in lines


def test_ncu_stalls_raw_page_reasons(tmp_path):
    """A raw-page CSV (titles, a units row, one row per launch): each launch's reasons by
    share of its samples, the _not_issued columns left out."""
    path = tmp_path / "raw.csv"
    head = ["ID", "Kernel Name", "smsp__pcsamp_warps_issue_stalled_barrier",
            "smsp__pcsamp_warps_issue_stalled_long_scoreboard", "smsp__pcsamp_warps_issue_stalled_long_scoreboard_not_issued"]
    with open(path, "w", newline="") as f:
        f.write("==PROF== Disconnected\n")
        w = csv.writer(f)
        w.writerow(head)
        w.writerow(["", "", "", "", ""])
        w.writerow(["0", "ours(ws_tmap)", "25", "75", "70"])
        w.writerow(["1", "nvjet_sm90_tst", "1,000", "0", "0"])
    out = subprocess.run([sys.executable, NCU_STALLS, str(path)], capture_output=True, text=True, check=True).stdout
    lines = out.splitlines()
    assert lines == ["ours(ws_tmap): long_scoreboard 75.0%, barrier 25.0%", "nvjet_sm90_tst: barrier 100.0%"]


def test_ncu_stalls_raw_page_only_not_issued(tmp_path):
    """A raw page whose only stall columns are the _not_issued ones has no reasons to give."""
    path = tmp_path / "raw.csv"
    path.write_text("ID,Kernel Name,smsp__pcsamp_warps_issue_stalled_wait_not_issued\n0,k,5\n")
    r = subprocess.run([sys.executable, NCU_STALLS, str(path)], capture_output=True, text=True)
    assert r.returncode != 0 and "no source table" in r.stderr


def test_ncu_stalls_neither_table(tmp_path):
    path = tmp_path / "none.csv"
    path.write_text("==ERROR== Option '--print-metric-name' is only supported for the details page.\n")
    r = subprocess.run([sys.executable, NCU_STALLS, str(path)], capture_output=True, text=True)
    assert r.returncode != 0 and "no source table" in r.stderr
