#!/usr/bin/env bash
# p1_s32g.sh — ONE GPU, session 32: the MoE GEMMs' raster group 1 where an expert gets <= 256 rows
# (call 6: the dispatch + first GEMM 11-18% faster with group 1 on the 256-expert rows and the
# decode row). test_moe 1,2,4 (most cases now run group 1); bench_moe --ranks 1 with the old
# defaults as A/B (group 8 and the engine's) and torch's layer in the same call.
# Prediction: pass; fused as call 6's group-1 variant; ffn 8-15% faster than call 5 on dsv3 T512 /
# T4096 / Zipf and the decode row (both GEMMs take the group); 32 experts and Mixtral unchanged.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/bench/bench_moe
export MELD_TIMEOUT_MS=5000
test_ranks build/tests/gpu/test_moe 1 2 4
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200}
export BENCH_MOE_AB=${BENCH_MOE_AB-MELD_MOE_GROUP_M=8,MELD_MOE_GROUP_M=16}
J="$OUT/moe.jsonl"
timeout -k 5 240 build/bench/bench_moe --ranks 1 --samples 3 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1.*(fused|ffn|cublas)|FAIL|rror" "$OUT/bench_moe_p1.log" | head -60
timeout -k 5 200 python3 bench/moe_torch.py --json "$J" > "$OUT/moe_torch.log" 2>&1
echo "== moe_torch rc=$? at $(el) s"; grep -E "^P1|rror" "$OUT/moe_torch.log"
echo "== done at $(el) s"
