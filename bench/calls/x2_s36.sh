#!/usr/bin/env bash
# x2_s36.sh — TWO GPUs (nvidia-h200-x2), prepared in session 36 (not run): the Python binding and
# the inter-node path on two real GPUs, after bench/calls/x2_s23.sh, x2_ring.sh and x2_moe.sh.
# (1) tests/gpu/test_torch.py at 1 and 2 ranks (a GPU each: the fused ops over NVLink, meld.nn's
# gradients, torch.compile); (2) python/examples/tp_mlp.py at TP = 2: meld (ag_gemm, gelu, gemm_rs)
# against torch with NCCL + cuBLAS, 8192 tokens x 8192 hidden x 28672 ffn; (3) test_net at 2 ranks
# (emulated nodes, a GPU each: the proxy path without time slices) and its timing row.
# Predictions: tests pass; tp_mlp meld 1.05-1.15x torch's speed (the fused ops' measured gain over
# the sequential NCCL + cuBLAS path at these shapes, session 9); test_net's timing bounded by
# loopback TCP and the PCIe staging (a few GB/s).
. "$(dirname "$0")/../device_env.sh"
build lib build/tests/gpu/test_net
timeout -k 5 400 python3 tests/gpu/test_torch.py --ranks 1,2 > "$OUT/test_torch.log" 2>&1
echo "== test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch" "$OUT/test_torch.log" | cut -c1-300 | head -20
timeout -k 5 300 python3 -m torch.distributed.run --nproc_per_node 2 python/examples/tp_mlp.py > "$OUT/tp_mlp.log" 2>&1
echo "== tp_mlp TP=2 rc=$? at $(el) s"; grep -E "^P=|rror" "$OUT/tp_mlp.log" | head -5
MELD_TIMEOUT_MS=5000 timeout -k 5 200 build/tests/gpu/test_net > "$OUT/test_net.log" 2>&1
echo "== test_net rc=$? at $(el) s"; grep -E "FAIL|checks|bandwidth|PASSED" "$OUT/test_net.log" | cut -c1-300 | head -20
echo "== done at $(el) s"
