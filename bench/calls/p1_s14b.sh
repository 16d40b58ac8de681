#!/usr/bin/env bash
# p1_s14b.sh — ONE GPU, session 14 call 2: the hook g kernel with the default add mode fixed at
# compile time (gemm.cuh PRE 4: 11,832 SASS instructions for the G2 kernel vs 17,032 general;
# MELD_GEMM_RS_LEAN=0 keeps the general one). (1) test_gemm_rs at one rank (every loopback and
# synthetic-partial case with mode 4 now runs the lean kernel; the LEAN=0 cases the general);
# (2) bench_gemm_rs --diag --soak at 8192^2 x 4096, RS then AR: loopback and diag 130, lean
# (default) vs general (LEAN=0), beside meld_gemm / mg_plain / diag 8 / diag 16.
# Prediction (written before the run): loopback lean 0.5-1.5% faster than general (RS 0.901 ->
# ~0.89); diag 130 alike.
# Usage (device): OUT=... bash bench/calls/p1_s14b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|PASSED|FAIL|LEAN" "$OUT/test_gemm_rs.log" | head
for op in rs ar; do
  timeout -k 5 200 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-600} \
    --json "$OUT/gemm_$op-p1-lean.jsonl" > "$OUT/$op.log" 2>&1
  echo "bench_gemm_rs $op rc=$? at $(el) s"
  grep -E "soak" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm | meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=1024 GEMM_RS_LEAN|DIAG=130 +[0-9]|DIAG=130 GEMM_RS_LEAN|DIAG=8 |DIAG=16 " | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
