/* symmem.c — symmetric device buffers: every rank allocates the same size, exchanges CUDA IPC
 * handles over the bootstrap, and maps the buffers of the peers on its node. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda_runtime.h>

#include "comm.h"
#include "error.h"
#include "log.h"

typedef struct {
  cudaIpcMemHandle_t handle;
  uint64_t bytes;
  int32_t ok; /* 0: this rank failed to allocate (everyone then fails together) */
  int32_t pad_;
} meld_symbuf_msg_t;

/* Unmaps what was mapped and frees the local buffer. Safe on a partly built buffer. */
void meld_symbuf_destroy(struct meld_comm *comm, meld_symbuf_t *buf) {
  if (!buf) return;
  if (buf->peer) {
    for (int r = 0; r < comm->nranks; r++)
      if (r != comm->rank && buf->peer[r]) cudaIpcCloseMemHandle(buf->peer[r]);
    free(buf->peer);
  }
  if (buf->local) cudaFree(buf->local);
  buf->peer = NULL;
  buf->local = NULL;
  buf->bytes = 0;
}

meld_result_t meld_symbuf_create(struct meld_comm *comm, size_t bytes, meld_symbuf_t *buf) {
  meld_result_t res = MELD_OK;
  memset(buf, 0, sizeof *buf);
  meld_symbuf_msg_t *msgs = calloc((size_t)comm->nranks, sizeof *msgs);
  buf->peer = calloc((size_t)comm->nranks, sizeof *buf->peer);
  if (!msgs || !buf->peer) {
    free(msgs);
    free(buf->peer);
    buf->peer = NULL;
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "symmetric memory: out of host memory");
  }
  meld_symbuf_msg_t *mine = &msgs[comm->rank];
  mine->bytes = bytes;
  cudaError_t e = cudaMalloc(&buf->local, bytes);
  char local_err[256] = "";
  if (e == cudaSuccess) e = cudaMemset(buf->local, 0, bytes);
  if (e == cudaSuccess) e = cudaDeviceSynchronize();
  if (e == cudaSuccess && comm->local_size > 1) e = cudaIpcGetMemHandle(&mine->handle, buf->local);
  mine->ok = e == cudaSuccess;
  if (!mine->ok) {
    snprintf(local_err, sizeof local_err, "%s (%s)", cudaGetErrorName(e), cudaGetErrorString(e));
    cudaGetLastError();
  }
  /* Everyone learns whether everyone succeeded: no rank proceeds alone (that would hang it). */
  MELD_CHECK_GOTO(meld_bootstrap_allgather(comm->boot, msgs, sizeof *msgs), res, fail);
  for (int r = 0; r < comm->nranks; r++) {
    if (!msgs[r].ok) {
      res = r == comm->rank
                ? meld_error(e == cudaErrorMemoryAllocation ? MELD_ERR_OUT_OF_MEMORY : MELD_ERR_CUDA,
                             "symmetric memory: allocating %zu bytes on GPU %s failed: %s", bytes,
                             comm->ranks[comm->rank].bus_id, local_err)
                : meld_error(MELD_ERR_CUDA, "symmetric memory: rank %d could not allocate %zu bytes",
                             r, bytes);
      goto fail;
    }
    if (msgs[r].bytes != bytes) {
      res = meld_error(MELD_ERR_INVALID_ARG,
                       "symmetric memory: rank %d allocates %llu bytes, this rank %zu: every rank "
                       "must pass the same size",
                       r, (unsigned long long)msgs[r].bytes, bytes);
      goto fail;
    }
  }
  buf->bytes = bytes;
  buf->peer[comm->rank] = buf->local;
  meld_result_t map_res = MELD_OK;
  for (int r = 0; r < comm->nranks && map_res == MELD_OK; r++) {
    if (r == comm->rank || comm->rank_node[r] != comm->node) continue;
    void *p = NULL;
    e = cudaIpcOpenMemHandle(&p, msgs[r].handle, cudaIpcMemLazyEnablePeerAccess);
    if (e != cudaSuccess) {
      cudaGetLastError();
      map_res = meld_error(MELD_ERR_CUDA,
                           "symmetric memory: cannot map rank %d's GPU %s from GPU %s: %s (%s). "
                           "GPUs of one node need peer access (NVLink or PCIe P2P); set "
                           "MELD_NODE_ID to put them in different nodes",
                           r, comm->ranks[r].bus_id, comm->ranks[comm->rank].bus_id,
                           cudaGetErrorName(e), cudaGetErrorString(e));
      break;
    }
    buf->peer[r] = p;
  }
  /* Everyone learns whether every mapping succeeded before anyone uses one, so a rank that
   * failed never leaves the others waiting; and no one frees while another still maps. */
  for (int r = 0; r < comm->nranks; r++) msgs[r].ok = 1;
  msgs[comm->rank].ok = map_res == MELD_OK;
  MELD_CHECK_GOTO(meld_bootstrap_allgather(comm->boot, msgs, sizeof *msgs), res, fail);
  if (map_res != MELD_OK) {
    res = map_res;
    goto fail;
  }
  for (int r = 0; r < comm->nranks; r++)
    if (!msgs[r].ok) {
      res = meld_error(MELD_ERR_CUDA, "symmetric memory: rank %d could not map its peers' buffers", r);
      goto fail;
    }
  free(msgs);
  MELD_INFO(MELD_SUB_MEM, "symmetric buffer of %zu bytes at %p", bytes, buf->local);
  return MELD_OK;
fail:
  free(msgs);
  meld_symbuf_destroy(comm, buf);
  return res;
}
