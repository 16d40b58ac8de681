#!/usr/bin/env bash
# p1_s13.sh — ONE GPU, next session: (1) does bench_gemm's preheat (session 12: the run's first
# soaked row read ~450 W and ran ~90 MHz higher than later rows) remove the first-row bias?
# Two processes at 8192^3 + 2048 x 5120 x 8192, --soak-rounds 2 (cuBLASLt first, then last):
# with the preheat the cuBLASLt rows of both rounds should agree within ~1% and read ~690 W.
# (2) test_ag_gemm at one rank (the loopback case whose default plan must take 128 x 320).
# Usage (device): OUT=... bash bench/calls/p1_s13.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_ag_gemm build/bench/bench_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 240 build/tests/gpu/test_ag_gemm > "$OUT/test_ag_gemm.log" 2>&1
echo "test_ag_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed|default plan" "$OUT/test_ag_gemm.log" | cut -c1-150 | head -8
for r in 1 2; do
  timeout -k 5 120 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --shape 2048,5120,8192 --soak ${SOAK:-600} \
    --soak-rounds 2 --json "$OUT/gemm-preheat-$r.jsonl" > "$OUT/bench$r.log" 2>&1
  echo "bench $r rc=$? at $(el) s"; grep -E "preheat|^soak" "$OUT/bench$r.log" | cut -c1-60,100-175
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
