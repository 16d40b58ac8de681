#!/usr/bin/env python3
"""plot_coll.py — turns bench_coll's JSON lines into one PNG: bus bandwidth vs size for each
collective (meld vs NCCL, plain launches solid, CUDA-graph replays dashed), and all-gather
GB/s vs the number of comm CTAs.

Usage: python3 bench/plot_coll.py RESULTS.jsonl [OUT.png]   (needs matplotlib)
"""
import json
import sys
from collections import defaultdict


def main():
    if len(sys.argv) < 2:
        print(__doc__)
        return 2
    path = sys.argv[1]
    out = sys.argv[2] if len(sys.argv) > 2 else path.rsplit(".", 1)[0] + ".png"
    rows = [json.loads(l) for l in open(path) if l.strip().startswith("{")]
    rows = [r for r in rows if r.get("op") in ("all_gather", "reduce_scatter", "all_reduce", "all_to_all",
                                               "all_gather_ctas")]
    if not rows:
        print("no collective rows in", path)
        return 1
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    ops = ["all_gather", "reduce_scatter", "all_reduce", "all_to_all"]
    fig, axes = plt.subplots(1, 5, figsize=(26, 5))
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
    pts = sorted((r["shape"]["ctas"], r["busbw"], r.get("nccl_busbw")) for r in rows if r["op"] == "all_gather_ctas")
    if pts:
        ax.plot([p[0] for p in pts], [p[1] for p in pts], marker="o", label="meld (384-thread CTAs)")
        if pts[0][2]:
            ax.axhline(pts[0][2], color="gray", linestyle=":", label="NCCL")
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
