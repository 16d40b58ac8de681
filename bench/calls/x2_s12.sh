#!/usr/bin/env bash
# x2_s12.sh — 2 GPUs, one call: AG+GEMM with the engine's 128 x 320 tile at 2 ranks. Session
# 12 made it the fused default where meld_gemm's rule takes it (of the suite at P = 2: M = 2048,
# N_loc = 5120) from one GPU in loopback (-6.5% sustained vs 128 x 256 + stream-K); this checks
# it over NVLink: test_ag_gemm at 2 ranks (its tile-320 cases: bitwise vs meld_gemm on the same
# tile), bench_ag_gemm soaked at 2048 x 10240 x 8192 (default = wide; stream_k = the old
# default; no_sk = 128 x 256 alone) and 2048 x 57344 x 8192 (ratio 0.98: the rule keeps 256,
# w320 in the fused kernel won 1.3% in loopback), PyTorch async-TP (--quick, soaked) in the same
# call, and a per-tile trace of the wide default with its picture.
# If the wide default loses at 2 ranks, set it back in ag_gemm_plan.c (the width rule).
# Session 13 added 8192 x 10240 x 8192 with the timing diagnostics diag_nowait (no row waits),
# diag_nolink (pushes into the own staging: no NVLink data) and both: one GPU put the fused
# kernel at +0.6-1% and its loopback pushes at +1.5-2% over meld_gemm sustained, session 9's 2
# GPUs at +3-7% (meld_gemm's row there was biased fast): these rows say whether the rest is the
# waits or the link. At the end: GEMM+RS per-tile traces at 2 ranks with the default and the
# opt-in interleaved owner order (MELD_GEMM_RS_ORDER=ileave), summarized by trace_stats.py.
# Session 20 added the `comm_warps` row (opt-in: warps 2-3 of every CTA push, no comm CTAs;
# one GPU in loopback: +1.2% at 8192 x 5120 x 8192 vs comm CTAs, +4% at 2048 x 5120 x 8192;
# prediction for 2 GPUs: slower by the same or more, the first chunks arriving late).
# Usage (device): OUT=... bash bench/calls/x2_s12.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-x2-s12}
d=$(date -u +%Y-%m-%d)
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
build lib build/tests/gpu/test_ag_gemm build/bench/bench_ag_gemm build/bench/bench_gemm_rs
TEST_TIMEOUT_S=150 MELD_TIMEOUT_MS=3000 tests/gpu/run.sh test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm (2 ranks) rc=$? at $(el) s"; grep -E "FAIL|checks passed|tile 128 x 320" "$OUT/test_ag_gemm.log" | cut -c1-150 | head -12
for s in 8192x10240x8192 2048x10240x8192 2048x57344x8192; do
  timeout -k 5 150 build/bench/bench_ag_gemm --shape ${s//x/,} --soak ${SOAK:-600} --json "$OUT/ag_gemm-x2-w320-$s-$d.jsonl" \
    > "$OUT/bench-$s.log" 2>&1
  echo "bench $s rc=$? at $(el) s"
  grep -E "soak ag_gemm" "$OUT/bench-$s.log" | grep -v "^\[rank 1\]" |
    grep -E " (default|seq|cublas|meld_gemm|nccl_ag|stream_k|no_sk|w320|nodefer|comm_warps|diag_nowait|diag_nolink|diag_nowait_nolink) " | cut -c1-150
done
BENCH_SOAK_MS=${SOAK:-600} timeout -k 5 120 torchrun --nproc-per-node 2 bench/ag_gemm_torch.py --quick \
  --json "$OUT/torch-ag-x2-$d.jsonl" > "$OUT/torch.log" 2>&1
echo "torch async-TP rc=$? at $(el) s"; grep -vE "^\s*$|Warning|warn" "$OUT/torch.log" | tail -8 | cut -c1-150
MELD_TRACE="$OUT/ag-trace-w320.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --shape 2048,10240,8192 \
  > "$OUT/trace.log" 2>&1; echo "trace rc=$? at $(el) s"
python3 tools/trace_png.py -o "$OUT/ag-trace-w320-x2.png" --title "AG+GEMM 2048 x 10240 x 8192, 128 x 320 tile, 2 x H200" \
  "$OUT"/ag-trace-w320*.json >> "$OUT/trace.log" 2>&1; echo "trace png rc=$?"
python3 tools/trace_stats.py "$OUT"/ag-trace-w320*.json 2>&1 | tail -10
# (session 13) GEMM+RS per-tile traces at 2 ranks, the default order and the opt-in interleaved
# one: where the push epilogues' time goes (tools/trace_stats.py: per-role summary per call)
for ord in rotate ileave; do
  MELD_GEMM_RS_ORDER=$ord MELD_TRACE="$OUT/rs-trace-$ord.json" timeout -k 5 60 build/bench/bench_gemm_rs --trace --op rs \
    --shape 8192,8192,8192 > "$OUT/rs-trace-$ord.log" 2>&1; echo "rs trace $ord rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/rs-trace-$ord.rank0.json 2>&1 | tail -8
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.txt *.json 2>/dev/null && rm -f *.log *.txt *.json
