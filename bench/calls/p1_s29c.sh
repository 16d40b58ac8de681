#!/usr/bin/env bash
# p1_s29c.sh — ONE GPU, session 29: which attention kernel is the default. Call 2 (p1_s29b) had
# pipe2 (ping-pong) ahead of pipe1 at S 4096 (-0.5..-2.3%) and at S 16384 causal MHA (-7.3%),
# behind at S 16384 GQA (+1.7 / +2.5%): here pipe1 and pipe2 alternate twice per shape at S 16384
# (the suite's long rows) with a longer settle (500 ms), then torch's cuDNN and flash backends on the
# same shapes in the same call (the peers).
# Prediction: pipe2 - pipe1 within +-2% on non-causal rows, -3..-8% on causal rows.
. "$(dirname "$0")/../device_env.sh"
build build/bench/bench_attn
L="$OUT/l"; mkdir -p "$L"
SH="--shape 1,16384,32,32,0 --shape 1,16384,32,32,1 --shape 1,16384,32,8,0 --shape 1,16384,32,8,1 --custom-only"
BENCH_ATTN_AB=MELD_ATTN_PIPE=1,MELD_ATTN_PIPE=2,MELD_ATTN_PIPE=1,MELD_ATTN_PIPE=2 BENCH_SETTLE_MS=500 timeout -k 5 200 build/bench/bench_attn --json "$OUT/attn.jsonl" $SH > "$L/bench_attn.log" 2>&1
echo "== bench_attn rc=$? at $(el) s"; grep -v "rel err" "$L/bench_attn.log" | tail -18
BENCH_SETTLE_MS=500 timeout -k 5 200 python3 bench/attn_torch.py --json "$OUT/attn.jsonl" $SH > "$L/attn_torch.log" 2>&1
echo "== attn_torch rc=$? at $(el) s"; grep -E "^1," "$L/attn_torch.log" | grep -v efficient
(cd "$L" && tar czf "$OUT/logs.tgz" *.log); rm -rf "$L"
echo "== done at $(el) s"
