#!/usr/bin/env bash
# p1_s37c.sh — ONE GPU, session 37: meld_comm_split's first GPU run — test_net (run_shared 4:
# emulated nodes; splits into rail children across nodes and node children, an all_reduce on
# each), test_comm_args (one rank: split into a 1-rank child, no color, a bad color),
# test_torch.py at 1 and 2 ranks (comm.split). Again the inter-node path (call 3's library plus
# the split) with the thread timing.
# Prediction: every check passes; the thread timing as call 3 (AG 2x1 256 KiB ~2.1 GB/s).
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net build/tests/unit/test_comm_args
timeout -k 5 60 build/tests/unit/test_comm_args > "$OUT/test_comm_args.log" 2>&1
echo "== test_comm_args rc=$? at $(el) s"; grep -E "PASSED|FAILED|OK|ERROR" "$OUT/test_comm_args.log" | tail -8
GT_SPAWN_TIMEOUT_S=240 timeout -k 5 420 tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"
grep -E "FAIL|checks|bandwidth|PASSED|FAILED|timeout after|error|threads|split" "$OUT/test_net4.log" | cut -c1-300 | head -70
PREBUILT=1 timeout -k 5 400 tests/gpu/run.sh test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== tests/gpu/run.sh test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch|Error|error|passed" "$OUT/test_torch.log" | head -30
echo "== done at $(el) s"
