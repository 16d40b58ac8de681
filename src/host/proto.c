/* proto.c — host side of the device protocol: state in the pad and in host-mapped memory,
 * abort that reaches stuck kernels, check with the error record as a sentence, the watchdog,
 * the trace buffer, and cooperative launch. See proto.h (host) and src/common/proto.h. */
#include "proto.h"

#include <cuda_runtime_api.h>
#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "error.h"
#include "log.h"
#include "trace.h"

_Static_assert(MELD_PAD_BYTES == MELD_SIGNAL_PAD_BYTES, "pad size: common/proto.h vs comm.h");
_Static_assert(MELD_PROTO_MAX_RANKS == MELD_MAX_RANKS, "max ranks: common/proto.h vs comm.h");
_Static_assert(MELD_PAD_OFF_ARGS + MELD_PROTO_MAX_RANKS * 16u <= MELD_PAD_OFF_SIGNALS, "pad: args overlap signals");
_Static_assert(MELD_PAD_OFF_SCRATCH + 4u * MELD_SCRATCH_WORDS <= MELD_PAD_OFF_ARGS, "pad: scratch overflow");
_Static_assert(MELD_PAD_OFF_QUEUES + 4u * MELD_NUM_QUEUES <= MELD_PAD_OFF_SCRATCH, "pad: queues overflow");
_Static_assert(MELD_PAD_OFF_DATA <= MELD_PAD_BYTES, "pad: regions overflow");
_Static_assert(MELD_PAD_OFF_NET + MELD_PAD_NET_BYTES <= MELD_PAD_OFF_LL, "pad: the net words overflow the data region");
_Static_assert(sizeof(meld_wait_mirror_t) == 64, "mirror entry is 64 bytes");
_Static_assert(sizeof(meld_trace_event_t) == 32, "trace event is 32 bytes");

#define MELD_TRACE_EVENTS_PER_CTA 4096u
#define MELD_ABORT_POLL_MS 100   /* how long abort/check wait for their small copies */

/* Host-mapped pinned block (one per comm): written by kernels, read by the host at any time. */
typedef struct {
  uint32_t host_abort;  /* nonzero (an abort code) after meld_comm_abort; kernels poll it  */
  uint32_t abort_src;   /* source of the abort-code copies into the pads                    */
  uint32_t probe;       /* destination of the pad abort-word probe                          */
  uint32_t pad_;
  meld_error_record_t record;
  meld_wait_mirror_t mirror[MELD_MIRROR_CTAS];
} meld_proto_host_t;

struct meld_proto_state {
  meld_proto_host_t *host;     /* host pointer of the mapped block                      */
  meld_proto_host_t *host_dev; /* device pointer of the same                            */
  uint8_t **peer_pads_dev;     /* device array [nranks]                                 */
  meld_proto_dev_t dev;
  cudaStream_t side;           /* non-blocking: abort copies and probes                 */
  int side_owned;              /* 0: the parent comm's (config side_stream)             */
  cudaEvent_t side_done;
  pthread_mutex_t side_mu;     /* abort and check may run on different threads          */
  meld_trace_t *trace;
  char trace_path[1024];
  pthread_t watchdog;
  int watchdog_started;
  pthread_mutex_t mu;
  pthread_cond_t cv;
  int stop;
  int logged;                  /* the watchdog logged the record (under mu)             */
  int64_t timeout_ms;
  int64_t watchdog_ms;
};

static const char *const g_op_names[] = {
    [MELD_OP_NONE] = "none",
    [MELD_OP_AG_GEMM] = "ag_gemm",
    [MELD_OP_GEMM_RS] = "gemm_rs",
    [MELD_OP_GEMM_AR] = "gemm_ar",
    [MELD_OP_MOE_DISPATCH_GEMM] = "moe_dispatch_gemm",
    [MELD_OP_MOE_FFN] = "moe_ffn",
    [MELD_OP_MOE_COMBINE] = "moe_combine",
    [MELD_OP_RING_ATTENTION] = "ring_attention",
    [MELD_OP_ALL_GATHER] = "all_gather",
    [MELD_OP_REDUCE_SCATTER] = "reduce_scatter",
    [MELD_OP_ALL_REDUCE] = "all_reduce",
    [MELD_OP_ALL_TO_ALL] = "all_to_all",
    [MELD_OP_TEST_SIGNAL] = "signal_test",
    [MELD_OP_TEST_PINGPONG] = "pingpong_test",
    [MELD_OP_TEST_LITMUS] = "litmus_test",
    [MELD_OP_TEST_ABORT] = "abort_test",
};

const char *meld_op_name(uint32_t op) {
  if (op < sizeof g_op_names / sizeof g_op_names[0] && g_op_names[op]) return g_op_names[op];
  return "unknown op";
}

/* ---- formatting ------------------------------------------------------------------------------ */

static void format_stamp(uint64_t s, char *buf, size_t len) {
  if (meld_stamp_seq(s)) snprintf(buf, len, "epoch %llu seq %u", (unsigned long long)meld_stamp_epoch(s), meld_stamp_seq(s));
  else snprintf(buf, len, "epoch %llu", (unsigned long long)meld_stamp_epoch(s));
}

static const char *abort_reason_text(uint32_t word) {
  switch (meld_abort_reason(word)) {
  case MELD_ABORT_TIMEOUT: return "a wait timed out there";
  case MELD_ABORT_USER: return "meld_comm_abort";
  case MELD_ABORT_ARGS: return "an argument mismatch";
  case MELD_ABORT_INPUT: return "unusable input";
  default: return "an unknown reason";
  }
}

/* "for signal slot 17 (from rank 0) to reach epoch 5; it holds epoch 4" */
static void format_wait(const meld_error_record_t *r, char *buf, size_t len) {
  char want[64], have[64];
  format_stamp(r->expected, want, sizeof want);
  format_stamp(r->observed, have, sizeof have);
  switch (r->region) {
  case MELD_REGION_SIGNAL:
  case MELD_REGION_CREDIT:
    snprintf(buf, len, "waiting for %s slot %u (from rank %d) to reach %s; it holds %s",
             r->region == MELD_REGION_SIGNAL ? "signal" : "credit", r->index, r->peer, want, have);
    break;
  case MELD_REGION_ARGS:
    snprintf(buf, len, "waiting for rank %d's argument handshake of call %llu; its slot holds call %u",
             r->peer, (unsigned long long)r->epoch, (unsigned)(r->observed >> 32));
    break;
  case MELD_REGION_MBARRIER:
    snprintf(buf, len, "waiting for the mbarrier at shared address 0x%x to complete phase parity %llu",
             r->index, (unsigned long long)r->expected);
    break;
  case MELD_REGION_OTHER:
    snprintf(buf, len, "waiting for flag %u (from rank %d) to reach %s; it holds %s", r->index, r->peer,
             want, have);
    break;
  default:
    snprintf(buf, len, "at kernel entry");
    break;
  }
}

/* The result code of a recorded failure. */
static meld_result_t fail_result(uint32_t kind) {
  return kind == MELD_FAIL_TIMEOUT ? MELD_ERR_TIMEOUT : kind == MELD_FAIL_INPUT ? MELD_ERR_INVALID_ARG : MELD_ERR_ABORTED;
}

void meld_proto_format_record(const meld_error_record_t *r, int timeout_ms, char *buf, size_t len) {
  char wait[256], label[MELD_RECORD_LABEL_BYTES + 8] = "";
  format_wait(r, wait, sizeof wait);
  if (r->label[0]) snprintf(label, sizeof label, " (%.*s)", MELD_RECORD_LABEL_BYTES - 1, r->label);
  const char *op = meld_op_name(r->op);
  const char *role = meld_role_name(r->role);
  unsigned long long call = (unsigned long long)r->epoch;
  switch (r->kind) {
  case MELD_FAIL_TIMEOUT:
    snprintf(buf, len,
             "rank %d CTA %d (%s) timed out after %lld ms (timeout_ms %d) in op '%s' (call %llu) %s%s",
             r->rank, r->cta, role, (long long)(r->waited_ns / 1000000ull), timeout_ms, op, call, wait, label);
    break;
  case MELD_FAIL_ARGS:
    snprintf(buf, len,
             "rank %d CTA %d (%s) in op '%s' (call %llu): the arguments differ between ranks: rank %d's "
             "argument hash is 0x%08llx, this rank's is 0x%08llx (every rank must make the same calls, "
             "in the same order, with the same shapes, and pass the buffers that peers access either "
             "from meld_mem_alloc at the same offsets on every rank or from ordinary memory on every "
             "rank); the communicator is aborted",
             r->rank, r->cta, role, op, call, r->peer, (unsigned long long)r->observed,
             (unsigned long long)r->expected);
    break;
  case MELD_FAIL_INPUT:
    snprintf(buf, len,
             "rank %d CTA %d (%s) in op '%s' (call %llu): unusable input: %.*s: %llu (limit %llu; rank %d); the "
             "communicator is aborted",
             r->rank, r->cta, role, op, call, MELD_RECORD_LABEL_BYTES - 1, r->label, (unsigned long long)r->observed,
             (unsigned long long)r->expected, r->peer);
    break;
  case MELD_FAIL_ABORTED:
    snprintf(buf, len,
             "rank %d CTA %d (%s) stopped in op '%s' (call %llu) because the communicator was aborted by "
             "rank %d (%s), %s%s",
             r->rank, r->cta, role, op, call, meld_abort_origin(r->abort_word), abort_reason_text(r->abort_word),
             wait, label);
    break;
  default:
    snprintf(buf, len, "no error recorded");
    break;
  }
}

void meld_proto_read_record(struct meld_comm *comm, meld_error_record_t *out) {
  meld_proto_host_t *h = comm->proto->host;
  /* Acquire: pairs with the kernel's st.release.sys of kind after the other fields. */
  uint32_t kind = __atomic_load_n(&h->record.kind, __ATOMIC_ACQUIRE);
  memcpy(out, (const void *)&h->record, sizeof *out);
  out->kind = kind;
}

int meld_proto_format_waits(struct meld_comm *comm, char *buf, size_t len) {
  meld_proto_host_t *h = comm->proto->host;
  int n = 0;
  size_t used = 0;
  if (len) buf[0] = 0;
  for (int c = 0; c < MELD_MIRROR_CTAS; c++) {
    const volatile meld_wait_mirror_t *m = &h->mirror[c];
    if (__atomic_load_n(&h->mirror[c].state, __ATOMIC_ACQUIRE) != 1u) continue;
    meld_error_record_t r;
    memset(&r, 0, sizeof r);
    r.region = m->region;
    r.index = m->index;
    r.peer = m->peer;
    r.expected = m->target;
    r.epoch = m->epoch;
    r.observed = 0;
    char wait[256];
    format_wait(&r, wait, sizeof wait);
    char *hold = strstr(wait, "; it holds");
    if (hold) *hold = 0; /* the mirror does not know the current value */
    if (used < len)
      used += (size_t)snprintf(buf + used, len - used, "CTA %d (%s) of op '%s' (call %llu) is %s\n", c, meld_role_name(m->role), meld_op_name(m->op),
                               (unsigned long long)m->epoch, wait);
    n++;
  }
  return n;
}

/* ---- the watchdog ------------------------------------------------------------------------------ */

static void *watchdog_main(void *arg) {
  struct meld_comm *comm = arg;
  struct meld_proto_state *st = comm->proto;
  pthread_mutex_lock(&st->mu);
  while (!st->stop) {
    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    long long ns = ts.tv_nsec + (long long)(st->watchdog_ms % 1000) * 1000000LL;
    ts.tv_sec += (time_t)(st->watchdog_ms / 1000 + ns / 1000000000LL);
    ts.tv_nsec = (long)(ns % 1000000000LL);
    pthread_cond_timedwait(&st->cv, &st->mu, &ts);
    if (st->stop || st->logged) continue;
    if (__atomic_load_n(&st->host->record.kind, __ATOMIC_ACQUIRE) == MELD_FAIL_NONE) continue;
    st->logged = 1;
    meld_error_record_t r;
    meld_proto_read_record(comm, &r);
    char msg[1024], waits[4096];
    meld_proto_format_record(&r, (int)st->timeout_ms, msg, sizeof msg);
    int n = meld_proto_format_waits(comm, waits, sizeof waits);
    MELD_WARN(MELD_SUB_PROTO, "watchdog: %s (call meld_comm_check, then destroy the communicator)%s%s", msg,
              n ? "; still waiting:\n" : "", n ? waits : "");
  }
  pthread_mutex_unlock(&st->mu);
  return NULL;
}

/* ---- create / destroy -------------------------------------------------------------------------- */

static void trace_path_for_rank(const char *path, int rank, int nranks, char *out, size_t len) {
  const char *pct = strstr(path, "%r");
  const char *dot = strrchr(path, '.'), *slash = strrchr(path, '/');
  int n;
  if (pct) n = snprintf(out, len, "%.*s%d%s", (int)(pct - path), path, rank, pct + 2);
  else if (nranks > 1 && dot && (!slash || dot > slash))
    n = snprintf(out, len, "%.*s.rank%d%s", (int)(dot - path), path, rank, dot);
  else if (nranks > 1) n = snprintf(out, len, "%s.rank%d", path, rank);
  else n = snprintf(out, len, "%s", path);
  if (n < 0 || (size_t)n >= len) MELD_WARN(MELD_SUB_TRACE, "trace path %s is too long: truncated", path);
}

static void state_free(struct meld_proto_state *st) {
  if (!st) return;
  if (st->trace) meld_trace_destroy(st->trace);
  if (st->side_done) cudaEventDestroy(st->side_done);
  if (st->side && st->side_owned) cudaStreamDestroy(st->side);
  if (st->peer_pads_dev) cudaFree(st->peer_pads_dev);
  if (st->host) cudaFreeHost(st->host);
  pthread_mutex_destroy(&st->side_mu);
  pthread_mutex_destroy(&st->mu);
  pthread_cond_destroy(&st->cv);
  free(st);
}

void *meld_proto_side_stream(struct meld_comm *comm) {
  return comm && comm->proto ? (void *)comm->proto->side : NULL;
}

const uint32_t *meld_proto_host_abort(struct meld_comm *comm) {
  return comm && comm->proto && comm->proto->host ? &comm->proto->host->host_abort : NULL;
}

meld_result_t meld_proto_create(struct meld_comm *comm) {
  meld_result_t res = MELD_OK;
  struct meld_proto_state *st = calloc(1, sizeof *st);
  if (!st) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld_comm_init: out of host memory");
  pthread_mutex_init(&st->side_mu, NULL);
  pthread_mutex_init(&st->mu, NULL);
  pthread_cond_init(&st->cv, NULL);
  st->timeout_ms = comm->cfg.timeout_ms;
  st->watchdog_ms = 1000;
  MELD_CHECK_GOTO(meld_env_int64("MELD_WATCHDOG_MS", 1, INT64_C(1) << 32, &st->watchdog_ms), res, fail);

  if (!comm->pad.local || comm->pad.bytes < MELD_PAD_BYTES || !comm->pad.peer) {
    res = meld_error(MELD_ERR_INTERNAL, "meld_proto_create: the signal pad is missing or smaller than %zu bytes",
                     (size_t)MELD_PAD_BYTES);
    goto fail;
  }
  MELD_CUDA_CHECK_GOTO(cudaHostAlloc((void **)&st->host, sizeof *st->host,
                                     cudaHostAllocMapped | cudaHostAllocPortable),
                       res, fail);
  memset(st->host, 0, sizeof *st->host);
  MELD_CUDA_CHECK_GOTO(cudaHostGetDevicePointer((void **)&st->host_dev, st->host, 0), res, fail);
  st->side = (cudaStream_t)comm->cfg.side_stream;
  if (!st->side) {
    MELD_CUDA_CHECK_GOTO(cudaStreamCreateWithFlags(&st->side, cudaStreamNonBlocking), res, fail);
    st->side_owned = 1;
  }
  MELD_CUDA_CHECK_GOTO(cudaEventCreateWithFlags(&st->side_done, cudaEventDisableTiming), res, fail);

  /* The pad is zeroed by its allocator; zero it again here so the protocol does not depend
   * on that. Safe: no peer can write it before init's agreement step after this function. */
  MELD_CUDA_CHECK_GOTO(cudaMemsetAsync(comm->pad.local, 0, MELD_PAD_BYTES, st->side), res, fail);
  MELD_CUDA_CHECK_GOTO(cudaMalloc((void **)&st->peer_pads_dev, (size_t)comm->nranks * sizeof(void *)), res, fail);
  MELD_CUDA_CHECK_GOTO(cudaMemcpyAsync(st->peer_pads_dev, comm->pad.peer, (size_t)comm->nranks * sizeof(void *),
                                       cudaMemcpyHostToDevice, st->side),
                       res, fail);
  MELD_CUDA_CHECK_GOTO(cudaStreamSynchronize(st->side), res, fail);

  if (comm->cfg.trace_path[0]) {
    int ctas = comm->sm_count > 0 ? comm->sm_count : 1;
    MELD_CHECK_GOTO(meld_trace_create((uint32_t)ctas, MELD_TRACE_EVENTS_PER_CTA, &st->trace), res, fail);
    trace_path_for_rank(comm->cfg.trace_path, comm->rank, comm->nranks, st->trace_path, sizeof st->trace_path);
  }

  meld_proto_dev_t *d = &st->dev;
  d->pad = (uint8_t *)comm->pad.local;
  d->peer_pads = st->peer_pads_dev;
  d->host_abort = &st->host_dev->host_abort;
  d->record = &st->host_dev->record;
  d->mirror = st->host_dev->mirror;
  d->trace = meld_trace_dev(st->trace);
  d->timeout_ns = (uint64_t)comm->cfg.timeout_ms * 1000000ull;
  d->rank = comm->rank;
  d->nranks = comm->nranks;

  comm->proto = st;
  if (pthread_create(&st->watchdog, NULL, watchdog_main, comm) != 0) {
    comm->proto = NULL;
    res = meld_error(MELD_ERR_SYSTEM, "meld_comm_init: cannot start the watchdog thread: %s", strerror(errno));
    goto fail;
  }
  st->watchdog_started = 1;
  MELD_INFO(MELD_SUB_PROTO, "protocol: timeout %lld ms, watchdog %lld ms%s%s", (long long)st->timeout_ms,
            (long long)st->watchdog_ms, st->trace ? ", trace to " : "", st->trace ? st->trace_path : "");
  return MELD_OK;
fail:
  state_free(st);
  return res;
}

void meld_proto_destroy(struct meld_comm *comm) {
  struct meld_proto_state *st = comm->proto;
  if (!st) return;
  if (st->watchdog_started) {
    pthread_mutex_lock(&st->mu);
    st->stop = 1;
    pthread_cond_signal(&st->cv);
    pthread_mutex_unlock(&st->mu);
    pthread_join(st->watchdog, NULL);
  }
  if (st->trace && meld_trace_write(st->trace, st->trace_path, comm->rank) != MELD_OK)
    MELD_WARN(MELD_SUB_TRACE, "%s", meld_last_error());
  comm->proto = NULL;
  state_free(st);
}

meld_proto_dev_t meld_proto_dev(struct meld_comm *comm) { return comm->proto->dev; }

/* ---- abort and check ------------------------------------------------------------------------- */

/* Waits up to MELD_ABORT_POLL_MS for the side stream's work recorded by side_done; never
 * blocks on it (it may sit behind a stuck kernel). Returns 1 if complete. */
static int side_wait(struct meld_proto_state *st) {
  for (int i = 0; i < MELD_ABORT_POLL_MS * 10; i++) {
    cudaError_t e = cudaEventQuery(st->side_done);
    if (e == cudaSuccess) return 1;
    if (e != cudaErrorNotReady) return 0;
    usleep(100);
  }
  return 0;
}

meld_result_t meld_proto_abort(struct meld_comm *comm) {
  struct meld_proto_state *st = comm->proto;
  const uint32_t code = meld_abort_code(MELD_ABORT_USER, comm->rank);
  /* 1. The word every slow wait of this rank polls (host-mapped): reaches a stuck kernel. */
  uint32_t zero = 0;
  __atomic_compare_exchange_n(&st->host->host_abort, &zero, code, 0, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);
  /* 2. Best effort, no synchronization: copy the code into this rank's and every same-node
   * peer's pad abort word on a non-blocking stream. When no kernel of ours runs, this is what
   * reaches the peers (and our next kernels' entry check). The copies may queue behind a
   * stuck kernel; then step 1 gets there first and that kernel raises the words itself. */
  pthread_mutex_lock(&st->side_mu);
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != comm->device) cudaSetDevice(comm->device);
  st->host->abort_src = code;
  cudaError_t e = cudaSuccess;
  for (int r = 0; r < comm->nranks && e == cudaSuccess; r++)
    if (comm->pad.peer[r])
      e = cudaMemcpyAsync((uint8_t *)comm->pad.peer[r] + MELD_PAD_OFF_ABORT, &st->host->abort_src,
                          sizeof(uint32_t), cudaMemcpyHostToDevice, st->side);
  if (e == cudaSuccess) e = cudaEventRecord(st->side_done, st->side);
  int done = e == cudaSuccess && side_wait(st);
  if (prev >= 0 && prev != comm->device) cudaSetDevice(prev);
  pthread_mutex_unlock(&st->side_mu);
  if (e != cudaSuccess)
    MELD_WARN(MELD_SUB_PROTO, "meld_comm_abort: copying the abort word failed (%s); running kernels still see "
              "the host-mapped word", cudaGetErrorString(e));
  else if (!done)
    MELD_INFO(MELD_SUB_PROTO, "meld_comm_abort: abort-word copies still queued (a kernel is running); it "
              "sees the host-mapped word");
  MELD_INFO(MELD_SUB_PROTO, "rank %d: communicator aborted by meld_comm_abort", comm->rank);
  return MELD_OK;
}

/* Reads this rank's pad abort word without blocking behind a running kernel: a small copy on
 * the side stream, polled for MELD_ABORT_POLL_MS. Returns 0 if not aborted or unknown. */
static uint32_t probe_abort_word(struct meld_comm *comm) {
  struct meld_proto_state *st = comm->proto;
  pthread_mutex_lock(&st->side_mu);
  int prev = -1;
  cudaGetDevice(&prev);
  if (prev != comm->device) cudaSetDevice(comm->device);
  uint32_t v = 0;
  __atomic_store_n(&st->host->probe, 0u, __ATOMIC_RELAXED);
  cudaError_t e = cudaMemcpyAsync(&st->host->probe, (uint8_t *)comm->pad.local + MELD_PAD_OFF_ABORT,
                                  sizeof(uint32_t), cudaMemcpyDeviceToHost, st->side);
  if (e == cudaSuccess) e = cudaEventRecord(st->side_done, st->side);
  if (e == cudaSuccess && side_wait(st)) v = __atomic_load_n(&st->host->probe, __ATOMIC_ACQUIRE);
  if (prev >= 0 && prev != comm->device) cudaSetDevice(prev);
  pthread_mutex_unlock(&st->side_mu);
  return v;
}

meld_result_t meld_proto_check(struct meld_comm *comm) {
  struct meld_proto_state *st = comm->proto;
  meld_error_record_t r;
  meld_proto_read_record(comm, &r);
  if (r.kind != MELD_FAIL_NONE) {
    char msg[1024];
    meld_proto_format_record(&r, (int)st->timeout_ms, msg, sizeof msg);
    return meld_error(fail_result(r.kind), "%s", msg);
  }
  uint32_t host = __atomic_load_n(&st->host->host_abort, __ATOMIC_ACQUIRE);
  if (host)
    return meld_error(MELD_ERR_ABORTED, "rank %d: the communicator was aborted by meld_comm_abort on this rank",
                      comm->rank);
  uint32_t word = probe_abort_word(comm);
  if (word)
    return meld_error(MELD_ERR_ABORTED,
                      "rank %d: the communicator was aborted by rank %d (%s); no call of this rank was "
                      "waiting then",
                      comm->rank, meld_abort_origin(word), abort_reason_text(word));
  return MELD_OK;
}

/* ---- cooperative launch ------------------------------------------------------------------------ */

meld_result_t meld_coop_grid(const void *kernel, int threads, size_t smem, int max_ctas, int sm_count, int *grid) {
  if (!kernel || !grid || threads <= 0 || sm_count <= 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld_coop_grid: bad argument (threads %d, sm_count %d)", threads,
                      sm_count);
  if (smem > 48u * 1024u)
    MELD_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)smem));
  int occ = 0;
  MELD_CUDA_CHECK(cudaOccupancyMaxActiveBlocksPerMultiprocessor(&occ, kernel, threads, smem));
  if (occ < 1)
    return meld_error(MELD_ERR_INVALID_ARG,
                      "a CTA of %d threads with %zu bytes of dynamic shared memory does not fit on one SM "
                      "(registers or shared memory): the fused kernel cannot be launched",
                      threads, smem);
  long g = sm_count; /* min(SMs, occupancy x SMs) with occupancy >= 1: one CTA per SM */
  if (max_ctas > 0 && g > max_ctas) g = max_ctas;
  *grid = (int)g;
  return MELD_OK;
}

meld_result_t meld_launch_coop(const void *kernel, int grid, int threads, size_t smem, void **args,
                               cudaStream_t stream) {
  cudaLaunchConfig_t cfg;
  cudaLaunchAttribute attr;
  memset(&cfg, 0, sizeof cfg);
  memset(&attr, 0, sizeof attr);
  cfg.gridDim.x = (unsigned)grid;
  cfg.gridDim.y = cfg.gridDim.z = 1;
  cfg.blockDim.x = (unsigned)threads;
  cfg.blockDim.y = cfg.blockDim.z = 1;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  attr.id = cudaLaunchAttributeCooperative;
  attr.val.cooperative = 1;
  cfg.attrs = &attr;
  cfg.numAttrs = 1;
  cudaError_t e = cudaLaunchKernelExC(&cfg, kernel, args);
  if (e == cudaErrorCooperativeLaunchTooLarge)
    return meld_error(MELD_ERR_CUDA,
                      "cooperative launch of %d CTAs x %d threads (%zu bytes shared memory) cannot have all "
                      "CTAs resident at once on this GPU (fewer SMs available, e.g. under MPS, or the CTA "
                      "is too large): refusing to launch a kernel that could hang",
                      grid, threads, smem);
  if (e != cudaSuccess)
    return meld_error(MELD_ERR_CUDA, "cooperative launch of %d CTAs x %d threads failed: %s (%s)", grid, threads,
                      cudaGetErrorName(e), cudaGetErrorString(e));
  return MELD_OK;
}

meld_result_t meld_proto_sticky_error(struct meld_comm *comm, const char *fn) {
  meld_error_record_t rec;
  meld_proto_read_record(comm, &rec);
  if (rec.kind == MELD_FAIL_NONE) return MELD_OK;
  char msg[1024];
  meld_proto_format_record(&rec, (int)comm->cfg.timeout_ms, msg, sizeof msg);
  return meld_error(fail_result(rec.kind), "%s: %s", fn, msg);
}
