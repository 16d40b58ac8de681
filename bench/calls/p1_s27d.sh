#!/usr/bin/env bash
# p1_s27d.sh — ONE GPU, session 27 call 4 (carried binaries: build/carry/bins.tar.xz, the GPU
# tests and bench_inproc built on the CPU machine at this commit). Two new defaults:
#   (1) the partial slots' L2 prefetch at an own tile's start (the further sources, more than 2
#       ranks) where a tile's mainloop has <= 8 k-blocks (gemm_rs_pf_first; call 2: -8% / -3.5%
#       at K 1024 with 4 / 8 ranks, +1.6% / +1.2% at K 8192, hence the rule);
#   (2) the AR's early copy (result slots) from 3 ranks on (gemm_rs_early_copy; call 3: 4 ranks
#       -3.5% at K 8192, -6.5% at K 1024).
# "old" = both off as before (MELD_GEMM_RS_PF=0 MELD_GEMM_AR_EARLY_COPY=0), "new" = the defaults.
# Prediction: 4 ranks new vs old RS K 1024 -8%, K 8192 0; AR K 1024 -12..-14%, K 8192 -3.5%;
# 8 ranks RS K 1024 -3.5%, AR -3..-8%; 3 ranks in between; every test passes.
# Usage (device, nvidia-h200): bash bench/calls/p1_s27d.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s27d L="$OUT/l"; mkdir -p "$L" build/tests/gpu
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log); }
OLD="MELD_GEMM_RS_PF=0 MELD_GEMM_AR_EARLY_COPY=0"; NEW="IP_ROW_NO_ENV=1"
timeout -k 5 120 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 (new defaults) rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -3
snap
S4=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
for v in "$OLD" "$NEW" "MELD_GEMM_AR_EARLY_COPY=0" "$NEW" "$OLD"; do fused_row 4 "$v" $S4 p4; done
snap
S8=rs:8192,8192,8192/rs:8192,8192,1024/ar:8192,8192,8192/ar:8192,8192,1024
for v in "$OLD" "$NEW" "$NEW" "$OLD"; do fused_row 8 "$v" $S8 p8; done
snap
S3=rs:8064,8192,8256/rs:8064,8192,1032/ar:8064,8192,8256/ar:8064,8192,1032
for v in "$OLD" "$NEW" "$NEW" "$OLD"; do fused_row 3 "$v" $S3 p3; done
snap
S2=ar:8192,8192,8192/ar:8192,8192,1024
for v in "MELD_GEMM_AR_EARLY_COPY=0" "MELD_GEMM_AR_EARLY_COPY=1" "MELD_GEMM_AR_EARLY_COPY=1" "MELD_GEMM_AR_EARLY_COPY=0"; do
  BENCH_VARIANTS=fused fused_row 2 "$v" $S2 p2; done
snap
TEST_TIMEOUT_S=150 timeout -k 5 200 tests/gpu/run.sh > "$L/gpu_tests.log" 2>&1
echo "== every GPU test at one rank rc=$? at $(el) s"; grep -E "checks passed|FAILED|FAIL" "$L/gpu_tests.log" | head -12
cp build/tests/gpu/*.log "$L/" 2>/dev/null; snap
MELD_GEMM_RS_PF=2 TEST_TIMEOUT_S=80 timeout -k 5 90 build/tests/gpu/test_gemm_rs > "$L/test_gemm_rs_pf2.log" 2>&1
echo "== test_gemm_rs (1 rank) PF=2 rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$L/test_gemm_rs_pf2.log" | cut -c1-200 | head -3
echo "== done at $(el) s"
snap; rm -rf "$L"
