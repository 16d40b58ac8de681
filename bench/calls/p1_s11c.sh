#!/usr/bin/env bash
# p1_s11c.sh — ONE GPU, session 11, call 3: the wide tile's default is now no deferral (call 2
# measured the deferred third 1-4% slower; that call's raw logs were lost). Re-measures and
# checks the whole tree at one rank:
#   1. every GPU test program (test_gemm now with forced-deferral wide cases and the default
#      rule expecting no deferral);
#   2. bench_gemm --soak 600: default (wide, no deferral) / w320d (wide, deferred) / n256 /
#      cuBLASLt at 2048 x 5120 x 8192 and 8192 x 1280 x 8192;
#   3. the GEMM suite (48 shapes, burst) with the new default against cuBLASLt: no shape worse.
# Prediction: default = call 2's w320nd (0.252 / 0.262 sustained), w320d +1-4%; suite geomean
# unchanged (only 2 shapes differ).
# Usage (device): OUT=... bash bench/calls/p1_s11c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build all bench
TEST_TIMEOUT_S=150 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "gpu tests rc=$? at $(el) s"; grep -E "checks passed|FAILED|PASSED|FAIL" "$OUT/gpu_tests.log" | cut -c1-160 | head -20
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
timeout -k 5 200 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,1280,8192 \
  --only default,w320d,n256 --soak ${SOAK:-600} --json "$OUT/gemm-wide-nodefer-s11.jsonl" > "$OUT/bench.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^custom|^soak|skipped|ERROR" "$OUT/bench.log" | cut -c1-170
timeout -k 5 200 build/bench/bench_gemm --json "$OUT/gemm-suite-s11.jsonl" > "$OUT/suite.log" 2>&1
echo "suite rc=$? at $(el) s"; grep -iE "geomean|lowest|ERROR|skipped" "$OUT/suite.log" | cut -c1-170 | head; tail -4 "$OUT/suite.log"
echo "total: $(el) s"
