#!/usr/bin/env bash
# p1_s24e.sh — ONE GPU, session 24 call 5: every GPU test at the session's library code (comm
# init now creates the CE stream, copies 16 bytes from every peer's pad and loads the CE
# kernels; with rank processes sharing the GPU that copy reads an IPC-mapped pad).
# Carry: build/carry (pack_bins of build/tests/gpu/*).
# 1. the 7 programs at one rank; 2. test_abort, test_gemm_rs, test_ag_gemm at 2 rank processes
# sharing the GPU; 3. test_coll TEST_COLL_ONLY=ce at 2 processes (new: the CE engine with peers
# in another process, CUDA IPC); 4. test_inproc 2,3,4. Prediction: all pass.
# Usage (device): OUT=... bash bench/calls/p1_s24e.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1
MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=150 timeout -k 5 250 tests/gpu/run.sh test_gemm test_coll test_gemm_rs \
  test_ag_gemm test_abort test_signal test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-160 | head -12
TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=140 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm > "$OUT/p2.log" 2>&1
echo "== P=2 shared rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2.log" | head
TEST_COLL_ONLY=ce TEST_TIMEOUT_S=120 GT_SPAWN_TIMEOUT_S=110 timeout -k 5 130 tests/gpu/run_shared.sh 2 test_coll > "$OUT/p2_ce.log" 2>&1
echo "== test_coll CE at 2 shared processes rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed|reference checks" "$OUT/p2_ce.log" | cut -c1-200 | head
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-200 | head -6
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
