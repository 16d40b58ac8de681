#!/usr/bin/env bash
# p1_s30a.sh — ONE GPU, prepared at the end of session 29 (not run). (0) test_gemm: the tensor maps
# now come from one encoder call (27471b7, CPU-only); (1) test_inproc 2,3,4: the
# rank threads now start through gt_thread_comm (gpu_test.h; compiled only); (2) test_ring_attn
# 2,3,4,8 (8 ranks for the first time) and test_attn; (3) bench_attn's 8 suite rows with torch's
# backends in the same call (the default after session 29: 0.46-0.47 / 0.27 / 0.46-0.47 / 0.26-0.27 /
# 6.85-6.95 / 3.69-3.75 / 6.85-6.95 / 3.63-3.68 ms).
# Prediction: every test passes; bench within +-2% of session 29's call 9.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_gemm build/tests/gpu/test_inproc build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/bench/bench_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
TEST_TIMEOUT_S=150 timeout -k 5 170 build/tests/gpu/test_gemm > "$L/test_gemm.log" 2>&1
echo "== test_gemm rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_gemm.log" | cut -c1-300 | head -4
timeout -k 5 150 build/tests/gpu/test_inproc 2,3,4 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 2,3,4 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -6
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_attn.log" | cut -c1-300 | head -6
timeout -k 5 200 build/tests/gpu/test_ring_attn 2,3,4,8 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4,8 rc=$? at $(el) s"; grep -E "checks|FAIL" "$L/test_ring_attn.log" | cut -c1-300 | head -6
BENCH_SETTLE_MS=300 timeout -k 5 200 build/bench/bench_attn --json "$OUT/attn.jsonl" > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -E "^1," "$L/bench_attn.log"
BENCH_SETTLE_MS=300 timeout -k 5 200 python3 bench/attn_torch.py --json "$OUT/attn.jsonl" > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; grep -E "^1," "$L/attn_torch.log" | grep -v efficient
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
