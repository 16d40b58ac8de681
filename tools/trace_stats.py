#!/usr/bin/env python3
"""trace_stats.py — per-call phase statistics of meld trace JSON (MELD_TRACE), one table per rank.

Events are grouped by call (args.epoch). For each call: the span from the first event's start
to the last event's end, the gap since the previous call ended (kernel boundary and launch),
and per role and item order the median and maximum duration and the spread of end times
across CTAs. For the ZC collectives (three events per CTA and call: wait = entry handshake,
comm = the move, wait = the peers' done) the roles are told apart by their order in the CTA.

    python3 tools/trace_stats.py trace.rank0.json trace.rank1.json

Exit status: 0 printed, 2 bad input.
"""
import json
import statistics
import sys
from collections import defaultdict


def phases(events):
    """(epoch) -> (cta) -> list of (name, start_us, end_us) in start order."""
    calls = defaultdict(lambda: defaultdict(list))
    for e in events:
        ep = int(e.get("args", {}).get("epoch", 0))
        s = float(e["ts"])
        calls[ep][int(e.get("tid", 0))].append((e["name"], s, s + float(e["dur"])))
    for per in calls.values():
        for lst in per.values():
            lst.sort(key=lambda x: x[1])
    return calls


def main(paths):
    for path in paths:
        try:
            with open(path) as f:
                doc = json.load(f)
        except (OSError, ValueError) as err:
            print(f"trace_stats.py: {path}: {err}", file=sys.stderr)
            return 2
        events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
        calls = phases(events)
        print(f"{path}: {len(events)} events, {len(calls)} calls (us)")
        prev_end = None
        for ep in sorted(calls):
            per = calls[ep]
            starts = [lst[0][1] for lst in per.values()]
            ends = [lst[-1][2] for lst in per.values()]
            gap = f"{min(starts) - prev_end:7.2f}" if prev_end is not None else "      -"
            prev_end = max(ends)
            nph = max(len(lst) for lst in per.values())
            cols = []
            for k in range(nph):
                ds = [lst[k][2] - lst[k][1] for lst in per.values() if len(lst) > k]
                es = [lst[k][2] for lst in per.values() if len(lst) > k]
                name = next(lst[k][0] for lst in per.values() if len(lst) > k)
                cols.append(f"{name}#{k} med {statistics.median(ds):7.2f} max {max(ds):7.2f} end spread {max(es) - min(es):6.2f}")
            print(f"  call {ep}: {len(per)} CTAs, span {max(ends) - min(starts):8.2f}, gap {gap}, start spread "
                  f"{max(starts) - min(starts):5.2f}")
            if len(cols) > 8:  # (per-tile traces: the first and last three phases)
                cols = cols[:3] + [f"... {len(cols) - 6} more"] + cols[-3:]
            for c in cols:
                print("     " + c)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
