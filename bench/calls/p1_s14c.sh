#!/usr/bin/env bash
# p1_s14c.sh — ONE GPU, session 14 call 3: RS's lean kernel without the AR's copy code (8,992
# SASS instructions for the G2 kernel, vs 11,832 with it = MELD_GEMM_RS_LEAN=2, 17,032 general
# = LEAN=0). (1) every GPU test program at one rank (gemm.cuh changed after call 1);
# (2) bench_gemm_rs --op rs --diag --soak at 8192^2 x 4096: loopback and diag 130 with LEAN 1 /
# 2 / 0. Prediction (before the run): LEAN=1 0.3-1% faster than LEAN=2 (call 2: general -> lean
# was -1.6% for 5,200 fewer instructions).
# Usage (device): OUT=... bash bench/calls/p1_s14c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
TEST_TIMEOUT_S=240 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/gpu_tests.log" | cut -c1-160 | head -20
timeout -k 5 200 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-600} \
  --json "$OUT/gemm_rs-p1-lean2.jsonl" > "$OUT/rs.log" 2>&1
echo "bench_gemm_rs rs rc=$? at $(el) s"
grep -E "soak" "$OUT/rs.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm | meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=1024 GEMM_RS_LEAN|DIAG=130 +[0-9]|DIAG=130 GEMM_RS_LEAN|DIAG=8 |DIAG=16 " | cut -c1-150
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
