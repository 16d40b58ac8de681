#!/usr/bin/env bash
# p1_s36g.sh — ONE GPU, session 36 call 11: python/examples/tp_train.py (a tensor-parallel MLP
# stack trained with meld.nn and AdamW) at 1 rank, at 2 ranks sharing the GPU, and at 1 rank under
# torch.compile. Call 11: all three ran end to end but diverged (AdamW at lr 3e-3: the loss 0.10 ->
# 10^4..10^7); call 12 at lr 3e-4. Prediction: the loss falls >= 2x in 80 steps in each run.
. "$(dirname "$0")/../device_env.sh"
timeout -k 5 150 python3 -m torch.distributed.run --nproc_per_node 1 python/examples/tp_train.py > "$OUT/tp_train_1.log" 2>&1
echo "== tp_train P=1 rc=$? at $(el) s"; grep -E "^P=|step|rror" "$OUT/tp_train_1.log" | tail -4
MELD_TIMEOUT_MS=20000 timeout -k 5 200 python3 -m torch.distributed.run --nproc_per_node 2 python/examples/tp_train.py > "$OUT/tp_train_2.log" 2>&1
echo "== tp_train P=2 shared rc=$? at $(el) s"; grep -E "^P=|rror" "$OUT/tp_train_2.log" | tail -3
timeout -k 5 200 python3 -m torch.distributed.run --nproc_per_node 1 python/examples/tp_train.py --compile > "$OUT/tp_train_c.log" 2>&1
echo "== tp_train P=1 compiled rc=$? at $(el) s"; grep -E "^P=|rror" "$OUT/tp_train_c.log" | tail -3
echo "== done at $(el) s"
