/* test_fakeverbs.c — the fake libibverbs (tests/fake/fakeverbs.c) against its model, the way
 * the ibverbs transport uses a real one: loaded with dlopen by path (FAKEVERBS_LIB, from the
 * Makefile), every ibv_* function found with dlsym (libibverbs is never linked), and the
 * header's static inline ibv_post_send / ibv_post_recv / ibv_poll_cq calling through
 * context->ops.
 *
 *   - two processes, one RC QP each, connected both ways (qpn / lid / psn exchanged through a
 *     shared mapping made before fork): each RDMA-WRITEs random data (1 byte, 3 MiB, 1000003
 *     bytes) then SENDs 24 inline bytes (the last with immediate data); the receiver sees each
 *     SEND's recv completion, then checks the written bytes, the payload and that the recv
 *     buffer past byte_len is untouched; then a 40003-byte SEND (three fragments, two SGEs on
 *     each side, split differently); send completions come in order, unsignaled WRs none.
 *   - a bad RDMA WRITE (a key of another context, the MR's lkey as rkey, a range past the MR,
 *     an MR without remote write, a QP without remote write): IBV_WC_REM_ACCESS_ERR, later WRs
 *     IBV_WC_WR_FLUSH_ERR (unsignaled ones too), the receiver's recvs flush, nothing lands.
 *   - a killed peer: IBV_WC_RETRY_EXC_ERR within FAKEVERBS_DEAD_MS + 700 ms; a peer that
 *     destroys its QP: the same at once (DEAD_MS 5 s there).
 *   - SQ / RQ accounting: ENOMEM with *bad_wr past max_send_wr / max_recv_wr; unsignaled WRs
 *     hold their slots until a later signaled completion; EINVAL cases.
 *   - RNR: rnr_retry 2 gives IBV_WC_RNR_RETRY_EXC_ERR after ~15 ms; rnr_retry 7 waits for a
 *     recv posted 100 ms later.
 *   - PSN mismatch: IBV_WC_RETRY_EXC_ERR, nothing delivered.
 *   - thread mode (no FAKEVERBS_FABRIC): two contexts of one process, four threads polling
 *     four CQs while the NIC threads push; another context opened and closed meanwhile.
 *   - ports and variables: FAKEVERBS_MAX_MSG in max_msg_sz (a longer write: LOC_LEN_ERR),
 *     FAKEVERBS_NDEV, FAKEVERBS_PORT_DOWN, FAKEVERBS_ROCE (GID-addressed AVs), query_device.
 *   - modify_qp: missing attributes, wrong LID, unknown QPN, too large an MTU, skipped states.
 *   - local errors: a bad lkey (LOC_PROT_ERR), a SEND longer than the recv (LOC_LEN_ERR at the
 *     receiver, REM_INV_REQ_ERR at the sender), a CQ overrun (poll_cq -1; the fake prints one
 *     "fakeverbs:" line), and source memory read when the NIC sends, inline data at post.
 * Children report through their exit codes (0 = as expected); each is killed after
 * CHILD_LIMIT_MS. */
#ifdef MELD_NO_VERBS
#include <stdio.h>
int main(void) {
  printf("test_fakeverbs: the fake libibverbs was not built: <infiniband/verbs.h> is missing "
         "(install libibverbs-dev)\n");
  printf("[  PASSED  ] 0 test(s).\n");
  return 0;
}
#else
#include <arpa/inet.h>
#include <dlfcn.h>
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cmocka.h>
#include <infiniband/verbs.h>

#include "common/mp_job.h"
#include "sock.h"

#ifndef FAKEVERBS_LIB
#error "FAKEVERBS_LIB (the fake's path) must be defined by the Makefile"
#endif

#define CHILD_LIMIT_MS 15000
#define WAIT_MS 5000 /* any single wait inside a child */
#define MAXQP 6
#define LW IBV_ACCESS_LOCAL_WRITE
#define RW (IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE)

/* ---- the fake, through dlsym --------------------------------------------------------------- */

static struct {
  struct ibv_device **(*get_device_list)(int *);
  void (*free_device_list)(struct ibv_device **);
  const char *(*get_device_name)(struct ibv_device *);
  struct ibv_context *(*open_device)(struct ibv_device *);
  int (*close_device)(struct ibv_context *);
  int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
  int (*query_port)(struct ibv_context *, uint8_t, struct _compat_ibv_port_attr *);
  int (*query_gid)(struct ibv_context *, uint8_t, int, union ibv_gid *);
  struct ibv_pd *(*alloc_pd)(struct ibv_context *);
  int (*dealloc_pd)(struct ibv_pd *);
  struct ibv_mr *(*reg_mr)(struct ibv_pd *, void *, size_t, int);
  int (*dereg_mr)(struct ibv_mr *);
  struct ibv_cq *(*create_cq)(struct ibv_context *, int, void *, struct ibv_comp_channel *, int);
  int (*destroy_cq)(struct ibv_cq *);
  struct ibv_qp *(*create_qp)(struct ibv_pd *, struct ibv_qp_init_attr *);
  int (*modify_qp)(struct ibv_qp *, struct ibv_qp_attr *, int);
  int (*destroy_qp)(struct ibv_qp *);
  const char *(*wc_status_str)(enum ibv_wc_status);
  int (*fork_init)(void);
} V;

static int load_fake(void) {
  void *h = dlopen(FAKEVERBS_LIB, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    fprintf(stderr, "dlopen %s: %s\n", FAKEVERBS_LIB, dlerror());
    return -1;
  }
#define SYM(f)                                                           \
  do {                                                                   \
    *(void **)&V.f = dlsym(h, "ibv_" #f);                                \
    if (!V.f) {                                                          \
      fprintf(stderr, "%s does not export ibv_%s\n", FAKEVERBS_LIB, #f); \
      return -1;                                                         \
    }                                                                    \
  } while (0)
  SYM(get_device_list);
  SYM(free_device_list);
  SYM(get_device_name);
  SYM(open_device);
  SYM(close_device);
  SYM(query_device);
  SYM(query_port);
  SYM(query_gid);
  SYM(alloc_pd);
  SYM(dealloc_pd);
  SYM(reg_mr);
  SYM(dereg_mr);
  SYM(create_cq);
  SYM(destroy_cq);
  SYM(create_qp);
  SYM(modify_qp);
  SYM(destroy_qp);
  SYM(wc_status_str);
  SYM(fork_init);
#undef SYM
  return 0;
}

/* ---- children: checks, shared area, barrier ------------------------------------------------ */

static int g_idx; /* the child's index, for messages */

#define CK(cond)                                                                                   \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      fprintf(stderr, "child %d: %s:%d: check failed: %s\n", g_idx, __FILE__, __LINE__, #cond); \
      return 1;                                                                                    \
    }                                                                                              \
  } while (0)

#define CKW(wc, want_id, want_status)                                                             \
  do {                                                                                            \
    if ((wc).wr_id != (uint64_t)(want_id) || (int)(wc).status != (int)(want_status)) {            \
      fprintf(stderr, "child %d: %s:%d: completion wr_id %llu status %d (%s), expected %llu %d (%s)\n", \
              g_idx, __FILE__, __LINE__, (unsigned long long)(wc).wr_id, (int)(wc).status,        \
              V.wc_status_str((wc).status), (unsigned long long)(want_id), (int)(want_status),    \
              V.wc_status_str((enum ibv_wc_status)(want_status)));                                \
      return 1;                                                                                   \
    }                                                                                             \
  } while (0)

typedef struct {
  uint32_t qpn[MAXQP];
  uint32_t psn, rkey, lkey, rkey_ro;
  uint16_t lid;
  uint64_t addr, addr_ro, bytes;
  int ready;
} info_t;

typedef struct {
  info_t info[2];
  int bar_count, bar_gen;
  int64_t t_event;
} shared_t;

static shared_t *S; /* mapped MAP_SHARED by the parent before each fork */

static int barrier(int n) {
  const int gen = __atomic_load_n(&S->bar_gen, __ATOMIC_ACQUIRE);
  if (__atomic_fetch_add(&S->bar_count, 1, __ATOMIC_ACQ_REL) == n - 1) {
    __atomic_store_n(&S->bar_count, 0, __ATOMIC_RELAXED);
    __atomic_store_n(&S->bar_gen, gen + 1, __ATOMIC_RELEASE);
    return 1;
  }
  const int64_t end = meld_now_ms() + WAIT_MS;
  while (__atomic_load_n(&S->bar_gen, __ATOMIC_ACQUIRE) == gen)
    if (meld_now_ms() > end) return 0;
    else usleep(100);
  return 1;
}

static void publish(int idx, const info_t *me) {
  S->info[idx] = *me;
  __atomic_store_n(&S->info[idx].ready, 1, __ATOMIC_RELEASE);
}
static const info_t *peer_info(int idx) {
  const int64_t end = meld_now_ms() + WAIT_MS;
  while (!__atomic_load_n(&S->info[1 - idx].ready, __ATOMIC_ACQUIRE))
    if (meld_now_ms() > end) return NULL;
    else usleep(100);
  return &S->info[1 - idx];
}

/* ---- data ---------------------------------------------------------------------------------- */

static int all_zero(const uint8_t *p, size_t n) {
  for (size_t i = 0; i < n; i++)
    if (p[i]) return 0;
  return 1;
}

/* ---- endpoints: a context, a PD, one buffer with one MR, QPs with their own CQs ------------ */

typedef struct {
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  uint8_t *buf;
  size_t bytes;
  struct ibv_mr *mr;
  int nqp;
  struct ibv_qp *qp[MAXQP];
  struct ibv_cq *scq[MAXQP], *rcq[MAXQP];
  uint16_t lid;
} ep_t;

static int ep_open(ep_t *e, size_t bytes) {
  memset(e, 0, sizeof *e);
  int n = -1;
  struct ibv_device **list = V.get_device_list(&n);
  CK(list && n >= 1 && list[0]);
  e->ctx = V.open_device(list[0]);
  V.free_device_list(list);
  CK(e->ctx);
  CK((e->pd = V.alloc_pd(e->ctx)) != NULL);
  e->bytes = bytes;
  CK((e->buf = aligned_alloc(4096, (bytes + 4095) & ~(size_t)4095)) != NULL);
  memset(e->buf, 0, bytes);
  CK((e->mr = V.reg_mr(e->pd, e->buf, bytes, RW)) != NULL);
  struct ibv_port_attr pa;
  memset(&pa, 0, sizeof pa);
  CK(V.query_port(e->ctx, 1, (struct _compat_ibv_port_attr *)&pa) == 0);
  e->lid = pa.lid;
  return 0;
}

/* A QP with its own send and recv CQs, taken to INIT. */
static int ep_add_qp(ep_t *e, uint32_t max_send, uint32_t max_recv, uint32_t max_inline, int cqe, unsigned access) {
  const int k = e->nqp;
  CK(k < MAXQP);
  CK((e->scq[k] = V.create_cq(e->ctx, cqe, NULL, NULL, 0)) != NULL);
  CK((e->rcq[k] = V.create_cq(e->ctx, cqe, NULL, NULL, 0)) != NULL);
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = e->scq[k];
  ia.recv_cq = e->rcq[k];
  ia.cap.max_send_wr = max_send;
  ia.cap.max_recv_wr = max_recv;
  ia.cap.max_send_sge = 2;
  ia.cap.max_recv_sge = 2;
  ia.cap.max_inline_data = max_inline;
  ia.qp_type = IBV_QPT_RC;
  CK((e->qp[k] = V.create_qp(e->pd, &ia)) != NULL);
  CK(e->qp[k]->qp_num != 0 && e->qp[k]->qp_num <= 0xFFFFFF);
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_INIT;
  a.port_num = 1;
  a.qp_access_flags = access;
  CK(V.modify_qp(e->qp[k], &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS) == 0);
  e->nqp++;
  return 0;
}

static void rtr_attr(struct ibv_qp_attr *a, int *mask, uint32_t dqpn, uint16_t dlid, uint32_t rq_psn) {
  memset(a, 0, sizeof *a);
  a->qp_state = IBV_QPS_RTR;
  a->path_mtu = IBV_MTU_4096;
  a->dest_qp_num = dqpn;
  a->rq_psn = rq_psn;
  a->max_dest_rd_atomic = 1;
  a->min_rnr_timer = 12;
  a->ah_attr.dlid = dlid;
  a->ah_attr.port_num = 1;
  *mask = IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
          IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER;
}
static int qp_rtr(struct ibv_qp *qp, uint32_t dqpn, uint16_t dlid, uint32_t rq_psn) {
  struct ibv_qp_attr a;
  int mask;
  rtr_attr(&a, &mask, dqpn, dlid, rq_psn);
  return V.modify_qp(qp, &a, mask);
}
static int qp_rts(struct ibv_qp *qp, uint32_t sq_psn, uint8_t rnr_retry) {
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = 14;
  a.retry_cnt = 7;
  a.rnr_retry = rnr_retry;
  a.sq_psn = sq_psn;
  a.max_rd_atomic = 1;
  return V.modify_qp(qp, &a, IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN |
                                 IBV_QP_MAX_QP_RD_ATOMIC);
}

/* Connects a->qp[qa] with b->qp[qb] (one process, thread mode). */
static int connect_local(ep_t *a, int qa, ep_t *b, int qb, uint32_t psn_a, uint32_t psn_b, uint8_t rnr_a) {
  CK(qp_rtr(a->qp[qa], b->qp[qb]->qp_num, b->lid, psn_b) == 0);
  CK(qp_rtr(b->qp[qb], a->qp[qa]->qp_num, a->lid, psn_a) == 0);
  CK(qp_rts(a->qp[qa], psn_a, rnr_a) == 0);
  CK(qp_rts(b->qp[qb], psn_b, 7) == 0);
  return 0;
}

static int ep_close(ep_t *e) {
  for (int k = 0; k < e->nqp; k++) {
    if (e->qp[k]) CK(V.destroy_qp(e->qp[k]) == 0);
    CK(V.destroy_cq(e->scq[k]) == 0);
    CK(V.destroy_cq(e->rcq[k]) == 0);
  }
  CK(V.dereg_mr(e->mr) == 0);
  CK(V.dealloc_pd(e->pd) == 0);
  CK(V.close_device(e->ctx) == 0);
  free(e->buf);
  memset(e, 0, sizeof *e);
  return 0;
}

static info_t ep_info(const ep_t *e, uint32_t psn) {
  info_t in;
  memset(&in, 0, sizeof in);
  for (int k = 0; k < e->nqp; k++) in.qpn[k] = e->qp[k]->qp_num;
  in.psn = psn;
  in.rkey = e->mr->rkey;
  in.lkey = e->mr->lkey;
  in.lid = e->lid;
  in.addr = (uintptr_t)e->buf;
  in.bytes = e->bytes;
  return in;
}

/* ---- posting and polling ------------------------------------------------------------------- */

static int post_write(struct ibv_qp *qp, uint64_t wr_id, const void *src, uint32_t len, uint32_t lkey,
                      uint64_t raddr, uint32_t rkey, unsigned flags) {
  struct ibv_sge sg = {(uintptr_t)src, len, lkey};
  struct ibv_send_wr w, *bad = NULL;
  memset(&w, 0, sizeof w);
  w.wr_id = wr_id;
  w.sg_list = &sg;
  w.num_sge = 1;
  w.opcode = IBV_WR_RDMA_WRITE;
  w.send_flags = flags;
  w.wr.rdma.remote_addr = raddr;
  w.wr.rdma.rkey = rkey;
  return ibv_post_send(qp, &w, &bad);
}

static int post_send_inline(struct ibv_qp *qp, uint64_t wr_id, const void *src, uint32_t len, unsigned flags,
                            int with_imm, uint32_t imm) {
  struct ibv_sge sg = {(uintptr_t)src, len, 0};
  struct ibv_send_wr w, *bad = NULL;
  memset(&w, 0, sizeof w);
  w.wr_id = wr_id;
  w.sg_list = &sg;
  w.num_sge = 1;
  w.opcode = with_imm ? IBV_WR_SEND_WITH_IMM : IBV_WR_SEND;
  w.send_flags = flags | IBV_SEND_INLINE;
  w.imm_data = htonl(imm);
  return ibv_post_send(qp, &w, &bad);
}

static int post_recv(struct ibv_qp *qp, uint64_t wr_id, void *buf, uint32_t len, uint32_t lkey) {
  struct ibv_sge sg = {(uintptr_t)buf, len, lkey};
  struct ibv_recv_wr w, *bad = NULL;
  memset(&w, 0, sizeof w);
  w.wr_id = wr_id;
  w.sg_list = &sg;
  w.num_sge = 1;
  return ibv_post_recv(qp, &w, &bad);
}

/* Polls until n completions arrived or ms passed: their count, or -1 if poll_cq failed. */
static int poll_n(struct ibv_cq *cq, struct ibv_wc *wc, int n, int ms) {
  int got = 0;
  const int64_t end = meld_now_ms() + ms;
  while (got < n) {
    const int r = ibv_poll_cq(cq, n - got, wc + got);
    if (r < 0) return -1;
    got += r;
    if (got < n) {
      if (meld_now_ms() > end) break;
      usleep(100);
    }
  }
  return got;
}

/* Nothing arrives on cq for ms. */
static int quiet(struct ibv_cq *cq, int ms) {
  struct ibv_wc wc;
  return poll_n(cq, &wc, 1, ms) == 0;
}

/* ---- parent side --------------------------------------------------------------------------- */

static char g_fabric[256];

static void shared_begin(void) {
  void *p = mmap(NULL, sizeof(shared_t), PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
  assert_true(p != MAP_FAILED);
  S = p;
  memset(S, 0, sizeof *S);
}
static void shared_end(void) {
  munmap(S, sizeof(shared_t));
  S = NULL;
}

/* A fresh fabric file for one multi-process test (tmpfs when there is one). */
static void fabric_begin(void) {
  static int seq;
  struct stat st;
  const char *dir = stat("/dev/shm", &st) == 0 && S_ISDIR(st.st_mode) && access("/dev/shm", W_OK) == 0 ? "/dev/shm" : "/tmp";
  snprintf(g_fabric, sizeof g_fabric, "%s/fakeverbs-test-%d-%d", dir, (int)getpid(), seq++);
  unlink(g_fabric);
  assert_int_equal(setenv("FAKEVERBS_FABRIC", g_fabric, 1), 0);
}
static void fabric_end(void) {
  struct stat st;
  assert_int_equal(stat(g_fabric, &st), 0); /* the children's first opener made it */
  assert_true(st.st_blocks * 512 < st.st_size); /* sparse: untouched inboxes cost nothing */
  unlink(g_fabric);
  unsetenv("FAKEVERBS_FABRIC");
}

/* n children of fn over a fresh fabric file (n >= 2) or in thread mode (n == 1); child
 * `special` must exit with special_code. */
static void run(int n, child_fn fn, int special, int special_code) {
  int codes[MP_MAX_CHILD];
  shared_begin();
  if (n > 1) fabric_begin();
  job_t job = mp_new_job(n);
  mp_run_children(n, fn, &job, codes, CHILD_LIMIT_MS);
  if (n > 1) fabric_end();
  shared_end();
  mp_expect_codes(n, codes, special, special_code);
}

/* ---- two processes: RDMA WRITE + SEND both ways ------------------------------------------- */

#define NSZ 3
#define MSG 24
#define RSLOT 64
#define BIG 40003 /* a SEND of three fragments, two SGEs each side (split differently) */
#define BIG_S0 12345
#define BIG_R0 30000
static const size_t k_sizes[NSZ] = {1, 3u << 20, 1000003};

static size_t area_off(int k) { /* offsets of the sizes inside a send or receive area */
  size_t o = 0;
  for (int i = 0; i < k; i++) o += (k_sizes[i] + 63) & ~(size_t)63;
  return o;
}
static uint64_t wseed(int from, int k) { return 0xabc00000ull + (uint64_t)from * 16 + (uint64_t)k; }
static void make_msg(uint8_t *m, int from, int k) {
  for (int i = 0; i < MSG; i++) m[i] = (uint8_t)(0x40 + from * 50 + k * 7 + i);
}

static int write_send_rank(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  const size_t area = area_off(NSZ);
  ep_t e;
  if (ep_open(&e, 2 * area + NSZ * RSLOT + 2 * (BIG + 64)) || ep_add_qp(&e, 16, 8, 64, 32, RW)) return 1;
  struct ibv_qp *qp = e.qp[0];
  uint8_t *src = e.buf, *dst = e.buf + area, *rb = e.buf + 2 * area;
  uint8_t *big_src = rb + NSZ * RSLOT, *big_dst = big_src + BIG + 64;
  for (int k = 0; k < NSZ; k++) CK(post_recv(qp, 100 + (uint64_t)k, rb + k * RSLOT, 32, e.mr->lkey) == 0);
  struct ibv_sge rsg[2] = {{(uintptr_t)big_dst, BIG_R0, e.mr->lkey}, {(uintptr_t)big_dst + BIG_R0, BIG - BIG_R0 + 64, e.mr->lkey}};
  struct ibv_recv_wr rw = {.wr_id = 100 + NSZ, .sg_list = rsg, .num_sge = 2}, *rbad = NULL;
  CK(ibv_post_recv(qp, &rw, &rbad) == 0);
  info_t me = ep_info(&e, 0x1000u + 77u * (uint32_t)idx);
  me.addr = (uintptr_t)dst;
  publish(idx, &me);
  const info_t *peer = peer_info(idx);
  CK(peer != NULL);
  CK(peer->lid != me.lid && peer->qpn[0] != me.qpn[0]);
  CK(qp_rtr(qp, peer->qpn[0], peer->lid, peer->psn) == 0);
  CK(qp_rts(qp, me.psn, 7) == 0);
  CK(barrier(2)); /* both in RTS with their recvs posted */
  for (int k = 0; k < NSZ; k++) mp_fill(src + area_off(k), k_sizes[k], wseed(idx, k));
  for (int k = 0; k < NSZ; k++) {
    CK(post_write(qp, 10 * (uint64_t)k + 1, src + area_off(k), (uint32_t)k_sizes[k], e.mr->lkey,
                  peer->addr + area_off(k), peer->rkey, k ? IBV_SEND_SIGNALED : 0) == 0);
    uint8_t msg[MSG];
    make_msg(msg, idx, k);
    CK(post_send_inline(qp, 10 * (uint64_t)k + 2, msg, MSG, IBV_SEND_SIGNALED, k == 2, 0xC0DE00u + (uint32_t)k) == 0);
    memset(msg, 0xEE, sizeof msg); /* inline: copied at post */
  }
  mp_fill(big_src, BIG, wseed(idx, 9));
  struct ibv_sge ssg[2] = {{(uintptr_t)big_src, BIG_S0, e.mr->lkey}, {(uintptr_t)big_src + BIG_S0, BIG - BIG_S0, e.mr->lkey}};
  struct ibv_send_wr sw, *sbad = NULL;
  memset(&sw, 0, sizeof sw);
  sw.wr_id = 31;
  sw.sg_list = ssg;
  sw.num_sge = 2;
  sw.opcode = IBV_WR_SEND;
  sw.send_flags = IBV_SEND_SIGNALED;
  CK(ibv_post_send(qp, &sw, &sbad) == 0);
  /* Send completions: the unsignaled first write has none. */
  const uint64_t want_id[6] = {2, 11, 12, 21, 22, 31};
  const enum ibv_wc_opcode want_op[6] = {IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_RDMA_WRITE, IBV_WC_SEND, IBV_WC_SEND};
  int ns = 0, nr = 0;
  const int64_t end = meld_now_ms() + 10000;
  while (ns < 6 || nr < NSZ + 1) {
    CK(meld_now_ms() < end);
    struct ibv_wc wc[8];
    int n = ibv_poll_cq(e.scq[0], 8, wc);
    CK(n >= 0 && ns + n <= 6);
    for (int i = 0; i < n; i++, ns++) {
      CKW(wc[i], want_id[ns], IBV_WC_SUCCESS);
      CK(wc[i].opcode == want_op[ns] && wc[i].qp_num == qp->qp_num);
    }
    const int m = ibv_poll_cq(e.rcq[0], 1, wc);
    CK(m >= 0);
    if (m == 1 && nr == NSZ) { /* the multi-fragment SEND: complete when its CQE comes */
      nr++;
      CKW(wc[0], 100 + NSZ, IBV_WC_SUCCESS);
      CK(wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == BIG && !(wc[0].wc_flags & IBV_WC_WITH_IMM));
      CK(mp_same(big_dst, BIG, wseed(1 - idx, 9)) && all_zero(big_dst + BIG, 64));
    } else if (m == 1) {
      const int k = nr++;
      CKW(wc[0], 100 + k, IBV_WC_SUCCESS);
      CK(wc[0].opcode == IBV_WC_RECV && wc[0].byte_len == MSG);
      CK(wc[0].qp_num == qp->qp_num && wc[0].src_qp == peer->qpn[0] && wc[0].slid == peer->lid);
      if (k == 2)
        CK((wc[0].wc_flags & IBV_WC_WITH_IMM) && ntohl(wc[0].imm_data) == 0xC0DE02u);
      else
        CK(!(wc[0].wc_flags & IBV_WC_WITH_IMM));
      /* RC order: the write before the SEND is in memory when the SEND completes */
      CK(mp_same(dst + area_off(k), k_sizes[k], wseed(1 - idx, k)));
      uint8_t want[MSG];
      make_msg(want, 1 - idx, k);
      CK(memcmp(rb + k * RSLOT, want, MSG) == 0);
      CK(all_zero(rb + k * RSLOT + MSG, RSLOT - MSG)); /* nothing past byte_len */
    }
    if (n == 0 && m == 0) usleep(50);
  }
  CK(quiet(e.scq[0], 20));
  CK(barrier(2));
  return ep_close(&e);
}

static void test_write_send(void **state) {
  (void)state;
  run(2, write_send_rank, -1, 0);
}

/* ---- two processes: bad remote writes ------------------------------------------------------ */

#define NBAD 5
static int bad_rkey_rank(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t e;
  if (ep_open(&e, NBAD * 4096)) return 1;
  for (int q = 0; q < NBAD; q++)
    if (ep_add_qp(&e, 8, 4, 16, 16, idx == 1 && q == 4 ? LW : RW)) return 1; /* B's QP 4: no remote write */
  uint8_t *ro = aligned_alloc(4096, 4096);
  CK(ro != NULL);
  memset(ro, 0, 4096);
  struct ibv_mr *ro_mr = V.reg_mr(e.pd, ro, 4096, LW);
  CK(ro_mr != NULL);
  CK(ro_mr->lkey != ro_mr->rkey && e.mr->lkey != e.mr->rkey);
  info_t me = ep_info(&e, 42);
  me.rkey_ro = ro_mr->rkey;
  me.addr_ro = (uintptr_t)ro;
  if (idx == 1)
    for (int q = 0; q < NBAD; q++)
      for (int r = 0; r < 2; r++) CK(post_recv(e.qp[q], 50 + (uint64_t)r, e.buf + q * 4096 + 2048, 64, e.mr->lkey) == 0);
  publish(idx, &me);
  const info_t *peer = peer_info(idx);
  CK(peer != NULL);
  for (int q = 0; q < NBAD; q++) {
    CK(qp_rtr(e.qp[q], peer->qpn[q], peer->lid, peer->psn) == 0);
    CK(qp_rts(e.qp[q], me.psn, 7) == 0);
  }
  CK(barrier(2));
  if (idx == 0) {
    uint8_t *src = e.buf;
    mp_fill(src, 64, 7);
    for (int q = 0; q < NBAD; q++) {
      uint64_t raddr = peer->addr + (uint64_t)q * 4096;
      uint32_t rkey = peer->rkey;
      switch (q) {
      case 0: rkey = e.mr->rkey; break;                 /* a key of another context */
      case 1: rkey = peer->lkey; break;                 /* the MR's lkey as rkey */
      case 2: raddr = peer->addr + peer->bytes - 8; break; /* 64 bytes, 56 past the MR */
      case 3: rkey = peer->rkey_ro; raddr = peer->addr_ro; break; /* no remote write */
      default: break;                                   /* q 4: the QP refuses writes */
      }
      CK(post_write(e.qp[q], 1, src, 64, e.mr->lkey, peer->addr + (uint64_t)q * 4096, peer->rkey, IBV_SEND_SIGNALED) == 0);
      CK(post_write(e.qp[q], 2, src, 64, e.mr->lkey, raddr, rkey, IBV_SEND_SIGNALED) == 0);
      CK(post_write(e.qp[q], 3, src, 64, e.mr->lkey, peer->addr + (uint64_t)q * 4096 + 1024, peer->rkey, 0) == 0);
      CK(post_send_inline(e.qp[q], 4, src, 8, 0, 0, 0) == 0);
    }
    for (int q = 0; q < NBAD; q++) {
      struct ibv_wc wc[4];
      CK(poll_n(e.scq[q], wc, 4, WAIT_MS) == 4);
      const int first_bad = q == 4 ? 0 : 1; /* a QP without remote write refuses the good one too */
      for (int i = 0; i < 4; i++) {
        const int want = i < first_bad ? IBV_WC_SUCCESS : i == first_bad ? IBV_WC_REM_ACCESS_ERR : IBV_WC_WR_FLUSH_ERR;
        CKW(wc[i], i + 1, want);
        CK(wc[i].qp_num == e.qp[q]->qp_num);
      }
      CK(quiet(e.scq[q], 10));
    }
  } else {
    for (int q = 0; q < NBAD; q++) {
      struct ibv_wc wc[2];
      CK(poll_n(e.rcq[q], wc, 2, WAIT_MS) == 2);
      CKW(wc[0], 50, IBV_WC_WR_FLUSH_ERR);
      CKW(wc[1], 51, IBV_WC_WR_FLUSH_ERR);
      uint8_t want[64];
      mp_fill(want, 64, 7);
      const uint8_t *slot = e.buf + q * 4096;
      if (q == 4)
        CK(all_zero(slot, 64));
      else
        CK(memcmp(slot, want, 64) == 0); /* the good write before the bad one landed */
      CK(all_zero(slot + 1024, 64));      /* the one after it did not */
      CK(all_zero(slot + 2048, 64));      /* no SEND */
    }
    CK(all_zero(e.buf + e.bytes - 8, 8)); /* the out-of-range write wrote nothing */
    CK(all_zero(ro, 4096));
  }
  CK(barrier(2));
  CK(V.dereg_mr(ro_mr) == 0);
  free(ro);
  return ep_close(&e);
}

static void test_bad_rkey(void **state) {
  (void)state;
  run(2, bad_rkey_rank, -1, 0);
}

/* ---- two processes: a peer killed, a peer that destroys its QP ------------------------------ */

static int connect_pair(int idx, ep_t *e, const info_t **peer) {
  if (ep_open(e, 1 << 16) || ep_add_qp(e, 8, 4, 16, 16, RW)) return 1;
  info_t me = ep_info(e, 9 + (uint32_t)idx);
  publish(idx, &me);
  CK((*peer = peer_info(idx)) != NULL);
  CK(qp_rtr(e->qp[0], (*peer)->qpn[0], (*peer)->lid, (*peer)->psn) == 0);
  CK(qp_rts(e->qp[0], me.psn, 7) == 0);
  CK(barrier(2));
  return 0;
}

static int killed_rank(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t e;
  const info_t *peer;
  if (connect_pair(idx, &e, &peer)) return 1;
  struct ibv_wc wc[2];
  if (idx == 0) { /* first, the pair works */
    CK(post_write(e.qp[0], 7, e.buf, 4096, e.mr->lkey, peer->addr, peer->rkey, IBV_SEND_SIGNALED) == 0);
    CK(poll_n(e.scq[0], wc, 1, WAIT_MS) == 1);
    CKW(wc[0], 7, IBV_WC_SUCCESS);
  }
  CK(barrier(2));
  if (idx == 1) {
    __atomic_store_n(&S->t_event, meld_now_ms(), __ATOMIC_RELEASE);
    raise(SIGKILL);
  }
  const int64_t end = meld_now_ms() + WAIT_MS;
  int64_t t0;
  while (!(t0 = __atomic_load_n(&S->t_event, __ATOMIC_ACQUIRE))) CK(meld_now_ms() < end);
  CK(post_write(e.qp[0], 1, e.buf, 4096, e.mr->lkey, peer->addr, peer->rkey, IBV_SEND_SIGNALED) == 0);
  CK(post_write(e.qp[0], 2, e.buf, 4096, e.mr->lkey, peer->addr, peer->rkey, 0) == 0);
  CK(poll_n(e.scq[0], wc, 2, WAIT_MS) == 2);
  const int64_t waited = meld_now_ms() - t0;
  CKW(wc[0], 1, IBV_WC_RETRY_EXC_ERR);
  CKW(wc[1], 2, IBV_WC_WR_FLUSH_ERR);
  if (waited > 300 + 700) fprintf(stderr, "child 0: the dead peer was noticed after %lld ms\n", (long long)waited);
  CK(waited <= 300 + 700);
  return ep_close(&e);
}

static void test_peer_killed(void **state) {
  (void)state;
  setenv("FAKEVERBS_DEAD_MS", "300", 1);
  run(2, killed_rank, 1, 128 + SIGKILL);
  unsetenv("FAKEVERBS_DEAD_MS");
}

static int destroyed_rank(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t e;
  const info_t *peer;
  if (connect_pair(idx, &e, &peer)) return 1;
  if (idx == 1) {
    CK(V.destroy_qp(e.qp[0]) == 0);
    e.qp[0] = NULL;
    __atomic_store_n(&S->t_event, meld_now_ms(), __ATOMIC_RELEASE);
  } else {
    const int64_t end = meld_now_ms() + WAIT_MS;
    while (!__atomic_load_n(&S->t_event, __ATOMIC_ACQUIRE)) CK(meld_now_ms() < end);
    const int64_t t0 = meld_now_ms();
    struct ibv_wc wc[2];
    CK(post_write(e.qp[0], 1, e.buf, 100, e.mr->lkey, peer->addr, peer->rkey, 0) == 0);
    CK(post_write(e.qp[0], 2, e.buf, 100, e.mr->lkey, peer->addr, peer->rkey, IBV_SEND_SIGNALED) == 0);
    CK(poll_n(e.scq[0], wc, 2, WAIT_MS) == 2);
    CKW(wc[0], 1, IBV_WC_RETRY_EXC_ERR); /* an unsignaled WR's error has a CQE too */
    CKW(wc[1], 2, IBV_WC_WR_FLUSH_ERR);
    CK(meld_now_ms() - t0 < 1000); /* no heartbeat timeout (DEAD_MS is 5 s here) */
  }
  CK(barrier(2));
  return ep_close(&e);
}

static void test_peer_destroyed(void **state) {
  (void)state;
  setenv("FAKEVERBS_DEAD_MS", "5000", 1);
  run(2, destroyed_rank, -1, 0);
  unsetenv("FAKEVERBS_DEAD_MS");
}

/* ---- thread mode (one process, two contexts, no FAKEVERBS_FABRIC) --------------------------- */

static int open_two(ep_t *a, ep_t *b, size_t bytes) {
  unsetenv("FAKEVERBS_FABRIC");
  if (ep_open(a, bytes) || ep_open(b, bytes)) return 1;
  CK(a->lid != b->lid && a->lid >= 1 && b->lid >= 1);
  return 0;
}

static int sq_full_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t a, b;
  if (open_two(&a, &b, 1 << 16)) return 1;
  if (ep_add_qp(&a, 8, 4, 16, 64, RW) || ep_add_qp(&b, 8, 4, 16, 64, RW)) return 1;
  if (ep_add_qp(&a, 8, 4, 16, 64, RW) || ep_add_qp(&b, 8, 4, 16, 64, RW)) return 1;
  struct ibv_qp *q0 = a.qp[0], *q1 = a.qp[1];
  /* not in RTS yet: EINVAL */
  CK(post_write(q0, 1, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, 0) == EINVAL);
  if (connect_local(&a, 0, &b, 0, 1, 2, 7) || connect_local(&a, 1, &b, 1, 3, 4, 7)) return 1;
  /* QP 0: 8 unsignaled writes fill the SQ for good: nothing ever releases them */
  for (int i = 0; i < 8; i++) CK(post_write(q0, (uint64_t)i, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, 0) == 0);
  struct ibv_sge sg = {(uintptr_t)a.buf, 8, a.mr->lkey};
  struct ibv_send_wr w[2], *bad = NULL;
  memset(w, 0, sizeof w);
  for (int i = 0; i < 2; i++) {
    w[i].wr_id = 100 + (uint64_t)i;
    w[i].sg_list = &sg;
    w[i].num_sge = 1;
    w[i].opcode = IBV_WR_RDMA_WRITE;
    w[i].send_flags = IBV_SEND_SIGNALED;
    w[i].wr.rdma.remote_addr = (uintptr_t)b.buf;
    w[i].wr.rdma.rkey = b.mr->rkey;
  }
  w[0].next = &w[1];
  CK(ibv_post_send(q0, &w[0], &bad) == ENOMEM && bad == &w[0]);
  usleep(50 * 1000); /* all 8 are acked by now: still held */
  bad = NULL;
  CK(ibv_post_send(q0, &w[1], &bad) == ENOMEM && bad == &w[1]);
  CK(quiet(a.scq[0], 10));
  /* QP 1: 7 unsignaled + 1 signaled; its CQE releases all 8 */
  for (int i = 0; i < 8; i++)
    CK(post_write(q1, (uint64_t)i, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, i == 7 ? IBV_SEND_SIGNALED : 0) == 0);
  struct ibv_wc wc[2];
  CK(poll_n(a.scq[1], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 7, IBV_WC_SUCCESS);
  w[1].next = NULL;
  bad = NULL;
  CK(ibv_post_send(q1, &w[0], &bad) == 0); /* two more fit now */
  CK(poll_n(a.scq[1], wc, 2, WAIT_MS) == 2);
  CKW(wc[0], 100, IBV_WC_SUCCESS);
  CKW(wc[1], 101, IBV_WC_SUCCESS);
  /* EINVAL: another opcode (in a list: the first is posted), too many SGEs, inline too long */
  w[0].next = &w[1];
  w[1].opcode = IBV_WR_RDMA_READ;
  bad = NULL;
  CK(ibv_post_send(q1, &w[0], &bad) == EINVAL && bad == &w[1]);
  CK(poll_n(a.scq[1], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 100, IBV_WC_SUCCESS);
  struct ibv_sge sg3[3] = {sg, sg, sg};
  w[0].next = NULL;
  w[0].sg_list = sg3;
  w[0].num_sge = 3;
  CK(ibv_post_send(q1, &w[0], &bad) == EINVAL);
  w[0].num_sge = 1;
  w[0].sg_list = &sg;
  sg.length = 17;
  w[0].send_flags = IBV_SEND_INLINE;
  CK(ibv_post_send(q1, &w[0], &bad) == EINVAL);
  sg.length = 16;
  w[0].wr_id = 200;
  w[0].send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED;
  CK(ibv_post_send(q1, &w[0], &bad) == 0);
  CK(poll_n(a.scq[1], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 200, IBV_WC_SUCCESS);
  /* RQ: 4 fit, the 5th is ENOMEM */
  for (int i = 0; i < 4; i++) CK(post_recv(b.qp[1], (uint64_t)i, b.buf, 64, b.mr->lkey) == 0);
  CK(post_recv(b.qp[1], 4, b.buf, 64, b.mr->lkey) == ENOMEM);
  /* CQ and PD in use: EBUSY */
  CK(V.destroy_cq(a.scq[0]) == EBUSY && V.dealloc_pd(a.pd) == EBUSY);
  return ep_close(&a) || ep_close(&b);
}

static void test_sq_full(void **state) {
  (void)state;
  run(1, sq_full_child, -1, 0);
}

static int rnr_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t a, b;
  if (open_two(&a, &b, 1 << 16)) return 1;
  for (int q = 0; q < 2; q++)
    if (ep_add_qp(&a, 8, 4, 32, 16, RW) || ep_add_qp(&b, 8, 4, 32, 16, RW)) return 1;
  if (connect_local(&a, 0, &b, 0, 5, 6, 2) || connect_local(&a, 1, &b, 1, 7, 8, 7)) return 1;
  uint8_t msg[MSG];
  make_msg(msg, 0, 0);
  struct ibv_wc wc[2];
  /* rnr_retry 2: three waits of ~5 ms, then RNR_RETRY_EXC_ERR */
  int64_t t0 = meld_now_ms();
  CK(post_send_inline(a.qp[0], 1, msg, MSG, IBV_SEND_SIGNALED, 0, 0) == 0);
  CK(post_send_inline(a.qp[0], 2, msg, MSG, 0, 0, 0) == 0);
  CK(poll_n(a.scq[0], wc, 2, WAIT_MS) == 2);
  CKW(wc[0], 1, IBV_WC_RNR_RETRY_EXC_ERR);
  CKW(wc[1], 2, IBV_WC_WR_FLUSH_ERR);
  CK(meld_now_ms() - t0 >= 10);
  CK(post_recv(b.qp[0], 9, b.buf, 64, b.mr->lkey) == 0);
  CK(quiet(b.rcq[0], 20)); /* the refused SEND is not delivered later */
  /* rnr_retry 7: waits as long as it takes */
  t0 = meld_now_ms();
  CK(post_send_inline(a.qp[1], 3, msg, MSG, IBV_SEND_SIGNALED, 1, 77) == 0);
  CK(quiet(a.scq[1], 100));
  CK(post_recv(b.qp[1], 4, b.buf + 128, 64, b.mr->lkey) == 0);
  CK(poll_n(a.scq[1], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 3, IBV_WC_SUCCESS);
  CK(poll_n(b.rcq[1], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 4, IBV_WC_SUCCESS);
  CK(wc[0].byte_len == MSG && ntohl(wc[0].imm_data) == 77 && memcmp(b.buf + 128, msg, MSG) == 0);
  return ep_close(&a) || ep_close(&b);
}

static void test_rnr(void **state) {
  (void)state;
  run(1, rnr_child, -1, 0);
}

static int psn_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t a, b;
  if (open_two(&a, &b, 1 << 16)) return 1;
  if (ep_add_qp(&a, 8, 4, 32, 16, RW) || ep_add_qp(&b, 8, 4, 32, 16, RW)) return 1;
  CK(qp_rtr(a.qp[0], b.qp[0]->qp_num, b.lid, 500) == 0);
  CK(qp_rtr(b.qp[0], a.qp[0]->qp_num, a.lid, 101) == 0); /* b expects 101 */
  CK(qp_rts(a.qp[0], 100, 7) == 0);                      /* a starts at 100 */
  CK(qp_rts(b.qp[0], 500, 7) == 0);
  struct ibv_wc wc[2];
  /* b -> a matches (500 == 500) and works (first: a's QP is in error afterwards) */
  CK(post_write(b.qp[0], 3, b.buf + 8192, 64, b.mr->lkey, (uintptr_t)a.buf + 8192, a.mr->rkey, IBV_SEND_SIGNALED) == 0);
  CK(poll_n(b.scq[0], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 3, IBV_WC_SUCCESS);
  CK(post_recv(b.qp[0], 1, b.buf + 4096, 64, b.mr->lkey) == 0);
  mp_fill(a.buf, 256, 3);
  CK(post_write(a.qp[0], 1, a.buf, 256, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, IBV_SEND_SIGNALED) == 0);
  CK(post_send_inline(a.qp[0], 2, a.buf, 8, IBV_SEND_SIGNALED, 0, 0) == 0);
  CK(poll_n(a.scq[0], wc, 2, WAIT_MS) == 2);
  CKW(wc[0], 1, IBV_WC_RETRY_EXC_ERR);
  CKW(wc[1], 2, IBV_WC_WR_FLUSH_ERR);
  CK(quiet(b.rcq[0], 20));
  CK(all_zero(b.buf, 256) && all_zero(b.buf + 4096, 64));
  return ep_close(&a) || ep_close(&b);
}

static void test_psn_mismatch(void **state) {
  (void)state;
  run(1, psn_child, -1, 0);
}

/* Four threads poll four CQs of two contexts while the NIC threads push. */
#define TN 200
#define TCHUNK 4096
typedef struct {
  ep_t *me;
  int from; /* the peer's index (data seeds) */
  int recv_side;
  int rc;
} poller_t;

static void *poller(void *arg) {
  poller_t *p = arg;
  ep_t *e = p->me;
  const int64_t end = meld_now_ms() + 10000;
  for (int got = 0; got < TN;) {
    if (meld_now_ms() > end) {
      fprintf(stderr, "thread mode: %s poller got %d of %d\n", p->recv_side ? "recv" : "send", got, TN);
      p->rc = 1;
      return NULL;
    }
    struct ibv_wc wc[16];
    const int n = ibv_poll_cq(p->recv_side ? e->rcq[0] : e->scq[0], 16, wc);
    if (n < 0) {
      p->rc = 1;
      return NULL;
    }
    for (int i = 0; i < n; i++, got++) {
      const uint64_t want = p->recv_side ? 5000u + (uint64_t)got : 2u * (uint64_t)got + 1;
      int ok = wc[i].status == IBV_WC_SUCCESS && wc[i].wr_id == want;
      if (ok && p->recv_side) { /* chunk `got` is there before its SEND */
        uint32_t k;
        memcpy(&k, e->buf + 2 * TN * TCHUNK + (size_t)got * 64, 4);
        ok = wc[i].byte_len == 4 && k == (uint32_t)got &&
             mp_same(e->buf + (size_t)(TN + got) * TCHUNK, TCHUNK, wseed(p->from, got));
      }
      if (!ok) {
        fprintf(stderr, "thread mode: %s completion %d wrong (wr_id %llu status %d)\n",
                p->recv_side ? "recv" : "send", got, (unsigned long long)wc[i].wr_id, (int)wc[i].status);
        p->rc = 1;
        return NULL;
      }
    }
    if (!n) usleep(50);
  }
  return NULL;
}

static int threads_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t ep[2];
  /* buffer: [send chunks: TN][recv chunks: TN][recv slots: TN * 64] */
  if (open_two(&ep[0], &ep[1], 2 * TN * TCHUNK + TN * 64)) return 1;
  for (int s = 0; s < 2; s++)
    if (ep_add_qp(&ep[s], 2 * TN, TN, 16, 2 * TN, RW)) return 1;
  if (connect_local(&ep[0], 0, &ep[1], 0, 11, 12, 7)) return 1;
  for (int s = 0; s < 2; s++)
    for (int i = 0; i < TN; i++) {
      CK(post_recv(ep[s].qp[0], 5000 + (uint64_t)i, ep[s].buf + 2 * TN * TCHUNK + (size_t)i * 64, 64, ep[s].mr->lkey) == 0);
      mp_fill(ep[s].buf + (size_t)i * TCHUNK, TCHUNK, wseed(s, i));
    }
  poller_t pl[4];
  pthread_t th[4];
  for (int t = 0; t < 4; t++) {
    pl[t] = (poller_t){&ep[t / 2], 1 - t / 2, t % 2, 0};
    CK(pthread_create(&th[t], NULL, poller, &pl[t]) == 0);
  }
  for (int i = 0; i < TN; i++)
    for (int s = 0; s < 2; s++) {
      ep_t *e = &ep[s], *o = &ep[1 - s];
      CK(post_write(e->qp[0], 2 * (uint64_t)i, e->buf + (size_t)i * TCHUNK, TCHUNK, e->mr->lkey,
                    (uintptr_t)o->buf + (size_t)(TN + i) * TCHUNK, o->mr->rkey, 0) == 0);
      uint32_t k = (uint32_t)i;
      CK(post_send_inline(e->qp[0], 2 * (uint64_t)i + 1, &k, 4, IBV_SEND_SIGNALED, 0, 0) == 0);
      if (i % 20 == 0) { /* contexts come and go while others work */
        int n;
        struct ibv_device **list = V.get_device_list(&n);
        CK(list && n >= 1);
        struct ibv_context *x = V.open_device(list[0]);
        V.free_device_list(list);
        CK(x != NULL);
        struct ibv_pd *pd = V.alloc_pd(x);
        CK(pd != NULL);
        CK(V.dealloc_pd(pd) == 0);
        CK(V.close_device(x) == 0);
      }
    }
  int rc = 0;
  for (int t = 0; t < 4; t++) {
    pthread_join(th[t], NULL);
    rc |= pl[t].rc;
  }
  CK(rc == 0);
  return ep_close(&ep[0]) || ep_close(&ep[1]);
}

static void test_thread_mode(void **state) {
  (void)state;
  run(1, threads_child, -1, 0);
}

/* ---- ports, devices, variables ------------------------------------------------------------- */

static int query(struct ibv_context *x, struct ibv_port_attr *pa) {
  memset(pa, 0, sizeof *pa);
  return V.query_port(x, 1, (struct _compat_ibv_port_attr *)pa);
}

static int env_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  unsetenv("FAKEVERBS_FABRIC");
  int n = -1;
  setenv("FAKEVERBS_NDEV", "0", 1);
  struct ibv_device **list = V.get_device_list(&n);
  CK(list && n == 0 && list[0] == NULL);
  V.free_device_list(list);
  setenv("FAKEVERBS_NDEV", "3", 1);
  CK((list = V.get_device_list(&n)) != NULL && n == 3 && list[3] == NULL);
  for (int i = 0; i < 3; i++) {
    char want[16];
    snprintf(want, sizeof want, "fake%d", i);
    CK(strcmp(V.get_device_name(list[i]), want) == 0);
  }
  V.free_device_list(list);
  unsetenv("FAKEVERBS_NDEV");
  CK(V.fork_init() == 0);
  for (int s = 0; s <= IBV_WC_TM_RNDV_INCOMPLETE; s++)
    CK(V.wc_status_str((enum ibv_wc_status)s) && strcmp(V.wc_status_str((enum ibv_wc_status)s), "unknown") != 0);

  /* FAKEVERBS_MAX_MSG: reported, and a longer message fails locally */
  setenv("FAKEVERBS_MAX_MSG", "65536", 1);
  ep_t a, b;
  if (open_two(&a, &b, 1 << 18)) return 1;
  unsetenv("FAKEVERBS_MAX_MSG");
  struct ibv_port_attr pa;
  CK(query(a.ctx, &pa) == 0);
  CK(pa.max_msg_sz == 65536 && pa.state == IBV_PORT_ACTIVE && pa.active_mtu == IBV_MTU_4096 &&
     pa.max_mtu == IBV_MTU_4096 && pa.gid_tbl_len == 4 && pa.link_layer == IBV_LINK_LAYER_INFINIBAND && pa.lid == a.lid);
  CK(V.query_port(a.ctx, 2, (struct _compat_ibv_port_attr *)&pa) == EINVAL);
  union ibv_gid g;
  CK(V.query_gid(a.ctx, 1, 0, &g) == 0 && g.raw[0] == 0xfe && g.raw[1] == 0x80 && g.raw[15] == (uint8_t)a.lid);
  CK(V.query_gid(a.ctx, 1, 3, &g) == 0 && all_zero(g.raw, 16));
  CK(V.query_gid(a.ctx, 1, 4, &g) == EINVAL);
  struct ibv_device_attr da;
  CK(V.query_device(a.ctx, &da) == 0);
  CK(da.max_qp_wr == 16384 && da.max_sge == 4 && da.max_cqe == 1 << 20 && da.max_qp == 256 &&
     da.max_mr_size == 1ull << 40 && da.phys_port_cnt == 1);
  if (ep_add_qp(&a, 8, 4, 16, 16, RW) || ep_add_qp(&b, 8, 4, 16, 16, RW) || connect_local(&a, 0, &b, 0, 1, 1, 7)) return 1;
  struct ibv_wc wc[2];
  mp_fill(a.buf, 65537, 5);
  CK(post_write(a.qp[0], 1, a.buf, 65536, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, IBV_SEND_SIGNALED) == 0);
  CK(poll_n(a.scq[0], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 1, IBV_WC_SUCCESS);
  CK(mp_same(b.buf, 65536, 5));
  CK(post_write(a.qp[0], 2, a.buf, 65537, a.mr->lkey, (uintptr_t)b.buf + 65536, b.mr->rkey, IBV_SEND_SIGNALED) == 0);
  CK(poll_n(a.scq[0], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 2, IBV_WC_LOC_LEN_ERR);
  CK(all_zero(b.buf + 65536, 65537));
  if (ep_close(&a) || ep_close(&b)) return 1;

  /* FAKEVERBS_PORT_DOWN */
  setenv("FAKEVERBS_PORT_DOWN", "1", 1);
  if (ep_open(&a, 4096)) return 1;
  unsetenv("FAKEVERBS_PORT_DOWN");
  CK(query(a.ctx, &pa) == 0 && pa.state == IBV_PORT_DOWN);
  if (ep_close(&a)) return 1;

  /* FAKEVERBS_ROCE: Ethernet, LID 0, GID 3 IPv4-mapped; AVs by GID */
  setenv("FAKEVERBS_ROCE", "1", 1);
  if (ep_open(&a, 1 << 16) || ep_open(&b, 1 << 16)) return 1;
  unsetenv("FAKEVERBS_ROCE");
  CK(a.lid == 0 && b.lid == 0);
  CK(query(a.ctx, &pa) == 0 && pa.link_layer == IBV_LINK_LAYER_ETHERNET && pa.lid == 0 && pa.max_msg_sz == 1u << 30);
  union ibv_gid ga, gb;
  CK(V.query_gid(a.ctx, 1, 3, &ga) == 0 && V.query_gid(b.ctx, 1, 3, &gb) == 0);
  CK(all_zero(ga.raw, 10) && ga.raw[10] == 0xff && ga.raw[11] == 0xff && ga.raw[12] == 10 && ga.raw[15] != gb.raw[15]);
  if (ep_add_qp(&a, 8, 4, 16, 16, RW) || ep_add_qp(&b, 8, 4, 16, 16, RW)) return 1;
  struct ibv_qp_attr at;
  int mask;
  rtr_attr(&at, &mask, b.qp[0]->qp_num, 0, 1);
  CK(V.modify_qp(a.qp[0], &at, mask) == EINVAL); /* no GRH */
  at.ah_attr.is_global = 1;
  at.ah_attr.grh.sgid_index = 3;
  at.ah_attr.grh.dgid = ga; /* a's own GID */
  CK(V.modify_qp(a.qp[0], &at, mask) == EINVAL);
  at.ah_attr.grh.dgid = gb;
  CK(V.modify_qp(a.qp[0], &at, mask) == 0);
  rtr_attr(&at, &mask, a.qp[0]->qp_num, 0, 1);
  at.ah_attr.is_global = 1;
  CK(V.query_gid(a.ctx, 1, 0, &at.ah_attr.grh.dgid) == 0); /* GID index 0 works as well */
  CK(V.modify_qp(b.qp[0], &at, mask) == 0);
  CK(qp_rts(a.qp[0], 1, 7) == 0 && qp_rts(b.qp[0], 1, 7) == 0);
  mp_fill(a.buf, 1000, 8);
  CK(post_write(a.qp[0], 1, a.buf, 1000, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, IBV_SEND_SIGNALED) == 0);
  CK(poll_n(a.scq[0], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 1, IBV_WC_SUCCESS);
  CK(mp_same(b.buf, 1000, 8));
  return ep_close(&a) || ep_close(&b);
}

static void test_env_and_ports(void **state) {
  (void)state;
  run(1, env_child, -1, 0);
}

/* ---- modify_qp's checks -------------------------------------------------------------------- */

static int modify_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t a, b;
  if (open_two(&a, &b, 4096)) return 1;
  if (ep_add_qp(&a, 8, 4, 16, 16, RW) || ep_add_qp(&b, 8, 4, 16, 16, RW)) return 1;
  struct ibv_qp_attr at;
  int mask;
  rtr_attr(&at, &mask, b.qp[0]->qp_num, b.lid, 1);
  CK(V.modify_qp(a.qp[0], &at, mask & ~IBV_QP_MIN_RNR_TIMER) == EINVAL); /* missing attribute */
  CK(V.modify_qp(a.qp[0], &at, mask | IBV_QP_SQ_PSN) == EINVAL);          /* one of RTS's */
  at.ah_attr.dlid = a.lid;
  CK(V.modify_qp(a.qp[0], &at, mask) == EINVAL); /* the LID of another port */
  at.ah_attr.dlid = b.lid;
  at.dest_qp_num = b.qp[0]->qp_num ^ 0x100; /* another generation of the slot: no such QP */
  CK(V.modify_qp(a.qp[0], &at, mask) == EINVAL);
  at.dest_qp_num = b.qp[0]->qp_num;
  at.path_mtu = (enum ibv_mtu)6;
  CK(V.modify_qp(a.qp[0], &at, mask) == EINVAL);
  at.path_mtu = IBV_MTU_1024;
  CK(qp_rts(a.qp[0], 1, 7) == EINVAL); /* INIT -> RTS */
  CK(V.modify_qp(a.qp[0], &at, mask) == 0);
  CK(a.qp[0]->state == IBV_QPS_RTR);
  CK(V.modify_qp(a.qp[0], &at, mask) == EINVAL); /* RTR -> RTR */
  /* INIT without its attributes; RESET -> RTR */
  if (ep_add_qp(&a, 8, 4, 16, 16, RW)) return 1;
  struct ibv_qp_init_attr ia;
  memset(&ia, 0, sizeof ia);
  ia.send_cq = ia.recv_cq = a.scq[1];
  ia.cap.max_send_wr = 4;
  ia.qp_type = IBV_QPT_RC;
  struct ibv_qp *raw = V.create_qp(a.pd, &ia);
  CK(raw != NULL);
  memset(&at, 0, sizeof at);
  at.qp_state = IBV_QPS_INIT;
  at.port_num = 1;
  CK(V.modify_qp(raw, &at, IBV_QP_STATE | IBV_QP_PORT | IBV_QP_PKEY_INDEX) == EINVAL);
  rtr_attr(&at, &mask, b.qp[0]->qp_num, b.lid, 1);
  CK(V.modify_qp(raw, &at, mask) == EINVAL);
  at.qp_state = IBV_QPS_ERR; /* any -> ERR */
  CK(V.modify_qp(raw, &at, IBV_QP_STATE) == 0);
  CK(V.destroy_qp(raw) == 0);
  ia.qp_type = IBV_QPT_UD;
  CK(V.create_qp(a.pd, &ia) == NULL);
  ia.qp_type = IBV_QPT_RC;
  ia.cap.max_send_wr = 16385;
  CK(V.create_qp(a.pd, &ia) == NULL);
  return ep_close(&a) || ep_close(&b);
}

static void test_modify_qp(void **state) {
  (void)state;
  run(1, modify_child, -1, 0);
}

/* ---- local errors, CQ overrun, when source memory is read ---------------------------------- */

static int local_child(int idx, const job_t *job) {
  (void)job;
  g_idx = idx;
  ep_t a, b;
  if (open_two(&a, &b, 1 << 16)) return 1;
  for (int q = 0; q < 4; q++)
    if (ep_add_qp(&a, 8, 4, 32, q == 2 ? 1 : 16, RW) || ep_add_qp(&b, 8, 4, 32, 16, RW)) return 1;
  for (int q = 0; q < 3; q++)
    if (connect_local(&a, q, &b, q, 20 + (uint32_t)q, 30 + (uint32_t)q, 7)) return 1;
  struct ibv_wc wc[4];
  /* QP 0: the rkey as an lkey: LOC_PROT_ERR, the next flushes */
  CK(post_write(a.qp[0], 1, a.buf, 64, a.mr->rkey, (uintptr_t)b.buf, b.mr->rkey, 0) == 0);
  CK(post_write(a.qp[0], 2, a.buf, 64, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, 0) == 0);
  CK(poll_n(a.scq[0], wc, 2, WAIT_MS) == 2);
  CKW(wc[0], 1, IBV_WC_LOC_PROT_ERR);
  CKW(wc[1], 2, IBV_WC_WR_FLUSH_ERR);
  /* QP 1: a 24-byte SEND into a 16-byte recv */
  CK(post_recv(b.qp[1], 7, b.buf + 4096, 16, b.mr->lkey) == 0);
  CK(post_recv(b.qp[1], 8, b.buf + 4096, 64, b.mr->lkey) == 0);
  uint8_t msg[MSG];
  make_msg(msg, 1, 1);
  CK(post_send_inline(a.qp[1], 3, msg, MSG, IBV_SEND_SIGNALED, 0, 0) == 0);
  CK(poll_n(b.rcq[1], wc, 2, WAIT_MS) == 2);
  CKW(wc[0], 7, IBV_WC_LOC_LEN_ERR);
  CKW(wc[1], 8, IBV_WC_WR_FLUSH_ERR);
  CK(poll_n(a.scq[1], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 3, IBV_WC_REM_INV_REQ_ERR);
  /* QP 2: a 1-entry CQ, three signaled writes: overrun, poll_cq fails from then on */
  CK(a.scq[2]->cqe >= 1 && a.scq[2]->cqe < 3);
  for (int i = 0; i < 3; i++)
    CK(post_write(a.qp[2], (uint64_t)i, a.buf, 8, a.mr->lkey, (uintptr_t)b.buf, b.mr->rkey, IBV_SEND_SIGNALED) == 0);
  usleep(100 * 1000);
  CK(ibv_poll_cq(a.scq[2], 4, wc) == -1);
  CK(ibv_poll_cq(a.scq[2], 4, wc) == -1);
  /* QP 3: posted while the destination is still in INIT (the NIC waits for it): the source is
   * read when the NIC sends, inline data when it is posted */
  CK(qp_rtr(a.qp[3], b.qp[3]->qp_num, b.lid, 40) == 0 && qp_rts(a.qp[3], 41, 7) == 0);
  uint8_t *src = a.buf + 8192;
  mp_fill(src, 5000, 100);
  CK(post_write(a.qp[3], 1, src, 5000, a.mr->lkey, (uintptr_t)b.buf + 8192, b.mr->rkey, 0) == 0);
  make_msg(msg, 0, 2);
  CK(post_send_inline(a.qp[3], 2, msg, MSG, IBV_SEND_SIGNALED, 0, 0) == 0);
  mp_fill(src, 5000, 101); /* reused before its completion */
  memset(msg, 0, sizeof msg);
  usleep(20 * 1000);
  CK(all_zero(b.buf + 8192, 5000)); /* nothing moved yet */
  CK(post_recv(b.qp[3], 9, b.buf + 16384, 64, b.mr->lkey) == 0);
  CK(qp_rtr(b.qp[3], a.qp[3]->qp_num, a.lid, 41) == 0 && qp_rts(b.qp[3], 40, 7) == 0);
  CK(poll_n(b.rcq[3], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 9, IBV_WC_SUCCESS);
  CK(mp_same(b.buf + 8192, 5000, 101)); /* the corrupted data, as on hardware */
  make_msg(msg, 0, 2);
  CK(memcmp(b.buf + 16384, msg, MSG) == 0);
  CK(poll_n(a.scq[3], wc, 1, WAIT_MS) == 1);
  CKW(wc[0], 2, IBV_WC_SUCCESS);
  return ep_close(&a) || ep_close(&b);
}

static void test_local_errors(void **state) {
  (void)state;
  run(1, local_child, -1, 0);
}

int main(void) {
  if (load_fake() != 0) return 1;
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_write_send),   cmocka_unit_test(test_bad_rkey),
      cmocka_unit_test(test_peer_killed),  cmocka_unit_test(test_peer_destroyed),
      cmocka_unit_test(test_sq_full),      cmocka_unit_test(test_rnr),
      cmocka_unit_test(test_psn_mismatch), cmocka_unit_test(test_thread_mode),
      cmocka_unit_test(test_env_and_ports), cmocka_unit_test(test_modify_qp),
      cmocka_unit_test(test_local_errors),
  };
  return cmocka_run_group_tests_name("fakeverbs", tests, NULL, NULL);
}
#endif
