#!/usr/bin/env bash
# p1_s25b.sh — ONE GPU, session 25 call 2. Carry: build/carry (main's GPU tests and bench_inproc;
# exp/ce-fanout's test_inproc and bench_inproc under build/fan/).
# Call 1 found: (1) the flat send broke an in-place sum (unfused GEMM+AR at 3 ranks, rank 1):
# now off where send and recv overlap; (2) LL timeouts at P = 4 (all-reduce 256 KB, 32 CTAs a
# rank) and P = 8 (64 KB, 16 CTAs) with ranks as threads on one GPU, old binary too: PDL lets a
# rank's next grid take SMs that a peer's current grid needs; now no PDL when ranks of one
# process share the GPU (comm->gpu_share); (3) the P = 2 reduce loop restructure cost
# +0.15..0.24 us: P = 2 keeps the old loop; (4) the first CE call at P = 8 stalled at entry
# (default 8 hardware queues, 16 streams), and the branch's 4-rank CE (5 streams a rank) timed
# out: both tried here with CUDA_DEVICE_MAX_CONNECTIONS=32.
# New since call 1 also: the LL argument check reads up to 8 peers' posts together (was one round
# trip per peer), the any-P kernel without run-time modulo in its sums.
# Also every GPU test at one rank and 3 at 2 rank processes sharing the GPU (comm.h changed).
# Prediction: every test passes (test_inproc 2,3,4 and 8 too); bench rows all complete (no PDL: +0.2..0.4 us vs
# call 1 at P > 2); lean P = 2 back to the old kernel's figures (2.28 / 2.41 us RS / AR 4 KB);
# MELD_COLL_LL_FLAT=0 vs 1 at P = 2 (any-P) / 4 / 8 says what the flat loops give.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 150 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== main test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-200 | head -4
CUDA_DEVICE_MAX_CONNECTIONS=32 timeout -k 5 100 build/tests/gpu/test_inproc 8 > "$OUT/test_inproc8.log" 2>&1
echo "== main test_inproc 8 (32 connections) rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc8.log" | cut -c1-200 | head -3
TEST_TIMEOUT_S=150 timeout -k 5 250 tests/gpu/run.sh test_gemm test_coll test_gemm_rs test_ag_gemm test_abort test_signal \
  test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-160 | head -12
TEST_TIMEOUT_S=150 GT_SPAWN_TIMEOUT_S=140 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_abort test_gemm_rs test_ag_gemm \
  > "$OUT/p2.log" 2>&1
echo "== P=2 shared processes rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2.log" | head -6
ip() { ip_row s25b "$@"; }
M=build/bench/bench_inproc F=build/fan/bench_inproc
for i in 1 2; do
  ip p2_sp2_$i MELD_COLL_LL_LEAN=1 $M --ranks 2 --kinds ord --sizes 4096,65536
  ip p2_old$i MELD_COLL_PDL=0 $F --ranks 2 --kinds ord --sizes 4096,65536
done
ip p2_any MELD_COLL_LL_LEAN=2 $M --ranks 2 --kinds ord --sizes 4096,65536
ip p2_anynf "MELD_COLL_LL_LEAN=2 MELD_COLL_LL_FLAT=0" $M --ranks 2 --kinds ord --sizes 4096,65536
for i in 1 2; do
  ip p4_lean$i MELD_COLL_LL_LEAN=1 $M --ranks 4 --kinds ord --sizes 4096,65536,262144
  ip p4_nf$i MELD_COLL_LL_FLAT=0 $M --ranks 4 --kinds ord --sizes 4096,65536,262144
  ip p4_gen$i MELD_COLL_LL_LEAN=0 $M --ranks 4 --kinds ord --sizes 4096,65536,262144
done
ip p8_lean MELD_COLL_LL_LEAN=1 $M --ranks 8 --kinds ord --sizes 4096,65536
ip p8_nf MELD_COLL_LL_FLAT=0 $M --ranks 8 --kinds ord --sizes 4096,65536
ip p8_gen MELD_COLL_LL_LEAN=0 $M --ranks 8 --kinds ord --sizes 4096,65536
echo "== (A) done at $(el) s"
CUDA_DEVICE_MAX_CONNECTIONS=32 timeout -k 5 100 build/fan/test_inproc 2,4 > "$OUT/fan_test_inproc.log" 2>&1
echo "== fan test_inproc 2,4 (32 connections) rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/fan_test_inproc.log" | cut -c1-200 | head -3
for i in 1 2; do
  ip ce4_fan$i CUDA_DEVICE_MAX_CONNECTIONS=32 $F --ranks 4 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
  ip ce4_main$i CUDA_DEVICE_MAX_CONNECTIONS=32 $M --ranks 4 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
