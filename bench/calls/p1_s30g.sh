#!/usr/bin/env bash
# p1_s30g.sh — ONE GPU, session 30: (1) test_ring_attn 8 after the per-head_dim split (D 64 ring
# cases at 8 ranks); (2) bench/ring_attn_torch.py (torch's context parallelism, the ring
# attention's peer for 2 GPUs) at ONE rank, to prove the script runs before a 2-GPU session.
# Prediction: test passes; the script prints 4 rows (one rank: plain SDPA on the whole sequence,
# ~0.30-0.50 ms at S 4096).
. "$(dirname "$0")/../device_env.sh"
build build/tests/gpu/test_ring_attn
export MELD_TIMEOUT_MS=3000
L="$OUT/l"; mkdir -p "$L"
timeout -k 5 150 build/tests/gpu/test_ring_attn 8 > "$L/test_ring_attn8.log" 2>&1
echo "== test_ring_attn 8 rc=$? at $(el) s"; grep -E "checks|FAIL|rror" "$L/test_ring_attn8.log" | cut -c1-300 | head -8
BENCH_SETTLE_MS=200 timeout -k 5 150 torchrun --nproc-per-node 1 bench/ring_attn_torch.py --json "$OUT/ring_attn.jsonl" > "$L/ring_attn_torch.log" 2>&1
echo "== ring_attn_torch P=1 rc=$? at $(el) s"; grep -vE "^\s*$" "$L/ring_attn_torch.log" | tail -12 | cut -c1-250
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
