#!/usr/bin/env bash
# p1_s32c.sh — ONE GPU, session 32: meld_moe_ffn with the combine's sends in the second GEMM's
# epilogue (the engine's row scatter: rows straight into their tokens' ranks' staging, counted per
# half-tile; the combine kernel only waits and sums). test_moe 1,2,4 (path 3 runs the ffn with
# MELD_MOE_FFN_SEND=0), test_inproc 2 and test_gemm (the engine's generic-store epilogue gained the
# scatter branch), bench_moe --ranks 1 (ffn vs ffn-apart) and --ranks 4 --quick-ish.
# Prediction: all pass; ffn 2-5% faster than ffn-apart at one rank (h2's write + read and the
# combine's copy pass saved, a fence per half-tile paid).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe build/tests/gpu/test_gemm build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4
grep -E "moe ffn.*T 1000" "$OUT/test_moe_4.log" | head -6
timeout -k 5 200 build/tests/gpu/test_inproc 2 > "$OUT/test_inproc_2.log" 2>&1
echo "== test_inproc 2 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_2.log" | head -5
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} BENCH_MOE_AB=${BENCH_MOE_AB-}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --samples 3 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1.*(fused|swiglu|ffn)|FAIL|rror" "$OUT/bench_moe_p1.log" | head -50
timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_gemm.log" | head -5
echo "== done at $(el) s"
