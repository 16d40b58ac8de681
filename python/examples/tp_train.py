#!/usr/bin/env python3
"""tp_train.py: training a tensor-parallel MLP stack with meld.nn (forward and backward through
meld's fused kernels) and an ordinary torch optimizer.

    torchrun --nproc_per_node 2 python/examples/tp_train.py [--layers 4 --hidden 1024 --steps 60]

Every rank holds tokens / P rows of the activations (sequence parallel) and 1 / P of each weight
(the column layer's rows, the row layer's columns). The task: fit a fixed random "teacher" residual
MLP (its output is the regression target). The loss is summed over the ranks with meld's all_reduce
for printing; gradients need no all-reduce (each weight shard's gradient is complete on its rank).
Prints the loss every few steps and checks that it fell at least 2x. With --compile the step runs
under torch.compile. One process per GPU; more ranks than GPUs share them (MELD_SHARE_GPU=1).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import meld  # noqa: E402
import meld.nn as mnn  # noqa: E402


class Block(torch.nn.Module):
    def __init__(self, comm, hidden, ffn, gen):
        super().__init__()
        self.up = mnn.ColumnParallelLinear(comm, hidden, ffn, generator=gen)
        self.down = mnn.RowParallelLinear(comm, ffn, hidden, generator=gen)

    def forward(self, x):
        return x + self.down(F.gelu(self.up(x)))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--layers", type=int, default=4)
    ap.add_argument("--hidden", type=int, default=1024)
    ap.add_argument("--tokens", type=int, default=2048)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--lr", type=float, default=3e-4)
    ap.add_argument("--compile", action="store_true")
    args = ap.parse_args()
    world = int(os.environ.get("WORLD_SIZE", 1))
    if world > torch.cuda.device_count():
        os.environ["MELD_SHARE_GPU"] = "1"
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", 0)) % torch.cuda.device_count())
    comm = meld.Comm.from_env()
    P, r = comm.nranks, comm.rank
    H, T = args.hidden, args.tokens
    # the same teacher and inputs on every rank (seeded), each rank keeping its rows
    g = torch.Generator(device="cuda").manual_seed(7)
    x_all = torch.randn(T, H, device="cuda", generator=g).bfloat16()
    teacher = [torch.randn(H, H, device="cuda", generator=g) * H ** -0.5 for _ in range(2)]
    y_all = (x_all.float() + 0.5 * torch.tanh(x_all.float() @ teacher[0]) @ teacher[1]).bfloat16()
    rows = slice(r * T // P, (r + 1) * T // P)
    x, y = x_all[rows].contiguous(), y_all[rows].contiguous()
    gen = torch.Generator(device="cuda").manual_seed(100 + r)  # each rank's weight shards
    model = torch.nn.Sequential(*[Block(comm, H, 4 * H, gen) for _ in range(args.layers)])
    with torch.no_grad():  # small residual branches: a stable start
        for b in model:
            b.down.weight.mul_(0.1)
    opt = torch.optim.AdamW(model.parameters(), lr=args.lr, foreach=False)

    def step():
        opt.zero_grad(set_to_none=True)
        out = model(x)
        loss = F.mse_loss(out.float(), y.float(), reduction="sum")
        loss.backward()
        opt.step()
        return loss.detach()

    fn = torch.compile(step) if args.compile else step
    first = last = None
    for s in range(args.steps):
        loss = comm.all_reduce(fn().reshape(1)).item() / (T * H)  # the mean over every rank's rows
        first = loss if first is None else first
        last = loss
        if r == 0 and (s % 10 == 0 or s == args.steps - 1):
            print(f"step {s:3d}  loss {loss:.5f}", flush=True)
    ok = last < first / 2
    if r == 0:
        print(f"P={P} layers={args.layers} hidden={H}: loss {first:.4f} -> {last:.4f} "
              f"({'fell' if ok else 'did NOT fall'} >= 2x){' [compiled]' if args.compile else ''}", flush=True)
    comm.destroy()
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
