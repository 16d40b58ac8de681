#!/usr/bin/env bash
# p1_s31e.sh — ONE GPU, session 31: the comm CTAs' bulk copies (one thread, 12 x 16 KB through
# shared memory, 8 loads in flight; now the default) against 16-byte vectors (MELD_MOE_COPY=vec),
# and raster group 8 where experts get <= 64 rows (the T 512 row) against 16. test_moe 1,2,4
# (three paths: bulk, one comm CTA, vec; and meld_moe_combine, new, after each case) first; the routing kernel's deterministic counting sort
# (warp-private counts) is new too (test_moe checks the order). MELD_MOE_DIAG=3: routing + protocol
# alone (call 7: 29-134 us; prediction now 20-60 us).
# Predictions: bulk copies cut the comm variant ~2x (1.15 -> ~0.6 ms at dsv3 T 4096 one rank) and
# the fused overhead over nocopy from ~9% to ~4-5%; T 512: group 8 = the -13% of call 6.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe build/tests/gpu/test_moe
export MELD_TIMEOUT_MS=5000
for p in 1 2 4; do
  timeout -k 5 150 build/tests/gpu/test_moe $p > "$OUT/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_moe_$p.log" | cut -c1-300 | head -5
done
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200}
export BENCH_MOE_AB=${BENCH_MOE_AB-MELD_MOE_COPY=vec,MELD_MOE_COPY=vec+MELD_MOE_DIAG=2,MELD_MOE_GROUP_M=16,MELD_MOE_DIAG=3}
J="$OUT/moe.jsonl"
for p in 1 2; do
  timeout -k 5 240 build/bench/bench_moe --ranks $p --json "$J" > "$OUT/bench_moe_p$p.log" 2>&1
  echo "== bench_moe --ranks $p rc=$? at $(el) s"; grep -E "^P$p|FAIL|rror" "$OUT/bench_moe_p$p.log" | grep -v cublas | head -40
done
echo "== done at $(el) s"
