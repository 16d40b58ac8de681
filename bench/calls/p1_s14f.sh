#!/usr/bin/env bash
# p1_s14f.sh — ONE GPU, session 14 call 6: AR's reduced tiles' copy flags deferred to the next
# epilogue like the pushes' (gemm.cuh reduce.copy_defer; MELD_GEMM_AR_COPY_FLAG=now = before).
# (1) test_gemm_rs at one rank (every AR loopback case runs the deferral; two cases the old
# release); (2) bench_gemm_rs --op ar --diag --soak at 8192^2 x 4096: loopback slots / zero copy,
# deferred vs now. Prediction (before the run): loopback -0.5..-1.5% (one 256-thread barrier and
# one local system fence fewer per own tile; at 2 GPUs the fence waits for NVLink stores: more).
# Usage (device): OUT=... bash bench/calls/p1_s14f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_gemm_rs.log" | head -5
timeout -k 5 150 build/bench/bench_gemm_rs --op ar --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
  --json "$OUT/gemm_ar-p1-copyflag.jsonl" > "$OUT/ar.log" 2>&1
echo "bench_gemm_rs ar rc=$? at $(el) s"
grep -E "loopback" "$OUT/ar.log" | sed 's/^\[rank 0\] //' | cut -c1-170
grep -E "soak" "$OUT/ar.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=1024 GEMM_AR_ZC=1 +[0-9]|COPY_FLAG" | cut -c1-160
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
