#!/usr/bin/env python3
"""ring_attn_torch.py — PyTorch's context parallelism (torch.distributed.tensor.experimental.
context_parallel: SDPA over a sequence sharded across the ranks, K/V rotated around the ring, causal
load balance by torch's own head-tail split) on bench_ring_attn's rows: D 128, 32 query heads, 32 or 8
KV heads (GQA rows expand K/V to 32 heads where torch's ring does not take GQA), batch 1, the sequence
per rank 4096 (--long: also 16384), causal and not. Per row: 5 warm-ups, BENCH_SETTLE_MS of calls
(every rank rank 0's count), 10 samples of 5 calls after a barrier, the median; the slowest rank.
FLOPs as bench_ring_attn (4 x all ranks' visible pairs x D). JSON lines to --json (op "ring_attn",
peer "torch_cp_<rotate method>"). Also runs with one rank (no ring: SDPA on the whole sequence).

  torchrun --nproc-per-node P bench/ring_attn_torch.py [--json FILE] [--long] [--rotate allgather|alltoall]
"""
import argparse, json, os, statistics, time

import torch
import torch.distributed as dist
import torch.nn.functional as F

from bench_torch_common import bench_keys, settle


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--json")
    ap.add_argument("--long", action="store_true")
    ap.add_argument("--rotate", default="allgather", choices=["allgather", "alltoall"])
    args = ap.parse_args()
    rank, world = int(os.environ.get("RANK", "0")), int(os.environ.get("WORLD_SIZE", "1"))
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
    dist.init_process_group("nccl")
    from torch.distributed.device_mesh import init_device_mesh
    from torch.distributed.tensor.experimental import context_parallel
    from torch.distributed.tensor.experimental._attention import _cp_options, set_rotate_method
    from torch.nn.attention import SDPBackend, sdpa_kernel

    set_rotate_method(args.rotate)
    mesh = init_device_mesh("cuda", (world,))
    rows = [(S, hkv, c) for S in ([4096, 16384] if args.long else [4096]) for hkv in (32, 8) for c in (0, 1)]
    if rank == 0:
        print(f"ring_attn_torch: {world} ranks, rotate {args.rotate}")
        print(f"{'row':34s} {'ms':>10s} {'TFLOP/s':>10s}")
    jf = open(args.json, "a") if args.json and rank == 0 else None
    for (S, HKV, causal) in rows:
        n = S * world
        g = torch.Generator(device="cuda").manual_seed(7)
        # [B, H, S, D]: the layout torch's context parallelism shards (sequence dim 2)
        q = (torch.rand(1, 32, n, 128, device="cuda", generator=g) * 2 - 1).bfloat16()
        k = (torch.rand(1, HKV, n, 128, device="cuda", generator=g) * 2 - 1).bfloat16()
        v = (torch.rand(1, HKV, n, 128, device="cuda", generator=g) * 2 - 1).bfloat16()
        if HKV != 32:  # GQA: K/V expanded to every query head (torch's ring attention takes MHA)
            k, v = k.repeat_interleave(32 // HKV, dim=1), v.repeat_interleave(32 // HKV, dim=1)
        ms, err = None, ""
        _cp_options.enable_load_balance = bool(causal)  # torch balances causal rows only
        try:
            with sdpa_kernel([SDPBackend.CUDNN_ATTENTION, SDPBackend.FLASH_ATTENTION]):
                with context_parallel(mesh, buffers=(q, k, v), buffer_seq_dims=(2, 2, 2)):
                    fn = lambda: F.scaled_dot_product_attention(q, k, v, is_causal=bool(causal))
                    settle(fn)
                    ts = []
                    for _ in range(10):
                        torch.cuda.synchronize()
                        dist.barrier()
                        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                        a.record()
                        for _ in range(5):
                            fn()
                        b.record()
                        torch.cuda.synchronize()
                        ts.append(a.elapsed_time(b) / 5)
                    t = torch.tensor([statistics.median(ts)], device="cuda")
                    dist.all_reduce(t, op=dist.ReduceOp.MAX)
                    ms = t.item()
        except Exception as e:  # a torch without this path, or a shape it refuses
            err = f"{type(e).__name__}: {str(e)[:120]}"
        if rank == 0:
            name = f"P{world} S{S} HKV{HKV} causal{causal}"
            if ms is None:
                print(f"{name:34s} {'-':>10s} ({err})")
            else:
                pairs = n * (n + 1) / 2 if causal else n * n
                tf = 4.0 * 32 * pairs * 128 / (ms * 1e-3) / 1e12
                print(f"{name:34s} {ms:10.4f} {tf:10.1f}")
                if jf:
                    jf.write(json.dumps({"op": "ring_attn", "shape": {"batch": 1, "seq": S, "heads": 32, "heads_kv": HKV,
                                                                      "head_dim": 128, "causal": causal},
                                         "nranks": world, "nnodes": 1, "dtype": "bf16",
                                         "peer": "torch_cp_" + args.rotate, "peer_ms": ms, "tflops_all_ranks": round(tf, 1),
                                         "settle_ms": int(os.environ.get("BENCH_SETTLE_MS", "0") or 0),
                                         **bench_keys()}) + "\n")
                    jf.flush()
        del q, k, v
        torch.cuda.empty_cache()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
