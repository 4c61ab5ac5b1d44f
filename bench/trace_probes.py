"""trace_probes.py CSV - the time between consecutive probe points of each role, from a
trace of a WS_PROBES build (cmake -DWS_PROBES=ON; `warpspec bench moe --trace PREFIX
--trace-block B`). A probe writes its points' times as one batch (include/warpspec/device/
trace.cuh), so, unlike the marks' figures (bench/trace_items.py), these carry no round trip
of the trace buffer. Points are grouped per role replica and per base (the kind of work
the role tells apart: 0, 10, ...); a batch starts at its base. Standard library only."""
import collections
import csv
import statistics
import sys

# What the points mean, where a kernel names them: (role, base) -> point names.
NAMES = {
    ("X_MATH", 0): ["wait for the first stage", "L1 K loop", "L1 epilogue"],
    ("X_MATH", 10): ["wait for the first stage", "L2 K loop", "L2 epilogue"],
    ("X_LOADER", 0): ["wait for the item", "first free slot", "(rows: none for L1)", "the other stages"],
    ("X_LOADER", 10): ["wait for the item", "first free slot", "act rows ready", "the other stages"],
    # WS_PROBES_STAGES builds (layer_loader.cuh mx_census): per tile, the slots the loader
    # came to refill, by what held them, printed as us (1 us a slot)
    ("X_LOADER", 30): ["L1: slots free (count)", "L1: landed, math behind", "L1: bytes in flight"],
    ("X_LOADER", 40): ["L2: slots free (count)", "L2: landed, math behind", "L2: bytes in flight"],
    # ... and the loader's own time per tile (SM clocks / 2): in acquire, issuing the copies
    ("X_LOADER", 50): ["L1: loader in acquire", "L1: loader issuing"],
    ("X_LOADER", 60): ["L2: loader in acquire", "L2: loader issuing"],
    # the scheduler warp's first tile (layer_loader.cuh mx_schedule)
    ("X_LOADER", 20): ["claim the item", "wait for the route", "offsets (own route)", "count the tiles",
                       "decode the item", "hand it over"],
}


def batches(rows):
    """{(role, replica, sm): [[(arg, t), ...] per batch]} from the probe events."""
    per = collections.defaultdict(list)
    for r in rows:
        if r["event"] == "probe":
            per[(r["role_name"], r["replica"], r["sm"])].append((int(r["t_ns"]), int(r["arg"])))
    out = {}
    for key, ev in per.items():
        ev.sort()
        cur, runs = None, []
        for t, arg in ev:
            if cur is None or arg % 10 == 0 or arg != cur[-1][0] + 1:
                cur = []
                runs.append(cur)
            cur.append((arg, t))
        out[key] = runs
    return out


def main(path):
    rows = list(csv.DictReader(open(path)))
    spans = collections.defaultdict(list)  # (role, base, i) -> [ns from point i to i + 1]
    for (role, _rep, _sm), runs in batches(rows).items():
        for run in runs:
            base = run[0][0] - run[0][0] % 10
            for (a0, t0), (_a1, t1) in zip(run, run[1:]):
                spans[(role, base, a0 - base)].append(t1 - t0)
    if not spans:
        print(f"{path}: no probe events (a WS_PROBES build?)")
        return
    print(f"{path}: time from each probe point to the next, us (median / mean / 90th percentile, count)")
    for role, base, i in sorted(spans):
        d = [x / 1e3 for x in spans[(role, base, i)]]
        names = NAMES.get((role, base), [])
        name = names[i] if i < len(names) else f"point {i} -> {i + 1}"
        p90 = statistics.quantiles(d, n=10)[-1] if len(d) >= 10 else max(d)
        print(f"  {role:10s} base {base:2d} {name:28s} {statistics.median(d):8.2f} {statistics.mean(d):8.2f} "
              f"{p90:8.2f}  n {len(d)}")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
