#!/usr/bin/env bash
# p1_s12c.sh — ONE GPU, session 12 call 3: the early release is now unconditional (every
# k-block: drain, free the previous stage, then wait; call 2 measured it fastest of four and it
# conforms). test_gemm with it; then does the unconditional form help the 4-stage 128 x 256 tile
# that the probing form left neutral (session 11: 8192^3 +0.4%)? MELD_GEMM_EARLY_RELEASE=0 / 1
# at four 128 x 256 shapes, A B A B, burst + soaked; then the fused GEMM+RS / AG+GEMM loopback
# (p1_er_fused.sh, 0 then 1). Prediction: 128 x 256 within +-1% (4 stages rarely starve).
# Usage (device): OUT=... bash bench/calls/p1_s12c.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/tests/gpu/test_gemm build/bench/bench_gemm build/bench/bench_gemm_rs build/bench/bench_ag_gemm
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "test_gemm rc=$? at $(el) s"; grep -E "FAIL|checks passed" "$OUT/test_gemm.log" | cut -c1-150 | head -12
for r in 1 2; do for e in 0 1; do
  MELD_GEMM_EARLY_RELEASE=$e timeout -k 5 90 build/bench/bench_gemm --custom-only --shape 8192,8192,8192 --shape 8192,5120,8192 \
    --shape 4096,4096,4096 --shape 8192,8192,4096 --soak ${SOAK:-600} --commit "er$e" --json "$OUT/gemm-er256.jsonl" > "$OUT/bench256_er$e-$r.log" 2>&1
  grep -E "^custom|^soak" "$OUT/bench256_er$e-$r.log" | sed "s/^/er$e.$r /" | cut -c1-125
done; done
echo "gemm total: $(el) s"
