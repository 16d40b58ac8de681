#!/usr/bin/env bash
# p1_s16g.sh — ONE GPU, session 16 call 7: the final code (the evict-first hint on by default in
# the fused kernels, copy flags held): test_gemm_rs at one rank (cases with
# MELD_GEMM_STORE_HINT=0 beside the default), then a focused soak: RS loopback and AR zero copy,
# default vs MELD_GEMM_STORE_HINT=0 (prediction: default 0.3-0.5% faster).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16g.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
export MELD_TIMEOUT_MS=3000
timeout -k 5 240 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL|TIMEOUT|rror" "$OUT/test_gemm_rs.log" | head -8 | cut -c1-200
grep -c "worst rel" "$OUT/test_gemm_rs.log"
for op in rs ar; do
  rows="meld fused GEMM_RS_DIAG=1024|meld fused GEMM_RS_DIAG=1024 GEMM_STORE_HINT=0"
  [ $op = ar ] && rows="meld_symc fused GEMM_RS_DIAG=1024 GEMM_AR_ZC=1|meld_symc fused GEMM_RS_DIAG=1024 GEMM_AR_ZC=1 GEMM_STORE_HINT=0"
  timeout -k 5 120 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-500} --rows "$rows" \
    --json "$OUT/gemm_$op-p1-s16g.jsonl" > "$OUT/$op.log" 2>&1
  echo "$op rc=$? at $(el) s"; grep -E "soak gemm" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
