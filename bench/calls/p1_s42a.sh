#!/usr/bin/env bash
# p1_s42a.sh — ONE GPU: the ping-pong tile (gemm_params_t.bn 128, session 42) and the rowwise
# scales' L1 prefetch, then the smem layout change (GEMM_RING_MAX) through the fused kernels.
# (A) test_gemm_fp8 as is (the prefetch, the layout) and with MELD_GEMM_TILE_N=128 (every legal
#     case on the ping-pong tile): prediction all pass, errors as before (~2e-3).
# (B) test_gemm (bf16) as is and with MELD_GEMM_TILE_N=128: all pass.
# (C) the fused kernels after the layout change: test_inproc 2,3, test_ag_gemm, test_gemm_rs,
#     test_moe (one rank): all pass.
# (D) gemm_fp8_torch.py --rowwise, default vs MELD_GEMM_TILE_N=128 (each against torch in its
#     own process). Floor: 8192^3 fp8 = 1.1 PFLOP at ~1.3-1.4 PFLOP/s sustained -> ~0.80 ms.
#     Prediction: ping-pong per tensor 0.95-1.0x torch's rowwise kernel (its own ping-pong
#     128 x 128, cluster 2x1) where the cooperative tile was 0.90-0.95x (8192^3) and 0.90x
#     (8192 x 28672 x 4096, K = 4096: the exposed epilogue is twice K = 8192's share); the
#     prefetch brings rowwise within 1-3% of per tensor (was +3.5-8.8%). Risk: 128 x 128 tiles
#     without B multicast move 1.33x the L2->SM bytes of 128 x 256.
# (E) bench_gemm bf16 default vs pp: prediction pp 0.98-1.04x the cooperative tile.
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s42a.sh (carry build/carry:
#   bench/pack_bins.sh build/lib/libmeld.so build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm
#   build/tests/gpu/test_inproc build/tests/gpu/test_ag_gemm build/tests/gpu/test_gemm_rs
#   build/tests/gpu/test_moe build/bench/bench_gemm)
# Estimated wall: (A) 30 s, (B) 60 s, (C) 120 s, (D) 80 s, (E) 60 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_gemm_fp8 build/tests/gpu/test_gemm build/tests/gpu/test_inproc \
  build/tests/gpu/test_ag_gemm build/tests/gpu/test_gemm_rs build/tests/gpu/test_moe build/bench/bench_gemm
export MELD_TIMEOUT_MS=5000
for tn in default 128; do
  e=IP_ROW_NO_ENV=1; [ $tn = 128 ] && e=MELD_GEMM_TILE_N=128
  env $e timeout -k 5 "$(tl 60)" build/tests/gpu/test_gemm_fp8 > "$OUT/test_gemm_fp8_$tn.log" 2>&1
  echo "== (A) test_gemm_fp8 tile $tn rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_fp8_$tn.log" | cut -c1-160 | head -8
done
for tn in default 128; do
  e=IP_ROW_NO_ENV=1; [ $tn = 128 ] && e=MELD_GEMM_TILE_N=128
  env $e timeout -k 5 "$(tl 90)" build/tests/gpu/test_gemm > "$OUT/test_gemm_$tn.log" 2>&1
  echo "== (B) test_gemm tile $tn rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_gemm_$tn.log" | cut -c1-160 | head -8
done
timeout -k 5 "$(tl 90)" build/tests/gpu/test_inproc 2,3 > "$OUT/test_inproc.log" 2>&1
echo "== (C) test_inproc 2,3 rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/test_inproc.log" | cut -c1-160 | head -8
for t in test_ag_gemm test_gemm_rs test_moe; do
  timeout -k 5 "$(tl 90)" build/tests/gpu/$t > "$OUT/$t.log" 2>&1
  echo "== (C) $t rc=$? at $(el) s"; grep -E "FAIL|checks" "$OUT/$t.log" | cut -c1-160 | head -6
done
SH=8192x8192x8192,8192x28672x4096,2048x5120x8192,4096x4096x4096,8192x7168x8192
for tn in default 128; do
  e=IP_ROW_NO_ENV=1; [ $tn = 128 ] && e=MELD_GEMM_TILE_N=128
  env $e BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 100)" python3 bench/gemm_fp8_torch.py --rowwise --shapes $SH \
    --json "$OUT/gemm_fp8_rowwise_$tn.jsonl" > "$OUT/gemm_fp8_rowwise_$tn.log" 2>&1
  echo "== (D) gemm_fp8_torch --rowwise tile $tn rc=$? at $(el) s"; tail -22 "$OUT/gemm_fp8_rowwise_$tn.log"
done
timeout -k 5 "$(tl 100)" build/bench/bench_gemm --variants --only default,pp --custom-only --shape 8192,8192,8192 \
  --shape 8192,28672,4096 --shape 4096,4096,4096 --shape 2048,5120,8192 --json "$OUT/bench_gemm_pp.jsonl" > "$OUT/bench_gemm_pp.log" 2>&1
echo "== (E) bench_gemm bf16 default vs pp rc=$? at $(el) s"; grep -E "default|pp |geomean" "$OUT/bench_gemm_pp.log" | cut -c1-170 | head -14
echo "== done at $(el) s"
