#!/usr/bin/env bash
# p1_s15c.sh — ONE GPU, session 15 call 3: own tiles' half 1 of the partial by register loads
# (gemm.cuh reduce.h1_ld, the new default; MELD_GEMM_RS_H1=tma = before), with the pushed
# tiles' deferred half (default since call 2) and the AR's TMA copies. Binaries built on the CPU
# and carried (PREBUILT=1), else built here.
# (1) test_gemm_rs at one rank; (2) bench_gemm_rs --diag --soak at 8192^2 x 4096, RS then AR.
# Prediction (before the run): loopback and diag 130 0.5-1.5% faster than H1=tma (one 16 KB TMA
# round trip per own tile and warpgroup, ~1-2 us with the warpgroup waiting, x ~8 own tiles per CTA).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s15c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 180 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_gemm_rs.log" | head -5
for op in rs ar; do
  timeout -k 5 200 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
    --json "$OUT/gemm_$op-p1-s15c.jsonl" > "$OUT/$op.log" 2>&1
  echo "bench_gemm_rs $op rc=$? at $(el) s"
  grep -E "soak" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=130 +[0-9]|DIAG=1024 GEMM_AR_ZC=1 +[0-9]|AR_COPY|PUSH_DEFER|RS_H1" | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
