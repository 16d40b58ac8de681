#!/usr/bin/env python3
"""ag_gemm_torch.py - PyTorch async-TP baseline for meld_ag_gemm (peer_ms in BENCH.md).

Times torch.ops.symm_mem.fused_all_gather_matmul (and, side by side, torch's own sequential
all_gather_into_tensor + matmul) at the AG+GEMM suite shapes: K=8192, N_total in {10240, 57344};
K=4096, N_total=28672; M in {2048, 8192, 16384}; N_loc = N_total / P. Median of 20 calls after
5 warm-ups (CUDA events), ranks aligned by a barrier. Rank 0 writes JSON lines (op "ag_gemm",
peer_ms filled, variant "torch") to --json and prints a table.

Launch:  NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 \
         torchrun --nproc-per-node 2 bench/ag_gemm_torch.py [--quick] [--json FILE]
"""
import argparse
import datetime
import json
import os
import statistics

import torch
import torch.distributed as dist
import torch.distributed._symmetric_memory as symm_mem  # registers torch.ops.symm_mem.*
from bench_torch_common import settle, soak_ms

SUITE = [(2048, 8192, 10240), (8192, 8192, 10240), (16384, 8192, 10240),
         (2048, 8192, 57344), (8192, 8192, 57344), (16384, 8192, 57344),
         (2048, 4096, 28672), (8192, 4096, 28672), (16384, 4096, 28672)]
QUICK = [(2048, 8192, 10240), (8192, 8192, 10240), (8192, 4096, 28672)]


def timed(fn, warm=5, n=20):
    settle(fn, warm)
    dist.barrier()
    ev = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(n)]
    for a, b in ev:
        a.record()
        fn()
        b.record()
    torch.cuda.synchronize()
    return statistics.median(a.elapsed_time(b) for a, b in ev)


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
    torch.manual_seed(1 + rank)
    rows = []
    for M, K, NT in (QUICK if args.quick else SUITE):
        m_loc, n_loc = M // P, NT // P
        a = torch.randn(m_loc, K, device="cuda", dtype=torch.bfloat16)
        w = torch.randn(n_loc, K, device="cuda", dtype=torch.bfloat16)  # nn.Linear weight [N, K]
        bt = w.t()
        full = torch.empty(M, K, device="cuda", dtype=torch.bfloat16)

        def fused():
            return torch.ops.symm_mem.fused_all_gather_matmul(a, [bt], gather_dim=0, group_name=group.group_name)

        def seq():
            dist.all_gather_into_tensor(full, a, group=group)
            return full @ bt

        err = None
        try:
            _, outs = fused()
            ref = seq()
            err = ((outs[0].float() - ref.float()).norm() / ref.float().norm()).item()
            t_peer = timed(fused)
        except Exception as e:  # report, keep going
            print(f"[rank {rank}] fused_all_gather_matmul failed at M={M}: {e}")
            t_peer = float("nan")
        s_peer = soak_ms(fused, t_peer)  # BENCH_SOAK_MS: sustained (power-capped) times
        t_seq = timed(seq)
        s_seq = soak_ms(seq, t_seq)
        t_mm = timed(lambda: full @ bt)
        t_ag = timed(lambda: dist.all_gather_into_tensor(full, a, group=group))
        row = dict(op="ag_gemm", shape=dict(m=M, n=NT, n_loc=n_loc, k=K, variant="torch"), nranks=P, nnodes=1,
                   dtype="bf16", meld_ms=None, seq_ms=t_seq, peer_ms=t_peer,
                   peer="torch async-TP fused_all_gather_matmul", compute_ms=t_mm, meld_compute_ms=None,
                   comm_ms=t_ag, bound_ms=max(t_mm, t_ag), rel_err=err, gpu=torch.cuda.get_device_name(),
                   driver=None, cuda=torch.version.cuda, nccl=".".join(map(str, torch.cuda.nccl.version())),
                   torch=torch.__version__, date=datetime.date.today().isoformat(),
                   commit=os.environ.get("BENCH_COMMIT", "unknown"), peer_soak_ms=s_peer, seq_soak_ms=s_seq)
        rows.append(row)
        if rank == 0:
            print(f"{M}x{n_loc}x{K}: async-TP {t_peer:.3f} ms, torch seq {t_seq:.3f}, matmul {t_mm:.3f}, "
                  f"all_gather {t_ag:.3f}, rel_err {err}" + (f"; sustained: async-TP {s_peer:.4f}, seq {s_seq:.4f}" if s_peer else ""),
                  flush=True)
        del a, w, full
        torch.cuda.empty_cache()
    if rank == 0 and args.json:
        with open(args.json, "a") as f:
            for r in rows:
                f.write(json.dumps(r) + "\n")
    dist.barrier()
    dist.destroy_process_group()


if __name__ == "__main__":
    main()
