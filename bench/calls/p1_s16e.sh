#!/usr/bin/env bash
# p1_s16e.sh — ONE GPU, session 16 call 5: call 4 again in ONE process per op, so that the
# variants share the power state: after 3 s of untraced meld_gemm calls, 3 traced calls each of
# the bare engine in the fused kernel (diag 16), the loopback (diag 1024), again both
# (bench_gemm_rs --trace-diags 16,1024,16,1024); RS, then the zero-copy AR (--symc).
# Prediction (unchanged from call 4): the bare kernel's summed mainloop per CTA 1-3% below the
# loopback's; spans ~ the soak rows' ratio (loopback +3% RS, +6% AR zero copy).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
export MELD_TIMEOUT_MS=3000
for v in rs: ar:--symc; do
  IFS=: read -r op fl <<< "$v"
  MELD_GEMM_AR_ZC=1 MELD_TRACE="$OUT/tw-$op.json" timeout -k 5 60 build/bench/bench_gemm_rs --trace --trace-warm 3000 \
    --trace-diags 16,1024,16,1024 $fl --op $op --shape 8192,8192,4096 > "$OUT/tw-$op.log" 2>&1; echo "trace $op rc=$? at $(el) s"
  grep "trace:" "$OUT/tw-$op.log"
  python3 tools/trace_stats.py "$OUT"/tw-$op*.json 2>&1 | grep -E "call [0-9]+:|compute |other |reduce |comm  |mainloops|tail" | cut -c1-200
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
