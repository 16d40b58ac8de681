#!/usr/bin/env bash
# p1_s24f.sh — ONE GPU, session 24 call 6. Carry: build/carry (test_inproc, bench_inproc, test_coll).
# The CE engine's copies from different peers now go to different side streams (one per peer,
# up to 4), so at P > 2 they may run on different copy engines at once (call 4, one stream:
# 4 ranks, 64 MB all-gather CE 136 us vs ZC 122; 2 ranks CE 70.4 vs ZC 97.5).
# Also (branch commit 2): the first copy goes on the caller's stream, the others on side streams:
# two ranks in place need no fork (3 operations a call instead of 8).
# Prediction: 4 ranks CE 64 MB 95-125 us; 2 ranks unchanged in graphs (still one fork: the own
# block); test_inproc's in-place CE case exercises the fork-less path.
# 1. test_inproc 2,4 (the device time left); 2. bench_inproc --ce / --zc at 4 and 2 ranks; 3. test_coll's CE
# variants at 2 rank processes sharing the GPU.
# Usage (device): OUT=... bash bench/calls/p1_s24f.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1
MELD_TIMEOUT_MS=3000 timeout -k 5 100 build/tests/gpu/test_inproc 2,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-200 | head -6
S=4096,1048576,16777216,67108864
bench/ab_inproc.sh s24f_ce4 "c" "c=build/bench" --ranks 4 --only all_gather --sizes $S --kinds sym --ce
bench/ab_inproc.sh s24f_zc4 "z" "z=build/bench" --ranks 4 --only all_gather --sizes $S --kinds sym --zc
TEST_COLL_ONLY=ce TEST_TIMEOUT_S=120 GT_SPAWN_TIMEOUT_S=110 timeout -k 5 130 tests/gpu/run_shared.sh 2 test_coll > "$OUT/p2_ce.log" 2>&1
echo "== test_coll CE at 2 shared processes rc=$? at $(el) s"; grep -E "^== gpu|FAIL|passed" "$OUT/p2_ce.log" | cut -c1-200 | head -4
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
