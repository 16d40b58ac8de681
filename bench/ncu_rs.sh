#!/usr/bin/env bash
# ncu_rs.sh — Nsight Compute on one GPU: the fused GEMM+RS kernel forced at one rank
# (bench_gemm_rs --diag at one shape), launch SKIP (default 2: the default plan) and SKIP2
# (default 110: MELD_GEMM_RS_DIAG=32 in bench order), warp states and per-instruction stall
# samples as CSV under $OUT. Clocks are left alone (--clock-control none).
set -u
OUT=${OUT:-/tmp/out}; mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
make -j16 lib build/bench/bench_gemm_rs > "$OUT/build.log" 2>&1 || { tail -5 "$OUT/build.log"; exit 1; }
NCU=$(command -v ncu || ls /opt/nvidia/nsight-compute/*/ncu 2>/dev/null | head -1)
echo "ncu: $NCU"
for s in ${SKIPS:-2 110}; do
  timeout -k 5 200 "$NCU" --clock-control none -k regex:gemm_rs_kernel --launch-skip $s --launch-count 1 \
    --section SpeedOfLight --section WarpStateStats --section SourceCounters --section LaunchStats \
    -o "$OUT/rs_$s" -f build/bench/bench_gemm_rs --diag --op rs --shape ${SHAPE:-8192,8192,4096} > "$OUT/ncu_$s.log" 2>&1
  echo "ncu skip $s rc=$?"; tail -3 "$OUT/ncu_$s.log"
  "$NCU" -i "$OUT/rs_$s.ncu-rep" --page details --csv > "$OUT/details_$s.csv" 2>&1
  "$NCU" -i "$OUT/rs_$s.ncu-rep" --page source --csv --print-source sass > "$OUT/source_$s.csv" 2>&1
  rm -f "$OUT/rs_$s.ncu-rep"
  ls -la "$OUT"
done
