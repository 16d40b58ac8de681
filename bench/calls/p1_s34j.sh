#!/usr/bin/env bash
# RAN in session 34 call 10 and REVERTED after it: decode fused 0.5327 (8 k-blocks) / 0.5397-0.5406 (12) vs
# 0.5334 off; Mixtral and T512 within noise. The code is in no commit; MELD_MOE_PF_EARLY does not exist.
# p1_s34j.sh — ONE GPU, EXPERIMENT: the fused kernel launched programmatically (cooperative +
# programmatic attributes; the routing kernel triggers its dependents at entry) and, before its
# griddepcontrol.wait, each CTA prefetches into L2 the first MELD_MOE_PF_EARLY k-blocks of "its"
# first tile's weight panel (tile blockIdx.x, as if every local expert had one block: decode).
# DRAM idles ~28 us at decode while the routing kernel (21 us) and the kernel boundary (7 us) run;
# the decode GEMM streams weights at ~4 TB/s. Call 5 (PDL without the prefetch): no change; call 6
# (prefetch while copies run): +2%: it fought the copies for DRAM, which do not run yet here.
# Prediction: decode dispatch + GEMM -5..-10 us with 8-12 k-blocks (132 tiles x 32 KB = 34-50 MB)
# IF the fused kernel's CTAs start before the routing kernel ends; if they do not, no change.
# Other rows: within noise. test_moe 1 passes with it on (2+ ranks share the GPU: off there).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
MELD_MOE_PF_EARLY=12 test_ranks build/tests/gpu/test_moe 1
grep -i "refused" "$OUT"/test_moe_1.log | head -2
BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512,mixtral_T4096 BENCH_MOE_VARIANTS=fused,ffn \
  BENCH_MOE_AB=MELD_MOE_PF_EARLY=8,MELD_MOE_PF_EARLY=12,MELD_MOE_PF_EARLY=0,MELD_MOE_PF_EARLY=12 moe_rows 5
echo "== done at $(el) s"
