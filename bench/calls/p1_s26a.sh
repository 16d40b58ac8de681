#!/usr/bin/env bash
# p1_s26a.sh — ONE GPU, session 26 call 1. Two builds carried (build/carry/bins.tar.xz):
#   build_c: main at 25ee858 (session 25's final any-P selection: copies FL 2, sums FL 1 / 0;
#            the all-to-all-v case with equal outgoing, unequal incoming blocks; the mend);
#   build_d: branch exp/acq-par rebased on it (entry acquires spread over a CTA's threads, P > 2).
# Build and pack (CPU machine): make -j2 BUILD=build_c build_c/tests/gpu/test_inproc
#   build_c/tests/gpu/test_coll build_c/bench/bench_inproc; on the branch make -j2 BUILD=build_d
#   build_d/tests/gpu/test_inproc build_d/bench/bench_inproc (copied here); then bench/pack_bins.sh
#   build_c/tests/gpu/test_inproc build_c/tests/gpu/test_coll build_c/bench/bench_inproc
#   build_d/tests/gpu/test_inproc build_d/bench/bench_inproc; carry ["build/carry"].
# Predictions: C tests pass (a2av case included); LL 4 ranks 64 KB all-gather ~4.3 us, sums as
# call 5's C. D tests pass; ZC 4 KB at 8 ranks -1..-3 us vs C, 4 ranks -0.3..-1, 1 MB equal.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
for v in c d; do
  timeout -k 5 150 build_$v/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc_$v.log" 2>&1
  echo "== $v test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc_$v.log" | cut -c1-300 | head -4
done
TEST_TIMEOUT_S=100 timeout -k 5 110 build_c/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== c test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_coll.log" | cut -c1-160 | head -3
for P in 4 8; do ip_row s26a ll${P}_c - build_c/bench/bench_inproc --ranks $P --kinds ord --sizes 4096,65536; done
for i in 1 2; do
  for v in c d; do
    for P in 8 4; do ip_row s26a zc${P}_$v$i - build_$v/bench/bench_inproc --ranks $P --kinds sym --zc --sizes 4096,1048576; done
  done
done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
