#!/usr/bin/env bash
# p1_s32d.sh — ONE GPU, session 32: the row scatter's count fence at GPU scope where every rank is on
# this GPU (call 3 paid fence.acq_rel.sys per half-tile: ffn 2-4% slower than ffn-apart at one rank
# on 4 of 5 rows). test_moe 1,4; bench_moe --ranks 1 and --ranks 4 (ranks sharing the GPU: the
# sends go to other ranks' staging).
# Prediction: pass; at one rank ffn within +-1% of ffn-apart at T4096 and faster at T512; at 4 ranks
# ffn faster than ffn-apart (the combine's copy pass over the other ranks' rows saved).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 4
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} BENCH_MOE_AB=${BENCH_MOE_AB-}
J="$OUT/moe.jsonl"
for p in 1 4; do
  timeout -k 5 280 build/bench/bench_moe --ranks $p --samples 3 --json "$J" > "$OUT/bench_moe_p$p.log" 2>&1
  echo "== bench_moe --ranks $p rc=$? at $(el) s"; grep -E "^P.*(fused|swiglu|ffn)|FAIL|rror" "$OUT/bench_moe_p$p.log" | head -50
done
echo "== done at $(el) s"
