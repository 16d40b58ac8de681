#!/usr/bin/env python3
"""test_trace_png.py — tools/trace_png.py's --call window (call_window) on a synthetic trace of
three calls with per-tile events, and its refusals; the drawing itself only where matplotlib is
installed. Prints the "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" lines tests/run.sh sums."""
import gzip
import json
import os
import sys
import tempfile

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import trace_png  # noqa: E402
from pycheck import check, finish  # noqa: E402

# Three calls (epochs 4, 5, 7: not consecutive) of 2 CTAs, 1000 us apart, each with 2 tile events.
events = []
for c, ep in enumerate((4, 5, 7)):
    t = 1000.0 * c
    for cta in range(2):
        events.append({"name": "compute", "ph": "X", "pid": 0, "tid": cta, "ts": t, "dur": 100.0, "args": {"epoch": ep}})
        events.append({"name": "compute", "ph": "X", "pid": 0, "tid": cta, "ts": t + 1, "dur": 40.0, "args": {"epoch": 0}})
        events.append({"name": "comm", "ph": "X", "pid": 0, "tid": cta, "ts": t + 41, "dur": 6.0, "args": {"epoch": 0}})
w = trace_png.call_window(events, 2)
check(w is not None and len(w) == 6, f"call 2: 6 events, got {None if w is None else len(w)}")
check(w is not None and all(1000.0 <= e["ts"] < 1100.0 for e in w), "call 2: only its window")
last = trace_png.call_window(events, -1)
check(last is not None and {e["args"]["epoch"] for e in last} == {7, 0}, "call -1 is the last epoch (7)")
check(trace_png.call_window(events, 1) == [e for e in events if e["ts"] < 1000.0], "call 1: the first window")
check(trace_png.call_window(events, 4) is None, "no call 4")
check(trace_png.call_window(events, 0) is None, "call 0 is no call")
check(trace_png.call_window([e for e in events if e["args"]["epoch"] == 0], 1) is None, "tile events alone: no call")

# main(): a gzipped input; a missing call is bad input (2) whether or not matplotlib is here.
d = tempfile.mkdtemp()
path = os.path.join(d, "t.rank0.json.gz")
with gzip.open(path, "wt") as f:
    json.dump({"traceEvents": events, "otherData": {"meld_base_ns": 5}}, f)
rc = trace_png.main(["--call", "9", "-o", os.path.join(d, "x.png"), path])
check(rc in (2, 3), f"--call 9 of 3 calls: rc {rc} (2, or 3 without matplotlib)")
rc = trace_png.main(["--call", "-1", "-o", os.path.join(d, "one.png"), path])
check(rc in (0, 3), f"--call -1: rc {rc}")
if rc == 0:
    check(os.path.getsize(os.path.join(d, "one.png")) > 1000, "a PNG was written")
finish()
