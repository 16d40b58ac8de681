#!/usr/bin/env bash
# p1_s19j.sh — ONE GPU, prepared at session 19's end (not run: device time spent). Call 4's
# bench_gemm_rs --decode suite read its 16 x 4096 x 14336 row (right after the 512 x 8192 x 28672
# rows) at meld_gemm 37.6 us and the decode kernel 53.9 us eager, while that shape alone (call 5)
# read 34.3 and 42.8. The suite twice: as is, and with the GPU idle 300 ms before each shape.
# Prediction (before the run): with the pause the row reads as alone (meld_gemm ~34.3, decode
# kernel ~43 eager): the previous rows' heat (the power cap's lowered clock) explains it; without
# the pause it repeats call 4 within ~2 us.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19j.sh   (carry build/bench/bench_gemm_rs)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
for pause in 0 300; do
  BENCH_SHAPE_PAUSE_MS=$pause timeout -k 5 90 build/bench/bench_gemm_rs --decode --diag --op ar \
    --json "$OUT/decode-pause$pause.jsonl" > "$OUT/decode-pause$pause.log" 2>&1
  echo "== pause $pause ms rc=$? at $(el) s"
  grep -E "^gemm_ar|one kernel" "$OUT/decode-pause$pause.log" | cut -c1-170
done
