#!/usr/bin/env bash
# p1_s24d.sh — ONE GPU, session 24 call 4. Carry: build/carry (test_inproc, bench_inproc).
# Call 3 refuted the hardware-queue hypothesis (32 connections failed alike). What failed:
# bench_inproc's FIRST CE call on a fresh comm (rank 1 waited 3 s for rank 0's entry; the rows
# still "passed": a failed CE call's copies run anyway), and test_inproc's first CE call of a
# graph's first launch. New hypothesis: a first peer copy, and a first launch of a graph with
# copy nodes, make the host thread wait for the device (lazy setup / upload) while the other
# rank's entry kernel spins on the same GPU. Changes: comm init makes one 16-byte copy from
# every peer (on the CE stream, waited for); the test and bench upload graphs before the
# barrier; both check the comm after CE calls (the data alone cannot tell).
# Prediction: test_inproc 2,3,4 passes; the CE rows run clean.
# Usage (device): OUT=... bash bench/calls/p1_s24d.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "ranks as threads|checks|FAIL|CE " "$OUT/test_inproc.log" | cut -c1-300 | head -16
for i in 1 2; do
  bench/ab_inproc.sh s24d_ce "c" "c=build/bench" --ranks 2 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --ce
  if grep -q "WARN\|rank [01]:" $OUT/ip_c1.log; then
    grep -h "WARN\|rank [01]:" $OUT/ip_c1.log | cut -c1-300 | head -3
    echo "-- again with CUDA_MODULE_LOADING=EAGER"
    CUDA_MODULE_LOADING=EAGER bench/ab_inproc.sh s24d_ce_eager "c" "c=build/bench" --ranks 2 --only all_gather --sizes 4096,67108864 --kinds sym --ce
    grep -h "WARN\|rank [01]:" $OUT/ip_c1.log | cut -c1-300 | head -3
  fi
  bench/ab_inproc.sh s24d_zc "z" "z=build/bench" --ranks 2 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --zc
done
bench/ab_inproc.sh s24d_ce4 "c" "c=build/bench" --ranks 4 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --ce
bench/ab_inproc.sh s24d_zc4 "z" "z=build/bench" --ranks 4 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --zc
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
