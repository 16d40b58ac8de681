#!/usr/bin/env bash
# p1_s25e.sh — ONE GPU, session 25 call 5. Carry: build/carry (B = build/: main at ff0d765;
# C = build_c/: B + the entry handshake's first pass reading up to 8 peers' posts at once
# (launch.cuh meld_args_verify: ZC, CE and the fused ops) + the any-P LL kernel's flat loops as
# a compile-time instantiation (FL: each kernel holds only the loops a call needs)).
# Prediction: C's tests pass; ZC 4 KB at 8 ranks -1..-3 us (7 serial round trips -> 1 in the
# first pass; the acquire pass stays serial), 4 ranks -0.5..-1.5, 2 ranks equal; LL lean at 4 / 8
# ranks -0.1..-0.5 us (less code on the path).
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 150 build_c/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== C test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-300 | head -4
TEST_TIMEOUT_S=100 timeout -k 5 110 build_c/tests/gpu/test_coll > "$OUT/test_coll.log" 2>&1
echo "== C test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL" "$OUT/test_coll.log" | cut -c1-160 | head -3
ip() { ip_row s25e "$1" - "${@:2}"; }
for i in 1 2; do
  for v in B C; do
    d=build/bench; [ $v = C ] && d=build_c/bench
    ip zc8_$v$i $d/bench_inproc --ranks 8 --kinds sym --zc --sizes 4096,1048576
    ip zc4_$v$i $d/bench_inproc --ranks 4 --kinds sym --zc --sizes 4096,1048576
    ip ll8_$v$i $d/bench_inproc --ranks 8 --kinds ord --sizes 4096,65536
    ip ll4_$v$i $d/bench_inproc --ranks 4 --kinds ord --sizes 4096,65536
  done
done
ip zc2_B build/bench/bench_inproc --ranks 2 --kinds sym --zc --sizes 4096,1048576
ip zc2_C build_c/bench/bench_inproc --ranks 2 --kinds sym --zc --sizes 4096,1048576
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
