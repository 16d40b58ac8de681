#!/usr/bin/env bash
# p1_s33e.sh — ONE GPU, session 33, call 5: the layer after the runs and the padding skip, with
# torch in the same call; the second GEMM alone (gemm2) to split the layer; ncu of the second GEMM
# and the combine at dsv3 T4096.
# Prediction: fused as call 4; ffn 5-10% under session 32's call 7 on dsv3 T4096 / Zipf / 32
# experts (both GEMMs take the runs); gemm2 at dsv3 T4096 ~2 ms (7.5 GB of down_proj weights at
# ~3.8 TB/s), the combine ~0.2 ms.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
BENCH_MOE_VARIANTS=fused,nocopy,cublas-loop,swiglu,gemm2,ffn,ffn-apart,ffn-send moe_rows 3
moe_torch_rows
bash bench/ncu_moe.sh "gemm2_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096;gemm2;moe_gemm_kernel;2" \
  "combine_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096;ffn-apart;moe_combine_kernel;2" \
  "gemm2_32e;BENCH_MOE_ROWS=dsv3-32e_T4096;gemm2;moe_gemm_kernel;2"
echo "== done at $(el) s"
