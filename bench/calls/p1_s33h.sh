#!/usr/bin/env bash
# p1_s33h.sh — ONE GPU, session 33, call 8: the combine's sums as (token, column part) items over
# every warp of the grid with eight slots' loads in flight a lane (call 7's ncu: 114 us at 128
# tokens for 15 MB, a warp a token waiting on one load at a time; 276 us at 4096 tokens for 0.53
# GB). test_moe 1,2,4,8; the bench's rows with torch in the same call (the session's final
# figures); ncu of the combine.
# Prediction: pass; combine 114 -> ~20 us at decode (the layer -10%: 0.889 -> ~0.80 ms), 276 ->
# ~150 us at dsv3 T4096.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
BENCH_MOE_VARIANTS=fused,nocopy,cublas-loop,swiglu,gemm2,ffn,ffn-apart,ffn-send moe_rows 5
moe_torch_rows
bash bench/ncu_moe.sh "combine_dsv3_T4096;BENCH_MOE_ROWS=dsv3_T4096;ffn-apart;moe_combine_kernel;2" \
  "combine_32e_T128;BENCH_MOE_ROWS=dsv3-32e_T128;ffn-apart;moe_combine_kernel;2"
echo "== done at $(el) s"
