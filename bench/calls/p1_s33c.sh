#!/usr/bin/env bash
# p1_s33c.sh — ONE GPU, session 33, call 3: the padding half-blocks. The routing kernel flags an
# expert's last block when it holds <= 64 rows (GEMM_GRP_PAD1 in hook f's table); the MoE kernels'
# engine (GRP) lets warpgroup 1 pass those stages on without MMAs and store zeros. Tests: test_moe
# 1,2,4,8 (random routing: tails on both sides of 64), test_gemm (the engine's producer masks the
# table's index). Bench: every default row, fused vs MELD_MOE_PAD_SKIP=0 as A/B, the layer.
# Prediction: pass; fused -5..-10% on dsv3 T4096 / Zipf (~1/3 of their tiles are such blocks),
# ~-2% on 32 experts / Mixtral (1 block in ~17), ~0 on T512 and decode (the weights' stream).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/tests/gpu/test_gemm build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_gemm.log" | head -5
BENCH_MOE_VARIANTS=fused,nocopy,cublas-loop,ffn BENCH_MOE_AB=MELD_MOE_PAD_SKIP=0,MELD_MOE_PAD_SKIP=0+MELD_MOE_DIAG=1 moe_rows 3
bash bench/ncu_moe.sh "dsv3_T4096_skip;BENCH_MOE_ROWS=dsv3_T4096;nocopy;moe_kernel;2" \
  "dsv3_T4096_noskip;BENCH_MOE_ROWS=dsv3_T4096 MELD_MOE_PAD_SKIP=0;nocopy;moe_kernel;2"
echo "== done at $(el) s"
