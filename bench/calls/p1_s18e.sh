#!/usr/bin/env bash
# p1_s18e.sh — ONE GPU, session 18 call 5 (the device time left: ~290 s): P = 5 ranks sharing
# the GPU (odd, not a power of two, more owners than any earlier run): test_ag_gemm, then
# test_gemm_rs as far as the time allows (P = 4 took 80 s; 5 processes take turns: ~1.3x).
# Prediction (before the run): both pass (call 3: P = 3 and 4 pass after the split-tile fix).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s18e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
PREBUILT=1 TEST_TIMEOUT_S=40 GT_SPAWN_TIMEOUT_S=35 tests/gpu/run_shared.sh 5 test_ag_gemm > "$OUT/p5_test_ag_gemm.log" 2>&1
echo "P=5 test_ag_gemm rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing" "$OUT/p5_test_ag_gemm.log" | cut -c1-160 | head -8
lim=$(( 185 - $(el) ))
PREBUILT=1 TEST_TIMEOUT_S=$lim GT_SPAWN_TIMEOUT_S=$((lim - 5)) tests/gpu/run_shared.sh 5 test_gemm_rs > "$OUT/p5_test_gemm_rs.log" 2>&1
echo "P=5 test_gemm_rs rc=$? at $(el) s"; grep -E "^== gpu|FAIL|killing|^---" "$OUT/p5_test_gemm_rs.log" | cut -c1-160 | head -14
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
