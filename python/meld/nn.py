"""meld.nn: tensor-parallel linear layers for training, whose forward AND backward are meld's fused
kernels (sequence parallelism in Megatron's layout: activations between blocks are split by
rows over the ranks, weights by columns / rows).

    col = meld.nn.ColumnParallelLinear(comm, hidden, ffn)    # weight [ffn / P, hidden]
    row = meld.nn.RowParallelLinear(comm, ffn, hidden)       # weight [hidden, ffn / P]
    z = row(F.gelu(col(x_shard)))                            # x_shard, z: [tokens / P, hidden]

                  forward                            backward (input grad; weight grad)
    column        AllGather(x) x W^T  (ag_gemm)      ReduceScatter(dy x W) (gemm_rs); dy^T x AllGather(x)
    row           ReduceScatter(h x W^T) (gemm_rs)   AllGather(dz) x W (ag_gemm); AllGather(dz)^T x h

Each communication is inside a GEMM's kernel, both ways. The weight gradients are local GEMMs
(torch's); the column layer keeps the gathered input for its weight gradient (P times the
shard's memory; save_gathered=False all-gathers it again in backward instead). bf16 only, no bias
(modern transformer blocks have none). The row count of a shard must be equal on every rank.
"""
import torch

from . import _capi as C


def _flat(x, name):
    if x.dim() < 2:
        raise C.error(C.ERR_INVALID_ARG, f"{name}: needs at least 2 dims, got {tuple(x.shape)}")
    return x.reshape(-1, x.size(-1)) if x.dim() > 2 else x


class _AgGemm(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x, w, comm, save_gathered):
        if save_gathered:
            y, xg = comm.ag_gemm(x, w, gathered=True)
            ctx.save_for_backward(xg, w)
        else:
            y = comm.ag_gemm(x, w)
            ctx.save_for_backward(x, w)
        ctx.comm, ctx.save_gathered = comm, save_gathered
        return y

    @staticmethod
    def backward(ctx, dy):
        xs, w = ctx.saved_tensors
        comm = ctx.comm
        dy = dy.contiguous()
        xg = xs if ctx.save_gathered else comm.all_gather(xs)
        dx = comm.gemm_rs(dy, w, b_layout="kn") if ctx.needs_input_grad[0] else None
        dw = dy.t() @ xg if ctx.needs_input_grad[1] else None
        return dx, dw, None, None


class _GemmRs(torch.autograd.Function):
    @staticmethod
    def forward(ctx, h, w, comm):
        if h.size(0) % comm.nranks:
            raise C.error(C.ERR_INVALID_ARG, f"h: {h.size(0)} rows are not a multiple of the "
                          f"{comm.nranks} ranks (the backward's all-gather needs equal shards)")
        ctx.save_for_backward(h, w)
        ctx.comm = comm
        return comm.gemm_rs(h, w)

    @staticmethod
    def backward(ctx, dz):
        h, w = ctx.saved_tensors
        dh, dzg = ctx.comm.ag_gemm(dz.contiguous(), w, b_layout="kn", gathered=True)
        dw = dzg.t() @ h if ctx.needs_input_grad[1] else None
        return (dh if ctx.needs_input_grad[0] else None), dw, None


def ag_gemm(comm, x, w, *, save_gathered=True):
    """AllGather(x) x w^T with autograd (x [m_loc, K], w [n_loc, K]): [P * m_loc, n_loc]."""
    return _AgGemm.apply(x, w, comm, save_gathered)


def gemm_rs(comm, h, w):
    """ReduceScatter(h x w^T) with autograd (h [M, K_loc], w [N, K_loc]): [M / P, N]."""
    return _GemmRs.apply(h, w, comm)


def _init_weight(shape, fan_in, device, generator):
    w = torch.empty(shape, dtype=torch.float32, device=device)
    bound = fan_in ** -0.5
    w.uniform_(-bound, bound, generator=generator)
    return w.to(torch.bfloat16)


class ColumnParallelLinear(torch.nn.Module):
    """y = AllGather(x) x W^T, W = this rank's rows [out_features / P, in_features] of the full
    weight. x: [..., in_features] holding this rank's tokens (rows); y: [P * rows, out / P]."""

    def __init__(self, comm, in_features, out_features, *, save_gathered=True, generator=None):
        super().__init__()
        if out_features % comm.nranks:
            raise C.error(C.ERR_INVALID_ARG, f"out_features {out_features} is not a multiple of "
                          f"the {comm.nranks} ranks")
        self.comm, self.save_gathered = comm, save_gathered
        self.in_features, self.out_features = in_features, out_features
        self.weight = torch.nn.Parameter(_init_weight(
            (out_features // comm.nranks, in_features), in_features, f"cuda:{comm.device}",
            generator))

    def forward(self, x):
        return _AgGemm.apply(_flat(x, "x"), self.weight, self.comm, self.save_gathered)


class RowParallelLinear(torch.nn.Module):
    """z = ReduceScatter(h x W^T), W = this rank's columns [out_features, in_features / P] of the
    full weight. h: [rows, in / P] (every rank's rows: the column layer's output); z: this rank's
    rows / P of [rows, out_features]."""

    def __init__(self, comm, in_features, out_features, *, generator=None):
        super().__init__()
        if in_features % comm.nranks:
            raise C.error(C.ERR_INVALID_ARG, f"in_features {in_features} is not a multiple of "
                          f"the {comm.nranks} ranks")
        self.comm = comm
        self.in_features, self.out_features = in_features, out_features
        self.weight = torch.nn.Parameter(_init_weight(
            (out_features, in_features // comm.nranks), in_features, f"cuda:{comm.device}",
            generator))

    def forward(self, h):
        return _GemmRs.apply(_flat(h, "h"), self.weight, self.comm)
