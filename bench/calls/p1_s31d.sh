#!/usr/bin/env bash
# p1_s31d.sh — ONE GPU, session 31: the grouped GEMM with the engine's deferred epilogue (now the
# default: moe_kernel<1>), checked (test_moe 1,2,4) and timed against it off (MELD_MOE_DEFER=0),
# raster groups 8 / 32 (default 16), and the routing kernel + protocol alone (MELD_MOE_DIAG=3).
# Predictions: deferral -2..-5% on the GEMM-heavy rows (it gave meld_gemm a few %); group_m within
# 2%; DIAG=3 ~50-100 us (the one-CTA routing kernel; comm at T512 was 0.20 ms with 59 MB copied).
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
for p in 1 2 4; do
  timeout -k 5 120 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200}
export BENCH_MOE_AB=${BENCH_MOE_AB-MELD_MOE_DEFER=0,MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=32,MELD_MOE_DIAG=3}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1|FAIL|rror" "$OUT/bench_moe_p1.log" | head -50
echo "== done at $(el) s"
