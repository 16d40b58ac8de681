/* test_transport.c — the inter-node path's host side: ranks are fork()ed children (each its
 * own "node", or two per node), each with a host "workspace" region and a "pad" region,
 * writing through the proxy's command ring (src/host/proxy.c) and a transport. Every case
 * runs twice: over the tcp transport on loopback (src/host/transport_tcp.c), and over the
 * ibverbs transport (src/host/transport_ibv.c) on the fake HCA (tests/fake/fakeverbs.c: RC
 * queue pairs between processes through a shared fabric file; it checks keys, ranges, PSNs,
 * queue depths, and reads a write's source when it sends, not when it is posted). The ibv
 * group adds: WRITEs split at a small max_msg_sz, slow completions, RoCE addressing (GIDs),
 * the choice and probe errors (no library, no device, a port down, a bad MELD_IB_HCA or other
 * MELD_IB_* setting), and a rank whose connect fails before the address exchange.
 *
 *   - all-to-all: every rank sends every other rank chunks of random sizes (1 byte, several
 *     MiB, and small ones in between) of random data, one flag per chunk holding the stamp of
 *     a simulated epoch; receivers wait for each flag (bounded) and check the bytes. Two
 *     epochs reuse the same buffers and flag slots (stamps grow, slots are never reset).
 *     2, 4 and 8 ranks.
 *   - 1000 back-to-back small writes through a 64-slot ring (it wraps 15 times), one flag.
 *   - a rank killed mid-transfer: the others fail within the deadline with a sentence naming
 *     it, and tear down in bounded time.
 *   - emulated nodes (two ranks per node): only other nodes are connected and written to.
 *   - bad arguments: MELD_ERR_INVALID_ARG with sentences; ranks that register different
 *     regions fail connect together.
 * Children report through their exit code (see tests/mp/test_bootstrap.c for the pattern). */
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "bootstrap.h"
#include "common/mp_job.h"
#include "error.h"
#include "log.h"
#include "proxy.h"
#include "sock.h"
#include "transport.h"

#ifndef FAKEVERBS_LIB
#define MELD_NO_VERBS_TEST 1 /* the fake HCA was not built (no rdma-core headers) */
#define FAKEVERBS_LIB ""
#endif

/* (the ThreadSanitizer build raises the time bounds: it runs 5-20x slower) */
#ifndef CHILD_LIMIT_MS
#define CHILD_LIMIT_MS 15000 /* a child still running after this is killed: a hang */
#endif
#define MAX_CHILD 8          /* ranks at most (array sizes) */
#ifndef TIMEOUT_MS
#define TIMEOUT_MS 5000      /* transport and proxy bound */
#endif
#ifndef DETECT_MS
#define DETECT_MS 3000       /* a dead or unreachable peer is noticed within this */
#endif
#define MAXCH 16             /* chunks per (sender, receiver) and epoch */
#define PAD_BYTES 65536
#define BB_SLOT 4000         /* pad slot of the back-to-back test's flag */
#define BB_N 1000

static const char *g_kind = "tcp"; /* the group's transport: "tcp" or "ibv" */

/* A transport of the group's kind (tcp on loopback). */
static meld_result_t make_transport(int rank, int nranks, int node, meld_transport_t **t) {
  if (strcmp(g_kind, "tcp") == 0)
    return meld_transport_tcp_create(rank, nranks, node, "127.0.0.1", TIMEOUT_MS, t);
  return meld_transport_create(g_kind, rank, nranks, node, rank, NULL, TIMEOUT_MS, t);
}

static job_t new_job(int nranks) { return mp_new_job(nranks); }
static void run_children(int n, child_fn fn, const job_t *job, int *codes) {
  mp_run_children(n, fn, job, codes, CHILD_LIMIT_MS);
}
static void expect_codes(int n, const int *codes, int special, int special_code) {
  mp_expect_codes(n, codes, special, special_code);
}

/* ---- one rank's world ----------------------------------------------------------------------- */

typedef struct {
  int rank, n;
  size_t slice;            /* bytes per peer in the send and receive areas */
  uint8_t *work;           /* region 0: [send area: n slices][receive area: n slices] */
  uint64_t *pad;           /* region 1 */
  meld_bootstrap_t *b;
  meld_transport_t *t;
  meld_proxy_t *p;
} world_t;

static int setup(int idx, const job_t *job, size_t slice, int node, world_t *w) {
  memset(w, 0, sizeof *w);
  meld_log_set_rank(idx);
  w->rank = idx;
  w->n = job->nranks;
  w->slice = slice;
  w->work = aligned_alloc(4096, 2 * (size_t)w->n * slice);
  w->pad = aligned_alloc(4096, PAD_BYTES);
  CHILD_CHECK(w->work && w->pad);
  memset(w->pad, 0, PAD_BYTES);
  CHILD_CHECK(meld_bootstrap_init(&job->addr, w->n, idx, 10000, &w->b) == MELD_OK);
  CHILD_CHECK(make_transport(idx, w->n, node, &w->t) == MELD_OK);
  uint32_t id;
  CHILD_CHECK(meld_transport_register(w->t, w->work, 2 * (uint64_t)w->n * slice, &id) == MELD_OK && id == 0);
  CHILD_CHECK(meld_transport_register(w->t, w->pad, PAD_BYTES, &id) == MELD_OK && id == 1);
  CHILD_CHECK(meld_transport_connect(w->t, w->b) == MELD_OK);
  meld_proxy_config_t cfg = MELD_PROXY_CONFIG_INIT;
  cfg.nslots = 64;
  CHILD_CHECK(meld_proxy_create(w->t, &cfg, &w->p) == MELD_OK);
  return 0;
}

/* Clean teardown: drain, a barrier (nobody closes while others still send), close. */
static int teardown(int idx, world_t *w) {
  CHILD_CHECK(meld_proxy_destroy(w->p) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_barrier(w->b) == MELD_OK);
  meld_transport_close(w->t, TIMEOUT_MS);
  meld_bootstrap_destroy(w->b);
  free(w->work);
  free(w->pad);
  return 0;
}

/* ---- chunk plan and data: both ends compute them from (sender, receiver, epoch) ------------- */

/* Chunk sizes for s -> d in `epoch`, filling at most `slice` bytes: 1 byte, one of several MiB
 * (most of the slice), then random small ones. Returns the count. */
static int plan(int s, int d, uint64_t epoch, size_t slice, uint64_t *len) {
  uint64_t seed = mp_mix(((uint64_t)s << 40) ^ ((uint64_t)d << 20) ^ epoch), used = 0;
  int k = 0;
  len[k++] = 1, used = 1;
  uint64_t big = slice / 2 + mp_mix(seed + 1) % (slice / 4);
  len[k++] = big, used += big;
  for (int i = 2; i < MAXCH; i++) {
    uint64_t l = 1 + mp_mix(seed + (uint64_t)i) % (i % 3 ? 4096 : 65536);
    if (used + l > slice) break;
    len[k++] = l, used += l;
  }
  return k;
}

static uint64_t chunk_seed(int s, int d, uint64_t epoch, int c) {
  return ((uint64_t)s << 48) ^ ((uint64_t)d << 32) ^ (epoch << 16) ^ (uint64_t)c ^ 0x5eedull;
}

/* Sends this epoch's chunks to every remote rank (interleaved over receivers). Returns the
 * first enqueue's failure (with its sentence). */
static meld_result_t send_epoch(world_t *w, uint64_t epoch) {
  uint64_t len[MAX_CHILD][MAXCH], off[MAX_CHILD];
  int nch[MAX_CHILD] = {0}, most = 0;
  for (int d = 0; d < w->n; d++) {
    if (!meld_transport_is_remote(w->t, d)) continue;
    nch[d] = plan(w->rank, d, epoch, w->slice, len[d]);
    most = nch[d] > most ? nch[d] : most;
    uint8_t *src = w->work + (size_t)d * w->slice;
    for (int c = 0, o = 0; c < nch[d]; o += (int)len[d][c], c++)
      mp_fill(src + o, len[d][c], chunk_seed(w->rank, d, epoch, c));
    off[d] = 0;
  }
  for (int c = 0; c < most; c++)
    for (int d = 0; d < w->n; d++) {
      if (c >= nch[d]) continue;
      const uint64_t src = (uint64_t)d * w->slice + off[d];
      const uint64_t dst = (uint64_t)(w->n + w->rank) * w->slice + off[d];
      MELD_CHECK(meld_proxy_write(w->p, d, 0, src, 0, dst, len[d][c], 1,
                                  (uint32_t)(w->rank * MAXCH + c),
                                  meld_stamp(epoch, (uint32_t)c + 1)));
      off[d] += len[d][c];
    }
  return MELD_OK;
}

/* Waits for every remote sender's chunks of this epoch, checking each after its flag. */
static int recv_epoch(int idx, world_t *w, uint64_t epoch) {
  for (int s = 0; s < w->n; s++) {
    if (!meld_transport_is_remote(w->t, s)) continue;
    uint64_t len[MAXCH], o = 0;
    int k = plan(s, w->rank, epoch, w->slice, len);
    const uint8_t *area = w->work + (size_t)(w->n + s) * w->slice;
    for (int c = 0; c < k; o += len[c], c++) {
      char what[64];
      snprintf(what, sizeof what, "chunk %d from rank %d", c, s);
      CHILD_CHECK(meld_proxy_wait_flag(w->p, &w->pad[s * MAXCH + c],
                                       meld_stamp(epoch, (uint32_t)c + 1), TIMEOUT_MS,
                                       what) == MELD_OK);
      if (!mp_same(area + o, len[c], chunk_seed(s, w->rank, epoch, c))) {
        fprintf(stderr, "rank %d: epoch %llu chunk %d (%llu bytes) from rank %d is wrong\n",
                w->rank, (unsigned long long)epoch, c, (unsigned long long)len[c], s);
        return 1;
      }
    }
  }
  return 0;
}

static size_t slice_for(int n) { return n <= 2 ? 8u << 20 : n <= 4 ? 4u << 20 : 2u << 20; }

static int alltoall_rank(int idx, const job_t *job) {
  world_t w;
  if (setup(idx, job, slice_for(job->nranks), idx, &w)) return 1;
  for (uint64_t epoch = 1; epoch <= 2; epoch++) {
    CHILD_CHECK(send_epoch(&w, epoch) == MELD_OK);
    if (recv_epoch(idx, &w, epoch)) return 1;
    CHILD_CHECK(meld_proxy_flush(w.p, TIMEOUT_MS) == MELD_OK);
    /* Next epoch rewrites the receive areas: everyone must have checked this one. */
    CHILD_CHECK(meld_bootstrap_barrier(w.b) == MELD_OK);
  }
  /* 1000 back-to-back small writes to the next rank, one flag slot, 64-slot ring. */
  const int to = (idx + 1) % w.n, from = (idx + w.n - 1) % w.n;
  const uint64_t epoch = 3, dst_base = (uint64_t)w.n * w.slice; /* receive area start */
  uint8_t *src = w.work;
  for (int k = 0; k < BB_N; k++) mp_fill(src + 64 * k, 1 + k % 64, chunk_seed(idx, to, epoch, k));
  for (int k = 0; k < BB_N; k++)
    CHILD_CHECK(meld_proxy_write(w.p, to, 0, 64 * (uint64_t)k, 0, dst_base + 64 * (uint64_t)k,
                                 1 + k % 64, 1, BB_SLOT, meld_stamp(epoch, (uint32_t)k + 1)) == MELD_OK);
  const uint8_t *got = w.work + dst_base;
  CHILD_CHECK(meld_proxy_wait_flag(w.p, &w.pad[BB_SLOT], meld_stamp(epoch, 500), TIMEOUT_MS, "500 writes") == MELD_OK);
  for (int k = 0; k < 500; k++) CHILD_CHECK(mp_same(got + 64 * k, 1 + k % 64, chunk_seed(from, idx, epoch, k)));
  CHILD_CHECK(meld_proxy_wait_flag(w.p, &w.pad[BB_SLOT], meld_stamp(epoch, BB_N), TIMEOUT_MS, "1000 writes") == MELD_OK);
  for (int k = 0; k < BB_N; k++) CHILD_CHECK(mp_same(got + 64 * k, 1 + k % 64, chunk_seed(from, idx, epoch, k)));
  CHILD_CHECK(meld_proxy_flush(w.p, TIMEOUT_MS) == MELD_OK);
  CHILD_CHECK(meld_proxy_done(w.p) == meld_proxy_ring(w.p)->head); /* every command, locally */
  return teardown(idx, &w);
}

static void alltoall(int n) {
  job_t job = new_job(n);
  int codes[MAX_CHILD];
  run_children(n, alltoall_rank, &job, codes);
  expect_codes(n, codes, -1, 0);
}
static void test_alltoall_2(void **state) { (void)state; alltoall(2); }
static void test_alltoall_4(void **state) { (void)state; alltoall(4); }
static void test_alltoall_8(void **state) { (void)state; alltoall(8); }

/* ---- sources reused as soon as `done` allows -------------------------------------------------- */

#define REUSE_SLOTS 4
#define REUSE_BYTES (256u << 10)
#define REUSE_CHUNKS 32 /* x 256 KiB = the 8 MiB receive slice of 2 ranks */

/* Each rank streams 32 chunks to the other through only 4 source slots, rewriting a slot as
 * soon as meld_proxy_done() passes the command that last read it. A transport that reports a
 * write complete before its source was read (the fake HCA reads it late, at send time) makes
 * the receiver see the newer chunk's bytes. */
static int reuse_rank(int idx, const job_t *job) {
  world_t w;
  if (setup(idx, job, slice_for(2), idx, &w)) return 1;
  const int peer = 1 - idx;
  const uint64_t epoch = 7;
  uint64_t last[REUSE_SLOTS] = {0};
  int used[REUSE_SLOTS] = {0};
  for (int k = 0; k < REUSE_CHUNKS; k++) {
    const int slot = k % REUSE_SLOTS;
    if (used[slot]) {
      const int64_t deadline = meld_now_ms() + TIMEOUT_MS;
      while (meld_proxy_done(w.p) <= last[slot]) {
        CHILD_CHECK(meld_now_ms() < deadline);
        meld_sleep_ms(0);
      }
    }
    uint8_t *src = w.work + (size_t)slot * REUSE_BYTES;
    mp_fill(src, REUSE_BYTES, chunk_seed(idx, peer, epoch, k));
    meld_cmd_t c = {.opcode = MELD_CMD_WRITE, .src_region = 0, .dst_region = 0, .flag_region = 1,
                    .dst_rank = peer, .flag_index = (uint32_t)k,
                    .src_offset = (uint64_t)slot * REUSE_BYTES,
                    .dst_offset = (uint64_t)(w.n + idx) * w.slice + (uint64_t)k * REUSE_BYTES,
                    .bytes = REUSE_BYTES, .flag_value = meld_stamp(epoch, 1)};
    CHILD_CHECK(meld_proxy_enqueue(w.p, &c, &last[slot]) == MELD_OK);
    used[slot] = 1;
  }
  const uint8_t *area = w.work + (size_t)(w.n + peer) * w.slice;
  for (int k = 0; k < REUSE_CHUNKS; k++) {
    CHILD_CHECK(meld_proxy_wait_flag(w.p, &w.pad[k], meld_stamp(epoch, 1), TIMEOUT_MS, "reuse") == MELD_OK);
    if (!mp_same(area + (size_t)k * REUSE_BYTES, REUSE_BYTES, chunk_seed(peer, idx, epoch, k))) {
      fprintf(stderr, "rank %d: chunk %d from rank %d is wrong (its source was rewritten before "
              "the transport read it?)\n", idx, k, peer);
      return 1;
    }
  }
  CHILD_CHECK(meld_proxy_flush(w.p, TIMEOUT_MS) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_barrier(w.b) == MELD_OK);
  return teardown(idx, &w);
}

static void test_source_reuse(void **state) {
  (void)state;
  job_t job = new_job(2);
  int codes[MAX_CHILD];
  run_children(2, reuse_rank, &job, codes);
  expect_codes(2, codes, -1, 0);
}

/* The fake HCA's settings for one case (a failed case must not leave them to the next). */
static int fake_env(void **state) {
  for (const char *const *kv = *state; kv && kv[0]; kv += 2) setenv(kv[0], kv[1], 1);
  return 0;
}
static int fake_env_end(void **state) {
  for (const char *const *kv = *state; kv && kv[0]; kv += 2) unsetenv(kv[0]);
  return 0;
}
static const char *const g_slow[] = {"FAKEVERBS_DELAY_US", "20", NULL}; /* completions lag */
#define FAKE_CASE(fn, env) {#fn, fn, fake_env, fake_env_end, (void *)(env)}

/* ---- a rank killed mid-transfer -------------------------------------------------------------- */

#define VICTIM 1

static int dies_rank(int idx, const job_t *job) {
  world_t w;
  if (setup(idx, job, 4u << 20, idx, &w)) return 1;
  if (idx == VICTIM) {
    /* Many MiB in flight to everyone, then SIGKILL: no goodbye, frames cut in the middle. */
    for (int i = 0; i < 4; i++)
      for (int d = 0; d < w.n; d++)
        if (d != idx)
          CHILD_CHECK(meld_proxy_write(w.p, d, 0, 0, 0, (uint64_t)(w.n + idx) * w.slice,
                                       w.slice, 1, (uint32_t)(idx * MAXCH), meld_stamp(1, 1)) == MELD_OK);
    meld_sleep_ms(5);
    raise(SIGKILL);
  }
  const int64_t t0 = meld_now_ms();
  meld_result_t rc = send_epoch(&w, 1); /* an enqueue may fail already */
  if (rc == MELD_OK)
    rc = meld_proxy_wait_flag(w.p, &w.pad[VICTIM * MAXCH + 1], meld_stamp(1, 2), TIMEOUT_MS, "victim");
  const int64_t waited = meld_now_ms() - t0;
  CHILD_CHECK(rc == MELD_ERR_SYSTEM);
  /* The victim's death is named, unless another survivor saw it first and its teardown closed
   * this rank's connection before the victim's was noticed (seen under load in make test,
   * session 29): then that survivor's leaving is named, as a death or abort (tcp), or as a
   * peer that stopped answering (ibv). */
  CHILD_CHECK(strstr(meld_last_error(), "rank 1") != NULL ||
              strstr(meld_last_error(), "(it died or aborted") != NULL ||
              strstr(meld_last_error(), "stopped answering") != NULL);
  CHILD_CHECK(waited < DETECT_MS);
  const int64_t t1 = meld_now_ms(); /* teardown is bounded too */
  CHILD_CHECK(meld_proxy_destroy(w.p) == MELD_ERR_SYSTEM);
  meld_transport_close(w.t, 1000);
  meld_bootstrap_destroy(w.b);
  CHILD_CHECK(meld_now_ms() - t1 < DETECT_MS - 500);
  free(w.work);
  free(w.pad);
  return 0;
}

static void test_peer_dies(void **state) {
  (void)state;
  job_t job = new_job(4);
  int codes[MAX_CHILD];
  run_children(4, dies_rank, &job, codes);
  expect_codes(4, codes, VICTIM, 128 + SIGKILL);
}

/* ---- emulated nodes: ranks {0,1} on node 0, {2,3} on node 1 ---------------------------------- */

static int nodes_rank(int idx, const job_t *job) {
  world_t w;
  if (setup(idx, job, 1u << 20, idx / 2, &w)) return 1;
  const int mate = idx ^ 1;
  CHILD_CHECK(!meld_transport_is_remote(w.t, mate) && meld_transport_is_remote(w.t, (idx + 2) % 4));
  CHILD_CHECK(meld_proxy_write(w.p, mate, 0, 0, 0, 0, 8, 1, 0, 1) == MELD_ERR_INVALID_ARG);
  CHILD_CHECK(strstr(meld_last_error(), "is on this node (node") != NULL);
  CHILD_CHECK(send_epoch(&w, 1) == MELD_OK);
  if (recv_epoch(idx, &w, 1)) return 1;
  CHILD_CHECK(w.pad[mate * MAXCH] == 0); /* nothing came from the same node */
  return teardown(idx, &w);
}

static void test_emulated_nodes(void **state) {
  (void)state;
  job_t job = new_job(4);
  int codes[MAX_CHILD];
  run_children(4, nodes_rank, &job, codes);
  expect_codes(4, codes, -1, 0);
}

/* ---- bad arguments ------------------------------------------------------------------------- */

#define EXPECT_INVALID(call, sentence)                                      \
  do {                                                                      \
    CHILD_CHECK((call) == MELD_ERR_INVALID_ARG);                            \
    CHILD_CHECK(strstr(meld_last_error(), sentence) != NULL);               \
  } while (0)

static int bad_args_rank(int idx, const job_t *job) {
  meld_transport_t *t = NULL;
  EXPECT_INVALID(meld_transport_create(g_kind, 2, 2, 0, 0, NULL, 1000, &t), "rank 2 is not in [0, nranks 2)");
  EXPECT_INVALID(meld_transport_create(g_kind, 0, 2, -1, 0, NULL, 1000, &t), "node -1 < 0");
  EXPECT_INVALID(meld_transport_create(g_kind, 0, 2, 0, 0, NULL, 0, &t), "timeout_ms 0 < 1");
  EXPECT_INVALID(meld_transport_create("udp", 0, 2, 0, 0, NULL, 1000, &t), "unknown kind \"udp\" (tcp or ibv)");
  CHILD_CHECK(t == NULL);
  uint64_t *mem = aligned_alloc(64, 4096);
  CHILD_CHECK(mem != NULL);
  memset(mem, 0, 4096);
  CHILD_CHECK(make_transport(idx, 2, idx, &t) == MELD_OK);
  uint32_t id;
  EXPECT_INVALID(meld_transport_register(t, NULL, 64, &id), "is NULL");
  EXPECT_INVALID(meld_transport_register(t, mem, 0, &id), "bytes is 0");
  EXPECT_INVALID(meld_transport_register(t, (char *)mem + 4, 64, &id), "is not 8-byte aligned");
  CHILD_CHECK(meld_transport_register(t, mem, 4096, &id) == MELD_OK);
  meld_write_t wr = {1 - idx, 0, 0, mem, 8, 0, 0, 1};
  EXPECT_INVALID(meld_transport_write(t, &wr), "the transport is not connected");
  meld_proxy_t *p = NULL;
  EXPECT_INVALID(meld_proxy_create(t, NULL, &p), "not connected");
  EXPECT_INVALID(meld_transport_connect(t, NULL), "t or b is NULL");
  meld_bootstrap_t *b = NULL;
  CHILD_CHECK(meld_bootstrap_init(&job->addr, 2, idx, 10000, &b) == MELD_OK);
  CHILD_CHECK(meld_transport_connect(t, b) == MELD_OK);
  EXPECT_INVALID(meld_transport_register(t, mem, 64, &id), "already connected");
  EXPECT_INVALID(meld_transport_connect(t, b), "already connected");
  const meld_write_t good = wr;
  wr.dst_rank = 5;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "dst rank 5 is not in [0, nranks 2)");
  wr.dst_rank = idx;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "is on this node");
  wr = good, wr.dst_region = 3;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "dst region 3 is not registered (1 regions)");
  wr = good, wr.dst_offset = 4090;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "8 bytes at offset 4090 pass the end of region 0 (4096 bytes) at rank");
  wr = good, wr.flag_offset = 4;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "flag offset 4 is not an 8-byte aligned slot");
  wr = good, wr.flag_offset = 4096;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "flag offset 4096 is not an 8-byte aligned slot");
  wr = good, wr.src = NULL;
  EXPECT_INVALID(meld_transport_check_write(t, &wr), "src is NULL (8 bytes)");
  /* And a good write still works: rank 0 -> rank 1, flag at slot 100. */
  CHILD_CHECK(meld_proxy_create(t, NULL, &p) == MELD_OK);
  EXPECT_INVALID(meld_proxy_write(p, 1 - idx, 0, 4000, 0, 0, 200, 0, 100, 7), "are not inside local region 0");
  if (idx == 0) {
    mem[1] = 0x1122334455667788ull;
    CHILD_CHECK(meld_proxy_write(p, 1, 0, 8, 0, 8, 8, 0, 100, 7) == MELD_OK);
  } else {
    CHILD_CHECK(meld_proxy_wait_flag(p, &mem[100], 7, TIMEOUT_MS, NULL) == MELD_OK);
    CHILD_CHECK(mem[1] == 0x1122334455667788ull);
  }
  CHILD_CHECK(meld_proxy_destroy(p) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_barrier(b) == MELD_OK);
  meld_transport_close(t, TIMEOUT_MS);
  meld_bootstrap_destroy(b);
  free(mem);
  return 0;
}

static void test_bad_args(void **state) {
  (void)state;
  job_t job = new_job(2);
  int codes[MAX_CHILD];
  run_children(2, bad_args_rank, &job, codes);
  expect_codes(2, codes, -1, 0);
}

/* Rank 1 registers one region, rank 0 two: both fail connect with the same sentence. */
static int mismatch_rank(int idx, const job_t *job) {
  uint64_t *mem = aligned_alloc(64, 128);
  meld_transport_t *t = NULL;
  meld_bootstrap_t *b = NULL;
  uint32_t id;
  CHILD_CHECK(mem && make_transport(idx, 2, idx, &t) == MELD_OK);
  CHILD_CHECK(meld_transport_register(t, mem, 64, &id) == MELD_OK);
  if (idx == 0) CHILD_CHECK(meld_transport_register(t, mem + 8, 64, &id) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_init(&job->addr, 2, idx, 10000, &b) == MELD_OK);
  EXPECT_INVALID(meld_transport_connect(t, b), "rank 1 registered 1 regions, rank 0 2: every rank must register the same regions");
  meld_transport_close(t, 100);
  meld_bootstrap_destroy(b);
  free(mem);
  return 0;
}

static void test_region_mismatch(void **state) {
  (void)state;
  job_t job = new_job(2);
  int codes[MAX_CHILD];
  run_children(2, mismatch_rank, &job, codes);
  expect_codes(2, codes, -1, 0);
}

/* ---- ibverbs only -------------------------------------------------------------------------- */
#ifndef MELD_NO_VERBS_TEST

static const char *const g_small[] = {"FAKEVERBS_MAX_MSG", "65536", "FAKEVERBS_DELAY_US", "20", NULL};
static const char *const g_roce[] = {"FAKEVERBS_ROCE", "1", NULL};
/* Two NICs a host: ranks spread over them by local index (no sysfs places them), so traffic
 * crosses between devices. */
static const char *const g_two_nics[] = {"FAKEVERBS_NDEV", "2", NULL};

/* WRITEs split at a 64 KiB max_msg_sz (MiB chunks: dozens of work requests a write), and a
 * fake HCA that applies each 16 KiB fragment 20 us late (completions lag the posts, so the
 * proxy's `done` trails its tail). */
static void test_ibv_small_messages(void **state) {
  (void)state;
  alltoall(2);
}

/* RoCE: Ethernet link layer, no LIDs: peers are addressed by their IPv4-mapped GID. */
static void test_ibv_roce(void **state) {
  (void)state;
  alltoall(2);
}

/* A rank whose connect fails before the address exchange (its region cannot be registered:
 * memory that is never mapped, failing as a too-low `ulimit -l` does on hardware) still takes
 * part in every collective: the others fail connect with a sentence naming it, and the
 * bootstrap stays usable (a rank that skipped the exchange put the others' all-gathers out of
 * step: "ranks called different collectives", and the bootstrap was unusable after). */
static int early_fail_rank(int idx, const job_t *job) {
  const size_t page = (size_t)sysconf(_SC_PAGESIZE);
  uint64_t *mem = aligned_alloc(page, 2 * page);
  meld_transport_t *t = NULL;
  meld_bootstrap_t *b = NULL;
  uint32_t id;
  CHILD_CHECK(mem && make_transport(idx, 2, idx, &t) == MELD_OK);
  void *hole = (void *)(uintptr_t)page; /* below vm.mmap_min_addr: never mapped */
  CHILD_CHECK(meld_transport_register(t, idx == 1 ? hole : (void *)mem, 2 * page, &id) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_init(&job->addr, 2, idx, 10000, &b) == MELD_OK);
  CHILD_CHECK(meld_transport_connect(t, b) == MELD_ERR_SYSTEM);
  if (!strstr(meld_last_error(), idx == 1 ? "rank 1: registering region 0" : "rank 1 failed to connect")) {
    fprintf(stderr, "rank %d: unexpected sentence: %s\n", idx, meld_last_error());
    return 1;
  }
  CHILD_CHECK(meld_bootstrap_barrier(b) == MELD_OK); /* still in step */
  meld_transport_close(t, 100);
  meld_bootstrap_destroy(b);
  free(mem);
  return 0;
}

static void test_ibv_connect_fails_early(void **state) {
  (void)state;
  job_t job = new_job(2);
  int codes[MAX_CHILD];
  run_children(2, early_fail_rank, &job, codes);
  expect_codes(2, codes, -1, 0);
}

/* One child per environment: each loads the library afresh. */
static const char *g_env_name, *g_env_value, *g_expect;
static meld_result_t g_want;

static int probe_child(int idx, const job_t *job) {
  (void)job;
  setenv(g_env_name, g_env_value, 1);
  meld_transport_t *t = NULL;
  const meld_result_t want = g_want;
  /* The probe sees only the library and the ports: a bad device name or setting is create's. */
  if (want == MELD_ERR_UNSUPPORTED && !strstr(g_expect, "no device"))
    CHILD_CHECK(meld_transport_ibv_probe() == MELD_ERR_UNSUPPORTED);
  CHILD_CHECK(meld_transport_ibv_create(0, 2, 0, 0, NULL, TIMEOUT_MS, &t) == want && t == NULL);
  if (!strstr(meld_last_error(), g_expect)) {
    fprintf(stderr, "child %d: expected \"%s\" in: %s\n", idx, g_expect, meld_last_error());
    return 1;
  }
  return 0;
}

static void probe_case_code(const char *name, const char *value, const char *expect,
                            meld_result_t want) {
  g_env_name = name, g_env_value = value, g_expect = expect, g_want = want;
  job_t job = new_job(1);
  int codes[MAX_CHILD];
  run_children(1, probe_child, &job, codes);
  expect_codes(1, codes, -1, 0);
}

static void probe_case(const char *name, const char *value, const char *expect) {
  probe_case_code(name, value, expect, strstr(expect, "MELD_IB_HCA=") ? MELD_ERR_INVALID_ARG : MELD_ERR_UNSUPPORTED);
}

static void test_ibv_unusable(void **state) {
  (void)state;
  probe_case("MELD_IB_LIB", "/nonexistent/libibverbs.so.1", "cannot load /nonexistent/libibverbs.so.1");
  probe_case("MELD_IB_LIB", "libc.so.6", "has no symbol ibv_get_device_list (not libibverbs?)");
  probe_case("FAKEVERBS_NDEV", "0", "0 RDMA devices, none with an active port");
  probe_case("FAKEVERBS_PORT_DOWN", "1", "none with an active port");
  probe_case("MELD_IB_HCA", "mlx5_9", "no device mlx5_9 could be opened");
  probe_case("MELD_IB_HCA", "fake0:x", "MELD_IB_HCA=fake0:x: give a device name");
  probe_case_code("MELD_IB_TIMEOUT", "0", "MELD_IB_TIMEOUT=0: give an integer 1..31", MELD_ERR_INVALID_ARG);
  probe_case_code("MELD_IB_TC", "256", "MELD_IB_TC=256: give an integer 0..255", MELD_ERR_INVALID_ARG);
  probe_case_code("MELD_IB_SL", "x", "MELD_IB_SL=x: give an integer 0..15", MELD_ERR_INVALID_ARG);
  probe_case_code("MELD_IB_GID_INDEX", "2", "GID 2 of fake0 port 1 cannot be read or is empty", MELD_ERR_SYSTEM);
}

/* The ibv probe succeeds on the fake, and an explicit device and port are taken. */
static int probe_ok_child(int idx, const job_t *job) {
  (void)job;
  CHILD_CHECK(meld_transport_ibv_probe() == MELD_OK);
  setenv("MELD_IB_HCA", "fake0:1", 1);
  meld_transport_t *t = NULL;
  CHILD_CHECK(meld_transport_ibv_create(0, 2, 0, 0, NULL, TIMEOUT_MS, &t) == MELD_OK && t != NULL);
  meld_transport_close(t, 0);
  return 0;
}

static void test_ibv_probe_ok(void **state) {
  (void)state;
  job_t job = new_job(1);
  int codes[MAX_CHILD];
  run_children(1, probe_ok_child, &job, codes);
  expect_codes(1, codes, -1, 0);
}

/* A fabric that cannot route to rank 1's NIC (its port says ACTIVE): connect fails on both
 * ranks at the first message, with a sentence saying what to check, not at a later collective. */
static int unreachable_rank(int idx, const job_t *job) {
  if (idx == 1) setenv("FAKEVERBS_UNREACHABLE", "1", 1);
  uint64_t *mem = aligned_alloc(64, 4096);
  meld_transport_t *t = NULL;
  meld_bootstrap_t *b = NULL;
  uint32_t id;
  CHILD_CHECK(mem && make_transport(idx, 2, idx, &t) == MELD_OK);
  CHILD_CHECK(meld_transport_register(t, mem, 4096, &id) == MELD_OK);
  CHILD_CHECK(meld_bootstrap_init(&job->addr, 2, idx, 10000, &b) == MELD_OK);
  const int64_t t0 = meld_now_ms();
  const meld_result_t rc = meld_transport_connect(t, b);
  CHILD_CHECK(rc != MELD_OK && meld_now_ms() - t0 < DETECT_MS + 2000);
  CHILD_CHECK(strstr(meld_last_error(), "the fabric does not carry messages between these ranks") ||
              strstr(meld_last_error(), "connections failed their first message"));
  CHILD_CHECK(strstr(meld_last_error(), "MELD_NET_TRANSPORT=tcp") ||
              strstr(meld_last_error(), "its log says why"));
  meld_transport_close(t, 100);
  meld_bootstrap_destroy(b);
  free(mem);
  return 0;
}

static void test_ibv_unreachable(void **state) {
  (void)state;
  job_t job = new_job(2);
  int codes[MAX_CHILD];
  run_children(2, unreachable_rank, &job, codes);
  expect_codes(2, codes, -1, 0);
}

static char g_fabric[64];

/* The ibv group: the fake HCA, one fabric file shared by the group's processes. */
static int group_ibv(void **state) {
  (void)state;
  g_kind = "ibv";
  snprintf(g_fabric, sizeof g_fabric, "/tmp/meld-fakeverbs-%d", (int)getpid());
  unlink(g_fabric);
  setenv("FAKEVERBS_FABRIC", g_fabric, 1);
  setenv("MELD_IB_LIB", FAKEVERBS_LIB, 1);
  return 0;
}

static int group_ibv_end(void **state) {
  (void)state;
  unlink(g_fabric);
  unsetenv("FAKEVERBS_FABRIC");
  unsetenv("MELD_IB_LIB");
  return 0;
}
#endif

static int group_tcp(void **state) {
  (void)state;
  g_kind = "tcp";
  return 0;
}

#define TRANSPORT_CASES                                                      \
  cmocka_unit_test(test_alltoall_2), cmocka_unit_test(test_alltoall_4),     \
      cmocka_unit_test(test_alltoall_8), cmocka_unit_test(test_peer_dies),  \
      cmocka_unit_test(test_emulated_nodes), cmocka_unit_test(test_bad_args), \
      cmocka_unit_test(test_region_mismatch), FAKE_CASE(test_source_reuse, g_slow)

int main(void) {
  /* MELD_TEST_FILTER: run only the cases whose names match (cmocka's * and ? wildcards) */
  if (getenv("MELD_TEST_FILTER")) cmocka_set_test_filter(getenv("MELD_TEST_FILTER"));
  const struct CMUnitTest tcp[] = {TRANSPORT_CASES};
  int failed = cmocka_run_group_tests_name("tcp", tcp, group_tcp, NULL);
#ifdef MELD_NO_VERBS_TEST
  printf("test_transport: the ibv group is skipped: the fake HCA was not built (install "
         "libibverbs-dev; CI does)\n");
#else
  const struct CMUnitTest ibv[] = {
      TRANSPORT_CASES,
      FAKE_CASE(test_ibv_small_messages, g_small),
      FAKE_CASE(test_ibv_roce, g_roce),
      {"test_ibv_two_nics", test_alltoall_4, fake_env, fake_env_end, (void *)g_two_nics},
      cmocka_unit_test(test_ibv_unusable),
      cmocka_unit_test(test_ibv_probe_ok),
      cmocka_unit_test(test_ibv_unreachable),
      cmocka_unit_test(test_ibv_connect_fails_early),
  };
  failed += cmocka_run_group_tests_name("ibv", ibv, group_ibv, group_ibv_end);
#endif
  return failed;
}
