#!/usr/bin/env bash
# run_all.sh — what `make test` runs: header, env-var list, install (pkg-config consumer), CPU
# tests, the same under ASan+UBSan, device compile checks, the GPU tests' sources through nvcc's
# front end, then the GPU tests when a GPU is present. Ends with "N passed, N failed".
set -u
cd "$(dirname "$0")/.."
rm -f build/tests/summary-*
mkdir -p build/tests
status=0
step() { echo "== make $1"; make --no-print-directory -j"$(nproc)" "$1" || status=1; }
make --no-print-directory -s test-header > build/tests/header.log 2>&1 && { cat build/tests/header.log; echo "2 0" > build/tests/summary-header; } || { cat build/tests/header.log; echo "0 1" > build/tests/summary-header; status=1; }
if tests/check_env_vars.sh > build/tests/env.log 2>&1; then cat build/tests/env.log; echo "1 0" > build/tests/summary-env
else cat build/tests/env.log; echo "0 1" > build/tests/summary-env; status=1; fi
tests/run.sh install tests/check_install.sh || status=1  # (make install, then a pkg-config consumer)
if [ -f /usr/include/cmocka.h ]; then
  step test-cpu
  step test-asan
  step test-tsan
else
  echo "== CPU tests SKIPPED: cmocka is not installed (apt-get install libcmocka-dev)"
fi
if make --no-print-directory test-device > build/tests/device.log 2>&1; then
  tail -n 3 build/tests/device.log; echo "1 0" > build/tests/summary-device
else
  cat build/tests/device.log; echo "0 1" > build/tests/summary-device; status=1
fi
if make --no-print-directory -s test-gpu-sources > build/tests/gpu-sources.log 2>&1; then
  tail -n 1 build/tests/gpu-sources.log; echo "1 0" > build/tests/summary-gpu-sources
else
  cat build/tests/gpu-sources.log; echo "0 1" > build/tests/summary-gpu-sources; status=1
fi
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  step test-gpu
else
  echo "== GPU tests SKIPPED: no GPU on this machine (nvidia-smi -L found none)"
fi
passed=0; failed=0
for f in build/tests/summary-*; do
  read -r p q < "$f"; passed=$((passed + p)); failed=$((failed + q))
done
[ "$status" -ne 0 ] && [ "$failed" -eq 0 ] && failed=1
echo "$passed passed, $failed failed"
[ "$failed" -eq 0 ]
