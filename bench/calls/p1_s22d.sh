#!/usr/bin/env bash
# p1_s22d.sh — ONE GPU, session 22 call 4: where the 2-rank ZC call's ~8 us go (in-process
# ranks, call 3: forced ZC at 4 KB all-reduce 8.1 us per call in graphs, all-gather 8.3,
# reduce-scatter 6.7, against 4.4 at one rank and 2.6 for LL at 2 ranks). MELD_TRACE timelines
# (one per rank) of 16 calls per op at 4 KB, this tree (b) and the relaxed post (e); the ZC
# kernel's 4 events: thread 0's entry incl. the argument post and the wait for the peer's post
# (other), the entry barrier (wait), the move (comm), the wait for the peer's done (wait).
# Prediction (before the run): entry (other) 2-3 us at 2 ranks (1.2 at one rank) of which the
# peer's post ~1 us; done wait 1-2 us; gap between calls ~2 us; e: entry -0.5.
# Usage (device): OUT=... bash bench/calls/p1_s22d.sh (carry build/bench/bench_inproc build_exp)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
for v in b e; do
  bin=build/bench/bench_inproc; [ $v = e ] && bin=build_exp/bench/bench_inproc
  for op in all_reduce all_gather reduce_scatter; do
    MELD_TRACE="$OUT/tr_${v}_$op.json" MELD_TIMEOUT_MS=3000 timeout -k 5 60 $bin --ranks 2 --kinds sym --zc --only $op \
      --sizes 4096 --trace 16 > "$OUT/tr_${v}_$op.log" 2>&1
    echo "== trace $v $op rc=$? at $(el) s"
    for f in $(ls "$OUT"/tr_${v}_$op*.json* 2>/dev/null); do
      python3 tools/trace_stats.py "$f" > "$f.stats" 2>&1; echo "-- $(basename $f)"; sed -n '/call 10:/,/call 12:/p' "$f.stats" | head -12
    done
  done
done
cd "$OUT" && tar czf logs.tgz *.log tr_* && rm -f *.log tr_*
