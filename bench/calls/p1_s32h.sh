#!/usr/bin/env bash
# p1_s32h.sh — ONE GPU, session 32, last check: test_moe 1,2,4,8 after the review mends (path 2 now
# runs the ffn with the sends forced on and the dispatch's deferred epilogue off: the gated tiles'
# direct store; MELD_MOE_FFN_SEND read before anything is launched).
# Prediction: all pass.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
echo "== done at $(el) s"
