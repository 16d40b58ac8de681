#!/usr/bin/env bash
# p1_s34o.sh — ONE GPU: the raster group inside the runs at the BENCH 8192-token row (DeepSeek-V3,
# 65536 pairs: ~256 rows = 2-3 blocks an expert), never tuned there: 16 (default) vs 8 / 32 and
# the runs off, two passes; dsv3 T4096 beside it (call 1: 8 lost 1.44x there, 32 within 1%).
# Prediction: 16 within 3% of the best at T8192.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
for pass in A B; do
  BENCH_MOE_ROWS=dsv3_T8192,dsv3_T4096 BENCH_MOE_VARIANTS=fused \
    BENCH_MOE_AB=MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=8,MELD_MOE_RUNS=0 moe_rows 3
  cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_$pass.log"
done
echo "== done at $(el) s"
