#!/usr/bin/env bash
# p1_s25f.sh — ONE GPU, session 25 call 6. Carry: build/carry (build_c/: the final code: call 5's C
# with copies back on the run-time flat choice (FL 2), sums on FL 1 / 0).
# Build and pack (CPU machine): make -j2 BUILD=build_c build_c/tests/gpu/test_inproc
#   build_c/tests/gpu/test_coll build_c/bench/bench_inproc && bench/pack_bins.sh build_c/tests/gpu/test_inproc
#   build_c/tests/gpu/test_coll build_c/bench/bench_inproc   (then carry ["build/carry"])
# test_inproc also has an all-to-all-v with equal outgoing, unequal incoming blocks (the flat
# receive must not apply: the receive condition fix).
# Prediction: tests pass; LL 4 ranks 64 KB all-gather back to ~4.3 us (call 5 B), sums as C.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 150 build_c/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-300 | head -4
TEST_TIMEOUT_S=100 timeout -k 5 110 build_c/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_coll.log" | cut -c1-160 | head -3
for P in 4 8; do ip_row s25f ll$P - build_c/bench/bench_inproc --ranks $P --kinds ord --sizes 4096,65536; done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
