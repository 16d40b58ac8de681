#!/usr/bin/env python3
"""trace_png.py — draws meld trace JSON (Chrome/Perfetto format, MELD_TRACE) as a PNG timeline.

One horizontal track per (rank, CTA), one bar per event, coloured by role (comm, compute,
wait, ...). Several files (one per rank) are aligned on their otherData.meld_base_ns (the
GPUs' %globaltimer), so overlap across ranks is visible too.

    python3 tools/trace_png.py -o trace.png trace.rank0.json trace.rank1.json
    python3 tools/trace_png.py --call -1 -o one.png trace.rank0.json.gz trace.rank1.json.gz

--call N draws only the N-th call of each file (1-based, in the order of the calls' epochs;
-1 = the last): the time window of that call's whole-CTA events (args.epoch = the call), with
the per-tile events (epoch 0) inside it. Several calls with long gaps between them otherwise
squeeze each call into a sliver of the picture. Inputs may be gzipped (.gz).

Exit status: 0 written, 2 bad input, 3 matplotlib is not installed.
"""
import argparse
import gzip
import json
import sys

COLORS = {"comm": "#d62728", "compute": "#1f77b4", "wait": "#ff7f0e", "reduce": "#2ca02c", "other": "#7f7f7f"}


def load(path):
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rt") as f:
        doc = json.load(f)
    base = int(doc.get("otherData", {}).get("meld_base_ns", 0))
    events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    return base, events


def call_window(events, call):
    """The events of one call: the window [first start, last end] of the whole-CTA events whose
    args.epoch is the call-th distinct nonzero epoch (1-based, ascending; -1 = the last), and
    every event inside it. None when there is no such call."""
    epochs = sorted({int(e.get("args", {}).get("epoch", 0)) for e in events} - {0})
    if not epochs or call == 0 or abs(call) > len(epochs):
        return None
    ep = epochs[call - 1] if call > 0 else epochs[call]
    whole = [e for e in events if int(e.get("args", {}).get("epoch", 0)) == ep]
    lo = min(float(e["ts"]) for e in whole)
    hi = max(float(e["ts"]) + float(e.get("dur", 0.0)) for e in whole)
    return [e for e in events if float(e["ts"]) >= lo and float(e["ts"]) + float(e.get("dur", 0.0)) <= hi]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="trace JSON files (one per rank)")
    ap.add_argument("-o", "--output", default="trace.png", help="PNG to write")
    ap.add_argument("--title", default=None)
    ap.add_argument("--call", type=int, default=0, help="draw only this call of each file (1-based; -1 = the last)")
    args = ap.parse_args(argv)
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        from matplotlib.patches import Patch
    except ImportError:
        print("trace_png.py: matplotlib is not installed (pip install matplotlib)", file=sys.stderr)
        return 3

    loaded = []
    for path in args.files:
        try:
            loaded.append(load(path))
        except (OSError, ValueError) as e:
            print(f"trace_png.py: {path}: {e}", file=sys.stderr)
            return 2
        if args.call:
            base, events = loaded[-1]
            events = call_window(events, args.call)
            if events is None:
                print(f"trace_png.py: {path}: no call {args.call}", file=sys.stderr)
                return 2
            loaded[-1] = (base, events)
    bases = [b for b, ev in loaded if ev]
    if not bases:
        print("trace_png.py: no events in the input", file=sys.stderr)
        return 2
    t0 = min(bases)

    tracks = {}  # (pid, tid) -> list of (start_us, dur_us, name)
    for base, events in loaded:
        shift_us = (base - t0) / 1000.0
        for e in events:
            key = (int(e.get("pid", 0)), int(e.get("tid", 0)))
            tracks.setdefault(key, []).append((float(e["ts"]) + shift_us, float(e.get("dur", 0.0)), e.get("name", "other")))
    keys = sorted(tracks)
    height = max(2.5, 0.18 * len(keys) + 1.2)
    fig, ax = plt.subplots(figsize=(14, height))
    for row, key in enumerate(keys):
        # Spans that cover most of the track (a kernel's whole GEMM) are drawn first and faint,
        # so that the per-tile events inside them (mainloop, epilogue) and their gaps show.
        evs = tracks[key]
        lo = min(s for s, _, _ in evs)
        hi = max(s + d for s, d, _ in evs)
        long_cut = 0.3 * max(hi - lo, 1e-9)
        for faint in (True, False):
            by_name = {}
            for start, dur, name in evs:
                if (dur > long_cut) == faint:
                    by_name.setdefault(name, []).append((start, max(dur, 0.05)))
            for name, bars in by_name.items():
                ax.broken_barh(bars, (row - 0.4, 0.8), facecolors=COLORS.get(name, COLORS["other"]), linewidth=0,
                               alpha=0.3 if faint and len(evs) > 1 else 1.0)
    ax.set_yticks(range(len(keys)))
    ax.set_yticklabels([f"r{p} CTA {t}" for p, t in keys], fontsize=6 if len(keys) > 40 else 8)
    ax.invert_yaxis()
    ax.set_xlabel("time (us)")
    ax.set_title(args.title or f"meld trace: {len(keys)} CTAs, {sum(len(v) for v in tracks.values())} events")
    names = sorted({n for v in tracks.values() for _, _, n in v})
    ax.legend(handles=[Patch(color=COLORS.get(n, COLORS["other"]), label=n) for n in names], loc="upper right",
              fontsize=8)
    fig.tight_layout()
    fig.savefig(args.output, dpi=120)
    print(f"trace_png.py: wrote {args.output} ({len(keys)} tracks)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
