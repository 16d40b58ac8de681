#!/usr/bin/env bash
# p1_s41b.sh — ONE GPU, after p1_s41a.sh passes: test_torch.py, then the fp8 timings of
# p1_s40a.sh and p1_s40b.sh.
# (D) test_torch.py (Python rowwise scales, fp8_quantize vs torch, Comm.ag_gemm_fp8 rowwise at
#     2 ranks; the scales compared with the correctly rounded quotient; a one-row shard's scale
#     taken as rowwise).
# (C) gemm_fp8_torch.py --rowwise: prediction meld rowwise within 1-2% of meld per tensor at
#     large shapes; torch's rowwise path 0.8-0.95x meld's speed; decode rows within 3%.
# (F) fused fp8 vs bf16 rows, 2 thread ranks: fp8 fused / meld_gemm_fp8 1.0-1.15; fp8 rows
#     1.5-1.9x faster than bf16's.
# (N) Nsight counters of the fp8 small-M kernel at 128 / 16 rows (p1_s40b.sh's prediction: L2
#     read sectors ~4.2 M vs ~2.4 M, DRAM ~64-70 MiB at both: A reloaded per 128-column block).
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s41b.sh (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/bench/bench_inproc build/bench/bench_gemm; test_torch.py
#   loads build/lib/libmeld.so)
# Estimated wall: (D) 90 s, (C) 40 s, (F) 200 s, (N) 80 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/bench/bench_inproc build/bench/bench_gemm
MELD_TIMEOUT_MS=15000 timeout -k 5 "$(tl 150)" python3 tests/gpu/test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== (D) test_torch.py rc=$? at $(el) s"; grep -E "rowwise|quantize|FAIL|passed|failed|Error" "$OUT/test_torch.log" | cut -c1-200 | head -16
BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 120)" python3 bench/gemm_fp8_torch.py --rowwise \
  --shapes 8192x8192x8192,4096x4096x4096,2048x5120x8192,8192x28672x4096,16x8192x8192,128x8192x8192 \
  --json "$OUT/gemm_fp8_rowwise.jsonl" > "$OUT/gemm_fp8_rowwise.log" 2>&1
echo "== (C) gemm_fp8_torch --rowwise rc=$? at $(el) s"; tail -26 "$OUT/gemm_fp8_rowwise.log"
for dt in fp8 bf16; do
  MELD_WORKSPACE_BYTES=160M BENCH_SETTLE_MS=100 timeout -k 5 "$(tl 110)" build/bench/bench_inproc --ranks 2 --sizes 4096 --samples 3 \
    --fused ag:8192,5120,8192/rs:8192,8192,8192/ar:8192,8192,8192 $([ $dt = fp8 ] && echo --fp8) \
    --json "$OUT/inproc_fused.jsonl" --label "s41_$dt" > "$OUT/inproc_$dt.log" 2>&1
  echo "== (F) bench_inproc --fused $dt rc=$? at $(el) s"; grep -E "mean of|FAIL|refus|error" "$OUT/inproc_$dt.log" | head -12
done
for shape in 128,8192,8192 16,8192,8192; do
  mkdir -p "$OUT/ncu_$shape"
  OUT="$OUT/ncu_$shape" BIN=build/bench/bench_gemm SHAPE=$shape ARGS="--fp8" COUNT=8 KERNEL=skinny \
    timeout -k 5 "$(tl 100)" bash bench/ncu_gemm_vs_cublas.sh > "$OUT/ncu_$shape.log" 2>&1
  echo "== (N) ncu fp8 $shape rc=$? at $(el) s"; tail -12 "$OUT/ncu_$shape.log"
done
echo "== done at $(el) s"
