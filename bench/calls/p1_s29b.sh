#!/usr/bin/env bash
# p1_s29b.sh — ONE GPU, session 29: the first run of meld_attention (flash-attention forward, the
# ring attention's compute core): test_attn, then bench_attn on the ring-attention suite shapes
# (B 1, H 32, HKV 32 / 8, S 4096 / 16384, causal and not; sustained, settle 200 ms) and torch's
# SDPA backends on the same shapes (bench/attn_torch.py), a table each.
# Floor: an H200 at its 700 W cap runs dense bf16 wgmma at ~660-780 TFLOP/s (GEMM engine, cuBLAS).
# Prediction: pipe0 (no overlap of softmax with the wgmmas, 2 stages): 330-450 TFLOP/s non-causal at S 16384,
# 250-380 causal; pipe1 (FA3 intra-warpgroup overlap, 3 stages) +10..+25%; pipe2 (+ ping-pong of the
# warpgroups) +0..+10% over pipe1; torch flash (FA2) 330-420, cuDNN 500-650.
# Usage (device): bash bench/calls/p1_s29b.sh  (or build here, bench/pack_bins.sh, carry build/carry,
# PREBUILT=1)
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_attn build/bench/bench_attn
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_attn > "$L/test_attn.log" 2>&1
echo "== test_attn rc=$? at $(el) s"; grep -E "checks|FAIL|PASSED|FAILED" "$L/test_attn.log" | cut -c1-300 | head -12
grep -E "rel err" "$L/test_attn.log" | cut -c1-160 | head -20
BENCH_ATTN_AB=MELD_ATTN_PIPE=1,MELD_ATTN_PIPE=0,MELD_ATTN_PIPE=2 BENCH_SETTLE_MS=200 timeout -k 5 200 build/bench/bench_attn --json "$OUT/attn.jsonl" ${BENCH_ARGS:-} > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -v "rel err" "$L/bench_attn.log" | tail -26
BENCH_SETTLE_MS=200 timeout -k 5 200 python3 bench/attn_torch.py --json "$OUT/attn.jsonl" ${BENCH_ARGS:-} > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; tail -30 "$L/attn_torch.log"
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
