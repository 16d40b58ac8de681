#!/usr/bin/env bash
# p1_s37a.sh — ONE GPU, prepared in session 36 after its device time was spent (NOT run): the
# inter-node path after two CPU-only changes: the piece arithmetic moved into src/common/net.h
# (meld_net_piece, unit-tested; the same expression) and test_net's new all_reduce at a count
# that is not a multiple of the ranks (shorter or empty last parts: never run on a GPU before).
# Prediction: all pass at 2 x 1, 3 x 1, 2 x 2.
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net
GT_SPAWN_TIMEOUT_S=240 timeout -k 5 400 tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"; grep -E "FAIL|checks|bandwidth|PASSED|FAILED" "$OUT/test_net4.log" | cut -c1-300 | head -30
echo "== done at $(el) s"
