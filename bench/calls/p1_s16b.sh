#!/usr/bin/env bash
# p1_s16b.sh — ONE GPU, session 16 call 2: an own tile's start work moved into its mainloop
# (MELD_GEMM_RS_OWN_START=KB: after k-block KB's wgmmas are issued) and the AR's pending copy
# flag kept over an own tile's start (MELD_GEMM_AR_COPY_HOLD=1), both opt-in for this call.
# (1) test_gemm_rs at one rank (loopback cases with each setting); (2) bench_gemm_rs --diag
# --soak, RS and AR at 8192^2 x 4096; (3) traces of the new settings (trace_stats' own/peer line).
# Predictions (before the run; call 1's trace: start work 1.33 us per own tile in RS loopback,
# 3.52 in AR loopback of which 2.37 is the barrier + copy-flag release): RS loopback with
# OWN_START=0 -0.7..-1.1%; AR zero copy with COPY_HOLD=1 -1.5..-2%, with both -2..-3%; diag 130
# (no flags) with OWN_START=0 -0.3..-0.6%.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/tests/gpu/test_gemm_rs
export MELD_TIMEOUT_MS=3000
timeout -k 5 240 build/tests/gpu/test_gemm_rs > "$OUT/test_gemm_rs.log" 2>&1
echo "test_gemm_rs rc=$? at $(el) s"; grep -E "checks passed|FAIL|TIMEOUT|rror" "$OUT/test_gemm_rs.log" | head -8 | cut -c1-200
for op in rs ar; do
  timeout -k 5 240 build/bench/bench_gemm_rs --op $op --shape 8192,8192,4096 --diag --soak ${SOAK:-300} \
    --json "$OUT/gemm_$op-p1-s16b.jsonl" > "$OUT/$op.log" 2>&1
  echo "bench_gemm_rs $op rc=$? at $(el) s"
  grep -E "soak" "$OUT/$op.log" | sed 's/^\[rank 0\] //' | grep -E " meld_gemm_plain |DIAG=1024 +[0-9]|DIAG=130 +[0-9]|OWN_START|COPY_HOLD|DIAG=1024 GEMM_AR_ZC=1 +[0-9]" | cut -c1-160
done
for v in rs:GEMM_RS_OWN_START=0 ar:GEMM_AR_COPY_HOLD=1 ar:GEMM_RS_OWN_START=0; do
  op=${v%%:*}; kv=${v##*:}
  env MELD_$kv MELD_GEMM_RS_DIAG=1024 MELD_TRACE="$OUT/tr-$op-$kv.json" timeout -k 5 60 build/bench/bench_gemm_rs --trace --op $op \
    --shape 8192,8192,4096 > "$OUT/tr-$op.log" 2>&1; echo "trace $op $kv rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/tr-$op-$kv*.json 2>&1 | grep -A12 "call 3" | grep -E "call 3|mainloops|wait|other|reduce" | cut -c1-230
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
