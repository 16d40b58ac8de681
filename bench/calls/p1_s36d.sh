#!/usr/bin/env bash
# p1_s36d.sh — ONE GPU, session 36 calls 5-6: the inter-node path's first run (src/ops/coll_net.cu,
# src/host/net.c): ranks as processes sharing the GPU (MELD_SHARE_GPU) with emulated nodes
# (MELD_NODE_ID): test_net at 2 nodes x 1 rank and 2 nodes x 2 ranks (run_shared.sh 4), then
# test_comm's emulated-nodes case (the net path built at init) at 2 ranks, test_coll at one rank.
# Call 5: all pass but test_net's in-place all_gather (a test bug: a memset on a non-blocking
# stream raced the legacy-stream copy of the own block). Call 6: fixed, and 3 nodes x 1 rank added.
# Prediction: all pass (first run of new device code: a hang would end at the 15 s deadline).
. "$(dirname "$0")/../device_env.sh"
PREBUILT=1 GT_SPAWN_TIMEOUT_S=240 timeout -k 5 300 tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"; grep -E "FAIL|checks|---|timeout after|every collective|PASSED|FAILED" "$OUT/test_net4.log" | cut -c1-300 | head -40
PREBUILT=1 timeout -k 5 200 tests/gpu/run_shared.sh 2 test_comm > "$OUT/test_comm2.log" 2>&1
echo "== run_shared 2 test_comm rc=$? at $(el) s"; grep -E "FAIL|checks|PASSED|FAILED" "$OUT/test_comm2.log" | cut -c1-300 | head -20
PREBUILT=1 timeout -k 5 200 tests/gpu/run.sh test_coll > "$OUT/test_coll.log" 2>&1
echo "== test_coll rc=$? at $(el) s"; grep -E "FAIL|checks|PASSED|FAILED" "$OUT/test_coll.log" | cut -c1-300 | head -10
echo "== done at $(el) s"
