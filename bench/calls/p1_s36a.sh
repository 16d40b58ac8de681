#!/usr/bin/env bash
# p1_s36a.sh — ONE GPU, session 36 call 1: the Python binding (python/meld) for the first time.
# tests/gpu/test_torch.py at 1 rank and 2 ranks sharing the GPU (MELD_SHARE_GPU), then --bench at
# one rank (the binding's host cost per call vs a CUDA graph of the same calls).
# Prediction: every check passes; the binding costs ~8-15 us of Python a call (eager 4 KB
# all-reduce bounded by it), meld.gemm 8192^3 eager = graph and within 5% of torch.matmul.
. "$(dirname "$0")/../device_env.sh"
python3 -c "import torch, sys; print('torch', torch.__version__, 'cuda', torch.version.cuda, sys.version.split()[0])"
python3 - <<'PY'
import sys; sys.path.insert(0, "python")
import torch, meld
torch.zeros(1, device="cuda")
maps = open("/proc/self/maps").read()
print("meld", meld.library_path, "version", meld.version())
print("cudart loaded:", sorted({l.split()[-1] for l in maps.splitlines() if "libcudart" in l}))
PY
PREBUILT=1 timeout -k 5 400 tests/gpu/run.sh test_torch.py > "$OUT/test_torch.log" 2>&1
echo "== tests/gpu/run.sh test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch|Error|error" "$OUT/test_torch.log" | head -40
timeout -k 5 200 python3 tests/gpu/test_torch.py --ranks 1 --bench > "$OUT/pybench.log" 2>&1
echo "== --bench rc=$? at $(el) s"; grep -E "PYBENCH|FAIL|rror" "$OUT/pybench.log" | head -20
echo "== done at $(el) s"
