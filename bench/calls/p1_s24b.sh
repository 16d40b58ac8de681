#!/usr/bin/env bash
# p1_s24b.sh — ONE GPU, session 24 call 2. Carry: build/carry (pack_bins of test_inproc,
# bench_inproc, test_coll).
# 1. test_inproc at 2, 3, 4 ranks as threads: call 1's test bugs fixed (the host reference buffer
#    at P > 2; the fused GEMM+RS at 128 rows per rank), and the new CE engine (copy engines pull
#    every peer's block; one-thread handshake kernels): all-gather / all-to-all on symmetric
#    sends, in place, 50 back-to-back + a graph of them, and mismatched counts through CE.
#    Prediction: all pass at 2, 3 and 4 ranks.
# 2. bench_inproc at 2 ranks, all-gather on symmetric buffers: --ce against --zc, 4 KB .. 64 MB.
#    Prediction (one GPU, peers' memory local): CE's fixed cost 8-14 us at 4 KB (two kernels,
#    fork, copies, join; ZC 5.3); at 64 MB CE within +-30% of ZC (a local copy engine moves
#    ~1.5-2.5 TB/s, 16 ZC CTAs ~2 TB/s here). Says nothing of NVLink (CE 387-391 vs SM 332-347).
# 3. test_coll at one rank (args->ce unset there: unchanged paths).
# Usage (device): OUT=... bash bench/calls/p1_s24b.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "ranks as threads|checks|FAIL|CE " "$OUT/test_inproc.log" | cut -c1-220 | head -24
bench/ab_inproc.sh s24b_zc "z" "z=build/bench" --ranks 2 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --zc
bench/ab_inproc.sh s24b_ce "c" "c=build/bench" --ranks 2 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --ce
bench/ab_inproc.sh s24b_zc "z" "z=build/bench" --ranks 2 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --zc
bench/ab_inproc.sh s24b_ce "c" "c=build/bench" --ranks 2 --only all_gather --sizes 4096,1048576,16777216,67108864 --kinds sym --ce
MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=150 timeout -k 5 200 tests/gpu/run.sh test_coll > "$OUT/tests_coll.log" 2>&1
echo "== test_coll (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_coll.log" | cut -c1-160 | head -6
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
