#!/usr/bin/env bash
# p1_s27c.sh — ONE GPU, session 27 call 3: the partial slots' L2 prefetch moved to the producer
# and timed: it goes out with an own tile's k-block k_nblk - MELD_GEMM_RS_PF_KB (its first if it
# has fewer). Call 2 (p1_s27b, prefetch at the tile's start): 4 in-process ranks -8% at K 1024
# (4 k-blocks a tile), +1.6% at K 8192 (32: the lines were gone again by the epilogue); 8 ranks
# -3.5% / +1.2%; 2 ranks (every source) +0..1%.
# Prediction: KB 4-8 keeps K 1024's gain (its tiles are shorter than KB: asked at the first
# k-block) and turns K 8192's +1.6% into -1..-3% (the own epilogue ~24 us -> ~18); KB 1000 = call
# 2's rows. Then a breakdown of the 4-rank own epilogue (general kernel with and without the
# partial loads (diag 4: WRONG results, FAIL expected), without the flag waits (diag 2), add mode
# 5) and the AR tail with the early copy.
# Ran at 8759ca6 (a record): the producer-side prefetch and MELD_GEMM_RS_PF_KB were dropped after
# it (681ea72), so its KB rows no longer mean anything at later commits.
# Usage (device, nvidia-h200): bash bench/calls/p1_s27c.sh
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_inproc build/tests/gpu/test_gemm_rs
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s27c L="$OUT/l"; mkdir -p "$L" build/tests/gpu
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log); }
S4=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
for v in "MELD_GEMM_RS_PF=0" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=1000" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=8" \
         "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=4" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=2"; do fused_row 4 "$v" $S4 p4; done
for v in "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=2" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=4" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=8" \
         "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=1000" "MELD_GEMM_RS_PF=0"; do fused_row 4 "$v" $S4 p4; done
snap
MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=4 timeout -k 5 120 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc_pf1.log" 2>&1
echo "== test_inproc 8,2,3,4 PF=1 KB=4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc_pf1.log" | cut -c1-300 | head -3
snap
S8=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,1024
for v in "MELD_GEMM_RS_PF=0" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=8" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=4" \
         "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=4" "MELD_GEMM_RS_PF=1 MELD_GEMM_RS_PF_KB=8" "MELD_GEMM_RS_PF=0"; do fused_row 8 "$v" $S8 p8; done
snap
S2=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192
for v in "MELD_GEMM_RS_PF=0" "MELD_GEMM_RS_PF=2 MELD_GEMM_RS_PF_KB=4" "MELD_GEMM_RS_PF=2 MELD_GEMM_RS_PF_KB=4" "MELD_GEMM_RS_PF=0"; do
  fused_row 2 "$v" $S2 p2; done
snap
# the 4-rank own epilogue's breakdown (RS; fused only)
S4R=rs:8192,8192,8192/rs:8192,8192,1024
for v in "MELD_GEMM_RS_LEAN=0" "MELD_GEMM_RS_LEAN=0 MELD_GEMM_RS_DIAG=4" "MELD_GEMM_RS_DIAG=2" "MELD_GEMM_RS_PRELOAD=5" \
         "MELD_GEMM_RS_PRELOAD=5" "MELD_GEMM_RS_DIAG=2" "MELD_GEMM_RS_LEAN=0 MELD_GEMM_RS_DIAG=4" "MELD_GEMM_RS_LEAN=0"; do
  BENCH_VARIANTS=fused fused_row 4 "$v" $S4R d4; done
for v in "MELD_GEMM_AR_EARLY_COPY=0" "MELD_GEMM_AR_EARLY_COPY=1" "MELD_GEMM_AR_EARLY_COPY=1" "MELD_GEMM_AR_EARLY_COPY=0"; do
  BENCH_VARIANTS=fused fused_row 4 "$v" ar:8192,8192,8192/ar:8192,8192,1024 e4; done
snap
MELD_GEMM_RS_PF=2 MELD_GEMM_RS_PF_KB=2 TEST_TIMEOUT_S=80 timeout -k 5 90 build/tests/gpu/test_gemm_rs > "$L/test_gemm_rs_pf2.log" 2>&1
echo "== test_gemm_rs (1 rank) PF=2 KB=2 rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$L/test_gemm_rs_pf2.log" | cut -c1-200 | head -3
echo "== done at $(el) s"
snap; rm -rf "$L"
