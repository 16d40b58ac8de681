#!/usr/bin/env python3
"""trace_phases.py — the MoE routing kernel's phases in a MELD_TRACE file (Chrome JSON from
src/host/trace.c, .gz too): per (role, item) the count and the median / min / max duration in
microseconds (role "route": item = phase, 0 entry, 1 count, 2 scans, 3 place, 4 counts exchange,
5 layout, 6 tables, 7 exit; other roles, e.g. "comm" = the dispatch's copy units, all items
together), the routing kernel's time per call (the sum of CTA 0's phases: with several routing
CTAs CTA 0 runs last), and the kernel boundaries around it (its exit's end -> the next other
event's start; the last other event's end -> its entry's start).
Usage: trace_phases.py TRACE.json[.gz] [ROLE ...]   (default roles: route comm)
Exit status: 0 printed, 2 bad input."""
import bisect
import os
import statistics
import sys
from collections import defaultdict

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import trace_stats  # noqa: E402  (its load: plain or gzip JSON)

PHASES = ["entry", "count", "scans", "place", "exchange", "layout", "tables", "exit"]
ENTRY, EXIT = 0, 7


def load(path):
    """The complete ("X") events of a trace file (read by trace_stats.load)."""
    return [e for e in trace_stats.load(path)["traceEvents"] if e.get("ph") == "X"]


def phase_durations(events, roles):
    """(role, item) -> durations (us); item -1 for roles other than "route"."""
    by = defaultdict(list)
    for e in events:
        if e["name"] in roles:
            by[(e["name"], e["args"]["item"] if e["name"] == "route" else -1)].append(float(e["dur"]))
    return by


def route_calls(events):
    """The routing kernel's time per call (epoch): the sum of CTA 0's route phases."""
    calls = defaultdict(float)
    for e in events:
        if e["name"] == "route" and e.get("tid", 0) == 0:
            calls[e["args"]["epoch"]] += float(e["dur"])
    return sorted(calls.values())


def boundaries(events):
    """(after, before): per call, CTA 0's exit end -> the next non-route event's start, and the
    last non-route event's end -> CTA 0's entry start (us)."""
    starts = sorted(float(e["ts"]) for e in events if e["name"] != "route")
    ends = sorted(float(e["ts"]) + float(e["dur"]) for e in events if e["name"] != "route")
    after, before = [], []
    for e in events:
        if e["name"] != "route" or e.get("tid", 0) != 0:
            continue
        t0, t1 = float(e["ts"]), float(e["ts"]) + float(e["dur"])
        if e["args"]["item"] == EXIT:
            i = bisect.bisect_right(starts, t1)
            if i < len(starts):
                after.append(starts[i] - t1)
        if e["args"]["item"] == ENTRY:
            i = bisect.bisect_left(ends, t0)
            if i > 0:
                before.append(t0 - ends[i - 1])
    return after, before


def main(argv):
    if not argv:
        print(__doc__.strip().splitlines()[-2])
        return 2
    try:
        events = load(argv[0])
    except (OSError, ValueError, KeyError) as err:
        print(f"trace_phases: {argv[0]}: {err}")
        return 2
    roles = argv[1:] or ["route", "comm"]
    print(f"{'role':8s} {'item':10s} {'n':>6s} {'median_us':>10s} {'min_us':>8s} {'max_us':>8s}")
    for (role, item), d in sorted(phase_durations(events, roles).items()):
        name = PHASES[item] if role == "route" and 0 <= item < len(PHASES) else str(item)
        print(f"{role:8s} {name:10s} {len(d):6d} {statistics.median(d):10.2f} {min(d):8.2f} {max(d):8.2f}")
    v = route_calls(events)
    if v:
        print(f"route kernel per call: n {len(v)} median {statistics.median(v):.2f} us min {v[0]:.2f} max {v[-1]:.2f}")
    after, before = boundaries(events)
    for name, d in (("route exit -> next kernel's first event", after),
                    ("previous event's end -> route entry", before)):
        if d:
            print(f"{name}: n {len(d)} median {statistics.median(d):.2f} us min {min(d):.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
