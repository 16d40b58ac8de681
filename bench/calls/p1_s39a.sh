#!/usr/bin/env bash
# p1_s39a.sh — ONE GPU, session 39: why 2 x 2 ranks as THREADS timed out in the hierarchy's node
# comm (session 38; the hierarchy was then switched off for thread ranks). Hypothesis: hardware
# queues. Ranks that are threads of one process spin for each other, so no two of their streams
# may share one of the process's CUDA_DEVICE_MAX_CONNECTIONS queues; test_net's thread part ran
# with the default 8, and each hierarchy comm added a protocol side stream (4 ranks x 5 streams).
# Now: the hierarchy's comms share their parent's side stream, the hierarchy is on for threads
# again, test_net's thread part asks for 32 queues (gt_inproc_env), and meld warns when thread
# ranks' streams exceed the queues.
# Steps: (1) thread timings only, CUDA_DEVICE_MAX_CONNECTIONS=8 (the warning; prediction: the
# 2 x 2 hierarchical case may still time out: 4 x 3 streams on 8 queues); (2) the same with 32
# (prediction: every thread case passes, hierarchical sums bitwise); (3) run_shared 4 test_net
# whole (processes: the shared side stream in the hierarchy; prediction: passes as in s38);
# (4) test_comm at one rank.
# Usage (device, nvidia-h200): OUT=... PREBUILT=1 bash bench/calls/p1_s39a.sh  (carry build/carry:
#   bench/pack_bins.sh build/tests/gpu/test_net build/tests/gpu/test_comm build/lib/libmeld.so)
# Estimated wall: (1) <= 120 s, (2) ~60 s, (3) ~200 s, (4) ~20 s.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net build/tests/gpu/test_comm
export MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=4
CUDA_DEVICE_MAX_CONNECTIONS=8 TEST_NET_THREADS_ONLY=1 MELD_TIMEOUT_MS=8000 \
  timeout -k 5 "$(tl 130)" build/tests/gpu/test_net > "$OUT/threads_q8.log" 2>&1
echo "== (1) threads, 8 queues rc=$? at $(el) s"
grep -E "FAIL|threads:|^---|WARN.*queues|checks" "$OUT/threads_q8.log" | cut -c1-260 | head -30
TEST_NET_THREADS_ONLY=1 MELD_TIMEOUT_MS=8000 timeout -k 5 "$(tl 150)" build/tests/gpu/test_net > "$OUT/threads_q32.log" 2>&1
echo "== (2) threads, 32 queues rc=$? at $(el) s"
grep -E "FAIL|threads:|^---|WARN.*queues|checks" "$OUT/threads_q32.log" | cut -c1-260 | head -30
unset MELD_SHARE_GPU GT_RANKS_PER_GPU
GT_SPAWN_TIMEOUT_S=300 timeout -k 5 "$(tl 330)" tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== (3) run_shared 4 test_net rc=$? at $(el) s"
grep -E "FAIL|checks|PASSED|FAILED|timeout after|threads:|^---" "$OUT/test_net4.log" | cut -c1-200 | head -60
MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 60)" tests/gpu/run.sh test_comm > "$OUT/test_comm.log" 2>&1
echo "== (4) test_comm rc=$? at $(el) s"; grep -E "checks|FAIL" "$OUT/test_comm.log" | head -5
echo "== done at $(el) s"
