#!/usr/bin/env bash
# p1_check.sh — one device call on ONE GPU for the fused kernels' own cost (sessions 5, 6):
# build; every GPU test at one rank; then GEMM+RS/AR forced fused at one rank (every tile its
# own) against meld_gemm with the diagnostics that strip it down, incl. the synthetic-partial
# rows (the 2-rank own-tile work without a peer; --diag), AG+GEMM's one-rank rows,
# and a per-tile trace picture. Usage (device): OUT=... [SKIP_TESTS=1] [TESTS="test_x ..."]
# [RS_RUNS="rs M,N,K --diag;ar M,N,K"] [NO_AG=1] [NO_TRACE=1] bash bench/p1_check.sh
. "$(dirname "$0")/device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-s6-p1}
nvidia-smi -L > "$OUT/gpus.txt" 2>&1
make -j16 lib build/bench/bench_gemm_rs build/bench/bench_ag_gemm > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(el) s"
if [ "${SKIP_TESTS:-0}" = 0 ]; then
  TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-150} MELD_TIMEOUT_MS=3000 tests/gpu/run.sh ${TESTS:-} > "$OUT/gpu_tests.log" 2>&1
  echo "gpu tests rc=$? at $(el) s"; grep -E "FAILED|^== |worst rel 0\.[1-9]|FAIL" "$OUT/gpu_tests.log" | head -20
fi
d=$(date -u +%Y-%m-%d)
IFS=';' read -ra runs <<< "${RS_RUNS:-rs 8192,8192,4096 --diag;rs 8192,4096,7168 --diag;ar 8192,8192,4096}"
for s in "${runs[@]}"; do
  set -- $s
  timeout -k 5 120 build/bench/bench_gemm_rs --op "$1" --shape "$2" ${3:-} --json "$OUT/gemm_rs-p1-$d.jsonl" >> "$OUT/bench_gemm_rs.log" 2>&1
  echo "bench_gemm_rs $s rc=$? at $(el) s"
done
grep -v "^\[" "$OUT/bench_gemm_rs.log" | grep -v "^bench_gemm_rs:" | head -60
[ "${NO_TRACE:-0}" = 1 ] || { MELD_TRACE="$OUT/gemm_rs-trace.json" timeout -k 5 40 build/bench/bench_gemm_rs --trace --op rs --shape 8192,8192,4096 > "$OUT/trace.log" 2>&1
echo "trace rc=$? at $(el) s"
python3 tools/trace_png.py -o "$OUT/gemm_rs-trace-p1.png" --title "GEMM+RS fused at one rank, 8192x8192x4096, 1 x H200, 3 calls" \
  "$OUT"/gemm_rs-trace*.json >> "$OUT/trace.log" 2>&1; echo "trace png rc=$?"; tail -3 "$OUT/trace.log"; }
[ "${NO_AG:-0}" = 1 ] || for s in ${AG_SHAPES:-2048,5120,8192}; do
  timeout -k 5 120 build/bench/bench_ag_gemm --shape $s --json "$OUT/ag_gemm-p1-$d.jsonl" >> "$OUT/bench_ag_gemm.log" 2>&1
  echo "bench_ag_gemm $s rc=$? at $(el) s"
done
grep -E "^ |^[0-9a-z]" "$OUT/bench_ag_gemm.log" | grep -vE "vec_cc|group_m|chunk256|bulk|staged|run2|^\[" | head -30
echo "total: $(el) s"
# (a device call brings back at most 8 files: logs and traces in one archive)
cd "$OUT" && tar czf logs.tgz *.log *.txt *.json 2>/dev/null && rm -f *.log *.txt *.json
