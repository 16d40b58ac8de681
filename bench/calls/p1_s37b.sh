#!/usr/bin/env bash
# p1_s37b.sh — ONE GPU, session 37: the inter-node collectives as ONE kernel a call (chunk streams
# per pair, 4 slots with credits, a feeder CTA owning the proxy ring; all_to_allv across nodes
# now supported), emulated nodes (ranks as processes sharing the H200), then the timing at three
# chunk sizes.
# Also ranks as THREADS of one process (cfg.node_id; kernels concurrent, no time slices) timing
# all_gather / all_reduce at 3 chunk sizes, 2x1 and 2x2, with sampled output checks.
# Prediction: 2x1, 3x1, 2x2 collectives pass (incl. the new all_to_allv case), the tp ops pass,
# a missing rank ends in MELD_ERR_TIMEOUT; all_gather 64 MiB at 2 ranks 1.5-3 GB/s bus (session
# 36: 0.46 GB/s with one launch per 1 MiB chunk), better at 256 KiB / 1 MiB than at 64 KiB.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net
unset MELD_TIMEOUT_MS
GT_SPAWN_TIMEOUT_S=240 timeout -k 5 420 tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"
grep -E "FAIL|checks|bandwidth|PASSED|FAILED|timeout after|error|threads" "$OUT/test_net4.log" | cut -c1-300 | head -60
echo "== done at $(el) s"
