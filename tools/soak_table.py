#!/usr/bin/env python3
"""soak_table.py - the sustained (--soak) rows of benchmark JSON lines as one table per shape.

Reads the rows the C benches write with "timing": "soak" (bench_soak.h: mean of two passes in
opposite orders, the burst median they were planned from, SM clock and power) and, where the
same files hold them, the torch baselines' sustained times (peer_soak_ms / seq_soak_ms from
bench/ag_gemm_torch.py and bench/gemm_rs_torch.py with BENCH_SOAK_MS). Prints, per (op, shape,
ranks), every row's sustained ms, the spread of its two passes, its burst median, and its ratio
to a base row (--base, default meld_gemm, else the first row).

    python3 tools/soak_table.py bench/results/*.jsonl [--base cublas] [--op gemm_rs]
"""
import argparse
import json
import sys


def key_of(row):
    s = row.get("shape", {})
    k = s.get("k_total", s.get("k"))
    return (row.get("op"), s.get("m"), s.get("n"), k, row.get("nranks", 1))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("files", nargs="+")
    ap.add_argument("--base", default="meld_gemm")
    ap.add_argument("--op", default=None)
    a = ap.parse_args()
    groups = {}
    for f in a.files:
        for line in open(f):
            line = line.strip()
            if not line.startswith("{"):
                continue
            try:
                r = json.loads(line)
            except json.JSONDecodeError:
                continue
            if a.op and r.get("op") != a.op:
                continue
            rows = groups.setdefault(key_of(r), [])
            if r.get("timing") == "soak" and r.get("meld_ms"):
                p = r.get("soak_pass_ms") or [r["meld_ms"]] * 2
                rows.append((r.get("variant", "?"), r["meld_ms"], abs(p[0] - p[-1]) / r["meld_ms"],
                             r.get("burst_median_ms"), r.get("sm_mhz"), r.get("power_w")))
            for field, name in (("peer_soak_ms", "torch async-TP"), ("seq_soak_ms", "torch sequential")):
                if r.get(field):
                    rows.append((name, r[field], None, r.get("peer_ms" if field == "peer_soak_ms" else "seq_ms"),
                                 None, None))
    for (op, m, n, k, P), rows in sorted(groups.items(), key=lambda kv: str(kv[0])):
        if not rows:
            continue
        base = next((r[1] for r in rows if r[0] == a.base), rows[0][1])
        print(f"\n{op} {m} x {n} x {k}, {P} rank(s): sustained ms (ratio to {a.base if any(r[0] == a.base for r in rows) else rows[0][0]})")
        print(f"  {'row':60s} {'soak ms':>9s} {'ratio':>6s} {'passes':>7s} {'burst':>8s} {'MHz':>5s} {'W':>4s}")
        for v, ms, spread, burst, mhz, w in rows:
            sp = f"{100 * spread:5.1f}%" if spread is not None else "     -"
            b = f"{burst:8.4f}" if isinstance(burst, (int, float)) else "       -"
            print(f"  {v[:60]:60s} {ms:9.4f} {ms / base:6.3f} {sp:>7s} {b} {mhz or '':>5} {round(w) if w else '':>4}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
