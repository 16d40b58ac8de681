#!/usr/bin/env bash
# PREPARED in session 34, NOT RUN (device time spent). First one-GPU call next session.
# p1_s34p.sh — ONE GPU: is the 40% slower "first A/B variant" at dsv3 T4096 a position artifact?
# Call 1: [G=8] 7.14 ms, [G=32] 5.12; call 15: [G=32] 7.16-7.22, [G=8] 5.10-5.11 (fused 5.05-5.07).
# At T4096 experts have 1-2 blocks, so G 8 / 16 / 32 should plan alike. Here G=16 (= the default)
# goes first, then 32, 8, 16 again; a second run in the opposite order.
# Prediction: if position, the first A/B variant is slow whatever its value.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_VARIANTS=fused \
  BENCH_MOE_AB=MELD_MOE_GROUP_M=16,MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=16 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_A.log"
BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_VARIANTS=fused \
  BENCH_MOE_AB=MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=16 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_B.log"
echo "== done at $(el) s"
