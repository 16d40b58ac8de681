#!/usr/bin/env bash
# p1_s27e.sh — ONE GPU, session 27 call 5 (carried: test_inproc, test_gemm_rs, bench_inproc built
# on the CPU machine at this commit). The AR early copy's default now from 2 ranks on
# (GEMM_RS_EARLY_COPY_MIN_RANKS 2: call 4 measured -2.5..-4% at 2 in-process ranks, 8192^3, and
# -0.6% at K 1024): its tests at every rank count incl. the one-rank loopback (virtual P = 2),
# the 2-rank A/B again, and the 3-rank rows call 4 lost (bench_inproc's --sizes check).
# Prediction: tests pass; 2 ranks AR 8192^3 -3%; 3 ranks RS K 1032 -5..-8%, AR -8..-12%;
# AG+GEMM (per-rank N_loc 2048 / 1024) fused within 10% of meld_gemm at 4 ranks, unfused slower.
# Usage (device, nvidia-h200): bash bench/calls/p1_s27e.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000 MELD_WORKSPACE_BYTES=402653184 BENCH_VARIANTS=gemm,fused,fused_symc
FR_LABEL=s27e L="$OUT/l"; mkdir -p "$L" build/tests/gpu
snap() { (cd "$L" && tar czf "$OUT/logs.tgz" *.log); }
timeout -k 5 120 build/tests/gpu/test_inproc 8,2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -3
TEST_TIMEOUT_S=80 timeout -k 5 90 build/tests/gpu/test_gemm_rs > "$L/test_gemm_rs.log" 2>&1
echo "== test_gemm_rs (1 rank, loopback incl.) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$L/test_gemm_rs.log" | cut -c1-200 | head -3
snap
OLD="MELD_GEMM_RS_PF=0 MELD_GEMM_AR_EARLY_COPY=0"; NEW="IP_ROW_NO_ENV=1"
for v in "$OLD" "$NEW" "$NEW" "$OLD"; do BENCH_VARIANTS=fused fused_row 2 "$v" ar:8192,8192,8192/ar:8192,8192,4096 p2; done
snap
S3=rs:8064,8192,8256/rs:8064,8192,1032/ar:8064,8192,8256/ar:8064,8192,1032
for v in "$OLD" "$NEW" "$NEW" "$OLD"; do fused_row 3 "$v" $S3 p3; done
# AG+GEMM at 4 and 8 ranks (not timed there before): fused vs unfused vs meld_gemm of the whole A
BENCH_VARIANTS=gemm,fused,unfused fused_row 4 "$NEW" ag:8192,2048,8192/ag:8192,2048,1024 ag4
BENCH_VARIANTS=gemm,fused,unfused fused_row 8 "$NEW" ag:8192,1024,8192/ag:8192,1024,1024 ag8
echo "== done at $(el) s"
snap; rm -rf "$L"
