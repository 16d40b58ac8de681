#!/usr/bin/env bash
# p1_s22g.sh — ONE GPU, session 22 call 7. Changes since call 6: the acquire polls reverted (no
# gain: call 6 A B A B within 0.05 us); meld_gemm's split-K / stream-K workspace and AG+GEMM's
# gathered buffer grow stream-ordered (cudaMallocAsync / cudaFreeAsync): a cudaMalloc is an
# implicit synchronization between streams, so an in-process rank's first unfused GEMM+RS
# (meld_gemm allocating its split-K workspace while the peer's reduce-scatter kernel spun on
# the GPU) never got its own reduce-scatter started (call 6: the peer timed out).
# Prediction (before the run): every test passes, test_inproc's unfused GEMM+RS/AR included.
# Usage (device): OUT=... PREBUILT=1 bash bench/calls/p1_s22g.sh (carry build/tests/gpu)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
MELD_TIMEOUT_MS=3000 timeout -k 5 120 build/tests/gpu/test_inproc > "$OUT/test_inproc.log" 2>&1
echo "== test_inproc rc=$? at $(el) s"; grep -vE "back-to-back|graph \(" "$OUT/test_inproc.log" | cut -c1-200 | head -24
PREBUILT=1 MELD_TIMEOUT_MS=3000 TEST_TIMEOUT_S=150 timeout -k 5 250 tests/gpu/run.sh test_gemm test_coll test_gemm_rs \
  test_ag_gemm test_abort test_signal test_comm > "$OUT/tests_p1.log" 2>&1
echo "== GPU tests (1 rank) rc=$? at $(el) s"; grep -E "checks passed|FAIL|^== gpu" "$OUT/tests_p1.log" | cut -c1-160 | head -12
cd "$OUT" && tar czf logs.tgz *.log && rm -f *.log
