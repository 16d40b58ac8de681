#!/usr/bin/env bash
# p1_s28f.sh — ONE GPU, session 28's sixth call: at 3+ ranks with the several-owner TMA push
# (opt-in MELD_GEMM_RS_PUSH=tma, the kernels' G2 2), the AR's copy flags are now deferred to the
# next epilogue like at 2 ranks (gemm_rs_copy_defer(g2 != 0): the copies by TMA (p1_s28d) no
# longer wait for their writes to complete inside the own tile's epilogue).
# (1) test_inproc 4,8,3 (opt_cases: AR with push tma = the deferred copy flags at 3+ ranks);
# (2) A/B MELD_GEMM_RS_PUSH=st,tma for the AR at 4 and 8 ranks (s28a without deferral: +2.5..+5.3%
# slots at 4 ranks, +-0.5% at 8).
# Prediction: push tma now -1..-3% at 4 ranks for the AR with result slots, +-1% zero copy.
# Usage (device, nvidia-h200): PREBUILT=1 bash bench/calls/p1_s28f.sh  (carry build/carry)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s28f L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log 2>/dev/null); }
timeout -k 5 120 build/tests/gpu/test_inproc 4,8,3 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 4,8,3 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -4
snap
S=ar:8192,8192,8192/ar:8192,8192,1024
fused_row 4 IP_ROW_NO_ENV=1 $S p4push --ab MELD_GEMM_RS_PUSH=st,tma --fused-pairs 2; snap
fused_row 8 IP_ROW_NO_ENV=1 $S p8push --ab MELD_GEMM_RS_PUSH=st,tma --fused-pairs 2; snap
echo "== done at $(el) s"
snap; rm -rf "$L"
