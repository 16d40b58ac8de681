#!/usr/bin/env bash
# p1_s37a.sh — ONE GPU, prepared in session 36 after its device time was spent (NOT run): the
# inter-node path after two CPU-only changes: the piece arithmetic moved into src/common/net.h
# (meld_net_piece, unit-tested; the same expression) and test_net's new all_reduce at a count
# that is not a multiple of the ranks (shorter or empty last parts: never run on a GPU before).
# Also after the review's mends (CPU-only): AG+GEMM's multi-node schedule decided in its plan
# (ag_gemm_plan_make_nodes) instead of a hint patched in ag_gemm.cu, the net staging block read
# once at init, test_net's references from tests/common (ref_coll.c / ref_gemm.c): test_ag_gemm
# at one rank and at 2 sharing the GPU.
# Prediction: all pass at 2 x 1, 3 x 1, 2 x 2; test_ag_gemm passes.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net build/tests/gpu/test_ag_gemm
export MELD_TIMEOUT_MS=5000
timeout -k 5 300 tests/gpu/run.sh test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "== test_ag_gemm rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_ag_gemm.log" | head -5
GT_SPAWN_TIMEOUT_S=240 timeout -k 5 300 tests/gpu/run_shared.sh 2 test_ag_gemm > "$OUT/test_ag_gemm2.log" 2>&1
echo "== run_shared 2 test_ag_gemm rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_ag_gemm2.log" | head -5
unset MELD_TIMEOUT_MS
GT_SPAWN_TIMEOUT_S=240 timeout -k 5 400 tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"; grep -E "FAIL|checks|bandwidth|PASSED|FAILED" "$OUT/test_net4.log" | cut -c1-300 | head -30
echo "== done at $(el) s"
