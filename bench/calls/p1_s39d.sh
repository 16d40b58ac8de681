#!/usr/bin/env bash
# p1_s39d.sh — ONE GPU, session 39, call 3: (A) test_gemm_fp8 with the small-M kernel in fp8
# (decode rows, tails; prediction: passes, errors ~2e-3); (B) test_inproc 2,4 (ranks as threads):
# meld_ag_gemm_fp8 and meld_gemm_rs_fp8 / meld_gemm_ar_fp8 first runs (fused, unfused; gathered
# e4m3 rows bitwise; prediction: passes) and everything else of test_inproc unchanged;
# (C) gemm_fp8_torch.py on the decode rows and two large ones (prediction: 16 / 128 x 8192 x
# 8192 now ~20-25 us, 1.3-1.6x torch._scaled_mm's 29-33 us: the weight stream in fp8 is half
# of bf16's 128 MiB -> 64 MiB at ~3-3.5 TB/s).
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s39d.sh (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_inproc)
# Estimated wall: (A) ~40 s, (B) ~150 s, (C) ~40 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_inproc
MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 90)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8.log" 2>&1
echo "== (A) test_gemm_fp8 rc=$? at $(el) s"; grep -E "rel err|FAIL|checks" "$OUT/test_gemm_fp8.log" | cut -c1-120 | head -40
timeout -k 5 "$(tl 240)" build/tests/gpu/test_inproc 2,4 > "$OUT/test_inproc.log" 2>&1
echo "== (B) test_inproc 2,4 rc=$? at $(el) s"; grep -E "fp8|FAIL|checks" "$OUT/test_inproc.log" | cut -c1-200 | head -30
BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 120)" python3 bench/gemm_fp8_torch.py --shapes 16x8192x8192,128x8192x8192,64x14336x4096,16x7168x16384,8192x8192x8192 \
  --json "$OUT/gemm_fp8_torch.jsonl" > "$OUT/gemm_fp8_torch.log" 2>&1
echo "== (C) gemm_fp8_torch rc=$? at $(el) s"; tail -30 "$OUT/gemm_fp8_torch.log"
echo "== done at $(el) s"
