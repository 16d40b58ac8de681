#!/usr/bin/env bash
# p1_s8b.sh — ONE GPU: how fast the clock settles under a GEMM from idle (NVML series), then
# the same rows timed "burst" (BENCH_SETTLE_MS=0) and "sustained" (BENCH_SETTLE_MS=300): the GEMM
# at the AG chunk shapes, GEMM+RS/AR with their diagnostics (loopback incl.), AG+GEMM.
# Usage (device): OUT=... [SETTLE=300] bash bench/calls/p1_s8b.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-s8-p1b}
d=$(date -u +%Y-%m-%d)
build lib build/bench/bench_gemm build/bench/bench_gemm_rs build/bench/bench_ag_gemm
sleep 3
BENCH_SOAK_TRACE=1 timeout -k 5 60 build/bench/bench_gemm --custom-only --shape 2048,28672,8192 --rounds 1 --soak 800 > "$OUT/settle_trace.log" 2>&1
echo "settle trace rc=$? at $(el) s"; grep -E "soak" "$OUT/settle_trace.log" | head -60
S=${SETTLE:-300}
shapes=""; for s in 1024,28672,8192 2048,28672,8192 1024,14336,4096 2048,14336,4096 4096,14336,4096 8192,14336,4096; do shapes="$shapes --shape $s"; done
BENCH_SETTLE_MS=$S timeout -k 5 120 build/bench/bench_gemm --custom-only $shapes --only default,g8 --json "$OUT/gemm-sustained-$d.jsonl" > "$OUT/gemm_sustained.log" 2>&1
echo "gemm sustained rc=$? at $(el) s"; grep -E "^custom" "$OUT/gemm_sustained.log"
for s in "rs 8192,8192,4096 --diag" "ar 8192,8192,4096 --diag"; do
  set -- $s
  BENCH_SETTLE_MS=$S timeout -k 5 150 build/bench/bench_gemm_rs --op "$1" --shape "$2" $3 --json "$OUT/gemm_rs-sustained-$d.jsonl" >> "$OUT/gemm_rs_sustained.log" 2>&1
  echo "bench_gemm_rs sustained $s rc=$? at $(el) s"
done
grep -v "^\[" "$OUT/gemm_rs_sustained.log" | grep -v "^bench_gemm_rs:" | head -40
for s in 2048,5120,8192 2048,28672,8192; do
  BENCH_SETTLE_MS=$S timeout -k 5 120 build/bench/bench_ag_gemm --shape $s --json "$OUT/ag_gemm-sustained-$d.jsonl" >> "$OUT/ag_sustained.log" 2>&1
  echo "bench_ag_gemm sustained $s rc=$? at $(el) s"
done
grep -E "^ |^[0-9a-z]" "$OUT/ag_sustained.log" | grep -vE "vec_cc|group_m|chunk256|bulk|staged|run2|^\[" | head -40
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f build.log
