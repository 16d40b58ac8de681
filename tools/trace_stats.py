#!/usr/bin/env python3
"""trace_stats.py — per-call phase statistics of meld trace JSON (MELD_TRACE), one table per rank.

Events are grouped by call (args.epoch). For each call: the span from the first event's start
to the last event's end, the gap since the previous call ended (kernel boundary and launch),
and per role and item order the median and maximum duration and the spread of end times
across CTAs. For the ZC collectives (four events per CTA and call since session 21: other =
thread 0's entry (ticket, epoch, argument handshake), wait = the entry barrier, comm = the move,
wait = the peers' done; three before, without the first) the roles are told apart by their order
in the CTA.

Per-tile events (the GEMM engine's timeline in the fused kernels) carry epoch 0; each is
assigned to the call whose whole-CTA event of the same CTA contains it, and such a call is
summarized per role instead (events per CTA, time per CTA, duration percentiles), with the
entry (whole-CTA start to the CTA's first tile) and the tail (its last tile's end to the
call's end); the pushed ("comm") epilogues binned by how many ran at once; and the mainloops
split by the epilogue that follows them (own tiles: "reduce", pushed: "comm"), with an own
tile's start work (the "wait" and "other" events inside its mainloop) apart.

    python3 tools/trace_stats.py trace.rank0.json[.gz] trace.rank1.json[.gz]

Exit status: 0 printed, 2 bad input.
"""
import bisect
import gzip
import json
import statistics
import sys
from collections import defaultdict


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        return json.load(f)


def phases(events):
    """(epoch) -> (cta) -> {"whole": [(name, s, e)], "inner": [(name, s, e)]} in start order.
    Epoch-0 events inside a same-CTA event of a later epoch move into that call as inner."""
    win = defaultdict(list)  # cta -> [(start, end, epoch)]
    for e in events:
        ep = int(e.get("args", {}).get("epoch", 0))
        if ep > 0:
            s = float(e["ts"])
            win[int(e.get("tid", 0))].append((s, s + float(e["dur"]), ep))
    calls = defaultdict(lambda: defaultdict(lambda: {"whole": [], "inner": []}))
    for e in events:
        ep = int(e.get("args", {}).get("epoch", 0))
        cta = int(e.get("tid", 0))
        s = float(e["ts"])
        rec = (e["name"], s, s + float(e["dur"]))
        kind = "whole"
        if ep == 0:
            for ws, we, wep in win.get(cta, ()):
                if ws <= s <= we:
                    ep, kind = wep, "inner"
                    break
        calls[ep][cta][kind].append(rec)
    for per in calls.values():
        for d in per.values():
            d["whole"].sort(key=lambda x: x[1])
            d["inner"].sort(key=lambda x: x[1])
    return calls


def pct(v, f):
    v = sorted(v)
    return v[int(f * (len(v) - 1))]


def print_positions(per):
    """Per item order (the k-th event of each CTA): median / max duration, end spread."""
    lists = {c: d["whole"] for c, d in per.items() if d["whole"]}
    nph = max((len(lst) for lst in lists.values()), default=0)
    cols = []
    for k in range(nph):
        ds = [lst[k][2] - lst[k][1] for lst in lists.values() if len(lst) > k]
        es = [lst[k][2] for lst in lists.values() if len(lst) > k]
        name = next(lst[k][0] for lst in lists.values() if len(lst) > k)
        cols.append(f"{name}#{k} med {statistics.median(ds):7.2f} max {max(ds):7.2f} end spread {max(es) - min(es):6.2f}")
    if len(cols) > 8:
        cols = cols[:3] + [f"... {len(cols) - 6} more"] + cols[-3:]
    for c in cols:
        print("     " + c)


def concurrency_bins(spans, width=32):
    """Median duration of the events `spans` [(start, end)] binned by how many of them are
    active at each one's midpoint (pushed tiles share the rank's NVLink: session 15 found the
    push epilogue's duration growing with the pushers)."""
    starts = sorted(s for s, _ in spans)
    ends = sorted(e for _, e in spans)
    bins = defaultdict(list)
    for s, e in spans:
        m = (s + e) / 2
        active = bisect.bisect_right(starts, m) - bisect.bisect_left(ends, m)
        bins[active // width].append(e - s)
    return "; ".join(f"{b * width}-{b * width + width - 1}: n {len(v)} med {statistics.median(v):.2f}"
                     for b, v in sorted(bins.items()))


def mainloop_split(per):
    """Medians of the "compute" events (a tile's mainloop) split by the epilogue event that
    follows in the same CTA: "reduce" (an own tile) or "comm" (a pushed tile), and for own
    tiles the start work recorded inside the mainloop ("wait": the consumers' barrier and the
    pending-flag release, "other": the partial's acquire and request) and what remains."""
    own, peer, start, rest = [], [], [], []
    for d in per.values():
        inner = d["inner"]
        for i, (name, s, e) in enumerate(inner):
            if name != "compute":
                continue
            inside = [x for x in inner if x[0] in ("wait", "other") and s <= x[1] and x[2] <= e]
            nxt = next((x[0] for x in inner[i + 1:] if x[0] in ("reduce", "comm") and x[1] >= e - 1e-3), None)
            if nxt == "reduce":
                own.append(e - s)
                work = sum(x[2] - x[1] for x in inside)
                if inside:
                    start.append(work)
                rest.append(e - s - work)
            elif nxt == "comm":
                peer.append(e - s)
    if not own or not peer:
        return ""
    out = f"own n {len(own)} med {statistics.median(own):.2f}, peer n {len(peer)} med {statistics.median(peer):.2f}"
    if start:
        out += f"; own start work med {statistics.median(start):.2f} (p90 {pct(start, .9):.2f})"
        out += f", own mainloop without it med {statistics.median(rest):.2f}"
    return out


def print_roles(per, call_end):
    """Per role of the inner (per-tile) events: per CTA count and time, duration percentiles;
    then the entry and the tail."""
    by_role = defaultdict(list)
    per_cta = defaultdict(lambda: defaultdict(float))
    entry, tail = [], []
    for c, d in per.items():
        inner = d["inner"]
        if not inner:
            continue
        for name, s, e in inner:
            by_role[name].append(e - s)
            per_cta[name][c] += e - s
        if d["whole"]:
            entry.append(inner[0][1] - d["whole"][0][1])
        tail.append(call_end - max(e for _, _, e in inner))
    n = max(1, len([d for d in per.values() if d["inner"]]))
    for name, ds in sorted(by_role.items()):
        print(f"     {name:8s} {len(ds) / n:6.1f} per CTA, {sum(ds) / n:8.2f} us per CTA; median {statistics.median(ds):7.2f} "
              f"(p10 {pct(ds, .1):.2f} p90 {pct(ds, .9):.2f} p99 {pct(ds, .99):.2f} max {max(ds):.2f})")
    split = mainloop_split(per)
    if split:
        print("     mainloops by the epilogue that follows (own = reduce, peer = comm): " + split)
    spans = [(s, e) for d in per.values() for name, s, e in d["inner"] if name == "comm"]
    if spans:
        print("     comm by how many comm epilogues of this rank run at its midpoint: " + concurrency_bins(spans))
    if entry:
        print(f"     entry (CTA start to its first tile): median {statistics.median(entry):.2f} max {max(entry):.2f}")
    if tail:
        print(f"     tail (a CTA's last tile end to the call's end): median {statistics.median(tail):.2f} max {max(tail):.2f}")


def main(paths):
    for path in paths:
        try:
            doc = load(path)
        except (OSError, ValueError, EOFError) as err:
            print(f"trace_stats.py: {path}: {err}", file=sys.stderr)
            return 2
        events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
        calls = phases(events)
        print(f"{path}: {len(events)} events, {len(calls)} calls (us)")
        prev_end = None
        for ep in sorted(calls):
            per = calls[ep]
            allev = [x for d in per.values() for x in d["whole"] + d["inner"]]
            starts = [min(x[1] for x in d["whole"] + d["inner"]) for d in per.values()]
            ends = [max(x[2] for x in d["whole"] + d["inner"]) for d in per.values()]
            gap = f"{min(starts) - prev_end:7.2f}" if prev_end is not None else "      -"
            prev_end = max(ends)
            print(f"  call {ep}: {len(per)} CTAs, span {max(ends) - min(starts):8.2f}, gap {gap}, start spread "
                  f"{max(starts) - min(starts):5.2f}, {len(allev)} events")
            if any(d["inner"] for d in per.values()):
                print_roles(per, max(ends))
            else:
                print_positions(per)
    return 0


if __name__ == "__main__":
    if len(sys.argv) < 2:
        print(__doc__)
        sys.exit(2)
    sys.exit(main(sys.argv[1:]))
