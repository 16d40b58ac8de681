#!/usr/bin/env bash
# p1_s40a.sh — ONE GPU, session 40, call 1: rowwise FP8 scales (MELD_FP8_ROWWISE*).
# (A) test_gemm_fp8 with rowwise cases on every kernel path (prediction: all pass, errors
#     ~2e-3 as the per-tensor cases; the 446 earlier checks unchanged) and meld_fp8_quantize
#     (scales exact, bytes the nearest e4m3; the rowwise round trip ~4-6% vs bf16).
# (B) test_inproc 2,3: gemm_rs_fp8 / gemm_ar_fp8 rowwise (fused and unfused) and ag_gemm_fp8
#     rowwise (the shards' row scales all-gathered into the comm's scratch first; fused, compact
#     m_loc 200, unfused, m_loc 100); at 4 ranks two meld_comm_split children by parity, each
#     capped at its parent's 33 SMs, run a 32 MiB all-reduce at once (prediction: pass).
# (C) gemm_fp8_torch.py --rowwise (meld rowwise vs torch._scaled_mm rowwise, and meld per tensor):
#     prediction: meld rowwise within 1-2% of meld per tensor at large shapes (the scales cost 2 +
#     2 BN / 8 L1 loads a thread a tile); torch's rowwise path (not cuBLASLt's per-tensor kernel)
#     0.8-0.95x meld's speed; decode rows within 3%.
# (D) test_torch.py (Python rowwise: [M,1] / [1,N] tensors; vs torch._scaled_mm rowwise;
#     meld.fp8_quantize vs torch's rounding; Comm.ag_gemm_fp8 rowwise at 2 ranks).
# (F) fused fp8 vs bf16 rows, 2 thread ranks (p1_s39e's step F, never run with its workspace):
#     fp8 fused / meld_gemm_fp8 1.0-1.15; fp8 rows 1.5-1.9x faster than bf16's.
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s40a.sh (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_inproc build/bench/bench_inproc build/tests/gpu/test_net)
# Estimated wall: (A) 15 s, (B) 100 s, (C) 40 s, (D) 90 s, (F) 100 s, (G) 60-130 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_inproc build/bench/bench_inproc build/tests/gpu/test_net
MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 90)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8.log" 2>&1
echo "== (A) test_gemm_fp8 rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_fp8.log" | cut -c1-160 | head -10
grep -E "rowwise|quantize" "$OUT/test_gemm_fp8.log" | cut -c1-120 | head -18
timeout -k 5 "$(tl 200)" build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== (B) test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "rowwise|split|FAIL|checks" "$OUT/test_inproc.log" | cut -c1-160 | head -24
BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 120)" python3 bench/gemm_fp8_torch.py --rowwise \
  --shapes 8192x8192x8192,4096x4096x4096,2048x5120x8192,8192x28672x4096,16x8192x8192,128x8192x8192 \
  --json "$OUT/gemm_fp8_rowwise.jsonl" > "$OUT/gemm_fp8_rowwise.log" 2>&1
echo "== (C) gemm_fp8_torch --rowwise rc=$? at $(el) s"; tail -26 "$OUT/gemm_fp8_rowwise.log"
MELD_TIMEOUT_MS=15000 timeout -k 5 "$(tl 200)" python3 tests/gpu/test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== (D) test_torch.py rc=$? at $(el) s"; grep -E "rowwise|quantize|FAIL|passed|failed|Error" "$OUT/test_torch.log" | cut -c1-200 | head -20
for dt in fp8 bf16; do
  MELD_WORKSPACE_BYTES=160M BENCH_SETTLE_MS=100 timeout -k 5 "$(tl 70)" build/bench/bench_inproc --ranks 2 --sizes 4096 --samples 3 \
    --fused ag:8192,5120,8192/rs:8192,8192,8192/ar:8192,8192,8192 $([ $dt = fp8 ] && echo --fp8) \
    --json "$OUT/inproc_fused.jsonl" --label "s40_$dt" > "$OUT/inproc_$dt.log" 2>&1
  echo "== (F) bench_inproc --fused $dt rc=$? at $(el) s"; grep -E "mean of|FAIL|refus|error" "$OUT/inproc_$dt.log" | head -12
done
# (G) the thread ranks' hierarchy (sessions 38-39: the first hierarchical all_gather of 2 x 2
# thread ranks timed out). Session 40's reading: share_sms counted the threads sharing the GPU
# node by node (2, not 4), so each of the 4 ranks planned with 66 SMs and 4 grids of up to 64
# CTAs could not all be resident. Prediction: with the count fixed, MELD_NET_HIER=2 passes.
MELD_NET_HIER=2 MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=4 TEST_NET_THREADS_ONLY=1 MELD_TIMEOUT_MS=8000 \
  timeout -k 5 "$(tl 130)" build/tests/gpu/test_net > "$OUT/threads_hier.log" 2>&1
echo "== (G) test_net threads, MELD_NET_HIER=2 rc=$? at $(el) s"
grep -E "FAIL|threads:|hierarch|share GPU|checks" "$OUT/threads_hier.log" | cut -c1-220 | head -20
echo "== done at $(el) s"
