#!/usr/bin/env bash
# p1_s35l.sh — ONE GPU, session 35 call 14 (review mend): hook a's wait and hook f's ready word now
# share one helper in the GEMM engine (gemm_wait_flag): the programs that use hook a / f —
# test_moe 1 2, test_ag_gemm, test_gemm_rs, test_gemm at one rank, test_inproc 2 — and the decode
# row once. Prediction: all pass, decode ~0.51 ms.
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000
PREBUILT=1 timeout -k 5 300 tests/gpu/run.sh test_ag_gemm test_gemm_rs test_gemm > "$OUT/gpu_tests.log" 2>&1
echo "== tests/gpu/run.sh rc=$? at $(el) s"; grep -hE "checks passed|passed, .* failed" "$OUT/gpu_tests.log" | tail -6
test_ranks build/tests/gpu/test_moe 1 2
test_ranks build/tests/gpu/test_inproc 2
BENCH_MOE_ROWS=dsv3-32e_T128 BENCH_MOE_VARIANTS=fused moe_rows 3
echo "== done at $(el) s"
