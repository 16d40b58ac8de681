#!/usr/bin/env bash
# p1_s32e.sh — ONE GPU, session 32, final: meld_moe_ffn's default (sends in the second GEMM with
# several ranks; with one rank where experts get <= 64 rows) checked by test_moe 1,2,8, and the
# bench rows with a decode row (dsv3-32e T128: 32 experts, ~32 rows each) against torch's layer.
# Prediction: pass; the decode row's floor is its weights' stream (2.8 GB: ~0.6-0.7 ms): meld ffn
# ~0.9 ms, torch layer ~1.2 ms.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 8
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} BENCH_MOE_AB=${BENCH_MOE_AB-}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --samples 3 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1.*(fused|swiglu|ffn|cublas)|FAIL|rror" "$OUT/bench_moe_p1.log" | head -60
timeout -k 5 200 python3 bench/moe_torch.py --json "$J" > "$OUT/moe_torch.log" 2>&1
echo "== moe_torch rc=$? at $(el) s"; grep -E "^P1|rror" "$OUT/moe_torch.log"
echo "== done at $(el) s"
