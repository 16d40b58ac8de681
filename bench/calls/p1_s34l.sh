#!/usr/bin/env bash
# p1_s34l.sh — ONE GPU: the dispatch's comm CTA count where rows are few (decode: 32 experts x 32
# rows; DeepSeek-V3 T512: 16 rows an expert). Default sm_count / 8 = 16. Copies cost 12-21 us at
# decode over the same kernel without them (calls 3-10), not from the first wave's wait (call 8).
# Prediction: within +-5 us of 16 for 4..64 at decode; if one count wins by >= 5 us on both passes,
# the plan takes it for small rows.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
for pass in A B; do
  BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512 BENCH_MOE_VARIANTS=fused,nocopy \
    BENCH_MOE_AB=MELD_MOE_COMM_CTAS=4,MELD_MOE_COMM_CTAS=8,MELD_MOE_COMM_CTAS=32,MELD_MOE_COMM_CTAS=64 moe_rows 5
  cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_$pass.log"
done
echo "== done at $(el) s"
