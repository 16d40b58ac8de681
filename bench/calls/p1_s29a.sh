#!/usr/bin/env bash
# p1_s29a.sh — ONE GPU, prepared at the end of session 28; ran in session 29 (call 1, docs/perf-notes.md "Session 29").
# (1) test_gemm and test_inproc 8,2,3,4 at the final library (gemm.cuh changed after session 28's
# last test_gemm: the AR copies by TMA at 3+ ranks, and the opt-in deferred copy flags without
# the TMA push, MELD_GEMM_AR_COPY_FLAG=next, which test_inproc's opt_cases run for the first
# time); (2) the 2-rank interleaved order for GEMM+RS (opt-in since session 13, never timed with
# both ranks in flight) as an A/B; (3) why the AR's own epilogue (28 us at 4 ranks, 25.6 without
# the early copy) is longer than RS's (17.7): A/B of the copy flags now / next at 4 and 8 ranks
# (next: the own epilogue no longer waits for its 4 x 64 KB of TMA writes to complete and a
# system fence; the flags go at the next epilogue's start) with a trace of it, and a trace of
# RS in the AR's kernel (MELD_GEMM_RS_LEAN=2: the copy code's own cost).
# Prediction: (2) +-2% (what the order targets, the pushes crowding NVLink, is not here);
# (3) next: own epilogue 28 -> ~20 us, AR 4 ranks -2..-4% (slots and zero copy), 8 ranks
# -1..-3%; if so, make it the default at 3+ ranks. RS in the AR kernel +0..+1%. The several-
# owner TMA push with its copy flags' one fence: 4 ranks AR +0..+4% (s28f +4..+11%).
# Usage (device, nvidia-h200): bash bench/calls/p1_s29a.sh  (or build here, bench/pack_bins.sh,
# carry build/carry and PREBUILT=1)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_gemm build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused
FR_LABEL=s29a L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log 2>/dev/null); }
TEST_TIMEOUT_S=150 timeout -k 5 170 build/tests/gpu/test_gemm > "$L/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_gemm.log" | cut -c1-300 | head -4
timeout -k 5 150 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -4
snap
fused_row 2 IP_ROW_NO_ENV=1 rs:8192,8192,8192/rs:8192,14336,4096/rs:8192,8192,1024 p2ord --ab MELD_GEMM_RS_ORDER=rotate,ileave --fused-pairs 2; snap
fused_row 4 IP_ROW_NO_ENV=1 rs:8192,8192,8192/rs:8192,8192,1024 p4lean --ab MELD_GEMM_RS_LEAN=1,2 --fused-pairs 2; snap
S=ar:8192,8192,8192/ar:8192,8192,1024
fused_row 4 BENCH_VARIANTS=gemm,fused,fused_symc $S p4cf --ab MELD_GEMM_AR_COPY_FLAG=now,next --fused-pairs 2; snap
fused_row 8 BENCH_VARIANTS=gemm,fused,fused_symc $S p8cf --ab MELD_GEMM_AR_COPY_FLAG=now,next --fused-pairs 2; snap
# the several-owner TMA push again (its deferred copy flags now one fence + relaxed stores: 6492802)
fused_row 4 BENCH_VARIANTS=gemm,fused,fused_symc $S p4push --ab MELD_GEMM_RS_PUSH=st,tma --fused-pairs 2; snap
for v in "ar MELD_GEMM_AR_COPY_FLAG=next" "rs MELD_GEMM_RS_LEAN=2"; do
  set -- $v
  env $2 BENCH_VARIANTS=fused MELD_TRACE="$L/$1.json" timeout -k 5 60 build/bench/bench_inproc \
    --ranks 4 --trace 3 --fused $1:8192,8192,8192 > "$L/trace_$1.log" 2>&1
  echo "== trace $1 4 ranks [$2] rc=$? at $(el) s"
  python3 tools/trace_stats.py "$L"/$1.rank0.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | grep -E "reduce|comm |tail" | head -4
done
echo "== done at $(el) s"
snap; rm -rf "$L"
