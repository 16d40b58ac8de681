#!/usr/bin/env bash
# p1_s17e.sh — ONE GPU, session 17 call 5 (again as call 6 after two fixes: a diag row left a record that the next row waited for; the loopback skipped the sticky-error check): the decode kernel with CONSUMED off its critical path
# (the last CTA posts one CONSUMED_ALL per call and records the epoch; the next call's side warp
# waits for it before the partial is overwritten; the partial moved to the workspace's top),
# test_gemm_rs (new: two shapes alternating back to back, their partials overlapping), then
# bench_gemm_rs --decode --diag at one rank twice.
# Prediction (before the run): tests pass; the loopback ~1 us faster than call 4 (128 x 8192 x
# 8192: 47.0 / 41.5 -> ~46 / ~40.5 us) and equal to its "without CONSUMED" row.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s17e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
PREBUILT=1 TEST_TIMEOUT_S=300 tests/gpu/run.sh test_gemm_rs > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "FAIL|passed|failed|decode kernel" "$OUT/gpu_tests.log" | tail -14
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
for rep in 1 2; do
  timeout -k 5 150 build/bench/bench_gemm_rs --decode --diag --op ar --json "$OUT/gemm_ar-p1-s17e-$rep.jsonl" > "$OUT/dec$rep.log" 2>&1
  echo "bench $rep rc=$? at $(el) s"; grep -E "^gemm_ar|decode GEMM\+AR as one|decode kernel's loopback|graph:" "$OUT/dec$rep.log" | cut -c1-190
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
