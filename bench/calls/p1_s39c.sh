#!/usr/bin/env bash
# p1_s39c.sh — ONE GPU, session 39, call 2: (A) meld.gemm_fp8 against torch._scaled_mm
# (cuBLASLt FP8, fast accumulation on and off) in one process, sustained (bench/gemm_fp8_torch.py;
# bench_gemm's own cuBLASLt FP8 call failed with status 15 in call 1). Prediction: meld within
# 0.95-1.05x of _scaled_mm fast-accum at the large shapes (call 1: 1247-1337 TFLOP/s burst),
# faster than use_fast_accum=False; decode rows (16 / 128 x 8192 x 8192) slower (no small-M
# fp8 kernel: the engine with split-K). (B) test_torch.py (the Python binding's gemm_fp8 vs
# _scaled_mm and fp32; torch.compile). (C) diagnostic: 2 x 2 thread ranks hierarchical
# (MELD_NET_HIER=2) with MELD_COLL_PDL=0: does the first call still time out?
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s39c.sh  (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/tests/gpu/test_net)
# Estimated wall: (A) ~60-90 s, (B) ~120 s, (C) ~60 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net
BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 200)" python3 bench/gemm_fp8_torch.py --json "$OUT/gemm_fp8_torch.jsonl" > "$OUT/gemm_fp8_torch.log" 2>&1
echo "== (A) gemm_fp8_torch rc=$? at $(el) s"; cat "$OUT/gemm_fp8_torch.log" | tail -45
MELD_TIMEOUT_MS=15000 timeout -k 5 "$(tl 200)" python3 tests/gpu/test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== (B) test_torch.py rc=$? at $(el) s"; grep -E "fp8|FAIL|checks|passed|failed|Error" "$OUT/test_torch.log" | cut -c1-200 | head -30
MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=4 TEST_NET_THREADS_ONLY=1 MELD_TIMEOUT_MS=8000 MELD_NET_HIER=2 MELD_COLL_PDL=0 \
  timeout -k 5 "$(tl 100)" build/tests/gpu/test_net > "$OUT/threads_hier_nopdl.log" 2>&1
echo "== (C) threads hierarchical, no PDL rc=$? at $(el) s"
grep -E "threads:|^---|checks" "$OUT/threads_hier_nopdl.log" | cut -c1-200 | head -20
grep -o "timed out: [^[]*" "$OUT/threads_hier_nopdl.log" | sort | uniq -c | cut -c1-400 | head -6
echo "== done at $(el) s"
