"""plot_trace.py CSV PNG [--roles NAME,NAME,...] - a role timeline (ws_trace_stop's CSV) as
one lane per role replica: the work items as bars, the waits over them in colour (what the
role waited for: a pipe stage from its writer, a free slot from its readers, rows from
other blocks, a peer, the schedule another block wrote). Lanes are named by the role table (the CSV's role_name); --roles
NAME,NAME names them by index instead, for CSVs without names."""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402

WAIT_COLOURS = {"stage": "#d62728", "slot": "#ff7f0e", "rows": "#9467bd", "peer": "#8c564b", "schedule": "#17becf",
                "epilogue": "#2ca02c"}


def spans(events, begin, end, key):
    """Pairs each begin with the next end of the same key, in time order."""
    open_at, out = {}, []
    for e in events:
        k = key(e)
        if e["event"] == begin:
            open_at[k] = e
        elif e["event"] == end and k in open_at:
            b = open_at.pop(k)
            out.append((b, e))
    return out


def main(argv):
    args = [a for a in argv[1:] if not a.startswith("--roles")]
    names = {}
    for a in argv[1:]:
        if a.startswith("--roles="):
            names = dict(enumerate(a.split("=", 1)[1].split(",")))
    if "--roles" in argv:
        i = argv.index("--roles")
        names = dict(enumerate(argv[i + 1].split(",")))
        args = [a for a in args if a != argv[i + 1]]
    if len(args) != 2:
        print(__doc__)
        return 2
    rows = list(csv.DictReader(open(args[0])))
    for r in rows:
        r["t_us"] = int(r["t_ns"]) / 1000.0
    for r in rows:  # a lane per role replica; named by the role table (role_name), or --roles
        r["lane"] = (r.get("role_name") or names.get(int(r["role"]), "role %s" % r["role"]), int(r["replica"]))
    lanes = sorted({r["lane"] for r in rows})
    y = {lane: i for i, lane in enumerate(lanes)}
    fig, ax = plt.subplots(figsize=(14, 1.2 + 0.8 * len(lanes)))
    for lane in lanes:
        ev = [r for r in rows if r["lane"] == lane]
        for b, e in spans(ev, "item_begin", "item_end", lambda r: "item"):
            ax.barh(y[lane], e["t_us"] - b["t_us"], left=b["t_us"], height=0.6, color="#a6c8e8", edgecolor="#3b75af")
            if e["t_us"] - b["t_us"] > 0:
                ax.text(b["t_us"], y[lane] - 0.32, b["arg"], fontsize=5, va="bottom")
        for b, e in spans(ev, "wait_begin", "wait_end", lambda r: r["what"]):
            ax.barh(y[lane], e["t_us"] - b["t_us"], left=b["t_us"], height=0.3, color=WAIT_COLOURS.get(b["what"], "k"))
    ax.set_yticks(range(len(lanes)))
    ax.set_yticklabels([f"{n} {p}" for n, p in lanes])
    ax.set_xlabel("microseconds from the first event")
    handles = [plt.Rectangle((0, 0), 1, 1, color="#a6c8e8", ec="#3b75af")]
    labels = ["work item (number above)"]
    for what, colour in WAIT_COLOURS.items():
        handles.append(plt.Rectangle((0, 0), 1, 1, color=colour))
        labels.append(f"waits for {what}")
    ax.legend(handles, labels, loc="upper right", fontsize=7, ncol=5)
    ax.invert_yaxis()
    fig.tight_layout()
    fig.savefig(args[1], dpi=130)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
