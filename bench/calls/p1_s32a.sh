#!/usr/bin/env bash
# p1_s32a.sh — ONE GPU, session 32, first call: session 31's CPU-only mends (grouped GEMM's
# smem attribute at device setup, shared test mains / Hopper probe, the routing kernel's id
# loader) checked by test_moe 1,2,4,8, test_ring_attn 2 and test_gemm.
# Prediction: all pass (nothing in the data path changed).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/tests/gpu/test_ring_attn build/tests/gpu/test_gemm
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
timeout -k 5 150 build/tests/gpu/test_ring_attn 2 > "$OUT/test_ring_attn_2.log" 2>&1
echo "== test_ring_attn 2 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_ring_attn_2.log" | head -5
timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_gemm.log" | head -5
echo "== done at $(el) s"
