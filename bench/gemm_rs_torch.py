"""gemm_rs_torch.py — the PyTorch async-TP peer of meld_gemm_rs, timed on the suite shapes.

    NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
      torchrun --nproc_per_node=P bench/gemm_rs_torch.py [--quick] [--json FILE]

Per GEMM+RS shape (K_total in {8192, 28672} with N 8192, K_total 14336 with N 4096; M in
{2048, 8192, 16384}; K_loc = K_total / P): torch.ops.symm_mem.fused_matmul_reduce_scatter
(A [M, K_loc], B^T) median of 20 calls after 5 warm-ups (CUDA events), and torch's own
sequential matmul + reduce_scatter_tensor for reference. Rank 0 writes one JSON line per shape
(keys op, shape, nranks, peer, peer_ms, torch_seq_ms, torch) that bench_gemm_rs's lines are
merged with (same op and shape).
"""
import argparse
import json
import os

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem  # registers torch.ops.symm_mem.*
from bench_torch_common import settle, soak_ms


def median_ms(fn, warm=5, iters=20):
    settle(fn, warm)
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(iters)]
    for s, e in ev:
        s.record()
        fn()
        e.record()
    torch.cuda.synchronize()
    t = sorted(s.elapsed_time(e) for s, e in ev)
    return t[len(t) // 2] if len(t) % 2 else 0.5 * (t[len(t) // 2 - 1] + t[len(t) // 2])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--quick", action="store_true")
    ap.add_argument("--json", default=None)
    args = ap.parse_args()
    os.environ.setdefault("NCCL_NVLS_ENABLE", "0")
    os.environ.setdefault("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1")
    rank = int(os.environ["RANK"])
    P = int(os.environ["WORLD_SIZE"])
    torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", rank)))
    dist.init_process_group("nccl")
    group = dist.group.WORLD
    symm_mem.enable_symm_mem_for_group(group.group_name)
    out = open(args.json, "a") if (args.json and rank == 0) else None
    for k_total, n in ((8192, 8192), (28672, 8192), (14336, 4096)):
        for m in (2048, 8192, 16384):
            if args.quick and m != 8192:
                continue
            k = k_total // P
            g = torch.Generator(device="cuda").manual_seed(rank + 1)
            a = torch.randn(m, k, device="cuda", dtype=torch.bfloat16, generator=g)
            b = torch.randn(n, k, device="cuda", dtype=torch.bfloat16, generator=g)
            bt = b.t()
            recv = torch.empty(m // P, n, device="cuda", dtype=torch.bfloat16)

            def fused():
                return torch.ops.symm_mem.fused_matmul_reduce_scatter(a, bt, "sum", 0, group.group_name)

            def seq():
                dist.reduce_scatter_tensor(recv, a @ bt, group=group)

            try:
                peer_ms = median_ms(fused)
            except Exception as e:  # noqa: BLE001 - report and go on
                if rank == 0:
                    print(f"fused_matmul_reduce_scatter failed at m {m}: {e}")
                peer_ms = None
            s_peer = soak_ms(fused, peer_ms)  # BENCH_SOAK_MS: sustained (power-capped) times
            seq_ms = median_ms(seq)
            s_seq = soak_ms(seq, seq_ms)
            if rank == 0:
                print(f"gemm_rs m {m:5d} n {n:5d} k_loc {k:5d} | async-TP {peer_ms} ms | torch seq {seq_ms:.3f} ms"
                      + (f" | sustained: async-TP {s_peer:.4f}, seq {s_seq:.4f}" if s_peer else ""), flush=True)
                if out:
                    out.write(json.dumps({"op": "gemm_rs", "shape": {"m": m, "n": n, "k": k, "k_total": k_total},
                                          "nranks": P, "peer": "torch_async_tp", "peer_ms": peer_ms,
                                          "torch_seq_ms": seq_ms, "peer_soak_ms": s_peer, "seq_soak_ms": s_seq,
                                          "torch": torch.__version__}) + "\n")
                    out.flush()
            del a, b, bt, recv
            torch.cuda.empty_cache()
    if out:
        out.close()
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
