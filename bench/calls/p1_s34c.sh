#!/usr/bin/env bash
# p1_s34c.sh — ONE GPU: the routing kernel without __match_any_sync (a ballot a bit of the expert
# id; the column scan a warp an expert; the second slot loop gone). Call 2 (p1_s34b) traced it at
# 19.4 us (decode, 32 experts x 128 tokens) / 24.9 (dsv3 T512) / 85.1 (dsv3 T4096) / 21.3
# (Mixtral T4096), the two walks 35.7 + 35.5 us at T4096 (~1 us a step of 8 ballots' worth).
# Prediction: walks <= 3 us each at T4096 (32 steps of ~10 ballots), scans <= 2.5 us; the kernel
# ~12 us at decode, ~20 us at T4096; dispatch + GEMM -60..-70 us at dsv3 T4096 (-1.3%), -8 us at
# decode (-1.5%). test_moe 1,2,4,8 passes (its origins check the expert's pairs in pair order).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
for row in "dsv3-32e_T128" "dsv3_T4096" "dsv3_T512" "mixtral_T4096"; do
  f=$OUT/trace_$row.json
  MELD_TRACE=$f BENCH_MOE_ROWS=$row BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 timeout -k 5 120 \
    build/bench/bench_moe --ranks 1 --samples 2 > "$OUT/bm_$row.log" 2>&1
  echo "== trace $row rc=$? at $(el) s"
  g=$(ls "$OUT"/trace_"$row"*.json 2>/dev/null | head -1)
  [ -n "$g" ] && python3 tools/trace_phases.py "$g" route | grep -v "^role"
  rm -f "$OUT"/trace_"$row"*.json
done
BENCH_MOE_VARIANTS=fused,nocopy,ffn moe_rows 3
echo "== done at $(el) s"
