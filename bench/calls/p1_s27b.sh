#!/usr/bin/env bash
# p1_s27b.sh — ONE GPU, session 27 call 2: the own tiles' partial slots asked into L2 at the
# tile's start (MELD_GEMM_RS_PF: 0 off, 1 the further sources src[1..], 2 every source), A/B in
# alternating processes (the variable is read per call; results must not change: a hint).
# Call 1 (p1_s27a) traced the fused GEMM+AR at 4 in-process ranks: an own tile's epilogue takes
# ~24 us (median) at K 1024 and K 8192, 1.3x a pushed tile's whole mainloop at K_loc 2048; with
# add mode 4 src[0]'s half 1 (TMA) and src[1], src[2] (register loads) are read after the
# mainloop, each an HBM round trip with the tensor cores idle.
# Prediction: PF 1 cuts the own epilogue at 4 ranks to ~12-16 us: fused RS 8192^3 1.94 ->
# 1.80-1.85 ms, K 1024 0.71 -> 0.60-0.65; AR alike; 8 ranks more (6 further sources); PF 2 at 2
# ranks -0..-1% (session 15's per-row prefetch of half 1 lost 0.3-1.1%: 64 bulk operations a
# tile; here one).
# Usage (device, nvidia-h200): bash bench/calls/p1_s27b.sh
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_inproc build/tests/gpu/test_inproc build/tests/gpu/test_gemm_rs
export MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
L="$OUT/l"; mkdir -p "$L" build/tests/gpu
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log ar4_* 2>/dev/null); }
n=0
row() { # P PF shapes label
  n=$((n + 1)); local log="$L/$4_pf$2_$n.log"
  MELD_GEMM_RS_PF=$2 BENCH_SETTLE_MS=100 timeout -k 5 100 build/bench/bench_inproc --ranks $1 --samples 3 \
    --fused "$3" --json "$OUT/inproc.jsonl" --label "s27b_$4_pf$2_$n" > "$log" 2>&1
  echo "== P=$1 PF=$2 rc=$? at $(el) s"; grep -E "mean of|FAIL" "$log" | grep -v " gemm " | cut -c1-100
}
S4=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
for pf in 0 1 2 2 1 0; do row 4 $pf $S4 p4; done; snap
MELD_GEMM_RS_PF=2 timeout -k 5 120 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc_pf2.log" 2>&1
echo "== test_inproc 8,2,3,4 PF=2 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc_pf2.log" | cut -c1-300 | head -3
snap
S2=rs:8192,8192,8192/ar:8192,8192,8192
for pf in 0 2 2 0; do row 2 $pf $S2 p2; done; snap
S8=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,1024
for pf in 0 1 1 0; do row 8 $pf $S8 p8; done; snap
MELD_GEMM_RS_PF=2 TEST_TIMEOUT_S=80 timeout -k 5 90 build/tests/gpu/test_gemm_rs > "$L/test_gemm_rs_pf2.log" 2>&1
echo "== test_gemm_rs (1 rank) PF=2 rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$L/test_gemm_rs_pf2.log" | cut -c1-200 | head -3
snap
MELD_GEMM_RS_PF=1 BENCH_VARIANTS=fused MELD_TRACE="$L/ar4_pf1.json" timeout -k 5 60 build/bench/bench_inproc --ranks 4 \
  --trace 3 --fused ar:8192,8192,8192 > "$L/trace_ar4_pf1.log" 2>&1
echo "== trace AR 4 ranks PF=1 rc=$? at $(el) s"
python3 tools/trace_stats.py "$L"/ar4_pf1.rank0.json* 2>&1 | grep -E "call 4|reduce|mainloops|tail" | tail -5
echo "== done at $(el) s"
snap; rm -rf "$L"
