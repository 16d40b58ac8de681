#!/usr/bin/env bash
# p1_s36b.sh — ONE GPU, session 36 call 2: the Python binding after its per-call trim (torch's raw
# current stream, device objects made once) and a comm from a torch.distributed group;
# test_torch.py at 1 and 2 (shared) ranks, --bench, and python/examples/tp_mlp.py at one rank
# (meld vs torch + NCCL; P = 1: two GEMMs and a copy) and at 2 ranks sharing the GPU (meld only).
# Prediction: all pass; the 4 KB all-reduce's Python cost 15.7 -> ~12 us a call; tp_mlp at
# P = 1 meld within +-3% of torch (both ~2 GEMMs of 8192 x 28672 x 8192: ~11-12 ms).
. "$(dirname "$0")/../device_env.sh"
PREBUILT=1 timeout -k 5 400 tests/gpu/run.sh test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== tests/gpu/run.sh test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch|Error|error" "$OUT/test_torch.log" | head -40
timeout -k 5 200 python3 tests/gpu/test_torch.py --ranks 1 --bench > "$OUT/pybench.log" 2>&1
echo "== --bench rc=$? at $(el) s"; grep -E "PYBENCH|FAIL|rror" "$OUT/pybench.log" | head -20
timeout -k 5 200 python3 -m torch.distributed.run --nproc_per_node 1 python/examples/tp_mlp.py > "$OUT/tp_mlp_1.log" 2>&1
echo "== tp_mlp P=1 rc=$? at $(el) s"; tail -5 "$OUT/tp_mlp_1.log"
MELD_TIMEOUT_MS=20000 timeout -k 5 200 python3 -m torch.distributed.run --nproc_per_node 2 python/examples/tp_mlp.py --tokens 2048 --iters 5 > "$OUT/tp_mlp_2.log" 2>&1
echo "== tp_mlp P=2 shared rc=$? at $(el) s"; tail -5 "$OUT/tp_mlp_2.log"
echo "== done at $(el) s"
