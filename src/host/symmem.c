/* symmem.c — symmetric device buffers: every rank allocates the same size, exchanges CUDA IPC
 * handles over the bootstrap, and maps the buffers of the peers on its node. Peers that are
 * threads of this process (meld_comm_same_process) use each other's addresses as they are:
 * CUDA IPC cannot open a handle of its own process, and needs none. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cuda.h>
#include <cuda_runtime.h>
#include <pthread.h>

#include "comm.h"
#include "error.h"
#include "log.h"

typedef struct {
  cudaIpcMemHandle_t handle;
  uint64_t bytes;
  uint64_t offset; /* registered: the range's start within the allocation the handle names */
  uint64_t base, alloc_bytes; /* registered: that allocation in the sender's address space (its identity) */
  uint64_t ptr;     /* the sender's buffer in its address space (used by peers of its process) */
  int32_t ok; /* 0: this rank failed to allocate (everyone then fails together) */
  int32_t err; /* registered: this rank's meld_result_t when ok is 0 */
} meld_symbuf_msg_t;

/* A registered range's mapping of rank r's allocation: one per (rank, allocation) per comm,
 * keyed by the allocation's base and size in rank r's address space, not by the handle's bytes
 * (two exports of one allocation need not be byte-equal). */
static meld_ipc_map_t *ipc_map_get(struct meld_comm *comm, int r, const cudaIpcMemHandle_t *h, uint64_t base,
                                   uint64_t bytes, cudaError_t *err) {
  for (meld_ipc_map_t *m = comm->ipc_maps; m; m = m->next)
    if (m->rank == r && m->remote_base == base && m->remote_bytes == bytes) {
      m->refs++;
      return m;
    }
  meld_ipc_map_t *m = calloc(1, sizeof *m);
  if (!m) {
    *err = cudaErrorMemoryAllocation;
    return NULL;
  }
  *err = cudaIpcOpenMemHandle(&m->base, *h, cudaIpcMemLazyEnablePeerAccess);
  if (*err != cudaSuccess) {
    cudaGetLastError();
    free(m);
    return NULL;
  }
  m->rank = r;
  m->remote_base = base;
  m->remote_bytes = bytes;
  m->refs = 1;
  m->next = comm->ipc_maps;
  comm->ipc_maps = m;
  return m;
}

static void ipc_map_put(struct meld_comm *comm, meld_ipc_map_t *m) {
  if (!m || --m->refs > 0) return;
  for (meld_ipc_map_t **l = &comm->ipc_maps; *l; l = &(*l)->next)
    if (*l == m) {
      *l = m->next;
      break;
    }
  cudaIpcCloseMemHandle(m->base);
  free(m);
}

/* 1 if some peer of this node is another process (CUDA IPC needed). */
static int needs_ipc(const struct meld_comm *comm) {
  for (int r = 0; r < comm->nranks; r++)
    if (r != comm->rank && comm->rank_node[r] == comm->node && !meld_comm_same_process(comm, r)) return 1;
  return 0;
}

/* A peer of this process: its address is usable here once this GPU may access the peer's GPU
 * (nothing to do when they share one). */
static void *same_process_peer(struct meld_comm *comm, int r, uint64_t ptr, cudaError_t *err) {
  int dev = -1;
  *err = cudaDeviceGetByPCIBusId(&dev, comm->ranks[r].bus_id);
  if (*err == cudaSuccess && dev != comm->device) {
    *err = cudaDeviceEnablePeerAccess(dev, 0);
    if (*err == cudaErrorPeerAccessAlreadyEnabled) *err = cudaSuccess;
  }
  cudaGetLastError();
  return *err == cudaSuccess ? (void *)(uintptr_t)ptr : NULL;
}

void meld_symbuf_unmap(struct meld_comm *comm, meld_symbuf_t *buf) {
  for (int r = 0; buf && buf->peer && r < comm->nranks; r++) {
    if (r == comm->rank) continue;
    if (buf->registered) {
      if (buf->maps && buf->maps[r]) ipc_map_put(comm, buf->maps[r]);
      if (buf->maps) buf->maps[r] = NULL;
    } else if (buf->peer[r] && !meld_comm_same_process(comm, r)) {
      cudaIpcCloseMemHandle(buf->peer[r]);
    }
    buf->peer[r] = NULL;
  }
}

/* Unmaps what was mapped and frees the local buffer (unless the user's). Safe on a partly
 * built buffer. */
void meld_symbuf_destroy(struct meld_comm *comm, meld_symbuf_t *buf) {
  if (!buf) return;
  meld_symbuf_unmap(comm, buf);
  free(buf->peer);
  free(buf->maps);
  if (buf->local && !buf->registered) cudaFree(buf->local);
  buf->peer = NULL;
  buf->maps = NULL;
  buf->local = NULL;
  buf->bytes = 0;
}

/* Everyone learns whether every rank mapped its peers' parts before anyone uses one, so a rank
 * that failed never leaves the others waiting, and no one frees while another still maps.
 * map_res: this rank's result (its sentence already set when not MELD_OK). */
static meld_result_t agree_mapped(struct meld_comm *comm, meld_symbuf_msg_t *msgs, meld_result_t map_res) {
  for (int r = 0; r < comm->nranks; r++) msgs[r].ok = 1;
  msgs[comm->rank].ok = map_res == MELD_OK;
  MELD_CHECK(meld_bootstrap_allgather(comm->boot, msgs, sizeof *msgs));
  if (map_res != MELD_OK) return map_res;
  for (int r = 0; r < comm->nranks; r++)
    if (!msgs[r].ok) return meld_error(MELD_ERR_CUDA, "symmetric memory: rank %d could not map its peers' buffers", r);
  return MELD_OK;
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
  if (e == cudaSuccess && needs_ipc(comm)) e = cudaIpcGetMemHandle(&mine->handle, buf->local);
  mine->ptr = (uint64_t)(uintptr_t)buf->local;
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
    if (meld_comm_same_process(comm, r)) p = same_process_peer(comm, r, msgs[r].ptr, &e);
    else e = cudaIpcOpenMemHandle(&p, msgs[r].handle, cudaIpcMemLazyEnablePeerAccess);
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
  MELD_CHECK_GOTO(agree_mapped(comm, msgs, map_res), res, fail);
  free(msgs);
  MELD_INFO(MELD_SUB_MEM, "symmetric buffer of %zu bytes at %p", bytes, buf->local);
  return MELD_OK;
fail:
  free(msgs);
  meld_symbuf_destroy(comm, buf);
  return res;
}

/* ---- registration of the user's memory ------------------------------------------------ */

typedef CUresult (*addr_range_fn)(CUdeviceptr *, size_t *, CUdeviceptr);
static pthread_once_t g_range_once = PTHREAD_ONCE_INIT;
static addr_range_fn g_range;

static void range_lookup(void) {
  void *fn = NULL;
  enum cudaDriverEntryPointQueryResult q = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuMemGetAddressRange", &fn, 12000, cudaEnableDefault, &q) == cudaSuccess &&
      q == cudaDriverEntryPointSuccess)
    g_range = (addr_range_fn)fn;
  cudaGetLastError();
}

/* 1 if b's local part and [p, p + bytes) share a byte. */
static int symbuf_overlaps(const meld_symbuf_t *b, uintptr_t p, size_t bytes) {
  const uintptr_t q = (uintptr_t)b->local;
  return b->local && q < p + bytes && p < q + b->bytes;
}

/* This rank's checks of [ptr, ptr + bytes): device memory of its GPU, not symmetric already,
 * inside one allocation that CUDA IPC can export. Fills the message (handle, offset). */
static meld_result_t register_local(struct meld_comm *comm, void *ptr, size_t bytes, meld_symbuf_msg_t *mine) {
  struct cudaPointerAttributes at;
  memset(&at, 0, sizeof at);
  if (cudaPointerGetAttributes(&at, ptr) != cudaSuccess || at.type != cudaMemoryTypeDevice) {
    cudaGetLastError();
    return meld_error(MELD_ERR_INVALID_ARG, "%p is not device memory (%s)", ptr,
                      at.type == cudaMemoryTypeManaged ? "managed memory cannot be shared"
                      : at.type == cudaMemoryTypeHost  ? "it is pinned host memory"
                                                       : "not allocated by CUDA");
  }
  if (at.device != comm->device)
    return meld_error(MELD_ERR_INVALID_ARG, "%p is memory of GPU %d, not of this rank's GPU %d", ptr, at.device,
                      comm->device);
  pthread_once(&g_range_once, range_lookup);
  if (!g_range) return meld_error(MELD_ERR_CUDA, "the driver's cuMemGetAddressRange is not available");
  CUdeviceptr base = 0;
  size_t size = 0;
  if (g_range(&base, &size, (CUdeviceptr)(uintptr_t)ptr) != CUDA_SUCCESS)
    return meld_error(MELD_ERR_INVALID_ARG, "%p: the driver knows no allocation there", ptr);
  const uintptr_t p = (uintptr_t)ptr;
  if (bytes > size - (p - (uintptr_t)base))
    return meld_error(MELD_ERR_INVALID_ARG,
                      "[%p, +%zu) runs past the end of its allocation (%zu bytes from %p): register "
                      "within one allocation",
                      ptr, bytes, size, (void *)(uintptr_t)base);
  /* (after the bounds check: p + bytes cannot wrap here) */
  int overlap = symbuf_overlaps(&comm->workspace, p, bytes) || symbuf_overlaps(&comm->pad, p, bytes);
  for (const meld_symbuf_t *b = comm->user_bufs; b && !overlap; b = b->next) overlap = symbuf_overlaps(b, p, bytes);
  if (overlap)
    return meld_error(MELD_ERR_INVALID_ARG, "[%p, +%zu) overlaps memory already symmetric on this comm", ptr, bytes);
  mine->offset = (uint64_t)(p - (uintptr_t)base);
  mine->base = (uint64_t)base;
  mine->alloc_bytes = (uint64_t)size;
  mine->ptr = (uint64_t)p;
  if (needs_ipc(comm)) {
    const cudaError_t e = cudaIpcGetMemHandle(&mine->handle, (void *)(uintptr_t)base);
    if (e != cudaSuccess) {
      cudaGetLastError();
      return meld_error(MELD_ERR_UNSUPPORTED,
                        "%p cannot be shared with the peers through CUDA IPC: %s (%s). Register "
                        "memory from cudaMalloc (not cudaMallocAsync pools, cuMemCreate or "
                        "expandable segments), or allocate it with meld_mem_alloc",
                        ptr, cudaGetErrorName(e), cudaGetErrorString(e));
    }
  }
  return MELD_OK;
}

meld_result_t meld_symbuf_register(struct meld_comm *comm, void *ptr, size_t bytes, meld_symbuf_t *buf) {
  meld_result_t res = MELD_OK;
  memset(buf, 0, sizeof *buf);
  buf->registered = 1;
  meld_symbuf_msg_t *msgs = calloc((size_t)comm->nranks, sizeof *msgs);
  buf->peer = calloc((size_t)comm->nranks, sizeof *buf->peer);
  buf->maps = calloc((size_t)comm->nranks, sizeof *buf->maps);
  if (!msgs || !buf->peer || !buf->maps) {
    free(msgs);
    meld_symbuf_destroy(comm, buf);
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "symmetric memory: out of host memory");
  }
  meld_symbuf_msg_t *mine = &msgs[comm->rank];
  mine->bytes = bytes;
  const meld_result_t lr = register_local(comm, ptr, bytes, mine);
  char local_err[512] = "";
  if (lr != MELD_OK) snprintf(local_err, sizeof local_err, "%s", meld_last_error());
  mine->ok = lr == MELD_OK;
  mine->err = (int32_t)lr;
  /* Everyone learns whether everyone's range is usable: no rank proceeds alone. */
  MELD_CHECK_GOTO(meld_bootstrap_allgather(comm->boot, msgs, sizeof *msgs), res, fail);
  if (lr != MELD_OK) { /* this rank's own reason first */
    res = meld_error(lr, "%s", local_err);
    goto fail;
  }
  for (int r = 0; r < comm->nranks; r++) {
    if (!msgs[r].ok) {
      res = meld_error((meld_result_t)msgs[r].err, "rank %d could not register its range; see its log", r);
      goto fail;
    }
    if (msgs[r].bytes != bytes) {
      res = meld_error(MELD_ERR_INVALID_ARG,
                       "rank %d registers %llu bytes, this rank %zu: every rank must pass the same size", r,
                       (unsigned long long)msgs[r].bytes, bytes);
      goto fail;
    }
  }
  buf->local = ptr;
  buf->bytes = bytes;
  buf->peer[comm->rank] = ptr;
  meld_result_t map_res = MELD_OK;
  for (int r = 0; r < comm->nranks && map_res == MELD_OK; r++) {
    if (r == comm->rank || comm->rank_node[r] != comm->node) continue;
    cudaError_t e = cudaSuccess;
    if (meld_comm_same_process(comm, r)) {
      buf->peer[r] = same_process_peer(comm, r, msgs[r].ptr, &e);
      if (!buf->peer[r]) {
        map_res = meld_error(MELD_ERR_CUDA, "cannot reach rank %d's registered range from GPU %s: %s (%s)", r,
                             comm->ranks[comm->rank].bus_id, cudaGetErrorName(e), cudaGetErrorString(e));
        break;
      }
      continue;
    }
    buf->maps[r] = ipc_map_get(comm, r, &msgs[r].handle, msgs[r].base, msgs[r].alloc_bytes, &e);
    if (!buf->maps[r]) {
      map_res = meld_error(MELD_ERR_CUDA, "cannot map rank %d's registered range from GPU %s: %s (%s)", r,
                           comm->ranks[comm->rank].bus_id, cudaGetErrorName(e), cudaGetErrorString(e));
      break;
    }
    buf->peer[r] = (uint8_t *)buf->maps[r]->base + msgs[r].offset;
  }
  MELD_CHECK_GOTO(agree_mapped(comm, msgs, map_res), res, fail);
  free(msgs);
  MELD_INFO(MELD_SUB_MEM, "registered %zu bytes at %p as symmetric", bytes, ptr);
  return MELD_OK;
fail:
  free(msgs);
  meld_symbuf_destroy(comm, buf);
  return res;
}
