#!/usr/bin/env python3
"""plot_coll.py — turns bench_coll's JSON lines into one PNG: bus bandwidth vs size for each
collective (meld vs NCCL, plain launches solid, CUDA-graph replays dashed; engines forced:
"ring", "ll", "two_shot"), latency (us) at small sizes vs NCCL, and all-gather GB/s vs the
number of comm CTAs (per CTA size), with the fewest CTAs that reach 90% of the best (printed too, also for the ZC engine's forced
CTA counts, variants zc_cN, from 64 MB).

Usage: python3 bench/plot_coll.py RESULTS.jsonl [OUT.png] [COMMIT_SUBSTRING]   (needs matplotlib)
  COMMIT_SUBSTRING: only rows whose "commit" contains it (a file collects several runs).
"""
import json
import sys
from collections import defaultdict


def fewest_ctas(points, frac=0.9):
    """The fewest CTAs whose bandwidth reaches `frac` of the best of `points` [(ctas, GB/s)]
    (issue 5 asks for 90%), with that best; (None, None) without points."""
    pts = [(c, b) for c, b in points if b is not None]
    if not pts:
        return None, None
    best = max(b for _, b in pts)
    return min(c for c, b in pts if b >= frac * best), best


def zc_cta_points(rows):
    """{(op, bytes): [(ctas, busbw)]} of bench_coll --zc's forced CTA counts (variants zc_cN,
    plain launches), sorted by CTAs."""
    out = defaultdict(list)
    for r in rows:
        s = r.get("shape", {})
        v = s.get("variant", "")
        if v.startswith("zc_c") and v[4:].isdigit() and s.get("mode", "plain") == "plain":
            out[(r["op"], s["bytes"])].append((int(v[4:]), r.get("busbw")))
    for pts in out.values():
        pts.sort()
    return out


def cta_curves(rows):
    """{threads: [(ctas, busbw, nccl_busbw)]} of bench_coll's all_gather_ctas rows, sorted."""
    by_thr = defaultdict(list)
    for r in rows:
        if r.get("op") == "all_gather_ctas":
            by_thr[r["shape"].get("threads", 384)].append((r["shape"]["ctas"], r.get("busbw"), r.get("nccl_busbw")))
    for pts in by_thr.values():
        pts.sort()
    return by_thr


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else path.rsplit(".", 1)[0] + ".png"
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    if len(sys.argv) > 3:
        rows = [r for r in rows if sys.argv[3] in str(r.get("commit", ""))]
    for (op, b), pts in sorted(zc_cta_points(rows).items()):
        if b >= (64 << 20):
            c, best = fewest_ctas(pts)
            print(f"{op} {b >> 20} MB (ZC, CTAs {'/'.join(str(p[0]) for p in pts)}): best {best:.0f} GB/s; "
                  f"90% of it from {c} CTAs")
    rows = [r for r in rows if r.get("shape", {}).get("variant", "auto") in ("auto", "ring", "ll", "two_shot", "ctas")]
    rows = [r for r in rows if r.get("op") in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all",
                                               "all_gather_ctas")]
    if not rows:
        print("no collective rows in", path)
        return 1
    by_thr = cta_curves(rows)
    for thr, pts in sorted(by_thr.items()):
        c, best = fewest_ctas([(p[0], p[1]) for p in pts])
        print(f"all_gather GB/s vs CTAs ({thr}-thread CTAs): best {best:.0f} GB/s; 90% of it from {c} CTAs")
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = ["all_gather", "reduce_scatter", "all_reduce", "all_to_all"]
    fig, axes = plt.subplots(1, 6, figsize=(31, 5))
    for ax, op in zip(axes, ops):
        series = defaultdict(list)
        for r in rows:
            if r["op"] != op:
                continue
            s = r["shape"]
            key = (s.get("variant", "auto"), s.get("mode", "plain"))
            series[key].append((s["bytes"], r.get("busbw"), r.get("nccl_busbw")))
        for (variant, mode), pts in sorted(series.items()):
            pts.sort()
            x = [p[0] for p in pts]
            style = "-" if mode == "plain" else "--"
            ax.plot(x, [p[1] for p in pts], style, marker="o", label=f"meld {variant} {mode}")
            if variant == "auto":
                ax.plot(x, [p[2] for p in pts], style, marker="x", color="gray", label=f"NCCL {mode}")
        ax.set_xscale("log", base=2)
        ax.set_xlabel("size (bytes, nccl-tests)")
        ax.set_ylabel("bus bandwidth (GB/s)")
        n = next((r["nranks"] for r in rows if r["op"] == op), "?")
        ax.set_title(f"{op} bf16, {n} ranks")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    ax = axes[4]
    for op in ops:
        for mode, style in (("plain", "-"), ("graph", "--")):
            pts = sorted((r["shape"]["bytes"], r["meld_ms"] * 1e3, (r.get("seq_ms") or 0) * 1e3) for r in rows
                         if r["op"] == op and r["shape"].get("variant") == "auto" and r["shape"].get("mode") == mode
                         and r["shape"]["bytes"] <= (1 << 20))
            if pts:
                ax.plot([p[0] for p in pts], [p[1] / p[2] if p[2] else float("nan") for p in pts], style, marker="o",
                        label=f"{op} {mode}")
    ax.axhline(0.7, color="red", linestyle=":", label="goal 0.7")
    ax.axhline(1.0, color="gray", linestyle=":")
    ax.set_xscale("log", base=2)
    ax.set_xlabel("size (bytes, nccl-tests)")
    ax.set_ylabel("meld time / NCCL time")
    ax.set_title("latency ratio (lower is better)")
    ax.grid(True, alpha=0.3)
    ax.legend(fontsize=7)
    ax = axes[5]
    for thr, pts in sorted(by_thr.items()):
        c90, _ = fewest_ctas([(p[0], p[1]) for p in pts])
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label=f"meld ({thr}-thread CTAs; 90% from {c90})")
        if pts[0][2]:
            ax.axhline(pts[0][2], color="gray", linestyle=":", label="NCCL" if thr == min(by_thr) else None)
    if by_thr:
        ax.set_xscale("log", base=2)
        ax.set_xlabel("comm CTAs")
        ax.set_ylabel("bus bandwidth (GB/s)")
        b = next(r["shape"]["bytes"] for r in rows if r["op"] == "all_gather_ctas")
        ax.set_title(f"all_gather {b >> 20} MB: GB/s vs CTAs")
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
