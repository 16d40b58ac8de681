#!/usr/bin/env bash
# run_shared.sh — the multi-rank GPU tests with P rank processes sharing each GPU
# (MELD_SHARE_GPU=1, GT_RANKS_PER_GPU=P; docs/DESIGN.md section 9): the protocol at P ranks where
# the machine has fewer GPUs (one GPU: P = 2..8). The processes' kernels take turns in time slices
# (~2.2 ms each), so waits get MELD_TIMEOUT_MS=15000 and the tests run 10-100x slower; timings
# printed there mean nothing. Session 18 found a 3-rank GEMM+RS/AR bug with `run_shared.sh 3 test_gemm_rs`.
# Usage: [PREBUILT=1] tests/gpu/run_shared.sh P [name ...]   (default: the multi-rank programs)
set -u
cd "$(dirname "$0")/../.."
P=${1:?usage: tests/gpu/run_shared.sh P [name ...]}; shift
case "$P" in [2-8]) ;; *) echo "run_shared.sh: P must be 2..8 (got $P)"; exit 2 ;; esac
names=("$@")
[ ${#names[@]} -eq 0 ] && names=(test_comm test_signal test_coll test_ag_gemm test_gemm_rs)
export MELD_SHARE_GPU=1 GT_RANKS_PER_GPU=$P MELD_TIMEOUT_MS=${MELD_TIMEOUT_MS:-15000}
export GT_SPAWN_TIMEOUT_S=${GT_SPAWN_TIMEOUT_S:-400} TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-420}
exec tests/gpu/run.sh "${names[@]}"
