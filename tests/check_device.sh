#!/usr/bin/env bash
# check_device.sh "NVCC FLAGS" FILE.cu... — compiles each device file for the target with
# ptxas verbose output and fails on spills, local memory, or ptxas performance warnings
# (C7508/C7509/C7510/C7511/C7515 and friends: setmaxnreg ignored, serialized wgmma, ...).
set -u
nvcc_cmd=$1; shift
bad=0
for f in "$@"; do
  out=$($nvcc_cmd -Xptxas -v -c "$f" -o /dev/null 2>&1) || { echo "$out"; echo "FAIL: $f does not compile"; bad=1; continue; }
  spills=$(echo "$out" | grep -E '[1-9][0-9]* bytes spill (stores|loads)')
  warn=$(echo "$out" | grep -E 'C75[0-9][0-9]|Potential Performance Loss')
  if [ -n "$spills$warn" ]; then
    echo "$out" | grep -E 'Compiling entry|spill|C75|Performance'
    echo "FAIL: $f: spills or ptxas performance warnings"; bad=1
  else
    n=$(echo "$out" | grep -c 'Compiling entry')
    echo "ok: $f ($n kernels, no spills)"
  fi
done
[ "$bad" -eq 0 ] && echo "[  PASSED  ] 1 test(s). (device code for sm_90a: no spills)"
exit $bad
