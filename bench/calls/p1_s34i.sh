#!/usr/bin/env bash
# p1_s34i.sh — ONE GPU: the session's final MoE figures at its final library (= call 7's: the
# routing kernel on several CTAs; call 8's split reverted). Calls 7-8 moved same-path variants by
# up to 10-25% (T4096 nocopy 5.00 / 5.69 ms, T8192 fused 7.75 / 8.50): two meld passes around one
# torch pass, every row sustained. Prediction: test_moe passes; passes agree within 5% on most
# rows; meld_moe_ffn 1.3-1.8x torch's layer on every row, dispatch + GEMM ahead of torch's on
# every row (T8192 / Mixtral / 32 experts by the least).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4 8
export BENCH_MOE_ROWS=dsv3_T512,dsv3_T4096,dsv3-zipf_T4096,dsv3_T8192,dsv3-32e_T4096,mixtral_T4096,dsv3-32e_T128
BENCH_MOE_VARIANTS=fused,nocopy,ffn,cublas-loop moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_passA.log"
moe_torch_rows
BENCH_MOE_VARIANTS=ffn,fused,nocopy moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_passB.log"
echo "== done at $(el) s"
