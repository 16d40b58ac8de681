#!/usr/bin/env bash
# p1_s8c.sh — ONE GPU, sustained (power-capped) times by --soak: each row back-to-back for
# SOAK ms, twice in opposite orders. meld_gemm's stream-K vs data-parallel; GEMM+RS/AR with
# their diagnostics (loopback, zero copy, early copy); AG+GEMM incl. loopback rows.
# Usage (device): OUT=... [SOAK=500] bash bench/calls/p1_s8c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
export BENCH_COMMIT=${BENCH_COMMIT:-$(git rev-parse --short HEAD 2>/dev/null || echo unknown)} BENCH_RUN=${BENCH_RUN:-s8-p1c}
d=$(date -u +%Y-%m-%d)
S=${SOAK:-500}
build lib build/bench/bench_gemm build/bench/bench_gemm_rs build/bench/bench_ag_gemm
timeout -k 5 120 build/bench/bench_gemm --custom-only --shape 2048,5120,8192 --shape 8192,8192,4096 --shape 2048,28672,8192 \
  --variants --only ${GEMM_VARIANTS:-default,dp,sk2,sk3} --soak $S > "$OUT/gemm_soak.log" 2>&1
echo "gemm soak rc=$? at $(el) s"; grep -E "^custom|^soak" "$OUT/gemm_soak.log"
for s in ${RS_RUNS:-"rs,8192,8192,4096" "ar,8192,8192,4096" "ar,8192,4096,7168"}; do
  IFS=, read -r op m n k <<< "$s"
  timeout -k 5 200 build/bench/bench_gemm_rs --op $op --shape $m,$n,$k --diag --soak $S --json "$OUT/gemm_rs-soak-$d.jsonl" >> "$OUT/gemm_rs_soak.log" 2>&1
  echo "bench_gemm_rs soak $s rc=$? at $(el) s"
done
grep -E "soak|^gemm_" "$OUT/gemm_rs_soak.log" | sed 's/^\[rank 0\] //' | head -120
for s in ${AG_SHAPES:-2048,5120,8192 2048,28672,8192}; do
  timeout -k 5 150 build/bench/bench_ag_gemm --shape $s --soak $S --json "$OUT/ag_gemm-soak-$d.jsonl" >> "$OUT/ag_soak.log" 2>&1
  echo "bench_ag_gemm soak $s rc=$? at $(el) s"
done
grep -E "soak" "$OUT/ag_soak.log" | sed 's/^\[rank 0\] //'
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f build.log
