#!/usr/bin/env bash
# p1_s16d.sh — ONE GPU, session 16 call 4: where the fused kernel's sustained overhead goes at the
# power cap. Per-tile traces of 3 calls that follow 2 s of untraced meld_gemm calls of the same
# plan (bench_gemm_rs --trace-warm: the GPU at its cap, as in the soak rows), 8192^2 x 4096: the
# bare engine inside the fused kernel (diag 16: sustained = meld_gemm_plain), the RS loopback
# (+3.2% sustained), the zero-copy AR loopback (+6.6%). tools/trace_stats.py per role.
# Prediction (before the run; call 1's burst traces had the summed mainloop per CTA invariant
# across the fused variants, 627-652 us): the bare kernel's summed mainloop per CTA 1-3% below the
# loopback's (the fused epilogues' energy slows the mainloops at the cap), its epilogues ~3 us.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s16d.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_gemm_rs
export MELD_TIMEOUT_MS=3000
for v in rs:16: rs:1024: ar:1024:--symc; do
  IFS=: read -r op dg fl <<< "$v"
  MELD_GEMM_AR_ZC=1 MELD_GEMM_RS_DIAG=$dg MELD_TRACE="$OUT/tw-$op-$dg.json" timeout -k 5 60 build/bench/bench_gemm_rs --trace \
    --trace-warm 2000 $fl --op $op --shape 8192,8192,4096 > "$OUT/tw-$op-$dg.log" 2>&1; echo "trace $op diag $dg rc=$? at $(el) s"
  python3 tools/trace_stats.py "$OUT"/tw-$op-$dg*.json 2>&1 | grep -A12 "call [0-9]" | grep -vE "comm by" | cut -c1-230
  nvidia-smi --query-gpu=clocks.sm,power.draw --format=csv,noheader
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.json 2>/dev/null && rm -f *.log *.json
