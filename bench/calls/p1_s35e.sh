#!/usr/bin/env bash
# p1_s35e.sh — ONE GPU, session 35 call 6: the routing's code size. ncu (call 2) put 65% of the
# routing kernel's warp samples at decode on no_instruction: its code runs once a call, cold
# after the GEMM swept L2, ~300 lines of 128 B fetched for ~20 us. The walks are unrolled
# MOE_RU = 8 pairs a lane (loads ahead); 2 and 1 shrink both loop bodies ~4-8x. Three builds of
# bench_moe (MOE_RU 8 = the library's, 2, 1; built on the CPU machine), each: decode, T512, T4096
# and Mixtral (fused, nocopy) and the decode trace's phases; then RU 8 again.
# Prediction: decode place + count phases 8.1 -> ~4-5 us with RU 1-2, the call -3..-4 us; T4096's
# walks (32768 pairs, 16 CTAs) slower by < 5 us with RU 1 (less load-ahead).
. "$(dirname "$0")/../device_env.sh"
export MELD_TIMEOUT_MS=5000
cp build/bench/bench_moe build/bench/bench_moe_ru8
for ru in 8 2 1 8; do
  cp build/bench/bench_moe_ru$ru build/bench/bench_moe
  echo "==== MOE_RU $ru"
  BENCH_MOE_ROWS=dsv3-32e_T128,dsv3_T512,dsv3_T4096,mixtral_T4096 BENCH_MOE_VARIANTS=fused moe_rows 5 | grep -v nocopy
  cp "$OUT/bench_moe_p1.log" "$OUT/bench_moe_ru${ru}_$(el).log"
  moe_trace dsv3-32e_T128
done
echo "== done at $(el) s"
