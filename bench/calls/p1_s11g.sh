#!/usr/bin/env bash
# p1_s11g.sh — ONE GPU, session 11, call 7: early stage release (MELD_GEMM_EARLY_RELEASE=1).
# The consumer releases k-block kb-1's stage after issuing kb's wgmmas (wgmma wait 1); when kb's
# stage is late the consumer sits in that wait and kb-1's stage, long done, is not refilled.
# With the flag, a consumer that finds kb's stage not landed (test_wait) first waits for all its
# wgmmas and releases kb-1, then waits. Call 5: 37% of samples on the stage-full wait.
# Prediction: wide 2048 x 5120 x 8192 cycles -2..-5%; the 256-wide kernel at 8192^3 -0..-2%; a loss
# would mean the drained tensor pipe costs more than the earlier refill gains.
# Usage (device): OUT=... bash bench/calls/p1_s11g.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_gemm build/bench/bench_gemm
MELD_GEMM_EARLY_RELEASE=1 MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm_er.log" 2>&1
echo "test_gemm (early release) rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_gemm_er.log" | cut -c1-150 | head -8
SH="--shape 2048,5120,8192 --shape 8192,8192,8192 --shape 8192,5120,8192"
for r in 1 2; do for e in 0 1; do
  MELD_GEMM_EARLY_RELEASE=$e timeout -k 5 120 build/bench/bench_gemm --custom-only $SH --soak ${SOAK:-600} \
    --commit "er$e" --json "$OUT/gemm-early-release-s11.jsonl" > "$OUT/soak_er$e-$r.log" 2>&1
  echo "er$e round $r rc=$? at $(el) s"; grep -E "^custom|^soak" "$OUT/soak_er$e-$r.log" | sed "s/^/er$e.$r /" | cut -c1-150
done; done
for e in 0 1; do
  MELD_GEMM_EARLY_RELEASE=$e BIN=build/bench/bench_gemm COUNT=2 SHAPE=2048,5120,8192 OUT="$OUT/ncu$e" \
    timeout -k 5 100 bash bench/ncu_gemm_vs_cublas.sh > "$OUT/ncu$e.out" 2>&1
  echo "== ncu er$e"; grep -E "launch|gpu__time|cycles_elapsed|inst_executed.sum" "$OUT/ncu$e.out" | head -10
  rm -f "$OUT/ncu$e/details.csv"
done
echo "total: $(el) s"
