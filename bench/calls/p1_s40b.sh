#!/usr/bin/env bash
# p1_s40b.sh — ONE GPU, after p1_s40a.sh: is the fp8 small-M kernel's lag at 128 rows its reloads
# of A (docs/perf-notes.md session 40)? Nsight Compute counters of meld_gemm_fp8 at 128 x 8192 x
# 8192 and 16 x 8192 x 8192 (bench_gemm --fp8: the small-M kernel's bf16 launches, then its fp8
# ones, "gemm_skinny_kernel<MT, true>"; bench_gemm's own cuBLASLt FP8 call fails, status 15). Prediction: L2 read sectors from the SMs
# (lts__t_sectors_srcunit_tex_op_read) ~4.2 M at 128 rows (64 MiB of weights + 64 MiB of A in
# 32-byte sectors) vs ~2.4 M at 16 rows (64 + 8 MiB), DRAM reads ~64-70 MiB at both; if so, the
# next kernel halves A's reloads (256-row CTAs or A multicast along N).
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s40b.sh (carry build/carry:
#   bench/pack_bins.sh build/bench/bench_gemm build/lib/libmeld.so)
# Estimated wall: 2 x ~40 s. (The bf16 launches at 128 rows give the same comparison in bf16:
# 128 MiB of weights + 128 MiB of A.)
. "$(dirname "$0")/../device_env.sh"
build lib build/bench/bench_gemm
for shape in 128,8192,8192 16,8192,8192; do
  mkdir -p "$OUT/ncu_$shape"
  OUT="$OUT/ncu_$shape" BIN=build/bench/bench_gemm SHAPE=$shape ARGS="--fp8" COUNT=8 KERNEL=skinny \
    timeout -k 5 "$(tl 120)" bash bench/ncu_gemm_vs_cublas.sh > "$OUT/ncu_$shape.log" 2>&1
  echo "== ncu fp8 $shape rc=$? at $(el) s"; tail -12 "$OUT/ncu_$shape.log"
done
echo "== done at $(el) s"
