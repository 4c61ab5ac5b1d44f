"""trace_ep.py CSV... - where the time of one dispatch + combine pair goes, from the role
timelines `warpspec bench ep --trace DIR` writes (every block of ep_route,
ep_send, ep_expand, ep_reduce, ep_gather). Per kernel (its role): the span from the first
block's start to the last block's end, the blocks' median and longest time, and the
median time a block spent in its waits on peers (acks, counts, data flags). Times are
each rank's own %globaltimer from its first event. Standard library only."""
import collections
import csv
import statistics
import sys


def summary(path):
    rows = list(csv.DictReader(open(path)))
    per = collections.defaultdict(lambda: collections.defaultdict(dict))  # role -> (sm, replica) -> fields
    for r in rows:
        b = per[r["role_name"]][(r["sm"], r["replica"])]
        t, e = int(r["t_ns"]), r["event"]
        if e == "item_begin":
            b.setdefault("begin", t)
        elif e == "item_end":
            b["end"] = t
        elif e == "wait_begin":
            b["wb"] = t
        elif e == "wait_end" and "wb" in b:
            b["wait"] = b.get("wait", 0) + t - b.pop("wb")
    out = []
    for role, blocks in per.items():
        bl = [b for b in blocks.values() if "begin" in b and "end" in b]
        if not bl:
            continue
        first, last = min(b["begin"] for b in bl), max(b["end"] for b in bl)
        dur = [b["end"] - b["begin"] for b in bl]
        wait = [b.get("wait", 0) for b in bl]
        out.append((first, role, len(bl), first, last, statistics.median(dur), max(dur), statistics.median(wait)))
    print(path)
    print(f"  {'role':12s} {'blocks':>6s} {'start us':>9s} {'end us':>9s} {'span us':>8s} {'med blk':>8s} "
          f"{'max blk':>8s} {'med wait':>8s}")
    for _, role, n, a, b, md, mx, mw in sorted(out):
        print(f"  {role:12s} {n:6d} {a / 1e3:9.1f} {b / 1e3:9.1f} {(b - a) / 1e3:8.1f} {md / 1e3:8.1f} "
              f"{mx / 1e3:8.1f} {mw / 1e3:8.1f}")


if __name__ == "__main__":
    for p in sys.argv[1:]:
        summary(p)
