#!/usr/bin/env bash
# p1_s15b.sh — ONE GPU, session 15 call 2: (a) AR's reduced tiles' copy by TMA store from the
# staging (gemm.cuh reduce.copy_tma; MELD_GEMM_AR_COPY=st = before), the default; (b) the pushed
# tiles' second half deferred into the next mainloop (MELD_GEMM_RS_PUSH_DEFER=KB, opt-in).
# (1) test_gemm_rs at one rank (every AR loopback case copies by TMA; "st" cases; the deferral
# after k-block 0 and 16, RS and AR); (2) bench_gemm_rs --diag --soak at 8192^2 x 4096, AR then RS.
# Predictions (before the run): AR loopback zero copy 0.886 -> 0.873-0.880, slots 0.932 ->
# 0.920-0.928 (-0.5..-1.5%: 128 threads' 8 shared loads + 8 stores per half gone); the deferral
# within +-0.5% of off in loopback (its gain is the NVLink drain of half 0, absent on one GPU).
# Usage (device): OUT=... bash bench/calls/p1_s15b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 180 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_gemm_rs.log" | head -5
for op in ar rs; do
  timeout -k 5 200 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
    --json "$OUT/gemm_$op-p1-s15b.jsonl" > "$OUT/$op.log" 2>&1
  echo "bench_gemm_rs $op rc=$? at $(el) s"
  grep -E "soak" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=1024 GEMM_AR_ZC=1 +[0-9]|AR_COPY|PUSH_DEFER" | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
