#!/usr/bin/env bash
# p1_s37d.sh — ONE GPU, session 37: the hierarchical inter-node collectives (MELD_NET_HIER,
# default on: all_reduce = reduce_scatter in the node + all_reduce across nodes + all_gather in
# the node; reduce_scatter / all_gather with strided permutations) first run: run_shared 4
# test_net (2 x 2 hierarchical and flat, 2 x 1, 3 x 1, splits, tp ops), then the thread timing
# 2 x 2 hierarchical vs flat. Also the review mends (CPU-only until then): reduced-before-credits,
# the scratch kept for a captured graph (test_net grows it between graph replays), NULL child.
# Also MELD_GEMM_DETERMINISTIC's plan option (test_gemm test_deterministic: 256 x 512 x 16384,
# default split 3+ pieces; deterministic <= 2, 20 runs bitwise equal).
# Prediction: all pass; 2 x 2 threads all_reduce hierarchical 1.3-1.8x faster than flat (half
# the bytes cross "nodes"; the in-node steps are same-GPU copies), all_gather 1.2-1.6x.
# Usage (device, nvidia-h200): OUT=... [PREBUILT=1: bench/pack_bins.sh build/tests/gpu/test_net
#   build/tests/gpu/test_gemm, carry build/carry] bash bench/calls/p1_s37d.sh
# Estimated wall: build ~100-120 s cold (0 with PREBUILT=1), test_gemm ~30-60 s, run_shared 4 test_net
# ~90-150 s (session 37's 2 x 2 runs, now also hierarchical + flat and 9 thread timings): ~250-330 s;
# every step capped by tl (bench/device_env.sh: the script ends by 570 s).
. "$(dirname "$0")/../device_env.sh"
# The inter-node transport: tcp, as when this call was prepared (since 0291438 the default "auto"
# takes the ibverbs transport wherever every rank can open an HCA; that transport has not run on a
# GPU yet, and the predictions below are loopback-TCP ones).
export MELD_NET_TRANSPORT=tcp
build lib build/tests/gpu/test_net build/tests/gpu/test_gemm
MELD_TIMEOUT_MS=5000 TEST_TIMEOUT_S=140 timeout -k 5 "$(tl 150)" tests/gpu/run.sh test_gemm > "$OUT/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks passed|FAIL|deterministic" "$OUT/test_gemm.log" | head -8
GT_SPAWN_TIMEOUT_S=300 timeout -k 5 "$(tl 420)" tests/gpu/run_shared.sh 4 test_net > "$OUT/test_net4.log" 2>&1
echo "== run_shared 4 test_net rc=$? at $(el) s"
grep -E "FAIL|checks|PASSED|FAILED|timeout after|error|threads|split|^---" "$OUT/test_net4.log" | cut -c1-260 | head -90
echo "== done at $(el) s"
