#!/usr/bin/env bash
# p1_s16f.sh — ONE GPU, session 16 call 6: is C's evict-first store hint (MELD_GEMM_STORE_HINT=1,
# opt-in since session 15) worth making the fused kernels' default? Sessions 15 and 16 (call 2)
# measured the RS loopback -0.6% with it, in one process each. Here a focused A/B
# (bench_gemm_rs --rows: only these rows), three processes per op, soak 500 ms, 8192^2 x 4096:
# RS loopback with / without, AR zero-copy loopback with / without, meld_gemm_plain.
# Prediction (before the run): RS -0.4..-0.8%, AR zero copy -0.3..-0.6%, same sign in all three
# processes. Then every GPU test program at one rank on the session's final device code.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
export MELD_TIMEOUT_MS=3000
RS_ROWS="meld_gemm_plain|meld fused GEMM_RS_DIAG=1024|meld fused GEMM_RS_DIAG=1024 GEMM_STORE_HINT=1"
AR_ROWS="meld_gemm_plain|meld_symc fused GEMM_RS_DIAG=1024 GEMM_AR_ZC=1|meld_symc fused GEMM_RS_DIAG=1024 GEMM_AR_ZC=1 GEMM_STORE_HINT=1"
for pr in 1 2 3; do
  for op in rs ar; do
    rows=$RS_ROWS; [ $op = ar ] && rows=$AR_ROWS
    timeout -k 5 120 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-500} --rows "$rows" \
      --json "$OUT/gemm_$op-p1-s16f.jsonl" > "$OUT/$op$pr.log" 2>&1
    echo "$op process $pr rc=$? at $(el) s"
    grep -E "soak gemm" "$OUT/$op$pr.log" | sed 's/^\[rank 0\] //' | cut -c1-150
  done
done
TEST_TIMEOUT_S=240 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1 # (PREBUILT=1: nothing made)
echo "gpu tests rc=$? at $(el) s"; grep -E "checks passed|FAIL|TIMEOUT|timed out|PASSED" "$OUT/gpu_tests.log" | cut -c1-160 | head -20
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
