#!/usr/bin/env bash
# p1_s16h.sh — ONE GPU, session 16 call 8: the store-hint A/B once more, with 4 rounds of pass
# pairs (bench_gemm_rs --soak-rounds 4, new), three rows per op (meld_gemm_plain first as a
# buffer), RS loopback and AR zero copy, with and without MELD_GEMM_STORE_HINT=1.
# Prediction (before the run): the hint within -0.5..+0.2%, i.e. inside the spread: it stays off.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16h.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
export MELD_TIMEOUT_MS=3000
for op in rs ar; do
  rows="meld_gemm_plain|meld fused GEMM_RS_DIAG=1024|meld fused GEMM_RS_DIAG=1024 GEMM_STORE_HINT=1"
  [ $op = ar ] && rows="meld_gemm_plain|meld_symc fused GEMM_RS_DIAG=1024 GEMM_AR_ZC=1|meld_symc fused GEMM_RS_DIAG=1024 GEMM_AR_ZC=1 GEMM_STORE_HINT=1"
  timeout -k 5 150 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-500} --soak-rounds 4 \
    --rows "$rows" --json "$OUT/gemm_$op-p1-s16h.jsonl" > "$OUT/$op.log" 2>&1
  echo "$op rc=$? at $(el) s"; grep -E "soak gemm" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
