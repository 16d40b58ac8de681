#!/usr/bin/env bash
# p1_s39b.sh — ONE GPU, session 39, call 1: (A) meld_gemm_fp8's first run (e4m3 A and B through
# the engine as bf16 of half the K; m64n256k32 e4m3 wgmma; per-tensor scales): test_gemm_fp8
# (prediction: passes; rel. errors ~3e-3..6e-3, the bf16 output's rounding plus the FP8 mode's
# shorter accumulation, growing with K), then test_gemm (the engine's bf16 path unchanged: 2004
# checks). (B) the hierarchy for ranks as threads (p1_s39a.sh's steps 1-2): thread timings of
# test_net with CUDA_DEVICE_MAX_CONNECTIONS=8 (prediction: the new warning; the 2 x 2
# hierarchical case may time out) and 32 (prediction: every thread case passes, the
# hierarchical sums bitwise). (C) if the binary has --fp8: bench_gemm's FP8 rows vs cuBLASLt.
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s39b.sh (carry build/carry:
#   bench/pack_bins.sh build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm build/tests/gpu/test_net
#   build/lib/libmeld.so [build/bench/bench_gemm])
# Estimated wall: (A) ~30 + ~90 s, (B) <= 130 + ~60 s, (C) ~120 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm build/tests/gpu/test_net
export MELD_TIMEOUT_MS=5000
timeout -k 5 "$(tl 90)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8.log" 2>&1
echo "== (A) test_gemm_fp8 rc=$? at $(el) s"; grep -E "rel err|FAIL|checks" "$OUT/test_gemm_fp8.log" | cut -c1-160 | head -40
timeout -k 5 "$(tl 150)" build/tests/gpu/test_gemm > "$OUT/test_gemm.log" 2>&1
echo "== (A) test_gemm rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm.log" | cut -c1-200 | head -8
(
  export MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=4 TEST_NET_THREADS_ONLY=1 MELD_TIMEOUT_MS=8000
  CUDA_DEVICE_MAX_CONNECTIONS=8 timeout -k 5 "$(tl 130)" build/tests/gpu/test_net > "$OUT/threads_q8.log" 2>&1
  echo "== (B) threads, 8 queues rc=$? at $(el) s"
  grep -E "FAIL|threads:|^---|queues|checks" "$OUT/threads_q8.log" | cut -c1-220 | head -24
  timeout -k 5 "$(tl 150)" build/tests/gpu/test_net > "$OUT/threads_q32.log" 2>&1
  echo "== (B) threads, 32 queues rc=$? at $(el) s"
  grep -E "FAIL|threads:|^---|queues|checks" "$OUT/threads_q32.log" | cut -c1-220 | head -24
)
if [ -x build/bench/bench_gemm ] && build/bench/bench_gemm --help 2>&1 | grep -q -- --fp8; then
  timeout -k 5 "$(tl 200)" build/bench/bench_gemm --fp8 --custom-only --shape 8192,8192,8192 --shape 4096,4096,4096 --shape 2048,5120,8192 --shape 8192,7168,8192 --json "$OUT/fp8.jsonl" ${FP8_ARGS:-} > "$OUT/bench_fp8.log" 2>&1
  echo "== (C) bench_gemm --fp8 rc=$? at $(el) s"; tail -30 "$OUT/bench_fp8.log"
fi
echo "== done at $(el) s"
