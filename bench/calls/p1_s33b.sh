#!/usr/bin/env bash
# p1_s33b.sh — ONE GPU, session 33, call 2: is the grouped GEMM's 6% over the same work as one
# dense meld_gemm (call 1, sustained) DRAM traffic at the power cap? Call 1's ncu: equal cycles,
# but 3.95 GB DRAM read vs 2.72 and a 4% lower clock. Counters per raster group for the grouped
# kernel (nocopy) and the dense one, and one cuBLAS kernel of the loop (x 32 for the row).
# Prediction: DRAM read falls with the group toward 2.35 GB (weights + A once) at group 8 (one
# expert's 8 blocks a group); cuBLAS's per-expert kernel reads ~73 MB (its expert's weight + rows).
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
bash bench/ncu_moe.sh "grouped_g16;-;nocopy;moe_kernel;2" "grouped_g8;MELD_MOE_GROUP_M=8;nocopy;moe_kernel;2" \
  "grouped_g4;MELD_MOE_GROUP_M=4;nocopy;moe_kernel;2" "grouped_g2;MELD_MOE_GROUP_M=2;nocopy;moe_kernel;2" \
  "grouped_g32;MELD_MOE_GROUP_M=32;nocopy;moe_kernel;2" \
  "dense_g16;-;dense;gemm_kernel;2" "dense_g8;MELD_GEMM_GROUP_M=8;dense;gemm_kernel;2" \
  "dense_g4;MELD_GEMM_GROUP_M=4;dense;gemm_kernel;2" "cublas_expert;-;cublas-loop;nvjet|xmma|cutlass;40" \
  "rand_grouped_g16;BENCH_MOE_ROWS=dsv3-32e_T4096;nocopy;moe_kernel;2" 2>&1
echo "== done at $(el) s"
