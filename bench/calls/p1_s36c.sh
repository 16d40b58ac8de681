#!/usr/bin/env bash
# p1_s36c.sh — ONE GPU, session 36 calls 3-4: meld.nn (tensor-parallel linear layers whose forward
# and backward are the fused kernels) and torch.compile over meld's ops (torch.ops.meld.*),
# first runs: tests/gpu/test_torch.py at 1 and 2 (shared) ranks.
# Call 3: two defects (the ops' fake kernels read the rank count from the comm, and inductor's
# cache gave the 2-rank process the 1-rank graph; the bitwise gradient check at one rank, where
# split-K adds in arrival order). Call 4 after the mends.
# Prediction: every check passes (fullgraph compile in both modes; gradients within 2e-2 of fp32
# autograd, bitwise equal between save_gathered True and False).
. "$(dirname "$0")/../device_env.sh"
PREBUILT=1 timeout -k 5 500 tests/gpu/run.sh test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== tests/gpu/run.sh test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch|Error|error" "$OUT/test_torch.log" | cut -c1-400 | head -40
echo "== done at $(el) s"
