#!/usr/bin/env bash
# p1_er_fused.sh — ONE GPU (next session): does early stage release (session 11: wide tile -7.8%
# cycles, 128 x 256 meld_gemm neutral) help the fused kernels, whose stages land less evenly
# while their epilogues push and pull? GEMM+RS 8192^2 x 4096 with its diagnostic rows (bare,
# loopback = the 2-rank kernel on one GPU) sustained, MELD_GEMM_EARLY_RELEASE for each of ER_VALUES (default "0 1") (it
# reaches the fused kernels through gemm_plan_make), then the AG+GEMM loopback per-tile trace
# both ways. Usage (device): OUT=... bash bench/calls/p1_er_fused.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs build/bench/bench_ag_gemm
for e in ${ER_VALUES:-0 1}; do
  MELD_GEMM_EARLY_RELEASE=$e timeout -k 5 200 build/bench/bench_gemm_rs --op rs --shape 8192,8192,4096 --diag --soak ${SOAK:-600} \
    --json "$OUT/gemm_rs-er$e.jsonl" > "$OUT/bench_rs_er$e.log" 2>&1
  echo "er$e rc=$? at $(el) s"; grep -E "soak|^gemm_|diag: (bare|loopback)" "$OUT/bench_rs_er$e.log" | sed "s/^\[rank 0\] /er$e /" | cut -c1-160 | head -20
done
for e in ${ER_VALUES:-0 1}; do
  MELD_GEMM_EARLY_RELEASE=$e MELD_TRACE="$OUT/ag_loop_er$e.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --loopback \
    --shape 2048,28672,8192 > "$OUT/ag_trace_er$e.log" 2>&1
  echo "ag loopback trace er$e rc=$?"; python3 tools/trace_stats.py "$OUT"/ag_loop_er$e*.json 2>&1 | tail -8
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
