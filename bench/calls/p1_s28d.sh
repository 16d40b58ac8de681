#!/usr/bin/env bash
# p1_s28d.sh — ONE GPU, session 28's fourth call: the AR's reduced tiles reach their P - 1 copies
# by TMA store at 3 to 8 ranks (reduce.copy_tma 2: one map per peer in the fused kernel's
# parameter, gemm.cuh gemm_copy_map; new default, MELD_GEMM_AR_COPY=st = the threads' 16-byte
# stores as before). p1_s28c's traces at 4 ranks: own epilogues 17.7 us (RS) vs 28.6 us (AR
# with result slots): ~11 us a tile for three copies by the threads' stores.
# (1) correctness: test_inproc 8,2,3,4 (the fused AR at 3, 4, 8 ranks, slots and zero copy, now
# with the copies by TMA) and test_gemm_rs at one rank (the 2-rank copy map path, loopback);
# (2) A/B MELD_GEMM_AR_COPY=st,tma at 4, 8, 3 ranks (AR only; the parameter grew by 0.9 KB);
# (3) a trace of the 4-rank AR with it (own epilogue vs 28.6 us).
# Prediction: own epilogue 28.6 -> 19-22 us; AR 4 ranks -2..-5% (slots and zero copy), 8 ranks
# -3..-6%, 3 ranks -1..-3%.
# Usage (device, nvidia-h200): PREBUILT=1 bash bench/calls/p1_s28d.sh  (carry build/carry)
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_inproc build/tests/gpu/test_gemm_rs
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s28d L="$OUT/l"; mkdir -p "$L"
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log ar4_* 2>/dev/null); }
timeout -k 5 150 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -4
snap
S=ar:8192,8192,8192/ar:8192,8192,1024
fused_row 4 IP_ROW_NO_ENV=1 $S p4cp --ab MELD_GEMM_AR_COPY=st,tma --fused-pairs 2; snap
fused_row 8 IP_ROW_NO_ENV=1 $S p8cp --ab MELD_GEMM_AR_COPY=st,tma --fused-pairs 2; snap
fused_row 3 IP_ROW_NO_ENV=1 ar:8064,8192,8256/ar:8064,8192,1032 p3cp --ab MELD_GEMM_AR_COPY=st,tma --fused-pairs 2; snap
BENCH_VARIANTS=fused MELD_TRACE="$L/ar4_cptma.json" timeout -k 5 60 build/bench/bench_inproc \
  --ranks 4 --trace 3 --fused ar:8192,8192,8192 > "$L/trace_ar4.log" 2>&1
echo "== trace AR 4 ranks (copies by TMA) rc=$? at $(el) s"
python3 tools/trace_stats.py "$L"/ar4_cptma.rank0.json* 2>&1 | sed -n '/call 3:/,/call 4:/p' | head -14
snap
TEST_TIMEOUT_S=150 timeout -k 5 170 build/tests/gpu/test_gemm_rs > "$L/test_gemm_rs.log" 2>&1
echo "== test_gemm_rs (one rank) rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_gemm_rs.log" | cut -c1-300 | head -4
echo "== done at $(el) s"
snap; rm -rf "$L"
