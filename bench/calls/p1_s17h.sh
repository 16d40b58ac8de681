#!/usr/bin/env bash
# p1_s17h.sh — ONE GPU, session 17 call 10: the decode kernel's CONSUMED_ALL posted by the call's
# last CTA from the epoch's own done count (one acq_rel count per CTA instead of two), test_gemm_rs
# at one rank, then bench_gemm_rs --decode --diag with programmatic launch on (default) and off.
# Call 9 measured: in graphs the programmatic launch (weights prefetched before the previous
# kernel ends) saves 2.2-3.1 us per call (loopback 37.8 vs 40.4 us at 16 x 8192 x 8192).
# Prediction (before the run): tests pass; the loopback 0.3-0.8 us faster than call 7 (e.g.
# 128 x 8192 x 8192 eager 47.3 -> ~46.7; graph 41.7 -> ~41.1).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s17h.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
PREBUILT=1 TEST_TIMEOUT_S=300 tests/gpu/run.sh test_gemm_rs > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "FAIL|checks passed|decode kernel" "$OUT/gpu_tests.log" | cut -c1-150 | tail -12
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
for pdl in 1 0; do
  MELD_GEMM_AR_DECODE_PDL=$pdl timeout -k 5 150 build/bench/bench_gemm_rs --decode --diag --op ar \
    --json "$OUT/gemm_ar-p1-s17h-pdl$pdl.jsonl" > "$OUT/dec-pdl$pdl.log" 2>&1
  echo "bench PDL=$pdl rc=$? at $(el) s"; grep -E "^gemm_ar m +(16|128) |decode GEMM\+AR as one|decode kernel's loopback|host enqueue" "$OUT/dec-pdl$pdl.log" | cut -c1-170
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
