#!/usr/bin/env bash
# p1_s24c.sh — ONE GPU, session 24 call 3. Carry: build/carry (test_inproc, bench_inproc).
# Call 2: the CE engine's 16 cases passed at 2 and 3 ranks; its in-place all-gather did not
# (the peers' blocks were pulled from this rank's send offset; fixed: rank q's block at q * B
# of the recv); bench_inproc's CE rows timed out once at 64 MB (rank 1 waited 3 s for rank 0's
# entry). Hypothesis: ranks as threads share ONE context and its pool of hardware queues
# (CUDA_DEVICE_MAX_CONNECTIONS, default 8); with 3 streams per rank, two ranks' streams can
# alias one FIFO queue, and a host thread running a call ahead puts its call n+1 ahead of the
# peer's call n in that queue: a false dependency across ranks (a timeout, not a hang).
# Prediction: the 64 MB CE rows time out sometimes with the default (8) and never with 32.
# 1. test_inproc 2,3,4 (default connections), then with CUDA_DEVICE_MAX_CONNECTIONS=32.
# 2. bench_inproc --ce all-gather 16 / 64 MB: default connections twice, 32 twice.
# Usage (device): OUT=... bash bench/calls/p1_s24c.sh
. "$(dirname "$0")/../device_env.sh"
export PREBUILT=1
MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "ranks as threads|checks|FAIL|CE " "$OUT/test_inproc.log" | cut -c1-220 | head -24
CUDA_DEVICE_MAX_CONNECTIONS=32 MELD_TIMEOUT_MS=3000 timeout -k 5 200 build/tests/gpu/test_inproc 2,3,4 > "$OUT/test_inproc32.log" 2>&1
echo "== test_inproc 2,3,4 (32 connections) rc=$? at $(el) s"; grep -E "ranks as threads|checks|FAIL|CE " "$OUT/test_inproc32.log" | cut -c1-220 | head -24
for i in 1 2; do
  bench/ab_inproc.sh s24c_ce8 "c" "c=build/bench" --ranks 2 --only all_gather --sizes 16777216,67108864 --kinds sym --ce
  CUDA_DEVICE_MAX_CONNECTIONS=32 bench/ab_inproc.sh s24c_ce32 "c" "c=build/bench" --ranks 2 --only all_gather --sizes 16777216,67108864 --kinds sym --ce
  grep -h "WARN\|rank 0:" $OUT/ip_c1.log | cut -c1-200 | head -3
done
echo "== done at $(el) s"
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
