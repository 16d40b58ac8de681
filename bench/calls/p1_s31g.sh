#!/usr/bin/env bash
# p1_s31g.sh — ONE GPU, session 31, last: the comm CTAs' origin copy with overlapped block waits (was
# one serial wait + two barriers a block: ~3 us a block before a comm CTA joined the GEMM), checked
# (test_moe 1,2,3,4,8 with the combine) and timed (bench_moe --ranks 1, DIAG=3: routing + protocol).
# Prediction: tests pass; DIAG=3 drops by ~50-100 us on the dsv3 rows (call 12: 81 / 169 / 162 / 114 /
# 33 us); fused within noise of call 13 elsewhere.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
for p in 1 2 3 4 8; do
  timeout -k 5 150 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-300} BENCH_MOE_AB=${BENCH_MOE_AB-MELD_MOE_DIAG=3}
timeout -k 5 240 build/bench/bench_moe --ranks 1 --json "$OUT/moe.jsonl" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1|FAIL|rror" "$OUT/bench_moe_p1.log" | grep -v loop | head -40
echo "== done at $(el) s"
