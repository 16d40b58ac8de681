#!/usr/bin/env bash
# p1_s25a.sh — ONE GPU, session 25 call 1. Carry: build/carry (main's test_inproc, bench_inproc,
# test_coll, and exp/ce-fanout's three under build/fan/).
# (A) main: the LL kernel's lean instantiation for any P (coll_ll<-1>: 8-byte units, 32-bit
#     indices, P at run time; MELD_COLL_LL_LEAN=1 default, 0 generic, 2 = any-P kernel at P = 2
#     too) and the sums' loop restructured for every instantiation (each peer's U lines polled
#     together, the own operand added in rank order after the next peer's polls issued; P > 2
#     polled one line at a time before). The any-P kernel also polls across streams: copies
#     with equal incoming streams use one index space over them (ll_flat; also the sends of
#     equal outgoing streams, every op), sums of one unit
#     per thread poll up to 8 peers at once. test_inproc now has 8-byte-block counts (lean).
#     Prediction: tests pass; P = 3 / 4, 4 KB graph rows: lean 0.5-1.5 us below generic
#     (generic P = 3 5.58 / 4.68 / 4.63 us AG / RS / AR, P = 4 6.80 / 6.03 / 5.81, session 24);
#     P = 2: lean (SP = 2) within +-0.1 us of the old kernel (fan's binary = session 24's LL);
#     any-P at P = 2 +0..0.2 us over SP = 2; P = 8 4 KB: lean 2-4 us below generic.
# (B) exp/ce-fanout: test_inproc 2,4; CE 64 MB all-gather at 4 ranks, fan vs main, alternating
#     (prediction: fan 95-125 us vs main ~136).
# Usage (device): OUT=... bash bench/calls/p1_s25a.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 150 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== main test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-200 | head -6
TEST_TIMEOUT_S=100 timeout -k 5 110 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== main test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/test_coll.log" | cut -c1-160 | head -5
# ip NAME ENV BIN ARGS...: one bench_inproc run with env VAR=VAL (or -), summary line
ip() { ip_row s25a "$@"; }
M=build/bench/bench_inproc F=build/fan/bench_inproc
for P in 4 3; do
  S=$([ $P = 3 ] && echo 6144,196608 || echo 4096,65536,262144)
  for i in 1 2; do
    ip p${P}_lean$i MELD_COLL_LL_LEAN=1 $M --ranks $P --kinds ord --sizes $S
    ip p${P}_gen$i MELD_COLL_LL_LEAN=0 $M --ranks $P --kinds ord --sizes $S
    [ $i = 1 ] && ip p${P}_old$i - $F --ranks $P --kinds ord --sizes $S
  done
done
for i in 1 2; do
  ip p2_sp2_$i MELD_COLL_LL_LEAN=1 $M --ranks 2 --kinds ord --sizes 4096,65536
  ip p2_old$i - $F --ranks 2 --kinds ord --sizes 4096,65536
  ip p2_any$i MELD_COLL_LL_LEAN=2 $M --ranks 2 --kinds ord --sizes 4096,65536
done
echo "== (A) done at $(el) s"
timeout -k 5 100 build/fan/test_inproc 2,4 > "$OUT/fan_test_inproc.log" 2>&1
echo "== fan test_inproc 2,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/fan_test_inproc.log" | cut -c1-200 | head -6
for i in 1 2; do
  ip ce4_fan$i - $F --ranks 4 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
  ip ce4_main$i - $M --ranks 4 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
done
ip zc4_main - $M --ranks 4 --only all_gather --kinds sym --zc --sizes 1048576,16777216,67108864
[ -x build/tests/gpu/test_inproc ] && { timeout -k 5 100 build/tests/gpu/test_inproc 8 > "$OUT/test_inproc8.log" 2>&1; echo "== main test_inproc 8 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc8.log" | cut -c1-200 | head -4; }
ip p8_lean - $M --ranks 8 --kinds ord --sizes 4096,65536
ip p8_gen MELD_COLL_LL_LEAN=0 $M --ranks 8 --kinds ord --sizes 4096,65536
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
