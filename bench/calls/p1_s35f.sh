#!/usr/bin/env bash
# p1_s35f.sh — ONE GPU, session 35's final call: (1) every GPU test at the final library (the GEMM
# engine's parameters gained hook f's ready word: every kernel rebuilt), test_moe at 2, 4, 8 ranks
# and test_inproc at 2 sharing the GPU; (2) the final MoE figures as session 34's call 9 (two meld
# passes around one torch pass, sustained, now with the 2 s lead-in).
# Prediction: all pass; decode dispatch + GEMM ~0.52 ms (session 34: 0.533), the layer ~0.78 (0.797);
# the other rows as session 34's within the host's noise (+-5-10%).
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000
PREBUILT=1 timeout -k 5 300 tests/gpu/run.sh > "$OUT/gpu_tests.log" 2>&1
echo "== tests/gpu/run.sh rc=$? at $(el) s"
grep -hE "checks passed|PASSED|FAILED|passed, .* failed" "$OUT/gpu_tests.log" | tail -16
test_ranks build/tests/gpu/test_moe 2 4 8
test_ranks build/tests/gpu/test_inproc 2
export BENCH_MOE_ROWS=dsv3_T512,dsv3_T4096,dsv3-zipf_T4096,dsv3_T8192,dsv3-32e_T4096,mixtral_T4096,dsv3-32e_T128
BENCH_MOE_VARIANTS=fused,nocopy,ffn,cublas-loop moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_passA.log"
moe_torch_rows
BENCH_MOE_VARIANTS=ffn,fused,nocopy moe_rows 3
cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_p1_passB.log"
echo "== done at $(el) s"
