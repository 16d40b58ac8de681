#!/usr/bin/env bash
# p1_s31c.sh — ONE GPU, session 31: the MoE dispatch + grouped GEMM's first figures.
# bench_moe --ranks 1 (every expert local: the routing kernel, local copies, the grouped GEMM) and
# torch's dispatch + torch._grouped_mm on the same shapes (moe_torch.py), then bench_moe --ranks 2
# (two ranks as threads sharing the GPU: the protocol in flight). Sustained (BENCH_SETTLE_MS 200).
# Floors (one H200, ~700 TFLOP/s dense bf16 at the cap): DeepSeek-V3 T 4096 top-8: 32768 rows x
# 4096 x 7168 x 2 = 1.92 TFLOP -> 2.7 ms useful; padding each of 256 experts to 128-row tiles
# computes ~1.5x the rows at ~128 rows an expert. Predictions: fused within 10% of nocopy at one
# rank; meld within 0.8-1.2x of torch._grouped_mm's GEMM alone (both pay tile padding); the comm
# variant (routing + copies of 470 MB) ~0.3-0.5 ms.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export BENCH_MOE_AB=${BENCH_MOE_AB-MELD_MOE_COMM_CTAS=8,MELD_MOE_COMM_CTAS=32}
export BENCH_SETTLE_MS=${BENCH_SETTLE_MS:-200} MELD_TIMEOUT_MS=5000
J="$OUT/moe.jsonl"
timeout -k 5 200 build/bench/bench_moe --ranks 1 --json "$J" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe --ranks 1 rc=$? at $(el) s"; grep -E "^P1|FAIL|rror" "$OUT/bench_moe_p1.log" | head -30
timeout -k 5 200 python3 bench/moe_torch.py --json "$J" > "$OUT/moe_torch.log" 2>&1
echo "== moe_torch rc=$? at $(el) s"; tail -n 15 "$OUT/moe_torch.log"
timeout -k 5 200 build/bench/bench_moe --ranks 2 --json "$J" > "$OUT/bench_moe_p2.log" 2>&1
echo "== bench_moe --ranks 2 rc=$? at $(el) s"; grep -E "^P2|FAIL|rror" "$OUT/bench_moe_p2.log" | head -30
echo "== done at $(el) s"
