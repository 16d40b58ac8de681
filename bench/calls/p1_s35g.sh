#!/usr/bin/env bash
# p1_s35g.sh — ONE GPU, session 35 call 8: test_moe's fifth path (the fused kernel's routing on 4
# CTAs ending with ranks that disagree; the paths' endings now cover each failure with the routing
# in the fused kernel) at 1, 2, 4, 8 ranks; then the decode A/B (routing kernel / in the fused
# kernel) three times each in one process at the final library.
# Prediction: all pass; in the fused kernel 6-12 us faster at decode in every pair.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
R=MELD_MOE_ROUTE_IN
BENCH_MOE_ROWS=dsv3-32e_T128 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$R=0,$R=1,$R=0,$R=1,$R=0 moe_rows 5
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_decode_ab.log"
echo "== done at $(el) s"
