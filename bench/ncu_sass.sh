#!/usr/bin/env bash
# ncu_sass.sh — ONE GPU: Nsight Compute's SASS view of one kernel launch, summed where it matters:
# executed instructions (static / distinct executed / warp instructions in all, 128-byte code
# lines touched), the top instructions by warp-state samples, and the samples by stall reason.
# Session 34 (calls 13-14) did this by hand for the MoE routing kernel: ncu 2025.3's
# `--page source --print-source cuda` printed source text only; the SASS page carries the
# metrics. Short kernels get few samples at the default interval (25 in 20 us): the smallest
# interval is asked for here (--warp-sampling-interval 0). First run in session 35 call 1 failed on the option name (--sampling-interval: unknown to ncu; written in session 34
# after its device time was spent; its summary was checked on call 14's export).
# Usage (device): OUT=... bash bench/ncu_sass.sh LABEL KERNEL_REGEX SKIP -- COMMAND [ARGS...]
#   e.g. BENCH_MOE_ROWS=dsv3-32e_T128 BENCH_MOE_VARIANTS=nocopy bash bench/ncu_sass.sh route \
#        moe_route_kernel 5 -- build/bench/bench_moe --ranks 1 --calls 1 --samples 1
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
[ $# -ge 5 ] && [ "$4" = "--" ] || { echo "usage: $0 LABEL KERNEL_REGEX SKIP -- COMMAND [ARGS...]"; exit 2; }
label=$1 kre=$2 skip=$3; shift 4
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu_sass: no ncu on this machine"; exit 2; }
timeout -k 5 300 "$NCU" --clock-control none -k regex:"$kre" --launch-skip "$skip" --launch-count 1 --set full \
  --import-source yes --warp-sampling-interval 0 -o "$OUT/$label" -f "$@" > "$OUT/ncu_$label.log" 2>&1
echo "== ncu $label rc=$?"; tail -2 "$OUT/ncu_$label.log"
timeout 120 "$NCU" -i "$OUT/$label.ncu-rep" --page source --csv --print-source sass > "$OUT/sass_$label.csv" \
  2> "$OUT/sass_$label.err" || { head -c 400 "$OUT/sass_$label.err"; exit 1; }
python3 - "$OUT/sass_$label.csv" <<'PY'
import csv, sys
rows = [r for r in csv.reader(open(sys.argv[1])) if r]
hi = next((i for i, r in enumerate(rows) if "Address" in r and "Source" in r), None)
if hi is None: sys.exit("no SASS table in the export")
h = rows[hi]; body = [r for r in rows[hi + 1:] if len(r) == len(h)]
def num(x):
    try: return float(x.replace(",", ""))
    except ValueError: return 0.0
col = {c: i for i, c in enumerate(h)}
ie, ws = col.get("Instructions Executed"), col.get("Warp Stall Sampling (All Samples)")
ex = [r for r in body if ie is not None and num(r[ie]) > 0]
print(f"static {len(body)}, executed {len(ex)}, warp instructions {sum(num(r[ie]) for r in ex):.0f}, "
      f"128-byte code lines {len({int(r[col['Address']], 16) // 128 for r in ex})}")
if ws is not None:
    tot = sum(num(r[ws]) for r in body)
    print(f"warp-state samples {tot:.0f}; top instructions:")
    for r in sorted(body, key=lambda r: -num(r[ws]))[:25]:
        if num(r[ws]) > 0: print(f"  {num(r[ws]):6.0f} {100 * num(r[ws]) / max(tot, 1):5.1f}%  {r[col['Source']][:90]}")
    stalls = [c for c in h if c.startswith("stall_") and "Not Issued" not in c]
    by = sorted(((sum(num(r[col[c]]) for r in body), c) for c in stalls), reverse=True)
    print("by stall reason: " + ", ".join(f"{c[6:]} {v:.0f}" for v, c in by[:8] if v > 0))
PY
rm -f "$OUT/sass_$label.csv" # (MBs; the summary above is what comes back)
