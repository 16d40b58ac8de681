#!/usr/bin/env python3
"""test_trace_stats.py — tools/trace_stats.py's binning of push epilogues by how many run at
once (concurrency_bins), on synthetic spans with a known answer; and a whole trace through
main(). Prints the "[  PASSED  ] N test(s)." / "[  FAILED  ] N test(s)" lines tests/run.sh sums."""
import io
import json
import os
import sys
import tempfile
from contextlib import redirect_stdout

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tools"))
import trace_stats  # noqa: E402
from pycheck import check, finish  # noqa: E402



# 40 short spans that all overlap (40 active at each midpoint) and 3 long ones apart from them
# and from each other (1 active): two bins of width 32, with their own medians.
spans = [(100.0 + 0.01 * i, 110.0 + 0.01 * i) for i in range(40)]
spans += [(0.0, 7.0), (20.0, 29.0), (40.0, 45.0)]
line = trace_stats.concurrency_bins(spans)
check(line.startswith("0-31: n 3 med 7.00"), f"lone spans: {line}")
check("32-63: n 40 med 10.00" in line, f"overlapping spans: {line}")
check(trace_stats.concurrency_bins([(0.0, 1.0)], width=1) == "1-1: n 1 med 1.00",
      "one span counts itself as active")

# A whole trace: one call (whole-CTA events of epoch 1) of 2 CTAs with per-tile events.
events = []
for cta in range(2):
    events.append({"name": "compute", "ph": "X", "pid": 0, "tid": cta, "ts": 0.0, "dur": 100.0, "args": {"epoch": 1}})
    events.append({"name": "compute", "ph": "X", "pid": 0, "tid": cta, "ts": 1.0, "dur": 40.0, "args": {"epoch": 0}})
    events.append({"name": "comm", "ph": "X", "pid": 0, "tid": cta, "ts": 41.0, "dur": 6.0 + cta, "args": {"epoch": 0}})
with tempfile.NamedTemporaryFile("w", suffix=".json", delete=False) as f:
    json.dump({"traceEvents": events}, f)
out = io.StringIO()
with redirect_stdout(out):
    rc = trace_stats.main([f.name])
os.unlink(f.name)
text = out.getvalue()
check(rc == 0, "main() exit status")
check("comm by how many comm epilogues of this rank run at its midpoint: 0-31: n 2 med 6.50" in text,
      f"the concurrency line in a real table:\n{text}")

# Own vs peer mainloops: per CTA a pushed tile (compute 40, comm) then an own tile (compute 45
# holding its start work: wait 1 + other 2, then reduce); the split pairs each mainloop with the
# epilogue that follows it, never with the events inside it.
per = {}
for cta in range(3):
    per[cta] = {"whole": [("compute", 0.0, 200.0)], "inner": [
        ("compute", 1.0, 41.0), ("comm", 41.0, 47.0),
        ("compute", 47.0, 92.0 + cta), ("wait", 47.0, 48.0), ("other", 48.0, 50.0), ("reduce", 92.0 + cta, 97.0)]}
    per[cta]["inner"].sort(key=lambda x: x[1])
line = trace_stats.mainloop_split(per)
check(line.startswith("own n 3 med 46.00, peer n 3 med 40.00"), f"own / peer medians: {line}")
check("own start work med 3.00" in line and "own mainloop without it med 43.00" in line, f"start work: {line}")
check(trace_stats.mainloop_split({0: {"whole": [], "inner": [("compute", 0.0, 1.0), ("comm", 1.0, 2.0)]}}) == "",
      "no own tiles: no line")

finish()
