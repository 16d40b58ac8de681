#!/usr/bin/env bash
# p1_s28g.sh — ONE GPU, session 28's last call (~60 s of budget left after the start): the
# 2-rank interleaved order for GEMM+RS (opt-in since session 13, never timed with both ranks in
# flight) as an A/B at 2 ranks, then test_gemm at the final library (gemm.cuh's copy_tma
# change touches every engine kernel's prologue) for what time is left.
# Prediction: ileave at 2 ranks in-process +-2% (the epilogue crowding it targets is NVLink's).
# Usage (device, nvidia-h200): PREBUILT=1 bash bench/calls/p1_s28g.sh  (carry build/carry)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_gemm
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused
FR_LABEL=s28g L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log 2>/dev/null); }
fused_row 2 IP_ROW_NO_ENV=1 rs:8192,8192,8192/rs:8192,14336,4096/rs:8192,8192,1024 p2ord --ab MELD_GEMM_RS_ORDER=rotate,ileave --fused-pairs 2; snap
timeout -k 5 100 build/tests/gpu/test_gemm > "$L/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_gemm.log" | cut -c1-300 | head -4
snap; rm -rf "$L"
