#!/usr/bin/env bash
# p1_s35k.sh — ONE GPU, session 35 call 13: the routing in the fused kernel at 2 and 4 ranks as
# threads sharing the GPU (the counts exchanged between ranks inside the fused kernels; SM shares
# per rank), against the routing kernel, alternating, sustained. Not a multi-GPU figure.
# Prediction: in the fused kernel equal or faster (one kernel boundary less a rank) at decode; no
# stall from the in-kernel exchange.
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000 BENCH_SETTLE_MS=200
R=MELD_MOE_ROUTE_IN
for p in 2 4; do
  BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$R=0,$R=1,$R=0,$R=1,$R=0 \
    timeout -k 5 200 build/bench/bench_moe --ranks $p --samples 3 --json "$OUT/moe.jsonl" > "$OUT/bench_moe_p$p.log" 2>&1
  echo "== bench_moe --ranks $p rc=$? at $(el) s"; grep -E "^P$p|FAIL|rror" "$OUT/bench_moe_p$p.log" | head -20
done
echo "== done at $(el) s"
