#!/usr/bin/env bash
# p1_s28e.sh — ONE GPU, session 28's fifth call: does the AR's early copy still pay with the
# interleaved order (default from 3 ranks since p1_s28b), and is it what makes the AR's own
# epilogue 28 us against RS's 17.7 (p1_s28c/d traces, 4 ranks; the copies by TMA did not change
# it: p1_s28d)? A/B MELD_GEMM_AR_EARLY_COPY=0,1 at 4 and 8 ranks (result slots only: the zero
# copy has no copy phase), a trace at 4 ranks without it.
# Prediction: early copy still -2..-5% (the tail's copy would otherwise hold all of C's (P-1)/P);
# without it the own epilogue drops to ~20 us (the side warps' polling and copies share the SM).
# Usage (device, nvidia-h200): PREBUILT=1 bash bench/calls/p1_s28e.sh  (carry build/carry)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused
FR_LABEL=s28e L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log 2>/dev/null); }
S=ar:8192,8192,8192/ar:8192,8192,1024
fused_row 4 IP_ROW_NO_ENV=1 $S p4ec --ab MELD_GEMM_AR_EARLY_COPY=0,1 --fused-pairs 2; snap
fused_row 8 IP_ROW_NO_ENV=1 $S p8ec --ab MELD_GEMM_AR_EARLY_COPY=0,1 --fused-pairs 2; snap
MELD_GEMM_AR_EARLY_COPY=0 BENCH_VARIANTS=fused MELD_TRACE="$L/ar4_noec.json" timeout -k 5 60 build/bench/bench_inproc \
  --ranks 4 --trace 3 --fused ar:8192,8192,8192 > "$L/trace_ar4_noec.log" 2>&1
echo "== trace AR 4 ranks, no early copy rc=$? at $(el) s"
python3 tools/trace_stats.py "$L"/ar4_noec.rank0.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | head -14
echo "== done at $(el) s"
snap; rm -rf "$L"
