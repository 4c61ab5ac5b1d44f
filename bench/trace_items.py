"""trace_items.py CSV - per-item figures of one block of the MoE experts kernel from a role
timeline (`warpspec bench moe --trace PREFIX --trace-block B`): for L1 and L2 tiles (an
L2 tile is one whose loader waited for rows), the median time the math spent on an item,
the math's wait for the item's first stage, its epilogue (traces taken after session 14),
and the loader's gap between the end of one item's loads and the start of the next. Session 14 found the L2 tiles' first-stage wait
(3 us at 8192 tokens) this way. No plotting: standard library only."""
import collections
import csv
import statistics
import sys


def events(rows, role, replica="0"):
    ev = [r for r in rows if r["role_name"] == role and r["replica"] == replica]
    return sorted(ev, key=lambda r: int(r["t_ns"]))


def loader_items(rows):
    """The loader's items by number: begin, end, and its waits (what -> begin, end)."""
    items, cur = {}, None
    for r in events(rows, "X_LOADER"):
        t, e = int(r["t_ns"]), r["event"]
        if e == "item_begin":
            cur = items.setdefault(int(r["arg"]), {"begin": t, "waits": {}})
        elif cur is not None and e in ("wait_begin", "wait_end"):
            cur["waits"].setdefault(r["what"], [None, None])[e == "wait_end"] = t
        elif cur is not None and e == "item_end":
            cur["end"] = t
    return items


def math_items(rows):
    """The math's items by number: (duration, wait for the first stage before it, time in
    the item's epilogue: 0 where the trace has no epilogue marks)."""
    out, stage_begin, stage_wait, epi_begin, epi = {}, None, 0, None, 0
    begin = None
    for r in events(rows, "X_MATH"):
        t, e, what = int(r["t_ns"]), r["event"], r["what"]
        if e == "wait_begin" and what == "stage":
            stage_begin = t
        elif e == "wait_end" and what == "stage" and stage_begin is not None:
            stage_wait = t - stage_begin
        elif e == "wait_begin" and what == "epilogue":
            epi_begin = t
        elif e == "wait_end" and what == "epilogue" and epi_begin is not None:
            epi = t - epi_begin
        elif e == "item_begin":
            begin, epi = (int(r["arg"]), t, stage_wait), 0
        elif e == "item_end" and begin is not None:
            out[begin[0]] = (t - begin[1], begin[2], epi)
            begin = None
    return out


def main(path):
    rows = list(csv.DictReader(open(path)))
    lo, ma = loader_items(rows), math_items(rows)
    order = sorted(lo.items(), key=lambda kv: kv[1]["begin"])
    gaps = {}
    for (_, a), (t, b) in zip(order, order[1:]):
        if "end" in a:
            gaps[t] = b["begin"] - a["end"]
    stats = collections.defaultdict(lambda: collections.defaultdict(list))
    for t, (dur, wait, epi) in ma.items():
        kind = "L2" if t in lo and "rows" in lo[t]["waits"] else "L1"
        stats[kind]["math item"].append(dur)
        stats[kind]["math wait for its first stage"].append(wait)
        if epi:
            stats[kind]["math item's epilogue"].append(epi)
        if t in gaps:
            stats[kind]["loader gap before it"].append(gaps[t])
    print(f"{path}: {len(ma)} math items, {len(lo)} loader items (block of the trace)")
    for kind in sorted(stats):
        for what, v in stats[kind].items():
            print(f"  {kind} {what:32s} n {len(v):4d}  median {statistics.median(v) / 1e3:7.2f} us"
                  f"  sum {sum(v) / 1e3:8.0f} us")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
