#!/usr/bin/env bash
# p1_s34k.sh — ONE GPU: every GPU test at the session's final library (one rank), then the
# in-process multi-rank programs at 2 ranks sharing the GPU. The session changed the MoE routing
# kernel, a trace role in src/common/proto.h (every kernel's header) and trace.c; the GEMM engine
# and the other ops' code did not change (the experiments that touched them were reverted).
# Prediction: all pass (test_gemm 1852 checks, test_inproc 2 4797, test_moe 25225 over 1,2,4,8).
. "$(dirname "$0")/../device_env.sh"
PREBUILT=1 MELD_TIMEOUT_MS=5000 timeout -k 5 480 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "== tests/gpu/run.sh rc=$? at $(el) s"
grep -hE "checks passed|PASSED|FAILED|^\[  FAILED|passed, .* failed" "$OUT/gpu_tests.log" | tail -20
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_inproc 2
test_ranks build/tests/gpu/test_ring_attn 2
echo "== done at $(el) s"
