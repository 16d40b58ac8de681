#!/usr/bin/env bash
# run.sh — builds and runs every GPU test (tests/gpu/*.cu) with short deadlines, so that a hang
# costs seconds. Multi-rank tests spawn their own ranks (one per GPU present).
# Usage: [PREBUILT=1] tests/gpu/run.sh [name ...]   (default: all). Logs go to build/tests/gpu/*.log
set -u
cd "$(dirname "$0")/../.."
export MELD_TIMEOUT_MS=${MELD_TIMEOUT_MS:-3000}
export MELD_BOOTSTRAP_TIMEOUT_MS=${MELD_BOOTSTRAP_TIMEOUT_MS:-30000}
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
names=("$@")
if [ ${#names[@]} -eq 0 ]; then
  for f in tests/gpu/*.cu; do names+=("$(basename "$f" .cu)"); done
  names+=(test_torch.py)  # the Python binding (skips itself where torch is missing)
  names+=(test_examples.sh) # the C examples (examples/run.sh at 1 and 2 ranks)
fi
bins=(); scripts=()
for n in "${names[@]}"; do
  case "$n" in *.py | *.sh) scripts+=("tests/gpu/$n") ;; *) bins+=("build/tests/gpu/$n") ;; esac
done
# PREBUILT=1: the binaries are there already (built elsewhere and carried); nothing is made.
if [ "${PREBUILT:-0}" != 1 ]; then
  make --no-print-directory -j"$(nproc)" "${bins[@]}" build/lib/libmeld.so examples || { echo "[  FAILED  ] 1 test(s): GPU tests did not build"; echo "0 1" > build/tests/summary-gpu; exit 1; }
fi
TEST_TIMEOUT_S=${TEST_TIMEOUT_S:-240} tests/run.sh gpu "${bins[@]}" "${scripts[@]}"
rc=$?
if [ "${MELD_SHARE_GPU:-0}" != 1 ] && [ "$(nvidia-smi -L 2>/dev/null | grep -c '^GPU')" = 1 ]; then
  echo "(one GPU: the multi-rank cases ran at one rank only (test_torch.py spawns 2 sharing it); tests/gpu/run_shared.sh 3 runs them at 3 ranks sharing it, run_shared.sh 4 test_net the emulated nodes)"
fi
exit $rc
