#!/usr/bin/env bash
# p1_s33f.sh — ONE GPU, session 33, call 6: the second GEMM's tiles from a queue (call 5's ncu:
# gemm2 at dsv3 T4096 read 10.6 GB from DRAM for 7.7 GB of weights and rows: its static workers
# drift apart over 32-k-block tiles and an expert's second block misses the weight in L2).
# test_moe 1,2,4,8; bench every row (5 samples) with torch in the same call; ncu of gemm2.
# Prediction: pass; gemm2 DRAM 10.6 -> ~8 GB, its time -15..-20% at dsv3 T4096 / Zipf (ncu 2.73 ->
# ~2.2 ms), ~0 at 32 experts (1.6 GB: already ~its weights); ffn -5..-8% on dsv3 T4096 / Zipf.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_VARIANTS=fused,nocopy,cublas-loop,swiglu,gemm2,ffn,ffn-apart,ffn-send moe_rows 5
moe_torch_rows
bash bench/ncu_moe.sh "gemm2_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096;gemm2;moe_gemm_kernel;2" \
  "gemm2_32e;BENCH_MOE_ROWS=dsv3-32e_T4096;gemm2;moe_gemm_kernel;2" \
  "gemm2_T128;BENCH_MOE_ROWS=dsv3-32e_T128;gemm2;moe_gemm_kernel;2"
echo "== done at $(el) s"
