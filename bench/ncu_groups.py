"""ncu_groups.py SOURCE.csv[.gz] [N] — reads an Nsight Compute source page (ncu -i R --page source
--csv --print-source sass) and groups the instructions by their execution count, which names the
code's regions in a persistent kernel (e.g. per k-block, per tile, per CTA): each group's share of
the warp-stall samples, its instruction count and first instructions, then the stall reasons and
the top instructions of the group with the most per-tile samples (bench/ncu_top.py lists the
kernel's top instructions overall)."""
import csv
import gzip
import sys
from collections import Counter


def num(x):
    try:
        return float(x.replace(",", ""))
    except ValueError:
        return 0.0


def main():
    f = sys.argv[1]
    n_top = int(sys.argv[2]) if len(sys.argv) > 2 else 14
    text = (gzip.open(f, "rt") if f.endswith(".gz") else open(f)).read().splitlines()
    rows = list(csv.reader(text[1:]))
    h = rows[0]
    idx = {k: i for i, k in enumerate(h)}
    data = [r for r in rows[1:] if len(r) == len(h)]
    S, E, src = idx["Warp Stall Sampling (All Samples)"], idx["Instructions Executed"], idx["Source"]
    stalls = [k for k in h if k.startswith("stall_") and "Not Issued" not in k]
    tot = sum(num(r[S]) for r in data) or 1.0
    groups = {}
    for r in data:
        g = groups.setdefault(num(r[E]), [0.0, 0, []])
        g[0] += num(r[S])
        g[1] += 1
        if len(g[2]) < 2:
            g[2].append(r[src].strip()[:34])
    print(f"instructions {len(data)}, samples {tot:.0f}")
    for e, (s, n, ex) in sorted(groups.items(), key=lambda x: -x[1][0])[:n_top]:
        print(f"  exec {e:>10.0f} x{n:5d} inst {s / tot * 100:5.1f}%  {ex}")
    for e, (s, n, ex) in sorted(groups.items(), key=lambda x: -x[1][0])[:3]:
        sel = [r for r in data if num(r[E]) == e]
        agg = Counter({k: sum(num(r[idx[k]]) for r in sel) for k in stalls})
        ops = Counter(r[src].strip().lstrip("@!P0123456789T ").split(" ")[0] for r in sel)
        print(f"  group exec {e:.0f}: stalls " + ", ".join(f"{k[6:]} {v / (s or 1) * 100:.0f}%" for k, v in agg.most_common(5)))
        print("    ops " + ", ".join(f"{k} {v}" for k, v in ops.most_common(10)))
        for r in sorted(sel, key=lambda r: -num(r[S]))[:6]:
            top = max(stalls, key=lambda k: num(r[idx[k]]))
            print(f"    {num(r[S]) / tot * 100:5.2f}% {r[src].strip()[:60]:60s} {top[6:]}")


if __name__ == "__main__":
    main()
