#!/usr/bin/env bash
# p1_s36e.sh — ONE GPU, session 36 call 8: the session's final library: every GPU test program at
# one rank (tests/gpu/run.sh, test_torch.py at 1 and 2 ranks included), the multi-rank programs at
# 2 ranks sharing the GPU (the collectives' entry now dispatches multi-node comms before its
# sticky-error read; ag_gemm / gemm_rs / attention route multi-node comms to their unfused paths),
# and test_net at 4 (emulated nodes) with its timing row.
# Prediction: all pass; the timing row a few hundred MB/s to ~2 GB/s (loopback TCP through pinned
# staging, two processes taking turns on the GPU).
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000
PREBUILT=1 timeout -k 5 400 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "== tests/gpu/run.sh rc=$? at $(el) s"
grep -hE "checks passed|PASSED|FAILED|passed, .* failed|FAIL" "$OUT/gpu_tests.log" | cut -c1-250 | tail -24
PREBUILT=1 GT_SPAWN_TIMEOUT_S=300 timeout -k 5 420 tests/gpu/run_shared.sh 2 test_comm test_coll test_ag_gemm test_gemm_rs > "$OUT/shared2.log" 2>&1
echo "== run_shared 2 rc=$? at $(el) s"; grep -hE "checks passed|FAIL|passed, .* failed" "$OUT/shared2.log" | cut -c1-250 | tail -12
unset MELD_TIMEOUT_MS
PREBUILT=1 GT_SPAWN_TIMEOUT_S=240 timeout -k 5 400 tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"; grep -E "FAIL|checks|bandwidth|PASSED|FAILED" "$OUT/test_net4.log" | cut -c1-300 | head -30
echo "== done at $(el) s"
