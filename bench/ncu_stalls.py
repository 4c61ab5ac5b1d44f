"""ncu_stalls.py CSV [TOP] - where a kernel's warps wait, from Nsight Compute's source page:
`ncu -i REP --page source --csv --print-source sass > CSV` (ncu 2025+ takes
`--print-metric-name name` on the details page only). Prints the total of warp-state
samples and the TOP (default 15) SASS instructions by samples; where the columns are metric
names (older ncu with `--print-metric-name name`) also their split by stall reason (the
smsp__pcsamp_warps_issue_stalled_* columns) and each line's leading reasons; with the
titles ncu prints by default it takes the "Warp Stall Sampling (All Samples)" column and
names no reasons. A file with several kernels' tables gives one summary each, titled by the
line before its table ("==PROF==" lines skipped).

The split by reason per kernel comes from the raw page instead:
`ncu -i REP --page raw --csv --metrics regex:smsp__pcsamp_warps_issue_stalled_ > CSV`;
given such a file (no source table) the script prints each kernel's reasons."""
import csv
import sys

STALL = "smsp__pcsamp_warps_issue_stalled_"


def number(text):
    try:
        return float(text.replace(",", "")) if text not in ("", None) else 0.0
    except ValueError:
        return 0.0


def read(path):
    """The source tables of the file, [(title, head, body)]: one per kernel profiled; the
    title is the last line before the table that is not ncu's own chatter."""
    tables, title, cur = [], "", None
    for line in open(path, newline="").read().splitlines():
        if "Address" in line and "Source" in line:
            head = next(csv.reader([line]))
            cur = (title, head, [])
            tables.append(cur)
            continue
        row = next(csv.reader([line]), [])
        if cur is not None and len(row) == len(cur[1]):
            cur[2].append(row)
        elif line.strip() and not line.startswith("==PROF=="):
            title, cur = line.strip(), None
    return tables


def raw_reasons(path):
    """A raw-page CSV (one row per kernel launch, a units row under the titles): per launch,
    its kernel name and stall reasons by share of samples, largest first; [] if none."""
    rows = list(csv.reader(open(path, newline="").read().splitlines()))
    head_at = next((i for i, r in enumerate(rows) if any(c.startswith(STALL) for c in r)), None)
    if head_at is None:
        return []
    head = rows[head_at]
    name = next((i for i, c in enumerate(head) if c == "Kernel Name"), None)
    cols = [(i, c[len(STALL):]) for i, c in enumerate(head) if c.startswith(STALL) and not c.endswith("_not_issued")]
    if not cols:
        return []
    out = []
    for r in rows[head_at + 1:]:
        if len(r) != len(head) or not r[cols[0][0]].replace(",", "").replace(".", "").isdigit():
            continue  # the units row, or chatter
        vals = sorted(((number(r[i]), n) for i, n in cols), reverse=True)
        total = sum(v for v, _ in vals) or 1.0
        out.append((r[name] if name is not None else "kernel",
                    [(n, 100 * v / total) for v, n in vals if v > 0]))
    return out


def summarize(head, body, top=15):
    col = {name: i for i, name in enumerate(head)}
    src = next(i for i, n in enumerate(head) if n.strip('" ') == "Source")
    addr = next(i for i, n in enumerate(head) if "Address" in n)
    reasons = [n for n in head if n.startswith(STALL) and not n.endswith("_not_issued")]
    if reasons:
        per_line = [sum(number(r[col[n]]) for n in reasons) for r in body]
    else:
        tot = next((i for i, n in enumerate(head) if n.startswith("Warp Stall Sampling (All")
                    or n == "smsp__pcsamp_sample_count"), None)
        if tot is None:
            raise SystemExit("no stall columns: run ncu with --set full (source counters) and --print-metric-name name")
        per_line = [number(r[tot]) for r in body]
    total = sum(per_line) or 1.0
    out = [f"total samples {total:.0f}"]
    if reasons:
        by = sorted(((sum(number(r[col[n]]) for r in body), n[len(STALL):]) for n in reasons), reverse=True)
        out.append("by reason: " + ", ".join(f"{name} {100 * v / total:.1f}%" for v, name in by if v > 0))
    order = sorted(range(len(body)), key=lambda i: per_line[i], reverse=True)[:top]
    for i in order:
        r = body[i]
        lead = ""
        if reasons:
            parts = sorted(((number(r[col[n]]), n[len(STALL):]) for n in reasons), reverse=True)[:2]
            lead = "  (" + ", ".join(f"{name} {100 * v / total:.1f}%" for v, name in parts if v > 0) + ")"
        out.append(f"{100 * per_line[i] / total:5.1f}% {r[addr]:>18}  {r[src].strip()[:60]}{lead}")
    return out


def main(argv):
    if len(argv) not in (2, 3):
        print(__doc__)
        return 2
    tables = read(argv[1])
    if not tables:
        launches = raw_reasons(argv[1])
        if not launches:
            raise SystemExit(f"{argv[1]}: no source table (a line naming Address and Source columns) and no "
                             f"{STALL}* columns")
        for kernel, parts in launches:
            print(f"{kernel[:90]}: " + ", ".join(f"{n} {p:.1f}%" for n, p in parts[:8]))
        return 0
    for n, (title, head, body) in enumerate(tables):
        if len(tables) > 1:
            print(f"== {title or 'kernel %d' % n}")
        print("\n".join(summarize(head, body, int(argv[2]) if len(argv) == 3 else 15)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
