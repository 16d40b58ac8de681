#!/usr/bin/env bash
# p1_s36f.sh — ONE GPU, session 36 call 9: test_torch.py after its harness now shares
# tests/unit/pycheck.py (counts summed from the ranks), with a new case: torch.compile (graph
# breaks allowed) over a block of meld.nn layers, forward and backward, against eager.
# Call 10: the same after comm.all_to_allv (eager, and in the compiled step) was added.
# Prediction: all pass (~190 checks; call 10 ~210); the compiled meld.nn block within 1e-2 of eager.
. "$(dirname "$0")/../device_env.sh"
timeout -k 5 400 python3 tests/gpu/test_torch.py --ranks 1,2 > "$OUT/test_torch.log" 2>&1
echo "== test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch" "$OUT/test_torch.log" | cut -c1-400 | head -20
echo "== done at $(el) s"
