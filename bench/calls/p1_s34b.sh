#!/usr/bin/env bash
# p1_s34b.sh — ONE GPU: where the MoE routing kernel's time goes (call 1 of session 34: ncu 20.7 us
# at decode, 84.8 at dsv3 T4096, a single CTA). MELD_TRACE records its phases (role "route":
# entry, count, scans, place, exchange, layout, tables, exit) and the dispatch's comm units;
# tools/trace_phases.py prints the medians. Also the whole call's timeline (tools/trace_stats.py).
# Prediction: the count and place walks (global id loads, one chunk of 256 a warp at a time) and
# the scattered sorted/inv stores take most of T4096's 85 us; at decode (1024 pairs, 32 experts)
# no phase should take > 3 us, so a 20 us total would point at entry/exit or launch.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
for row in "dsv3-32e_T128" "dsv3_T4096" "dsv3_T512" "mixtral_T4096"; do
  for v in nocopy fused; do
    f=$OUT/trace_${row}_$v.json
    MELD_TRACE=$f BENCH_MOE_ROWS=$row BENCH_MOE_VARIANTS=$v BENCH_SETTLE_MS=0 timeout -k 5 120 \
      build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm_${row}_$v.log" 2>&1
    echo "== $row $v rc=$? at $(el) s: $(grep -E '^P1' "$OUT/bm_${row}_$v.log" | head -2 | tr '\n' ' ')"
    g=$(ls "$OUT"/trace_"${row}"_$v*.json 2>/dev/null | head -1)
    [ -n "$g" ] && python3 tools/trace_phases.py "$g" route comm
    [ -n "$g" ] && [ $v = nocopy ] && python3 tools/trace_stats.py "$g" 2>&1 | head -40 > "$OUT/stats_${row}_$v.txt"
    rm -f "$OUT"/trace_"${row}"_$v*.json
  done
done
echo "== done at $(el) s"
