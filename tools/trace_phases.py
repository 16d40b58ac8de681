#!/usr/bin/env python3
"""trace_phases.py — summarizes a MELD_TRACE file (Chrome JSON from src/host/trace.c) by role and
item: for each (role, item) the count and the median / min duration in microseconds, and for the
comm role the per-CTA busy span. Used for the MoE routing kernel's phases (role "route", item =
phase: 0 entry, 1 count, 2 scans, 3 place, 4 counts exchange, 5 layout, 6 tables, 7 exit).
Usage: trace_phases.py TRACE.json [ROLE ...]   (default roles: route comm)"""
import bisect
import json
import statistics
import sys
from collections import defaultdict

PHASES = ["entry", "count", "scans", "place", "exchange", "layout", "tables", "exit"]


def main():
    path = sys.argv[1]
    roles = sys.argv[2:] or ["route", "comm"]
    with open(path) as f:
        ev = [e for e in json.load(f)["traceEvents"] if e.get("ph") == "X"]
    by = defaultdict(list)
    for e in ev:
        if e["name"] in roles:
            by[(e["name"], e["args"]["item"] if e["name"] == "route" else -1)].append(float(e["dur"]))
    print(f"{'role':8s} {'item':10s} {'n':>6s} {'median_us':>10s} {'min_us':>8s} {'max_us':>8s}")
    for (role, item), d in sorted(by.items()):
        name = PHASES[item] if role == "route" and 0 <= item < len(PHASES) else str(item)
        print(f"{role:8s} {name:10s} {len(d):6d} {statistics.median(d):10.2f} {min(d):8.2f} {max(d):8.2f}")
    # route calls: sum of phases per call (epoch)
    calls = defaultdict(float)  # (CTA 0's phases: the whole kernel's critical path)
    for e in ev:
        if e["name"] == "route" and e.get("tid", 0) == 0:
            calls[e["args"]["epoch"]] += float(e["dur"])
    if calls:
        v = sorted(calls.values())
        print(f"route kernel per call: n {len(v)} median {statistics.median(v):.2f} us min {v[0]:.2f} max {v[-1]:.2f}")
    # kernel boundaries around the routing kernel: its exit's end -> the next event's start (the
    # next kernel's first CTA at work), and the last earlier event's end -> its entry's start
    starts = sorted(float(e["ts"]) for e in ev if e["name"] != "route")
    ends = sorted(float(e["ts"]) + float(e["dur"]) for e in ev if e["name"] != "route")
    after, before = [], []
    for e in ev:
        if e["name"] != "route" or e.get("tid", 0) != 0:
            continue
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if e["args"]["item"] == 7:
            i = bisect.bisect_right(starts, t1)
            if i < len(starts):
                after.append(starts[i] - t1)
        if e["args"]["item"] == 0:
            i = bisect.bisect_left(ends, t0)
            if i > 0:
                before.append(t0 - ends[i - 1])
    for name, d in (("route exit -> next kernel's first event", after),
                    ("previous event's end -> route entry", before)):
        if d:
            print(f"{name}: n {len(d)} median {statistics.median(d):.2f} us min {min(d):.2f}")


if __name__ == "__main__":
    main()
