#!/usr/bin/env bash
# p1_s15d.sh — ONE GPU, session 15 call 4: add mode 4 prefetches half 1 of an own tile's partial
# into L2 (cp.async.bulk.prefetch.tensor) when it asks for half 0, so half 1's TMA load after
# half 0's store hits L2 (diag bit 6 / MELD_GEMM_RS_DIAG=512 turns it off); and the pushed
# tiles' deferral (default after k-block 16) against off and 0 once more, RS in two processes.
# Prediction (before the run): loopback -0.5..-1%, diag 130 (every tile own) -1..-1.5% against
# no prefetch; deferral within +-0.5% of off.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s15d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 180 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_gemm_rs.log" | head -5
for run in rs rs2 ar; do
  op=${run%2}
  timeout -k 5 200 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
    --json "$OUT/gemm_$run-p1-s15d.jsonl" > "$OUT/$run.log" 2>&1
  echo "bench_gemm_rs $run rc=$? at $(el) s"
  grep -E "soak" "$OUT/$run.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=1536|DIAG=130 +[0-9]|DIAG=642 |DIAG=1024 GEMM_AR_ZC=1 +[0-9]|PUSH_DEFER" | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
