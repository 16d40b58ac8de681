#!/usr/bin/env bash
# p1_s13g.sh — ONE GPU, session 13 call 7: bench_energy again (call 1: a 64 MiB copy by 16 SM
# CTAs beside a capped 8192^3 GEMM cost it 0.1-0.2%, the copy engine's 35 us burst 2.4%).
# (a) the same run again (is 0.1-0.2% reproducible?); (b) 48 CTAs: the copy ~2.5x faster,
# burstier: does it then cost like the copy engine? (c) 256 MiB with 16 CTAs: linear in bytes?
# Prediction: (a) within +-0.3%; (b) +0.5-1.5%; (c) +0.4-0.8%.
# Usage (device): OUT=... bash bench/calls/p1_s13g.sh
. "$(dirname "$0")/../device_env.sh" # set -u, $OUT, no multicast, el
build lib build/bench/bench_energy
for cfg in "16 64" "48 64" "16 256"; do
  set -- $cfg
  timeout -k 5 150 build/bench/bench_energy --ms 2000 --ctas $1 --mib $2 --json "$OUT/energy-s13g.jsonl" > "$OUT/energy-$1-$2.log" 2>&1
  echo "energy ctas $1 mib $2 rc=$? at $(el) s"; grep -E "^(idle|copy|gemm)|J/GiB" "$OUT/energy-$1-$2.log" | cut -c1-150
done
echo "total: $(el) s"
cd "$OUT" && tar czf logs.tgz *.log 2>/dev/null && rm -f *.log
