#!/usr/bin/env bash
# RAN in session 34 call 13: ncu 2025.3.1; --page source --print-source cuda printed no metrics (source text only);
# the SASS page (call 14, p1_s34n.sh) has them. The report itself (7.5 MB) is not committed.
# p1_s34m.sh — ONE GPU: where the one-CTA routing kernel's ~20 us go at decode (32 experts x 128
# tokens, 1024 pairs): Nsight Compute's source view (warp-state samples per CUDA line, -lineinfo
# build) of moe_route_kernel, printed as the top lines by samples. Trace phases (calls 2-7): entry
# 2, count 1.4-2, scans 3.5-4.8, place 5.7-6.4, layout 3.2-3.5, tables 1.6-1.8 us.
# Prediction: the samples sit on a few dependent chains (the block exscans' shuffles and barriers,
# the layout's __ldcg, the entry's atomics / fence), not on the walks.
. "$(dirname "$0")/../device_env.sh"
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
"$NCU" --version | tail -1
env BENCH_SETTLE_MS=0 BENCH_MOE_ROWS=dsv3-32e_T128 BENCH_MOE_VARIANTS=nocopy timeout -k 5 200 "$NCU" --clock-control none \
  -k regex:moe_route_kernel --launch-skip 5 --launch-count 1 --set full --import-source yes -o "$OUT/route" -f \
  build/bench/bench_moe --ranks 1 --calls 1 --samples 1 > "$OUT/ncu_run.log" 2>&1
echo "== ncu rc=$? at $(el) s"; tail -3 "$OUT/ncu_run.log"
for ps in "cuda" "sass"; do
  timeout 120 "$NCU" -i "$OUT/route.ncu-rep" --page source --csv --print-source "$ps" > "$OUT/src_$ps.csv" 2> "$OUT/src_$ps.err"
  echo "== source $ps rc=$? $(wc -l < "$OUT/src_$ps.csv") lines"; head -c 300 "$OUT/src_$ps.err"
done
python3 - "$OUT/src_cuda.csv" <<'PY'
import csv, sys
rows = list(csv.reader(open(sys.argv[1])))
if not rows: print("empty"); sys.exit()
h = rows[0]; print("columns:", h[:12])
key = next((i for i, c in enumerate(h) if "Warp Stall Sampling (All" in c), None)
if key is None: key = next((i for i, c in enumerate(h) if "Sampling" in c), None)
src = next((i for i, c in enumerate(h) if c in ("Source", "Address Source")), 1)
lin = next((i for i, c in enumerate(h) if c in ("#", "Line")), 0)
def num(x):
    try: return float(x.replace(",", ""))
    except: return 0.0
if key is not None:
    tot = sum(num(r[key]) for r in rows[1:] if len(r) > key)
    top = sorted(rows[1:], key=lambda r: -num(r[key]) if len(r) > key else 0)[:25]
    print(f"total samples {tot:.0f}")
    for r in top: print(f"{num(r[key]):7.0f} {100*num(r[key])/max(tot,1):5.1f}%  {r[lin]:>6}  {r[src].strip()[:110]}")
PY
rm -f "$OUT/src_sass.csv"
echo "== done at $(el) s"
