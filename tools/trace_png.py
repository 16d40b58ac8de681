#!/usr/bin/env python3
"""trace_png.py — draws meld trace JSON (Chrome/Perfetto format, MELD_TRACE) as a PNG timeline.

One horizontal track per (rank, CTA), one bar per event, coloured by role (comm, compute,
wait, ...). Several files (one per rank) are aligned on their otherData.meld_base_ns (the
GPUs' %globaltimer), so overlap across ranks is visible too.

    python3 tools/trace_png.py -o trace.png trace.rank0.json trace.rank1.json

Exit status: 0 written, 2 bad input, 3 matplotlib is not installed.
"""
import argparse
import json
import sys

COLORS = {"comm": "#d62728", "compute": "#1f77b4", "wait": "#ff7f0e", "reduce": "#2ca02c", "other": "#7f7f7f"}


def load(path):
    with open(path) as f:
        doc = json.load(f)
    base = int(doc.get("otherData", {}).get("meld_base_ns", 0))
    events = [e for e in doc.get("traceEvents", []) if e.get("ph") == "X"]
    return base, events


def main():
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("files", nargs="+", help="trace JSON files (one per rank)")
    ap.add_argument("-o", "--output", default="trace.png", help="PNG to write")
    ap.add_argument("--title", default=None)
    args = ap.parse_args()
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
