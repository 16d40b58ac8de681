#!/usr/bin/env bash
# p1_s32f.sh — ONE GPU, session 32, last: the final library (moe_kernel runs the ffn's second GEMM
# as op MELD_OP_MOE_FFN; one rank sends in the second GEMM only at <= 16 rows an expert; test_moe's
# ffn out with ldo > hidden and the gap checked) by test_moe 1,2,4,8; bench_moe --ranks 1 with
# the dispatch's knobs for the decode row (raster group 1 / 16, 4 comm CTAs, no deferred epilogue).
# Prediction: pass; ffn at dsv3-32e T128 = ffn-apart (~0.97 ms); the knobs within +-3% of fused.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200}
export BENCH_MOE_AB=${BENCH_MOE_AB-MELD_MOE_GROUP_M=1,MELD_MOE_GROUP_M=16,MELD_MOE_COMM_CTAS=4,MELD_MOE_DEFER=0}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --samples 3 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1.*(fused|ffn)|FAIL|rror" "$OUT/bench_moe_p1.log" | head -60
echo "== done at $(el) s"
