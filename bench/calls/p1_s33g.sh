#!/usr/bin/env bash
# p1_s33g.sh — ONE GPU, session 33, call 7: the combine reads its own tokens' rows in y2 where they
# are (the routing kernel's inv table gives each pair's row) instead of copying them through the
# staging first: at one rank it only sums. test_moe 1,2,4,8 (the combine's fp32 reference at
# every rank count: own rows and peers' rows); bench the layer; ncu of the combine.
# Prediction: pass; the combine at dsv3 T4096 520 -> ~150-200 us (ncu: 1.47 -> ~0.53 GB of
# traffic); the layer (apart path at one rank) -3..-4% at T4096 / Zipf / 32 experts / Mixtral.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_VARIANTS=fused,swiglu,gemm2,ffn,ffn-apart,ffn-send moe_rows 5
bash bench/ncu_moe.sh "combine_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096;ffn-apart;moe_combine_kernel;2" \
  "combine_32e_T128;BENCH_MOE_ROWS=dsv3-32e_T128;ffn-apart;moe_combine_kernel;2"
echo "== done at $(el) s"
