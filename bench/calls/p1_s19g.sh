#!/usr/bin/env bash
# p1_s19g.sh — ONE GPU, session 19 call 7: did this session's small-M kernel change slow the
# swapped kernel's tall tiles? Call 6's suite read ag P8 qkv 2048 x 1280 x 8192 (130 tiles of
# 128 x 160, no split) at 0.845-0.848 of cuBLASLt, against 0.886-0.896 in sessions 3 and 11.
# bench_gemm of the session's start (d504547, /tmp/oldtree, carried as build_old) against this
# one, order A B B A, same shapes (the N 4096 rows with <= 32 rows excluded: their plans differ).
# Prediction (before the run): no difference beyond 1-2% (the reduce's two-row pass issues the
# same loads at S 1); then the 5% is older (session 17's tail hook) or the GPU's, not this
# session's.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s19g.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
args=()
for s in 2048,1280,8192 2048,1280,4096 128,4096,7168 128,8192,8192 192,8192,8192 256,8192,8192 512,4096,7168 16,8192,8192; do
  args+=(--shape "$s"); done
i=0
for b in build_old build build build_old; do
  i=$((i + 1))
  timeout -k 5 60 $b/bench/bench_gemm --custom-only --only default "${args[@]}" --json "$OUT/ab-$i-$b.jsonl" \
    > "$OUT/ab-$i-$b.log" 2>&1
  echo "== $i $b rc=$?"
  grep -E "^custom" "$OUT/ab-$i-$b.log" | awk '{printf "%s x %s x %s: %s %s %s | ", $2, $3, $4, $(NF-6), $(NF-4), $(NF-2)}'; echo
done
echo "total: $(el) s"
