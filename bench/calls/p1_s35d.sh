#!/usr/bin/env bash
# REVERTED EXPERIMENT (session 35): the prefetch lost (decode 8 / 16 / 32 k-blocks: +1 / +7 / +17 us against 0;
# T512 even); the code is in no commit, this script is kept as the record.
# p1_s35d.sh — ONE GPU, session 35 call 5: with the routing in the fused kernel, the GEMM's
# producers ask L2 for a guessed first tile's weight k-blocks while the routing runs
# (MELD_MOE_PREFETCH_KB, default 8 where a local expert gets <= 128 rows on average). test_moe 1
# (a hint: results unchanged), then A/B in one process, sustained: 0 / 8 / 16 / 32 twice each and
# the routing kernel (ROUTE_IN=0) on decode and DeepSeek-V3 T512.
# Prediction: decode -5..-10 us with 8-16 k-blocks (the ~17 us routing window, DRAM idle: 30-60 MB
# at ~3.5 TB/s), 32 no better than 16 (L2 holds ~50 MB); T512 smaller (256 experts: some empty,
# the guess partly wrong).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1
K=MELD_MOE_PREFETCH_KB
BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512 BENCH_MOE_VARIANTS=fused \
  BENCH_MOE_AB=$K=0,$K=8,$K=16,$K=32,$K=0,$K=8,$K=16,$K=32,MELD_MOE_ROUTE_IN=0 moe_rows 5
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_pf.log"
echo "== done at $(el) s"
