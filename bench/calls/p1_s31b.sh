#!/usr/bin/env bash
# p1_s31b.sh — ONE GPU, session 31: the first run of meld_moe_dispatch_gemm (test_moe 1,2,3,4:
# routing kernel + fused dispatch / grouped GEMM kernel, ranks as threads), and session 30's
# CPU-only mends (test_attn, test_ring_attn 2,3,4,8, test_inproc 2).
# Prediction: test_moe may fail on its first run (new kernels); the others pass.
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_moe build/tests/gpu/test_attn build/tests/gpu/test_ring_attn build/tests/gpu/test_inproc
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
for p in 1 2 3 4; do
  timeout -k 5 90 build/tests/gpu/test_moe $p > "$L/test_moe_$p.log" 2>&1
  echo "== test_moe $p rc=$? at $(el) s"; grep -E "PASSED|FAILED|FAIL|rror|expected failure" "$L/test_moe_$p.log" | cut -c1-400 | head -12
done
timeout -k 5 120 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "PASSED|FAILED|FAIL" "$L/test_attn.log" | cut -c1-300 | head -5
timeout -k 5 240 build/tests/gpu/test_ring_attn 2,3,4,8 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2,3,4,8 rc=$? at $(el) s"; grep -E "PASSED|FAILED|FAIL" "$L/test_ring_attn.log" | cut -c1-300 | head -5
timeout -k 5 120 build/tests/gpu/test_inproc 2 > "$L/test_inproc.log" 2>&1
echo "== test_inproc 2 rc=$? at $(el) s"; grep -E "PASSED|FAILED|FAIL" "$L/test_inproc.log" | cut -c1-300 | head -5
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
