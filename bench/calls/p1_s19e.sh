#!/usr/bin/env bash
# p1_s19e.sh — ONE GPU, session 19 call 5: call 4's clusters of 2 at 16 x 4096 x 14336 made
# bench_gemm's meld_gemm 8% faster (34.3 vs 37.2 us) but bench_gemm_rs --decode's meld_gemm
# row did not move (37.6 vs 38.0) and its decode kernel (loopback) got slower (53.9 vs 42.1 us
# eager, 42.4 vs 37.0 graph). Same shape, both benches, the cluster size forced both ways
# (MELD_GEMM_SPLIT_K = the small-M kernel's cluster size), in one call.
# Prediction (before the run): the benches differ in their inputs (bench_gemm rotates 2 B sets,
# bench_gemm_rs reuses one B and times many ops in turn), not in the kernel: under bench_gemm_rs
# both cluster sizes give ~37.5 us, and the decode kernel's loss at 2 is its tail (8 rows of
# pull + sum per CTA instead of 5-6), not its GEMM.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19e.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
for sh in 16,4096,14336 16,4096,7168; do
  for S in "" 2 3; do
    MELD_GEMM_SPLIT_K=${S:-0} timeout -k 5 40 build/bench/bench_gemm_rs --shape "$sh" --op ar --diag \
      --json "$OUT/ar-${sh//,/x}-s${S:-plan}.jsonl" > "$OUT/ar-${sh//,/x}-s${S:-plan}.log" 2>&1
    echo "== $sh S=${S:-plan} rc=$?"
    grep -E "^gemm_ar|graph:|one kernel|without" "$OUT/ar-${sh//,/x}-s${S:-plan}.log" | cut -c1-200
  done
done
timeout -k 5 60 build/bench/bench_gemm --custom-only --only default,skinny_s2,skinny_s3 --shape 16,4096,14336 --shape 16,4096,7168 \
  --json "$OUT/gemm.jsonl" > "$OUT/bench_gemm.log" 2>&1
grep -E "^custom" "$OUT/bench_gemm.log" | cut -c1-150
echo "total: $(el) s"
