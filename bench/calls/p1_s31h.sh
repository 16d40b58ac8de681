#!/usr/bin/env bash
# p1_s31h.sh — ONE GPU, session 31: meld_moe_grouped_gemm (new: the layer's second GEMM on the
# dispatch's layout) checked by test_moe 1,2,3,4,8 (with the dispatch and the combine).
# Prediction: all pass.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
for p in 1 2 3 4 8; do
  timeout -k 5 150 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL|grouped GEMM P=.*T 1000" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
echo "== done at $(el) s"
