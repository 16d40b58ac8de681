#!/usr/bin/env bash
# p1_s35h.sh — ONE GPU, session 35 call 9: the comm CTA count at decode and T512 with the routing
# in the fused kernel (the GEMM's CTAs now wait for the routing, then for their blocks' copies: a
# unit is a block, 32 blocks at decode over 16 comm CTAs = 2 units each). Session 34 (routing
# kernel) read a non-monotonic sweep (32 worst). 16 (default), 32, 64, 8, then 16, 32, 64 again.
# Prediction: 32 best at decode (one unit a CTA: the copies ~halved, ~-5 us) if the sweep is
# monotonic now; T512 (256 blocks) flat.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
C=MELD_MOE_COMM_CTAS
BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$C=32,$C=64,$C=8,$C=16,$C=32 moe_rows 5
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_comm_a.log"
BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512 BENCH_MOE_VARIANTS=fused BENCH_MOE_AB=$C=64,$C=16,$C=32,$C=48,$C=24 moe_rows 5
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_comm_b.log"
echo "== done at $(el) s"
