#!/usr/bin/env bash
# p1_s21g.sh — ONE GPU, session 21 call 7 (the last ~280 s of device time): the out-of-line
# failure record alone. Call 6 measured per-op ZC kernels + the out-of-line record together (ZC
# forced 4 KB 6.5 -> 4.9 us) and the LL rows unchanged. Same library but collectives.o built with
# -DMELD_COLL_FAIL_INLINE (build_inl: the record inline again), run in the order A B B A.
# Prediction (before the run): LL rows equal within 0.05 us; ZC rows inline 0-0.3 us slower.
# Usage (device): OUT=... bash bench/calls/p1_s21g.sh   (carry build/bench/bench_coll build_inl/bench/bench_coll)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
i=0
for b in build build_inl build_inl build; do
  i=$((i + 1))
  for op in all_reduce all_gather; do
    MELD_TIMEOUT_MS=3000 timeout -k 5 30 $b/bench/bench_coll --zc --only $op --max-bytes 16384 --json "$OUT/c_${i}_$op.jsonl" > "$OUT/c_${i}_$op.log" 2>&1
    echo "== $i $b $op rc=$? at $(el) s"; grep -E "(ll_loop|zc).*graph" "$OUT/c_${i}_$op.log" | awk '{printf "%s %s %s | ", $2, $3, $5}'; echo
  done
done
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log *.jsonl
