/* nccl_baseline.h — NCCL called from C, as the like-for-like baseline of meld's benchmarks:
 * a communicator over the same ranks (its unique id travels over meld's bootstrap), and the
 * four collectives in bf16/fp32 with nccl-tests' conventions (all-to-all as grouped
 * send/recv, as nccl-tests does). Multicast (NVLS) must be off: set NCCL_NVLS_ENABLE=0
 * before nb_init. Link with -lnccl. */
#ifndef MELD_BENCH_NCCL_BASELINE_H
#define MELD_BENCH_NCCL_BASELINE_H

#include <nccl.h>
#include <stdio.h>

#include "comm.h"
#include "meld.h"

#define NB_CHECK(call)                                                                     \
  do {                                                                                     \
    ncclResult_t nb_r_ = (call);                                                           \
    if (nb_r_ != ncclSuccess) {                                                            \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, ncclGetErrorString(nb_r_)); \
      return nb_r_;                                                                        \
    }                                                                                      \
  } while (0)

/* A NCCL communicator over the ranks of `comm` (collective over meld's bootstrap). */
static inline ncclResult_t nb_init(meld_comm_t comm, ncclComm_t *nc) {
  ncclUniqueId id;
  if (comm->rank == 0) NB_CHECK(ncclGetUniqueId(&id));
  if (meld_bootstrap_bcast(comm->boot, &id, sizeof id, 0) != MELD_OK) return ncclSystemError;
  NB_CHECK(ncclCommInitRank(nc, comm->nranks, id, comm->rank));
  return ncclSuccess;
}

/* "2.28.3" */
static inline void nb_version(char *buf, size_t len) {
  int v = 0;
  ncclGetVersion(&v);
  snprintf(buf, len, "%d.%d.%d", v / 10000, (v / 100) % 100, v % 100);
}

static inline ncclDataType_t nb_dtype(meld_dtype_t dt) { return dt == MELD_BF16 ? ncclBfloat16 : ncclFloat32; }

/* op: 0 all-gather (count per rank), 1 reduce-scatter (count = recv count), 2 all-reduce,
 * 3 all-to-all (count per peer). */
static inline ncclResult_t nb_run(int op, const void *send, void *recv, size_t count, meld_dtype_t dt,
                                  ncclComm_t nc, cudaStream_t s) {
  ncclDataType_t t = nb_dtype(dt);
  switch (op) {
    case 0: return ncclAllGather(send, recv, count, t, nc, s);
    case 1: return ncclReduceScatter(send, recv, count, t, ncclSum, nc, s);
    case 2: return ncclAllReduce(send, recv, count, t, ncclSum, nc, s);
    default: {
      int P = 0;
      NB_CHECK(ncclCommCount(nc, &P));
      size_t bytes = count * (dt == MELD_BF16 ? 2 : 4);
      NB_CHECK(ncclGroupStart());
      for (int q = 0; q < P; q++) {
        NB_CHECK(ncclSend((const char *)send + (size_t)q * bytes, count, t, q, nc, s));
        NB_CHECK(ncclRecv((char *)recv + (size_t)q * bytes, count, t, q, nc, s));
      }
      NB_CHECK(ncclGroupEnd());
      return ncclSuccess;
    }
  }
}

#endif
