#!/usr/bin/env bash
# p1_s34a.sh — ONE GPU, prepared in session 33 (not run): the next MoE questions after the runs.
# (1) test_moe 1,2,4,8 at session 33's last code (the gemm2 JSON label is the only change since
# call 8); (2) the group inside a run (16, the default) against 8 and 32 on every row; (3) where
# the fixed cost goes: ncu of the routing kernel and of the fused kernel with no copies and no
# GEMM (MELD_MOE_DIAG=3) at dsv3 T4096 (session 32: 131 us together, sustained) and at decode (24 us).
# Prediction: pass; groups 8 / 32 within +-3% of 16 (32 experts: a run of 8-9 blocks is one group
# at 16 and at 32; Mixtral 32 blocks: 16 vs 32 the open question); the routing kernel < 20 us at
# T4096 (32768 pairs over 32 warps), the rest launch and the fused kernel's entry / exit.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_VARIANTS=fused,nocopy BENCH_MOE_AB=MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=32,MELD_MOE_DIAG=3 moe_rows 3
bash bench/ncu_moe.sh "route_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096;nocopy;moe_route_kernel;2" \
  "route_decode;BENCH_MOE_ROWS=dsv3-32e_T128;nocopy;moe_route_kernel;2" \
  "entry_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096 BENCH_MOE_AB=MELD_MOE_DIAG=3;nocopy;moe_kernel;8"
echo "== done at $(el) s"
