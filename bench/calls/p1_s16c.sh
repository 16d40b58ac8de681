#!/usr/bin/env bash
# p1_s16c.sh — ONE GPU, session 16 call 3: the AR's pending copy flag kept over an own tile's
# start, now the default (MELD_GEMM_AR_COPY_HOLD=0 = before). (1) test_gemm_rs at one rank;
# (2) bench_gemm_rs --op ar --diag --soak twice (two processes): loopback slots and zero copy,
# default vs HOLD=0; (3) per-tile traces of the zero-copy AR loopback (--symc), default and HOLD=0.
# Prediction (before the run; call 2: slots -0.7%, zero copy even): default within -1..+0.3% of
# HOLD=0 in both rows; the trace's own start work ~1.3 us (was 3.5) in zero copy too.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
export MELD_TIMEOUT_MS=3000
timeout -k 5 240 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL|TIMEOUT|rror" "$OUT/test_gemm_rs.log" | head -8 | cut -c1-200
for pr in 1 2; do
  timeout -k 5 240 build/bench/bench_gemm_rs --op ar --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
    --json "$OUT/gemm_ar-p1-s16c-$pr.jsonl" > "$OUT/ar$pr.log" 2>&1
  echo "bench_gemm_rs ar (process $pr) rc=$? at $(el) s"
  grep -E "soak" "$OUT/ar$pr.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|COPY_HOLD|DIAG=1024 GEMM_AR_ZC=1 +[0-9]" | cut -c1-160
done
for h in 1 0; do
  MELD_GEMM_AR_COPY_HOLD=$h MELD_GEMM_AR_ZC=1 MELD_GEMM_RS_DIAG=1024 MELD_TRACE="$OUT/tr-arzc-hold$h.json" timeout -k 5 60 \
    build/bench/bench_gemm_rs --trace --symc --op ar --shape 8192,8192,4096 > "$OUT/tr-$h.log" 2>&1; echo "trace zc hold $h rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/tr-arzc-hold$h*.json 2>&1 | grep -A12 "call 3" | grep -vE "entry|comm by" | cut -c1-230
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
