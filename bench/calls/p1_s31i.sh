#!/usr/bin/env bash
# p1_s31i.sh — ONE GPU, session 31, final check of the review mends after call 17 (moe_begin /
# moe_refuse shared by the MoE ops, bf2f in gpu_test.h, test_moe's seg_rel_err, bench_rank_time):
# test_moe 2,4 and a short bench_moe --ranks 1 (the shared timing loop). Prediction: pass; times as
# call 14.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
for p in 2 4; do
  timeout -k 5 150 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
BENCH_MOE_AB= BENCH_SETTLE_MS=100 timeout -k 5 120 build/bench/bench_moe --ranks 1 --samples 3 > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "fused|FAIL|rror" "$OUT/bench_moe_p1.log" | head -12
