#!/usr/bin/env bash
# p1_s20a.sh — ONE GPU, session 20 call 1: AG+GEMM with comm WARPS instead of comm CTAs (issue 6
# asks for both, measured): warps 2-3 of every CTA's producer warpgroup push the shard while
# the GEMM runs (ag_gemm.cu ag_side_push), so no SM is taken from the GEMM for the pushes.
#  1. test_ag_gemm at one rank: the fused kernel, the loopback (comm warps at tails, both B
#     layouts, strided / dense / 40000-byte rows, a 129-row shard, the own shard staged first,
#     M = 2048 with the wide tile), 400 back-to-back calls (every 4th with comm CTAs: the piece
#     counters restart by epoch), graphs.
#  2. test_ag_gemm at 2 ranks sharing the GPU (the real 2-rank path: peer pads, P = 2 rows).
#  3. bench_ag_gemm in loopback, sustained (--soak 600): the 2-rank kernel with 8 comm CTAs
#     (loopback_p1) vs comm warps (loopback_p1_cw), fused_p1 (nothing pushed) beside.
#  4. a loopback trace with comm warps (pieces as COMM events on every CTA's track).
# Prediction (written before the run): tests pass; loopback_p1_cw 0.5-1.5% faster than
# loopback_p1 at 8192 x 5120 x 8192 and 8192 x 14336 x 4096 (the comm CTAs' ~0.3 ms x 8 SMs of
# a ~1 ms kernel = ~1.7% of SM time back, minus the side warps' interference), 1-3% at
# 2048 x 5120 x 8192 (no late joiners there); if cw is slower, the side warps' loads slow the
# consumers (issue slots, L2) more than the SMs gained.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s20a.sh
#   (carry build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export MELD_TIMEOUT_MS=3000
timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/t1.log" 2>&1
echo "== test_ag_gemm 1 rank rc=$? at $(el) s"; grep -E "FAIL|passed|comm warps|back-to-back|graph" "$OUT/t1.log" | cut -c1-150 | head -40
MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=2 MELD_TIMEOUT_MS=15000 GT_SPAWN_TIMEOUT_S=300 timeout -k 5 320 build/tests/gpu/test_ag_gemm > "$OUT/t2.log" 2>&1
echo "== test_ag_gemm 2 shared ranks rc=$? at $(el) s"; grep -E "FAIL|passed|back-to-back|graph|rank 0.*comm warps" "$OUT/t2.log" | cut -c1-150 | head -30
export BENCH_VARIANTS=fused_p1,loopback_p1,loopback_p1_cw
for S in 8192,5120,8192 8192,14336,4096 2048,5120,8192; do
  timeout -k 5 150 build/bench/bench_ag_gemm --shape $S --soak 600 --json "$OUT/ag-p1-s20a.jsonl" > "$OUT/ag-${S//,/x}.log" 2>&1
  echo "== bench_ag_gemm $S rc=$? at $(el) s"
  grep -E "soak ag_gemm|^ +(fused_p1|loopback)" "$OUT/ag-${S//,/x}.log" | cut -c1-160
done
unset BENCH_VARIANTS
for cw in 0 1; do
  MELD_AG_GEMM_COMM_WARPS=$cw MELD_TRACE="$OUT/ag_loop_cw$cw.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --loopback \
    --shape 2048,5120,8192 > "$OUT/ag_trace_cw$cw.log" 2>&1
  echo "== trace cw=$cw rc=$?"; grep -E "trace:" "$OUT/ag_trace_cw$cw.log" | head -2 | cut -c1-160
  python3 tools/trace_stats.py "$OUT"/ag_loop_cw$cw*.json 2>&1 | tail -6
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
