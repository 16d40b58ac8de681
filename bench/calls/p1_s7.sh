#!/usr/bin/env bash
# p1_s7.sh — one device call on ONE GPU (session 7): the AG+GEMM 2-rank kernel in loopback
# (MELD_AG_GEMM_DIAG=2: rank 0 of 2 on one GPU, the virtual peer's shard pushed and signalled
# locally) against meld_gemm and cuBLAS at the suite's 2-rank shapes, with plan variants
# (stream-K, 4 comm CTAs, raster group 8), the engine alone at the M = 2048 / 1024 shapes
# (async-TP runs two 1024-row GEMMs), and a per-tile trace picture of the loopback.
# Usage (device): OUT=... [AG_SHAPES="M,N_loc,K ..."] [GEMM_SHAPES="M,N,K ..."] [NO_GEMM=1] [NO_TRACE=1]
# bash bench/calls/p1_s7.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-s7-p1}
d=$(date -u +%Y-%m-%d)
make -j16 lib build/bench/bench_ag_gemm build/bench/bench_gemm > "$OUT/build.log" 2>&1 || { grep -E "error" "$OUT/build.log" | head -30; exit 1; }
echo "build: $(el) s"
for s in ${AG_SHAPES:-2048,28672,8192 2048,14336,4096 2048,5120,8192 8192,5120,8192}; do
  timeout -k 5 150 build/bench/bench_ag_gemm --shape $s --json "$OUT/ag_gemm-p1-$d.jsonl" >> "$OUT/bench_ag_gemm.log" 2>&1
  echo "bench_ag_gemm $s rc=$? at $(el) s"
done
[ "${NO_GEMM:-0}" = 1 ] || { gs=""; for s in ${GEMM_SHAPES:-2048,28672,8192 1024,28672,8192 2048,14336,4096 1024,14336,4096}; do gs="$gs --shape $s"; done
timeout -k 5 150 build/bench/bench_gemm --custom-only $gs --only default,dp,sk3,g8,g32 --json "$OUT/gemm-p1-$d.jsonl" > "$OUT/bench_gemm.log" 2>&1
echo "bench_gemm rc=$? at $(el) s"; }
[ "${NO_TRACE:-0}" = 1 ] || { MELD_TRACE="$OUT/ag_loop-trace.json" timeout -k 5 60 build/bench/bench_ag_gemm --trace --loopback --shape 2048,28672,8192 > "$OUT/trace.log" 2>&1
echo "trace rc=$? at $(el) s"
python3 tools/trace_png.py -o "$OUT/ag_loop-trace-p1.png" --title "AG+GEMM 2-rank kernel in loopback on 1 x H200, M 2048 (1024 + 1024 pushed) x 28672 x 8192, 3 calls" \
  "$OUT"/ag_loop-trace*.json >> "$OUT/trace.log" 2>&1; echo "trace png rc=$?"; tail -3 "$OUT/trace.log"; }
grep -E "^ |^[0-9a-z]" "$OUT/bench_ag_gemm.log" | grep -vE "^\[" | head -80
[ "${NO_GEMM:-0}" = 1 ] || grep -vE "^\[" "$OUT/bench_gemm.log" | tail -30
echo "total: $(el) s"
