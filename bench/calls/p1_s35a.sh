#!/usr/bin/env bash
# p1_s35a.sh — ONE GPU, prepared at the end of session 34 (NOT RUN): the next session's first call.
# (1) at dsv3 T4096 the first A/B variant after "nocopy" ran ~1.4x slower in
#     sessions 34's calls 1 and 15 whatever its setting (G=8 / G=32, which plan alike there):
#     G=16 (= the default) first, then 32, 8, 16; then the reverse order. Prediction: a position
#     artifact: the first A/B variant slow whatever its value, or none slow (a transient).
# (2) the raster group at the 8192-token row (16 vs 32: call 15 read 8.87 / 7.71 ms, but with (1)
#     unexplained), two passes.
# (3) bench/ncu_sass.sh on the one-CTA routing kernel at decode (--sampling-interval 0, first run):
#     which waits its ~20 us are.
# Build here first: make -j2 build/bench/bench_moe && bench/pack_bins.sh build/bench/bench_moe,
# carry ["build/carry"], PREBUILT=1.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_VARIANTS=fused \
  BENCH_MOE_AB=MELD_MOE_GROUP_M=16,MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=16 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_order1.log"
BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_VARIANTS=fused \
  BENCH_MOE_AB=MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=16 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_order2.log"
for pass in A B; do
  BENCH_MOE_ROWS=dsv3_T8192 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=MELD_MOE_GROUP_M=32,MELD_MOE_GROUP_M=16 moe_rows 3
  cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_t8192_$pass.log"
done
BENCH_MOE_ROWS=dsv3-32e_T128 BENCH_MOE_VARIANTS=nocopy BENCH_SETTLE_MS=0 bash bench/ncu_sass.sh route moe_route_kernel 5 -- \
  build/bench/bench_moe --ranks 1 --calls 1 --samples 1
echo "== done at $(el) s"
