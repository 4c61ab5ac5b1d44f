"""ncu_stalls.py CSV [TOP] - where a kernel's warps wait, from Nsight Compute's source page:
`ncu -i REP --page source --csv --print-source sass --print-metric-name name > CSV`.
Prints the total of warp-state samples, their split by stall reason (the
smsp__pcsamp_warps_issue_stalled_* columns, summed over the kernel), and the TOP (default
15) SASS instructions by samples with their leading reasons. Without metric names
(the column titles ncu prints by default) it falls back to the "Warp Stall Sampling (All
Samples)" column for the totals and names no reasons. A file with several kernels' tables
gives one summary each, titled by the line before its table ("==PROF==" lines skipped)."""
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
    if not tables:
        raise SystemExit(f"{path}: no source table (a line naming Address and Source columns)")
    return tables


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
    for n, (title, head, body) in enumerate(tables):
        if len(tables) > 1:
            print(f"== {title or 'kernel %d' % n}")
        print("\n".join(summarize(head, body, int(argv[2]) if len(argv) == 3 else 15)))
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
