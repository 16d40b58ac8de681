#!/usr/bin/env bash
# p1_s32b.sh — ONE GPU, session 32: meld_moe_ffn (the whole SwiGLU layer) and the GEMM engine's
# gated tiles (grp_glu: the dispatch's activation MELD_MOE_ACT_SWIGLU in the epilogue).
# test_moe 1,2,4 (the ffn cases against an fp32 reference from the inputs alone), bench_moe
# --ranks 1 with the swiglu and ffn variants, moe_torch.py with "torch layer", test_gemm (the
# engine's epilogue gained a run-time branch).
# Prediction: all pass; swiglu within 1% of fused (half of C's stores saved: ~0.5%); ffn at dsv3
# T4096 ~10.7 ms (fused 6.95 + second GEMM ~3.4 + combine ~0.3); torch layer ~11.6 ms: meld
# 1.05-1.15x faster on the layer.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe build/tests/gpu/test_gemm
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4
grep -E "moe ffn" "$OUT/test_moe_2.log" | head -12
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} BENCH_MOE_AB=${BENCH_MOE_AB-}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --samples 3 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1|FAIL|rror" "$OUT/bench_moe_p1.log" | head -50
timeout -k 5 200 python3 bench/moe_torch.py --json "$J" > "$OUT/moe_torch.log" 2>&1
echo "== moe_torch rc=$? at $(el) s"; grep -E "^P1|rror" "$OUT/moe_torch.log"
timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_gemm.log" | head -5
echo "== done at $(el) s"
