#!/usr/bin/env bash
# p1_s33i.sh — ONE GPU, session 33, call 9: the shared engine (src/device/gemm.cuh) gained a GRP
# template flag (hook f's runs, the padding half-blocks) and hook f's index mask: the other engine
# users at their last code: test_gemm, test_ag_gemm, test_gemm_rs at one rank, test_inproc at 2
# ranks as threads (the fused ops in flight together).
# Prediction: all pass (the flag defaults off: their kernels compile as before).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_gemm build/tests/gpu/test_ag_gemm build/tests/gpu/test_gemm_rs build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=5000
for t in test_ag_gemm test_gemm_rs test_gemm; do
  timeout -k 5 150 build/tests/gpu/$t > "$OUT/$t.log" 2>&1
  echo "== $t rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/$t.log" | head -3
done
test_ranks build/tests/gpu/test_inproc 2
echo "== done at $(el) s"
