#!/usr/bin/env bash
# p1_s11.sh — ONE GPU, session 11, call 1: the 128 x 320 tile (gemm_params_t.bn 320, meld_gemm's
# default where gemm_plan_default_tile_n says: 2048 x 5120 and 8192 x 1280 on 132 SMs).
#   1. test_gemm (the wide cases: tails, both epilogues, 1-2 SMs, refusals, the default rule);
#   2. bench_gemm burst + --soak 600: default (wide where chosen) / n256 (the old default, stream-K
#      rule) / dp / w320 / cuBLASLt at the two chosen shapes and three controls;
#   3. every other GPU test program at one rank (test_gemm_rs runs session 10's flag change:
#      st.release.sys alone, one fence for the reduce pushes / epilogue signals);
#   4. Nsight Compute counters: w320 vs n256 vs cuBLASLt at 2048 x 5120 x 8192.
# Prediction (written before): 2048 x 5120 x 8192 burst w320 ~0.205-0.215 ms (n256 stream-K 0.227,
# cuBLASLt 0.211), sustained 0.245-0.26 (n256 0.276, cuBLASLt 0.248); counters: SM cycles near
# cuBLASLt's 352 K, L2 reads ~-6% per MAC vs 128 x 256 (no multicast), no stream-K partials.
# Usage (device): OUT=... bash bench/calls/p1_s11.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_gemm build/bench/bench_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 150 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "test_gemm rc=$? at $(el) s"; grep -E "wide320|FAIL|checks passed|meld_gemm 2048" "$OUT/test_gemm.log" | cut -c1-150 | head -24
shapes=""; for s in ${SHAPES:-2048,5120,8192 8192,1280,8192 8192,5120,8192 8192,8192,4096 4096,4096,4096}; do shapes="$shapes --shape $s"; done
timeout -k 5 220 build/bench/bench_gemm --custom-only $shapes --only default,n256,dp,w320 --soak ${SOAK:-600} \
  --json "$OUT/gemm-wide-s11.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^custom|^soak|skipped|ERROR" "$OUT/bench.log" | cut -c1-170
TEST_TIMEOUT_S=100 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh test_gemm_rs test_ag_gemm test_coll test_comm test_signal test_abort \
  > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "checks passed|FAILED|PASSED" "$OUT/gpu_tests.log" | head -14
ARGS="--only n256" COUNT=5 SHAPE=2048,5120,8192 OUT="$OUT/ncu" timeout -k 5 150 bash bench/ncu_gemm_vs_cublas.sh 2>&1 | tail -30
echo "total: $(el) s"
