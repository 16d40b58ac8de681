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
# Usage (device, nvidia-h200-x2): OUT=... [PREBUILT=1: bench/pack_bins.sh build/lib/libmeld.so
#   build/tests/gpu/test_net, carry build/carry] bash bench/calls/x2_s36.sh
# Estimated wall: build ~100-120 s cold (0 with PREBUILT=1), test_torch.py 1,2 ~60-150 s (torch
# start-up and torch.compile per rank count), tp_mlp ~30-60 s, test_net ~40-90 s: ~250-400 s; every
# step capped by tl (bench/device_env.sh: the script ends by 570 s).
. "$(dirname "$0")/../device_env.sh"
# The inter-node transport: tcp, as when this call was prepared (since 0291438 the default "auto"
# takes the ibverbs transport wherever every rank can open an HCA; that transport has not run on a
# GPU yet, and test_net's prediction below is a loopback-TCP one).
export MELD_NET_TRANSPORT=tcp
build lib build/tests/gpu/test_net
# MELD_TIMEOUT_MS: with a GPU per rank test_torch.py passes its own environment to its ranks (15 s
# only where ranks share a GPU), and unset a wait's deadline is 300 s; 20 s leaves room for the
# ranks' uneven start-up (torch.compile) and makes a hang cost seconds.
MELD_TIMEOUT_MS=20000 GT_SPAWN_TIMEOUT_S=200 timeout -k 5 "$(tl 400)" python3 tests/gpu/test_torch.py --ranks 1,2 > "$OUT/test_torch.log" 2>&1
echo "== test_torch.py rc=$? at $(el) s"; grep -E "FAIL|PASSED|FAILED|== test_torch" "$OUT/test_torch.log" | cut -c1-300 | head -20
MELD_TIMEOUT_MS=20000 timeout -k 5 "$(tl 300)" python3 -m torch.distributed.run --nproc_per_node 2 python/examples/tp_mlp.py > "$OUT/tp_mlp.log" 2>&1
echo "== tp_mlp TP=2 rc=$? at $(el) s"; grep -E "^P=|rror" "$OUT/tp_mlp.log" | head -5
MELD_TIMEOUT_MS=5000 timeout -k 5 "$(tl 200)" build/tests/gpu/test_net > "$OUT/test_net.log" 2>&1
echo "== test_net rc=$? at $(el) s"; grep -E "FAIL|checks|bandwidth|PASSED" "$OUT/test_net.log" | cut -c1-300 | head -20
echo "== done at $(el) s"
