#!/usr/bin/env bash
# p1_s20b.sh — ONE GPU, session 20 call 2: every GPU test program at one rank on this session's
# library (the trace's event index is now an atomic add: several recorders per CTA), then
# session 19's prepared p1_s19j.sh (the decode suite with and without an idle pause before each
# shape; its prediction is written there).
# Usage (device): OUT=... bash bench/calls/p1_s20b.sh   (builds here)
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib $(ls tests/gpu/*.cu | sed 's|tests/gpu/\(.*\)\.cu|build/tests/gpu/\1|') build/bench/bench_gemm_rs
PREBUILT=1 TEST_TIMEOUT_S=240 tests/gpu/run.sh > "$OUT/tests.log" 2>&1
echo "== GPU tests rc=$? at $(el) s"; grep -E "checks passed|^== gpu|FAIL" "$OUT/tests.log" | head -20
PREBUILT=1 bash bench/calls/p1_s19j.sh
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log *.jsonl 2>/dev/null && rm -f *.log
