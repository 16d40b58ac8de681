#!/usr/bin/env bash
# p1_s25c.sh — ONE GPU, session 25 call 3. Carry: build/carry (test_inproc, test_coll, bench_inproc
# of main with exp/ce-fanout merged).
# New since call 2: PDL beside in-process peers where two grids of every rank fit (2 x ctas <=
# the rank's SM share; call 2 had it off, P = 2 lost 0.65 us); exp/ce-fanout merged (the CE
# copies from different peers on up to 4 side streams; call 2, 4 ranks, 32 queues: 64 MB
# 130.1-130.5 us vs 136.2-136.5 one stream, tests pass); test_inproc and bench_inproc load every
# module at start and ask for 32 hardware queues (call 2: 8 ranks' fused GEMM+RS stalled one
# rank's kernel start: a lazy module load is the suspect).
# Prediction: test_inproc 2,3,4 and 8 pass; test_coll (1 rank; CE at 2 rank processes) pass;
# P = 2 4 KB back to 2.3-2.7 us (PDL on); P = 4 4 KB lean 4.4-4.6 (PDL on at 1 CTA) vs generic
# 6.2-6.7; P = 8 4 KB lean 6.0-7.5 vs generic 12-13.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 150 build/tests/gpu/test_inproc 2,3,4,8 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4,8 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-300 | head -6
TEST_TIMEOUT_S=100 timeout -k 5 110 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_coll.log" | cut -c1-160 | head -3
TEST_COLL_ONLY=ce TEST_TIMEOUT_S=120 GT_SPAWN_TIMEOUT_S=110 timeout -k 5 130 tests/gpu/run_shared.sh 2 test_coll > "$OUT/p2_ce.log" 2>&1
echo "== test_coll CE at 2 shared processes rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2_ce.log" | cut -c1-200 | head -4
ip() { ip_row s25c "$@"; }
M=build/bench/bench_inproc
ip p2_lean X=1 $M --ranks 2 --kinds ord --sizes 4096,65536
ip p3_lean X=1 $M --ranks 3 --kinds ord --sizes 6144,196608
ip p3_gen MELD_COLL_LL_LEAN=0 $M --ranks 3 --kinds ord --sizes 6144,196608
for i in 1 2; do
  ip p4_lean$i X=1 $M --ranks 4 --kinds ord --sizes 4096,65536,262144
  ip p4_gen$i MELD_COLL_LL_LEAN=0 $M --ranks 4 --kinds ord --sizes 4096,65536,262144
done
ip p8_lean X=1 $M --ranks 8 --kinds ord --sizes 4096,65536
ip p8_gen MELD_COLL_LL_LEAN=0 $M --ranks 8 --kinds ord --sizes 4096,65536
ip ce4 X=1 $M --ranks 4 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
ip ce2 X=1 $M --ranks 2 --only all_gather --kinds sym --ce --sizes 4096,1048576,16777216,67108864
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
