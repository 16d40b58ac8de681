#!/usr/bin/env bash
# p1_s35c.sh — ONE GPU, session 35 call 4: the MoE routing inside the fused kernel (MELD_MOE_ROUTE_IN,
# default 1: the first route_ctas comm CTAs route, the other comm CTAs and the GEMM's producers
# wait for its layout word; no routing kernel). (1) test_moe at 1, 2, 4 ranks (4 paths: in the
# fused kernel with 1 / up to 16 routing CTAs, the routing kernel with 3 / 16); (2) A/B in one
# process per row set, sustained (2 s lead-in): ROUTE_IN 0 / 1 twice each on decode, T512, T4096,
# Mixtral, T8192; (3) the trace's phases at decode both ways.
# Prediction: tests pass; decode -8..-12 us a call (0.533 -> ~0.52 ms: the routing kernel's
# entry / exit and one kernel boundary gone), T4096 within +-1% (12 warps a routing CTA, not 32),
# T8192 may lose up to ~20 us (16 x 12 warps walk 65536 pairs).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4
R=MELD_MOE_ROUTE_IN
BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512,dsv3_T4096,mixtral_T4096,dsv3_T8192 BENCH_MOE_VARIANTS=fused \
  BENCH_MOE_AB=$R=0,$R=1,$R=0,$R=1 moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_ab.log"
for r in 1 0; do moe_trace dsv3-32e_T128 $R=$r; done
echo "== done at $(el) s"
