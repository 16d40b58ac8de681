#!/usr/bin/env bash
# p1_s22c.sh — ONE GPU, session 22 call 3: the in-process ranks (bench_inproc) again.
# Call 2 learned: 2 ranks as threads on one GPU run correctly (18 rows, rel_err 0) and their
# graphs time the 2-rank LL protocol: 4 KB all-reduce 2.63 us, reduce-scatter 2.42, all-gather
# 2.78 (sym rows took LL too: the plan's size rule); 3 ranks stalled 3 s at a row's first call
# (rank 0's kernel entered after the others had timed out), most likely the pageable host copy
# of a peer's thread; the bench now copies through pinned memory.
# Parts: (1) P = 2: ord rows and --zc rows (ZC forced on the symmetric buffers), 3 ops,
# 4 KB / 64 KB / 1 MB; (2) P = 3 the same (sizes multiples of 6); (3) the relaxed argument post
# (build_exp) vs B at P = 2, --zc, B E B E; (4) session 20's defaults (MELD_COLL_LL_LEAN=0
# MELD_COLL_PDL=0) vs today's at P = 2, ord rows, D S D S: what session 21's kernel changes give
# with two ranks really in flight.
# Predictions (before the run): (1) ZC forced at 4 KB: 5-6.5 us per call (one rank's forced ZC
# 4.44 + the peer's post and done through L2); (2) P = 3 completes, ord 4 KB 5-5.5 us (call 2's
# first rows 5.15), zc 6-7.5; (3) relaxed post -0.3..-1.0 us at 4 KB; (4) s20 defaults +1.0-1.2
# us per call at 4 KB (as in loopback).
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22c.sh (carry build/bench/bench_inproc build_exp)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
ip() { MELD_TIMEOUT_MS=3000 timeout -k 5 90 "$@" --json "$OUT/inproc.jsonl"; }
summ() { grep -E '^(all|reduce)' "$1" | awk '{printf "%s %s %s %s %s | ", $1, $2, $3, $4, $7}'; echo; }
for P in 2 3; do
  sizes=4096,65536,1048576; [ $P = 3 ] && sizes=6144,98304,1572864
  ip build/bench/bench_inproc --ranks $P --sizes $sizes --kinds ord --label "ord_p$P" > "$OUT/ord_p$P.log" 2>&1
  echo "== ord P=$P rc=$? at $(el) s: $(summ "$OUT/ord_p$P.log")"
  ip build/bench/bench_inproc --ranks $P --sizes $sizes --kinds sym --zc --label "zc_p$P" > "$OUT/zc_p$P.log" 2>&1
  echo "== zc P=$P rc=$? at $(el) s: $(summ "$OUT/zc_p$P.log")"
done
grep -vE "WARN|^(all|reduce)" "$OUT"/ord_p3.log "$OUT"/zc_p3.log | head -8
for pass in 1 2; do
  for v in b e; do
    bin=build/bench/bench_inproc; [ $v = e ] && bin=build_exp/bench/bench_inproc
    ip $bin --ranks 2 --kinds sym --zc --sizes 4096,65536,1048576 --label "post_${v}$pass" > "$OUT/post_${v}$pass.log" 2>&1
    echo "== post $v$pass rc=$? at $(el) s: $(summ "$OUT/post_${v}$pass.log")"
  done
done
for pass in 1 2; do
  for v in d s; do
    if [ $v = s ]; then export MELD_COLL_LL_LEAN=0 MELD_COLL_PDL=0; else unset MELD_COLL_LL_LEAN MELD_COLL_PDL; fi
    ip build/bench/bench_inproc --ranks 2 --kinds ord --sizes 4096,65536 --label "def_${v}$pass" > "$OUT/def_${v}$pass.log" 2>&1
    echo "== defaults $v$pass rc=$? at $(el) s: $(summ "$OUT/def_${v}$pass.log")"
  done
done
unset MELD_COLL_LL_LEAN MELD_COLL_PDL
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
