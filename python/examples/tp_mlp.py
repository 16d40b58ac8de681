#!/usr/bin/env python3
"""tp_mlp.py: a tensor-parallel MLP block with meld's fused ops, against the same block in torch.

    torchrun --nproc_per_node 2 python/examples/tp_mlp.py [--tokens 8192 --hidden 8192 --ffn 28672]

Sequence-parallel layout (Megatron style): each rank holds tokens/P rows of x [T, H] and the
column-parallel W1 shard [F/P, H] and the row-parallel W2 shard [H, F/P]:

    meld:  h = comm.ag_gemm(x_shard, w1)     AllGather(x) x W1^T      one kernel
           a = gelu(h)
           y = comm.gemm_rs(a, w2)            ReduceScatter(a x W2^T)  one kernel
    torch: all_gather_into_tensor + matmul, gelu, matmul + reduce_scatter_tensor (NCCL)

Checks that the two agree, then times both (CUDA events, after a warm-up) and prints one line
per rank count. One process per GPU (NCCL refuses two ranks on one GPU; with fewer GPUs than
ranks the torch baseline is skipped and meld's ranks share the GPU: MELD_SHARE_GPU=1).
"""
import argparse
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import torch  # noqa: E402
import torch.distributed as dist  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import meld  # noqa: E402


def timed(fn, iters):
    for _ in range(3):
        fn()
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    torch.cuda.synchronize()
    start.record()
    for _ in range(iters):
        fn()
    end.record()
    torch.cuda.synchronize()
    return start.elapsed_time(end) / iters


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--tokens", type=int, default=8192)
    ap.add_argument("--hidden", type=int, default=8192)
    ap.add_argument("--ffn", type=int, default=28672)
    ap.add_argument("--iters", type=int, default=20)
    args = ap.parse_args()
    rank, world = int(os.environ.get("RANK", 0)), int(os.environ.get("WORLD_SIZE", 1))
    local = int(os.environ.get("LOCAL_RANK", 0))
    shared = world > torch.cuda.device_count()
    if shared:
        os.environ["MELD_SHARE_GPU"] = "1"
    torch.cuda.set_device(local % torch.cuda.device_count())
    T, H, Fd = args.tokens, args.hidden, args.ffn
    if T % world or Fd % world:
        sys.exit(f"tokens ({T}) and ffn ({Fd}) must be multiples of the {world} ranks")
    # staging of the fused ops: AG+GEMM P x m_loc x H, GEMM+RS (P-1) x rows x H (bf16)
    ws = max(world * T // world * H, (world - 1) * T // world * H) * 2 + (64 << 20)
    comm = meld.Comm.from_env(workspace_bytes=ws)
    g = torch.Generator(device="cuda").manual_seed(1234 + rank)
    x = torch.randn(T // world, H, device="cuda", generator=g).bfloat16()
    w1 = (torch.randn(Fd // world, H, device="cuda", generator=g) * H ** -0.5).bfloat16()
    w2 = (torch.randn(H, Fd // world, device="cuda", generator=g) * Fd ** -0.5).bfloat16()

    def meld_block():
        return comm.gemm_rs(F.gelu(comm.ag_gemm(x, w1)), w2)

    y = meld_block()
    ms_meld = timed(meld_block, args.iters)
    line = f"P={world} T={T} H={H} F={Fd}: meld {ms_meld:.3f} ms"
    if not shared:
        dist.init_process_group("nccl", device_id=torch.device("cuda", torch.cuda.current_device()))
        xg = torch.empty(T, H, dtype=x.dtype, device="cuda")
        out = torch.empty(T // world, H, dtype=x.dtype, device="cuda")

        def torch_block():
            dist.all_gather_into_tensor(xg, x)
            dist.reduce_scatter_tensor(out, F.gelu(xg @ w1.T) @ w2.T)
            return out

        ref = torch_block().clone()
        err = ((y.float() - ref.float()).norm() / ref.float().norm()).item()
        ms_torch = timed(torch_block, args.iters)
        line += f", torch (NCCL + cuBLAS) {ms_torch:.3f} ms: {ms_torch / ms_meld:.2f}x; " \
                f"outputs agree to {err:.1e} (rel.)"
        if err > 2e-2:
            line += " MISMATCH"
        dist.destroy_process_group()
    if rank == 0:
        print(line, flush=True)
    comm.destroy()


if __name__ == "__main__":
    main()
