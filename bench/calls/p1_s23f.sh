#!/usr/bin/env bash
# p1_s23f.sh — ONE GPU, session 23 calls 5 and 7: every GPU test at the session's last library code
# (the per-comm unfused scratch, the pull-only relaxed done, the lean LL kernels by action and
# unroll). Carry: build/tests/gpu.
# Prediction: everything passes. (Call 7: test_coll at 2 shared processes dropped: in call 5 it
# ran past the call's own limit; test_inproc runs the 2-rank collectives concurrently.)
# Usage (device): OUT=... bash bench/calls/p1_s23f.sh
. "$(dirname "$0")/../device_env.sh"
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -vE "back-to-back|graph \(" "$OUT/test_inproc.log" | cut -c1-200 | tail -4
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=150 timeout -k 5 250 tests/gpu/run.sh test_gemm test_coll test_gemm_rs \
  test_ag_gemm test_abort test_signal test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-160 | head -12
PREBUILT=1 TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=140 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm > "$OUT/p2.log" 2>&1
echo "== P=2 shared rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2.log" | head
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
