#!/usr/bin/env bash
# p1_s32h.sh — ONE GPU, session 32, last check: test_moe 1,2,4,8 after the review mends (path 2 now
# runs the ffn with the sends forced on and the dispatch's deferred epilogue off: the gated tiles'
# direct store; MELD_MOE_FFN_SEND read before anything is launched).
# Prediction: all pass.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
for p in 1 2 4 8; do
  timeout -k 5 150 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
echo "== done at $(el) s"
