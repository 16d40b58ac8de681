#!/usr/bin/env bash
# p1_s33d.sh — ONE GPU, session 33, call 4: the MoE GEMMs' tiles expert by expert (hook f's runs,
# grp_span: an expert's blocks in groups of up to 16, so its weight is read from L2 once; call 3's
# ncu: DeepSeek-V3 T 4096 read 20 GB from DRAM for 15.5 GB of weights and rows, its 2-block experts'
# second blocks ~16 tiles behind the first). test_moe 1,2,4,8; bench every row, the old order
# (MELD_MOE_RUNS=0: group 1 / 16 by rows an expert) as A/B; ncu DRAM bytes with and without.
# Prediction: pass; DRAM 20 -> ~16 GB and fused -10..-20% on dsv3 T4096 / Zipf; T512 and decode
# unchanged (one block an expert: the same order as group 1); 32 experts / Mixtral within noise.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_VARIANTS=fused,nocopy,cublas-loop,ffn BENCH_MOE_AB=MELD_MOE_RUNS=0,MELD_MOE_RUNS=0+MELD_MOE_DIAG=1 moe_rows 3
bash bench/ncu_moe.sh "dsv3_T4096_runs;BENCH_MOE_ROWS=dsv3_T4096;nocopy;moe_kernel;2" \
  "dsv3_T4096_noruns;BENCH_MOE_ROWS=dsv3_T4096 MELD_MOE_RUNS=0;nocopy;moe_kernel;2" \
  "32e_runs;BENCH_MOE_ROWS=dsv3-32e_T4096;nocopy;moe_kernel;2" \
  "32e_noruns;BENCH_MOE_ROWS=dsv3-32e_T4096 MELD_MOE_RUNS=0;nocopy;moe_kernel;2"
echo "== done at $(el) s"
