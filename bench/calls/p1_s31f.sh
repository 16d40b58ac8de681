#!/usr/bin/env bash
# p1_s31f.sh — ONE GPU, session 31: every bench_moe variant sustained (call 12 timed the cuBLAS and
# meld_gemm loops in bursts: settle 0, a flattering comparison), with torch's dispatch +
# _grouped_mm in the same call; test_moe 3 and 8 (with the combine; 1, 2, 4 passed in call 12).
# Prediction: the loops slow by 5-15% once sustained; meld fused within 0.95-1.10x of torch.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
for p in 3 8; do
  timeout -k 5 150 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-300} BENCH_MOE_AB=${BENCH_MOE_AB-}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1|FAIL|rror" "$OUT/bench_moe_p1.log" | head -40
timeout -k 5 200 python3 bench/moe_torch.py --json "$J" > "$OUT/moe_torch.log" 2>&1
echo "== moe_torch rc=$? at $(el) s"; grep -E "^P1|rror" "$OUT/moe_torch.log"
echo "== done at $(el) s"
