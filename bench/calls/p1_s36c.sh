#!/usr/bin/env bash
# p1_s36c.sh — ONE GPU, session 36 call 3: meld.nn (tensor-parallel linear layers whose forward
# and backward are the fused kernels) and torch.compile over meld's ops (torch.ops.meld.*),
# first runs: tests/gpu/test_torch.py at 1 and 2 (shared) ranks.
# Prediction: every check passes (fullgraph compile in both modes; gradients within 2e-2 of fp32
# autograd, bitwise equal between save_gathered True and False).
. "$(dirname "$0")/../device_env.sh"
PREBUILT=1 timeout -k 5 500 tests/gpu/run.sh test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== tests/gpu/run.sh test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch|Error|error" "$OUT/test_torch.log" | cut -c1-400 | head -40
echo "== done at $(el) s"
