#!/usr/bin/env bash
# p1_s26a.sh — ONE GPU, session 26 call 1. Four builds carried (build/carry/bins.tar.xz):
#   build_c: main at 25ee858 (session 25's final any-P selection: copies FL 2, sums FL 1 / 0;
#            the all-to-all-v case with equal outgoing, unequal incoming blocks; the mend);
#   build_d: branch exp/acq-par rebased on it (entry acquires spread over a CTA's threads, P > 2);
#   build_e: branch exp/fence-acq (entry acquires = relaxed reads + ONE fence.acquire.sys);
#   build_f: E + every wait's closing acquire (meld_acquire_slot) a fence.acquire.sys, no re-read.
# Build and pack (CPU machine): BUILD=build_X make of tests/gpu/test_inproc and bench/bench_inproc
#   in each tree (+ build_c/tests/gpu/test_coll, build_e/bench/bench_fence), copied under main,
#   then bench/pack_bins.sh of them all; carry ["build/carry"].
# Predictions: fence.acquire.sys costs about one local ld.acquire (~0.5 us?) or less; the 7-post
# shape 7x serial -> ~1x. All tests pass. ZC 4 KB at 8 ranks: D, E -1..-3 us vs C; 4 ranks
# -0.3..-1; 2 ranks equal; F a further -0.2..-1 at 1 MB (its chunk waits).
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 30 build_e/bench/bench_fence > "$OUT/fence.log" 2>&1; echo "== bench_fence rc=$?"; cat "$OUT/fence.log"
timeout -k 5 150 build_c/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc_c.log" 2>&1
echo "== c test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_c.log" | cut -c1-300 | head -4
TEST_TIMEOUT_S=100 timeout -k 5 110 build_c/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== c test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_coll.log" | cut -c1-160 | head -3
for P in 4 8; do ip_row s26a ll${P}_c - build_c/bench/bench_inproc --ranks $P --kinds ord --sizes 4096,65536; done
for i in 1 2; do
  for v in c d e f; do
    for P in 8 4; do ip_row s26a zc${P}_$v$i - build_$v/bench/bench_inproc --ranks $P --kinds sym --zc --sizes 4096,1048576; done
  done
done
for v in c e f; do ip_row s26a zc2_$v - build_$v/bench/bench_inproc --ranks 2 --kinds sym --zc --sizes 4096,1048576; done
for v in f e d; do
  timeout -k 5 150 build_$v/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc_$v.log" 2>&1
  echo "== $v test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_$v.log" | cut -c1-300 | head -4
done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
