#!/usr/bin/env python3
"""test_trace_phases.py — tools/trace_phases.py on a synthetic trace: two calls of a routing kernel
with two CTAs (CTA 1's phases must not count in the per-call time), each followed by a fused
kernel's comm and compute events; the phase medians, the per-call sums, both kernel boundaries,
a gzip file, and the refusals. Prints the lines tests/run.sh sums."""
import gzip
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import trace_phases  # noqa: E402
from pycheck import check, finish  # noqa: E402


def ev(name, tid, ts, dur, item, epoch):
    return {"name": name, "ph": "X", "pid": 0, "tid": tid, "ts": ts, "dur": dur, "args": {"item": item, "epoch": epoch}}


events = [{"name": "process_name", "ph": "M", "pid": 0, "tid": 0, "args": {"name": "rank 0"}}]
t = 0.0
for call, epoch in enumerate((3, 5)):
    t0 = t
    for ph in range(8):  # CTA 0: phase ph lasts ph + 1 us (+ 1 more in the second call)
        d = ph + 1.0 + call
        events.append(ev("route", 0, t, d, ph, epoch))
        t += d
    events.append(ev("route", 1, t0, 100.0, 1, epoch))  # CTA 1: long, but not the per-call time
    t += 4.0 + call  # the boundary to the fused kernel: 4, then 5 us
    events.append(ev("comm", 2, t, 10.0, 0, epoch + 1))
    events.append(ev("compute", 3, t + 1.0, 50.0, 7, 0))
    t += 51.0 + 2.0 + call  # the next routing kernel's entry 2, then 3 us after the last event

by = trace_phases.phase_durations([e for e in events if e.get("ph") == "X"], ["route", "comm"])
check(by[("route", 0)] == [1.0, 2.0], f"entry durations {by[('route', 0)]}")
check(by[("route", 1)] == [2.0, 100.0, 3.0, 100.0], f"count durations (both CTAs) {by[('route', 1)]}")
check(by[("comm", -1)] == [10.0, 10.0], f"comm durations {by[('comm', -1)]}")
check(("compute", -1) not in by, "compute not asked for, yet counted")
xs = [e for e in events if e.get("ph") == "X"]
check(trace_phases.route_calls(xs) == [36.0, 44.0], f"per-call sums {trace_phases.route_calls(xs)}")
after, before = trace_phases.boundaries(xs)
check(after == [4.0, 5.0], f"exit -> next event {after}")
check(before == [2.0], f"previous end -> entry {before} (the first call has none)")

with tempfile.TemporaryDirectory() as d:
    p = os.path.join(d, "t.json.gz")
    with gzip.open(p, "wt") as f:
        json.dump({"traceEvents": events}, f)
    out = io.StringIO()
    with redirect_stdout(out):
        rc = trace_phases.main([p])
    text = out.getvalue()
    check(rc == 0, f"main rc {rc}")
    check("route kernel per call: n 2 median 40.00" in text, f"per-call line missing:\n{text}")
    check("route exit -> next kernel's first event: n 2 median 4.50" in text, f"boundary line missing:\n{text}")
    check("exit" in text and "entry" in text, "phase names missing")
    bad = os.path.join(d, "bad.json")
    with open(bad, "w") as f:
        f.write("{not json")
    with redirect_stdout(io.StringIO()):
        check(trace_phases.main([bad]) == 2, "bad JSON accepted")
        check(trace_phases.main([os.path.join(d, "none.json")]) == 2, "missing file accepted")
        check(trace_phases.main([]) == 2, "no arguments accepted")

finish()
