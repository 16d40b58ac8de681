#!/usr/bin/env bash
# x2_ring.sh — TWO GPUs (nvidia-h200-x2), prepared in session 30 (not run): the ring attention's
# first 2-GPU figures, after bench/calls/x2_s23.sh (issues 5-7). (1) test_ring_attn 2 (a GPU per
# rank thread: the pushes cross NVLink); (2) bench_ring_attn --ranks 2 --long (fused / gathered /
# compute-only / zigzag; comm CTAs 4 and 16 against 8); (3) torch's context parallelism on the same
# rows (bench/ring_attn_torch.py, rotate allgather and alltoall), the BENCH peer.
# Prediction: tests pass; fused 1.00-1.05x compute-only (on its own GPU a rank's kernel has every
# SM; S 4096 MHA consumes ~140 GB/s of ~350 pushed by 8 CTAs), gathered 1.10-1.20x, zigzag causal
# 1.0-1.1x compute; torch CP 1.5-3x meld's time (one rank: 0.69-0.79 ms at S 4096 vs 0.26-0.47).
# Usage (device, nvidia-h200-x2): OUT=... [PREBUILT=1: bench/pack_bins.sh build/tests/gpu/test_ring_attn
#   build/bench/bench_ring_attn, carry build/carry] bash bench/calls/x2_ring.sh
# Estimated wall: build ~100-120 s cold (0 with PREBUILT=1), test_ring_attn 2 ~10-20 s, bench_ring_attn
# --long ~40-80 s, each torch CP run ~40-80 s (start-up, 8 rows): ~250-350 s; every step capped by tl
# (bench/device_env.sh: the script ends by 570 s).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_ring_attn build/bench/bench_ring_attn
# (MELD_TIMEOUT_MS reaches neither meld program: their comms set timeout_ms themselves, 5 s in
# test_ring_attn and 20 s in bench_ring_attn, so a hang there costs those and `timeout`)
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 "$(tl 150)" build/tests/gpu/test_ring_attn 2 > "$L/test_ring_attn.log" 2>&1
echo "== test_ring_attn 2 rc=$? at $(el) s"; grep -E "checks|FAIL|rror|GPU" "$L/test_ring_attn.log" | cut -c1-300 | head -8
BENCH_RING_AB="MELD_RING_ATTN_COMM_CTAS=4,MELD_RING_ATTN_COMM_CTAS=16" BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 300)" \
  build/bench/bench_ring_attn --ranks 2 --long --json "$OUT/ring_attn.jsonl" > "$L/bench_ring_attn2.log" 2>&1
echo "== bench_ring_attn P=2 rc=$? at $(el) s"; grep -E "^P|FAIL|rror|GPU" "$L/bench_ring_attn2.log" | cut -c1-200 | head -60
for rot in allgather alltoall; do
  BENCH_SETTLE_MS=300 timeout -k 5 "$(tl 200)" torchrun --nproc-per-node 2 bench/ring_attn_torch.py --long --rotate $rot \
    --json "$OUT/ring_attn.jsonl" > "$L/ring_attn_torch_$rot.log" 2>&1
  echo "== ring_attn_torch $rot rc=$? at $(el) s"; grep -E "^P" "$L/ring_attn_torch_$rot.log" | cut -c1-200
done
for f in "$L"/*.log; do [ "$(wc -c < "$f")" -gt 2000000 ] && { head -c 1000000 "$f" > "$f.t"; mv "$f.t" "$f"; }; done
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
