#!/usr/bin/env bash
# p1_s17f.sh — ONE GPU, session 17's last call: every GPU test program at one rank on the final
# code (the cluster barrier's halves now helpers in ptx_async.cuh; every kernel rebuilt), then
# bench_gemm_rs --decode --diag once more (JSON for the record).
# Prediction: all 7 pass; the decode loopback as in call 6 (within ~0.5 us).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s17f.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
PREBUILT=1 TEST_TIMEOUT_S=240 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "tests rc=$? at $(el) s"; grep -E "FAILED|checks passed|== gpu" "$OUT/gpu_tests.log" | tail -12
cp build/tests/gpu/*.log "$OUT/" 2>/dev/null
timeout -k 5 150 build/bench/bench_gemm_rs --decode --diag --op ar --json "$OUT/gemm_ar-p1-s17g.jsonl" > "$OUT/dec.log" 2>&1
echo "bench rc=$? at $(el) s"; grep -E "^gemm_ar|decode GEMM\+AR as one|decode kernel's loopback|graph:" "$OUT/dec.log" | cut -c1-170
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
