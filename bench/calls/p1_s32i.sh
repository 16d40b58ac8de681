#!/usr/bin/env bash
# p1_s32i.sh — ONE GPU, session 32: moe_torch.py --quick (bench/run.sh now runs it) and the MoE
# fixed cost at every row: routing + protocol alone (MELD_MOE_DIAG=3: no copies, no GEMM).
# Prediction: moe_torch --quick runs 3 rows; DIAG=3 30-130 us (session 31: 29-128), the decode row
# ~30 us (~6% of its 0.53 ms).
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_moe
export MELD_TIMEOUT_MS=5000 BENCH_SETTLE_MS=100 BENCH_MOE_AB="MELD_MOE_DIAG=3"
timeout -k 5 120 python3 bench/moe_torch.py --quick > "$OUT/moe_torch_quick.log" 2>&1
echo "== moe_torch --quick rc=$? at $(el) s"; grep -E "^P1|rror" "$OUT/moe_torch_quick.log"
timeout -k 5 200 build/bench/bench_moe --ranks 1 --samples 3 --json "$OUT/moe.jsonl" > "$OUT/bench_moe_p1.log" 2>&1
echo "== bench_moe rc=$? at $(el) s"; grep -E "^P1.*( fused|DIAG)|FAIL|rror" "$OUT/bench_moe_p1.log" | head -20
echo "== done at $(el) s"
