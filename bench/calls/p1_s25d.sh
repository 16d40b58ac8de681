#!/usr/bin/env bash
# p1_s25d.sh — ONE GPU, session 25 call 4. Carry: build/carry (test_inproc, bench_inproc).
# Call 3: everything passed but test_inproc at 8 ranks: a CE all-to-all's entry stalled on one
# rank, with 8 ranks x (1 + 4 side streams) = 40 streams on 32 hardware queues. Now ranks as
# threads sharing a GPU take n side streams such that (1 + n) x ranks fits the queues
# (CUDA_DEVICE_MAX_CONNECTIONS, which the harness sets to 32): 3 at 8 ranks.
# Prediction: test_inproc 2,3,4,8 all pass; CE rows at 4 ranks as call 3 (130 us at 64 MB),
# 8 ranks run.
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1 MELD_TIMEOUT_MS=3000
timeout -k 5 150 build/tests/gpu/test_inproc 8,2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 8,2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_inproc.log" | cut -c1-300 | head -6
ip() { ip_row s25d "$@"; }
M=build/bench/bench_inproc
ip ce8 X=1 $M --ranks 8 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
ip zc8 X=1 $M --ranks 8 --only all_gather --kinds sym --zc --sizes 1048576,16777216,67108864
ip ce4 X=1 $M --ranks 4 --only all_gather --kinds sym --ce --sizes 1048576,16777216,67108864
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
