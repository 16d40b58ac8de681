/* fakeverbs.c — a fake libibverbs for tests: one emulated RC "HCA" per opened context, across
 * the threads of one process and across fork()ed processes, loaded with dlopen in place of
 * libibverbs.so.1. No kernel RDMA support is needed: data moves through shared memory.
 *
 * THE MODEL
 *   Fabric. Everything shared between users lives in one "fabric" mapping: the file named by
 *   FAKEVERBS_FABRIC (mmap'ed MAP_SHARED; the first opener creates and ftruncates it, sparse,
 *   and initialises it once: an init word set by CAS, others wait for "ready"), or, when the
 *   variable is unset, an anonymous MAP_SHARED mapping private to the process (threads only).
 *   The fabric is chosen when a process opens its first context (none of its contexts open). It
 *   holds 64 context ("port") slots, 256 QP slots and one 64 KiB inbox ring per QP slot.
 *   Cross-process fields are only read and written with __atomic builtins.
 *   Context slots. ibv_open_device takes a free slot (or one whose heartbeat is older than
 *   FAKEVERBS_DEAD_MS: its process died); the slot's index + 1 is the port's LID. A slot word
 *   packs (heartbeat ms << 24 | 24-bit tag); the context's NIC thread refreshes it every 5 ms.
 *   QP slots. qp_num = generation << 8 | slot (24 bits; the generation comes from a fabric
 *   counter, never 0). A slot's owner word packs qpn, owner context slot and tag, so that a
 *   slot whose owner died is reclaimed with one CAS. ibv_destroy_qp frees the slot: its peer
 *   sees the qpn change ("gone").
 *   NIC thread. One per context (started by ibv_open_device, joined by ibv_close_device). It
 *   does all data movement: (a) for each of its QPs in RTS it takes posted send WRs in order and
 *   writes them into the DESTINATION QP's inbox as records (a 64-byte header + at most 16 KiB of
 *   payload each), reading the payload from the SGEs' memory at that time (not at post time:
 *   reusing a source buffer before its completion sends corrupted data, as on hardware; inline
 *   data is copied at post time); (b) it drains its own QPs' inboxes strictly in order: RDMA
 *   WRITE fragments are checked (the QP has IBV_ACCESS_REMOTE_WRITE; the rkey names an MR of
 *   THIS context, of the QP's PD, with IBV_ACCESS_REMOTE_WRITE, covering [raddr, raddr+len)) and
 *   copied into place; a failure puts both QPs in error (the sender's WR completes with
 *   IBV_WC_REM_ACCESS_ERR, later ones IBV_WC_WR_FLUSH_ERR; the receiver's posted recvs flush). A
 *   SEND (or WRITE_WITH_IMM) consumes the oldest posted recv: its SGEs must lie in local MRs of
 *   the QP's PD with IBV_ACCESS_LOCAL_WRITE (else the recv completes IBV_WC_LOC_PROT_ERR and the
 *   sender gets IBV_WC_REM_OP_ERR); a payload longer than the SGEs gives IBV_WC_LOC_LEN_ERR at
 *   the receiver and IBV_WC_REM_INV_REQ_ERR at the sender (both QPs to error). The recv CQE
 *   carries wr_id, byte_len, imm_data + IBV_WC_WITH_IMM, qp_num, src_qp, slid. After a WR is
 *   fully applied the receiver publishes "acked = seq + 1" in its slot; (c) the sender completes
 *   WRs in order once acked: a CQE for signaled WRs (IBV_SEND_SIGNALED or sq_sig_all) and for
 *   every error.
 *   RNR. A SEND / WRITE_WITH_IMM meeting an empty receive queue waits: forever when the sender's
 *   rnr_retry is 7, else for (rnr_retry + 1) * 5 ms, then the sender's WR completes with
 *   IBV_WC_RNR_RETRY_EXC_ERR (its QP to error; the receiver stays in RTS).
 *   Dead peer. When the destination QP's slot changed owner (destroyed) or its context's
 *   heartbeat is stale, the oldest unfinished WR completes with IBV_WC_RETRY_EXC_ERR and the rest
 *   flush. A destination that stays unreachable (not in RTR/RTS, connected elsewhere, in error,
 *   port down) fails the same way after FAKEVERBS_DEAD_MS.
 *   PSN. At the first record a QP receives after RTR, the sender's sq_psn must equal the
 *   receiver's rq_psn, else the sender's WR completes with IBV_WC_RETRY_EXC_ERR.
 *   SQ. A WR holds an SQ slot from post until it is acked AND a signaled WR at or after it has
 *   produced its CQE (errors always produce CQEs). ibv_post_send: ENOMEM when max_send_wr slots
 *   are held; EINVAL for another opcode than RDMA_WRITE[_WITH_IMM] / SEND[_WITH_IMM], num_sge >
 *   max_send_sge, inline data > max_inline_data, or a QP not in RTS. A message longer than
 *   max_msg_sz completes IBV_WC_LOC_LEN_ERR; a non-inline SGE outside a local MR of the QP's PD
 *   (by lkey) completes IBV_WC_LOC_PROT_ERR (both when the NIC reaches the WR). RQ: ENOMEM past
 *   max_recv_wr; allowed from INIT on (in error a posted recv is flushed at once).
 *   Keys. lkey and rkey of an MR are distinct, unique fabric-wide (from a fabric counter): a
 *   local key used as a remote one (or the reverse) fails.
 *   CQ. A ring of cqe entries (create_cq's cqe rounded up to 2^n - 1, as mlx5 reports it). When
 *   the NIC must push into a full CQ, the CQ is overrun: one "fakeverbs:" line, and poll_cq
 *   returns -1 from then on. poll_cq is thread-safe.
 *   modify_qp. RESET->INIT (STATE|PKEY_INDEX|PORT|ACCESS_FLAGS), INIT->RTR (STATE|AV|PATH_MTU|
 *   DEST_QPN|RQ_PSN|MAX_DEST_RD_ATOMIC|MIN_RNR_TIMER; the destination QP must exist and the AV
 *   address its owner: IB: dlid == owner's LID (and, with is_global, dgid == its GID 0); RoCE:
 *   is_global with dgid == the owner's GID at sgid_index 0 or 3; path_mtu <= 4096), RTR->RTS
 *   (STATE|TIMEOUT|RETRY_CNT|RNR_RETRY|SQ_PSN|MAX_QP_RD_ATOMIC), any -> ERR (flushes both
 *   queues). Anything else (missing or extra mask bits, other transitions) is EINVAL. RC only.
 *   Ports. Port 1 only: ACTIVE, MTU 4096, LID = context slot + 1 (0 in RoCE mode), gid_tbl_len
 *   4: GID 0 = fe80::<slot + 1>; in RoCE mode GID 3 = ::ffff:10.0.0.<slot + 1>; others zero.
 *
 * ENVIRONMENT (read when a context opens; FAKEVERBS_NDEV when the device list is made)
 *   FAKEVERBS_FABRIC    path of the fabric file shared by processes; unset: threads of one
 *                       process only
 *   FAKEVERBS_NDEV      number of devices fake0, fake1, ... (default 1; 0: an empty list)
 *   FAKEVERBS_DEAD_MS   a context whose heartbeat is older is dead (default 300); also how long
 *                       a sender waits for an unreachable destination
 *   FAKEVERBS_MAX_MSG   the port's max_msg_sz (default 1 GiB)
 *   FAKEVERBS_PORT_DOWN 1: the port is IBV_PORT_DOWN (nothing moves to or from it)
 *   FAKEVERBS_UNREACHABLE 1: the port says ACTIVE, but nothing moves to or from it (a fabric
 *                       that cannot route to this NIC: peers' WRs fail with RETRY_EXC_ERR)
 *   FAKEVERBS_ROCE      1: Ethernet link layer (LID 0, GID-addressed AVs)
 *   FAKEVERBS_DELAY_US  microseconds to wait before each received fragment is applied
 *                       (default 0: slow completions on demand)
 *
 * Nothing is printed on success; an internal impossibility (or a CQ overrun, a lost slot, a bad
 * variable) prints one line prefixed "fakeverbs:". */
#include <endian.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <pthread.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include <infiniband/verbs.h>

/* The header wraps some verbs in macros / inlines; this file defines the real symbols. */
#undef ibv_get_device_list
#undef ibv_query_port
#undef ibv_reg_mr
#undef ibv_reg_mr_iova

#define FV_EXPORT __attribute__((visibility("default")))

#define FV_NCTX 64
#define FV_NQP 256
#define FV_RING (64u << 10)
#define FV_FRAG (16u << 10)
#define FV_REC 64u
#define FV_MAX_SGE 4
#define FV_MAX_INLINE 512
#define FV_MAX_WR 16384
#define FV_MAX_CQE (1 << 20)
#define FV_NDEV_MAX 16
#define FV_MAGIC 0x53425245564b4146ull /* "FAKEVERBS" */
#define FV_VERSION 1u
#define FV_RNR_MS 5
#define FV_HB_MS 5
#define SEQ_MASK ((1ull << 48) - 1)

#define LD(p) __atomic_load_n((p), __ATOMIC_ACQUIRE)
#define ST(p, v) __atomic_store_n((p), (v), __ATOMIC_RELEASE)
#define CAS(p, e, d) __atomic_compare_exchange_n((p), (e), (d), 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)
#define FADD(p, v) __atomic_fetch_add((p), (v), __ATOMIC_ACQ_REL)

/* ---- the fabric (shared) ------------------------------------------------------------------- */

typedef struct {
  uint64_t word;      /* 0 free; else heartbeat ms << 24 | tag (24 bits, != 0) */
  uint32_t roce;      /* the owner's link layer is Ethernet */
  uint32_t port_down; /* the owner's port is down */
  uint32_t pid;
  uint8_t pad_[44];
} fab_ctx_t;

typedef struct {
  uint64_t own;       /* 0 free; else qpn | ctx slot << 24 | ctx tag << 32 */
  uint32_t state;     /* enum ibv_qp_state, as the owner set it */
  uint32_t dest_qpn;  /* the QP it is connected to (RTR) */
  uint32_t rq_psn, sq_psn;
  uint64_t acked;     /* responder: WRs from its peer fully applied */
  uint64_t nak;       /* responder: 0, or status << 48 | seq of the WR it refused */
  uint64_t ring_head; /* producer: qpn << 32 | bytes written (mod 2^32) */
  uint32_t ring_tail; /* consumer: bytes consumed (mod 2^32) */
  uint8_t pad_[76];
} fab_qp_t;

typedef struct {
  uint32_t init; /* 0 fresh, 1 being initialised, 2 ready */
  uint32_t version;
  uint64_t magic;
  uint64_t size;
  uint32_t next_key, next_tag, next_gen, next_slot;
  uint8_t pad_[24];
  fab_ctx_t ctx[FV_NCTX];
  fab_qp_t qp[FV_NQP];
} fab_t;

#define FAB_RINGS_OFF (((sizeof(fab_t)) + 4095) & ~(size_t)4095)
#define FAB_SIZE (FAB_RINGS_OFF + (size_t)FV_NQP * FV_RING)

_Static_assert(sizeof(fab_ctx_t) == 64, "fab_ctx_t is one cache line");
_Static_assert(sizeof(fab_qp_t) == 128, "fab_qp_t is two cache lines");

/* An inbox record: this header, then `len` payload bytes, padded to a multiple of 64. */
enum { REC_PAD = 1, REC_MSG = 2 };
enum { F_FIRST = 1, F_LAST = 2 };
typedef struct {
  uint32_t kind, rec_bytes;
  uint32_t dst_qpn, src_qpn;
  uint64_t seq;   /* the WR's index in the sender's SQ */
  uint64_t raddr; /* RDMA WRITE: remote address of this fragment's first byte */
  uint32_t rkey;
  uint32_t len;   /* payload bytes in this record */
  uint32_t off;   /* the fragment's offset in the message */
  uint32_t total; /* the message's length */
  uint32_t imm;
  uint32_t sq_psn;
  uint16_t flags;
  uint8_t opcode, rnr_retry;
  uint16_t src_lid, pad_;
} rec_t;
_Static_assert(sizeof(rec_t) == FV_REC, "rec_t is 64 bytes");

/* ---- process-local objects ----------------------------------------------------------------- */

enum { M_CTX = 0x43747831, M_PD = 0x50643031, M_MR = 0x4d723031, M_CQ = 0x43713031, M_QP = 0x51703031 };

/* The bookkeeping all kinds of objects share, as one header `res` that each carries right after
 * its ibv_* struct (which stays first: the application's pointer is the object's address), so
 * that one set of functions (res_* below) serves them all. magic: to_*() tell a live object of
 * the right kind from a freed or foreign pointer (EINVAL, not a crash). next: the context's list
 * of that kind (for MRs a hash chain), from which ibv_close_device frees what the application
 * left. nref: the objects that use this one (a PD's MRs and QPs, a CQ's QPs); destroying it while
 * any do is EBUSY. handle: one above the list head's when linked (PDs and CQs report it). A
 * context uses only the magic. */
typedef struct fres {
  uint32_t magic;
  uint32_t handle;
  int nref;
  struct fres *next;
} fres_t;

/* The object of `type` whose header is *r. */
#define OBJ(type, r) ((type *)(void *)((char *)(r) - offsetof(type, res)))

typedef struct fctx fctx_t;

typedef struct fpd {
  struct ibv_pd pd;
  fres_t res;
  fctx_t *c;
} fpd_t;

typedef struct fmr {
  struct ibv_mr mr;
  fres_t res;
  fpd_t *pd;
  unsigned access;
  uint64_t iova;
} fmr_t;

typedef struct fcq {
  struct ibv_cq cq;
  fres_t res;
  fctx_t *c;
  pthread_mutex_t lock;
  struct ibv_wc *ring;
  uint32_t cap;
  uint64_t head, tail;
  int overrun;
} fcq_t;

typedef struct {
  uint64_t wr_id;
  uint64_t raddr;
  uint64_t total;
  uint32_t rkey, imm;
  int opcode, signaled, is_inline, nsge;
  int local_status; /* set when the NIC found the WR bad locally */
  struct ibv_sge sge[FV_MAX_SGE];
  uint8_t *inl;
} swqe_t;

typedef struct {
  uint64_t wr_id;
  int nsge;
  struct ibv_sge sge[FV_MAX_SGE];
} rwqe_t;

typedef struct fqp {
  struct ibv_qp qp;
  fres_t res;
  fctx_t *c;
  fpd_t *pd;
  fcq_t *scq, *rcq;
  int slot;
  uint32_t qpn;
  uint64_t own;
  pthread_mutex_t lock; /* everything below */
  int state, sig_all;
  struct ibv_qp_cap cap;
  unsigned access;
  uint32_t dest_qpn, rq_psn, sq_psn;
  uint8_t rnr_retry, retry_cnt, timeout;
  /* send queue: [sq_tail, sq_head) held; [sq_comp, sq_head) unfinished; sq_next: next to send */
  swqe_t *sq;
  uint8_t *inl_buf;
  uint64_t sq_head, sq_tail, sq_next, sq_comp, tx_off;
  int tx_stopped;
  int64_t wait_since;
  /* receive queue: [rq_tail, rq_head) posted */
  rwqe_t *rq;
  uint64_t rq_head, rq_tail;
  /* responder */
  int psn_checked;
  int64_t rnr_since;
  uint64_t nak;
} fqp_t;

struct fctx {
  struct ibv_context ctx;
  fres_t res;
  fab_t *f;
  int dev, slot;
  uint32_t tag;
  uint64_t hb_word;
  int64_t last_hb;
  pthread_t nic;
  int stop, lost;
  int roce, port_down, unreachable, dead_ms, delay_us;
  uint32_t max_msg;
  pthread_mutex_t nic_lock; /* held by the NIC thread during a scan; guards the QP list */
  pthread_mutex_t res_lock; /* PD and CQ lists, reference counts */
  pthread_mutex_t mr_lock;  /* the MR table; held while the NIC copies from / into an MR */
  fres_t *qps;      /* of fqp_t */
  fres_t *pds;      /* of fpd_t */
  fres_t *cqs;      /* of fcq_t */
  fres_t *mrs[256]; /* of fmr_t, by key index */
};

/* ---- process globals ----------------------------------------------------------------------- */

static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER;
static fab_t *g_fab;
static char g_fab_path[PATH_MAX]; /* "" = anonymous */
static pid_t g_fab_pid;
static int g_nopen; /* contexts of process g_fab_pid open */
static struct ibv_device g_devs[FV_NDEV_MAX];
static int g_devs_ready;

static void fv_log(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static void fv_log(const char *fmt, ...) {
  char line[512];
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(line, sizeof line, fmt, ap);
  va_end(ap);
  fprintf(stderr, "fakeverbs: %s\n", line);
}

static void atfork_prepare(void) { pthread_mutex_lock(&g_lock); }
static void atfork_parent(void) { pthread_mutex_unlock(&g_lock); }
static void atfork_child(void) { pthread_mutex_init(&g_lock, NULL); }
__attribute__((constructor)) static void fv_init(void) {
  pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
}

static int64_t now_ms(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static void sleep_us(long us) {
  struct timespec ts = {us / 1000000, (us % 1000000) * 1000};
  while (nanosleep(&ts, &ts) != 0 && errno == EINTR) {
  }
}

static long long env_int(const char *name, long long def, long long lo, long long hi) {
  const char *s = getenv(name);
  if (!s || !*s) return def;
  char *end;
  errno = 0;
  long long v = strtoll(s, &end, 0);
  if (errno || *end || v < lo || v > hi) {
    fv_log("%s=%s is not an integer in [%lld, %lld]; using %lld", name, s, lo, hi, def);
    return def;
  }
  return v;
}

static uint8_t *ring_of(fab_t *f, int slot) {
  return (uint8_t *)f + FAB_RINGS_OFF + (size_t)slot * FV_RING;
}

/* ---- fabric attach ------------------------------------------------------------------------- */

static void fab_init_header(fab_t *f) {
  f->magic = FV_MAGIC;
  f->version = FV_VERSION;
  f->size = FAB_SIZE;
  ST(&f->init, 2u);
}

/* Maps the fabric this process's next context uses; g_lock held. 0 or an errno value. */
static int fab_attach(void) {
  const char *path = getenv("FAKEVERBS_FABRIC");
  if (!path) path = "";
  if (strlen(path) >= sizeof g_fab_path) return ENAMETOOLONG;
  const pid_t pid = getpid();
  if (g_fab && g_fab_pid == pid) {
    if (g_nopen > 0 || strcmp(path, g_fab_path) == 0) return 0;
    munmap(g_fab, FAB_SIZE);
  }
  /* After fork() the inherited mapping is left alone (the parent's objects point into it). */
  g_fab = NULL;
  g_nopen = 0;
  fab_t *f;
  if (!*path) {
    f = mmap(NULL, FAB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    if (f == MAP_FAILED) return errno;
    fab_init_header(f);
  } else {
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) return errno;
    struct stat st;
    if (fstat(fd, &st) != 0 || (st.st_size < (off_t)FAB_SIZE && ftruncate(fd, (off_t)FAB_SIZE) != 0)) {
      int e = errno;
      close(fd);
      return e;
    }
    f = mmap(NULL, FAB_SIZE, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
    int e = errno;
    close(fd);
    if (f == MAP_FAILED) return e;
    uint32_t zero = 0;
    if (CAS(&f->init, &zero, 1u)) {
      fab_init_header(f);
    } else {
      const int64_t deadline = now_ms() + 5000;
      while (LD(&f->init) != 2u && now_ms() < deadline) sleep_us(100);
      if (LD(&f->init) != 2u) {
        fv_log("fabric %s was never initialised (its creator died?): remove it", path);
        munmap(f, FAB_SIZE);
        return EIO;
      }
    }
    if (f->magic != FV_MAGIC || f->version != FV_VERSION || f->size != FAB_SIZE) {
      fv_log("fabric %s has another layout (an older fake?): remove it", path);
      munmap(f, FAB_SIZE);
      return EINVAL;
    }
  }
  g_fab = f;
  g_fab_pid = pid;
  snprintf(g_fab_path, sizeof g_fab_path, "%s", path);
  return 0;
}

/* ---- slots --------------------------------------------------------------------------------- */

static uint32_t new_tag(fab_t *f) {
  for (;;) {
    uint32_t t = (FADD(&f->next_tag, 1u) + 1u) & 0xFFFFFFu;
    if (t) return t;
  }
}

static int ctx_alive(fab_t *f, uint32_t slot, uint32_t tag, int dead_ms) {
  if (slot >= FV_NCTX) return 0;
  const uint64_t w = LD(&f->ctx[slot].word);
  return w != 0 && (uint32_t)(w & 0xFFFFFF) == tag && now_ms() - (int64_t)(w >> 24) <= dead_ms;
}

static int ctx_claim(fctx_t *c) {
  fab_t *f = c->f;
  for (int i = 0; i < FV_NCTX; i++) {
    fab_ctx_t *s = &f->ctx[i];
    uint64_t w = LD(&s->word);
    const int64_t now = now_ms();
    if (w != 0 && now - (int64_t)(w >> 24) <= c->dead_ms) continue;
    const uint32_t tag = new_tag(f);
    const uint64_t nw = (uint64_t)now << 24 | tag;
    if (!CAS(&s->word, &w, nw)) continue;
    ST(&s->roce, (uint32_t)c->roce);
    ST(&s->port_down, (uint32_t)(c->port_down || c->unreachable));
    ST(&s->pid, (uint32_t)getpid());
    c->slot = i;
    c->tag = tag;
    c->hb_word = nw;
    c->last_hb = now;
    return 0;
  }
  return ENOSPC;
}

/* The NIC thread's heartbeat; notices when the slot was taken over (this process stalled). */
static void hb_tick(fctx_t *c) {
  const int64_t now = now_ms();
  if (c->lost || now - c->last_hb < FV_HB_MS) return;
  uint64_t w = c->hb_word;
  const uint64_t nw = (uint64_t)now << 24 | c->tag;
  if (CAS(&c->f->ctx[c->slot].word, &w, nw)) {
    c->hb_word = nw;
    c->last_hb = now;
  } else {
    fv_log("context slot %d was taken over (its heartbeat stalled > %d ms): its QPs are in error",
           c->slot, c->dead_ms);
    c->lost = 1;
  }
}

static void gid_of(int slot, int roce, int index, union ibv_gid *g) {
  memset(g, 0, sizeof *g);
  const unsigned id = (unsigned)slot + 1;
  if (index == 0) {
    g->raw[0] = 0xfe;
    g->raw[1] = 0x80;
    g->raw[14] = (uint8_t)(id >> 8);
    g->raw[15] = (uint8_t)id;
  } else if (index == 3 && roce) {
    g->raw[10] = g->raw[11] = 0xff;
    g->raw[12] = 10;
    g->raw[15] = (uint8_t)id;
  }
}

/* ---- object bookkeeping (a bad pointer we can check is EINVAL, not a crash) --------------- */

/* x, when its header (`off` bytes in) says it is a live object of kind `magic`; else NULL. */
static void *res_check(void *x, size_t off, uint32_t magic) {
  return x && ((fres_t *)((char *)x + off))->magic == magic ? x : NULL;
}
#define TO(type, x, magic) ((type *)res_check((x), offsetof(type, res), (magic)))
static fctx_t *to_ctx(struct ibv_context *x) { return TO(fctx_t, x, M_CTX); }
static fpd_t *to_pd(struct ibv_pd *x) { return TO(fpd_t, x, M_PD); }
static fmr_t *to_mr(struct ibv_mr *x) { return TO(fmr_t, x, M_MR); }
static fcq_t *to_cq(struct ibv_cq *x) { return TO(fcq_t, x, M_CQ); }
static fqp_t *to_qp(struct ibv_qp *x) { return TO(fqp_t, x, M_QP); }

/* The lists are guarded by different locks (PDs and CQs: res_lock; MRs: mr_lock, which the NIC
 * holds while it copies; QPs: nic_lock, which the caller holds across more), so these take the
 * list's lock, or NULL where the caller already holds it. */

/* Links r at the head of *list as a live object of kind `magic`; returns its handle. */
static uint32_t res_link(pthread_mutex_t *lock, fres_t **list, fres_t *r, uint32_t magic) {
  r->magic = magic;
  if (lock) pthread_mutex_lock(lock);
  r->handle = *list ? (*list)->handle + 1 : 1;
  r->next = *list;
  *list = r;
  if (lock) pthread_mutex_unlock(lock);
  return r->handle;
}

/* Takes r off *list, unless objects still use it (EBUSY, nothing changed), and clears its magic:
 * a stale pointer is EINVAL from then on. Only PDs and CQs have users, and their lock is
 * res_lock, which guards nref too. */
static int res_unlink(pthread_mutex_t *lock, fres_t **list, fres_t *r) {
  if (lock) pthread_mutex_lock(lock);
  if (r->nref) {
    if (lock) pthread_mutex_unlock(lock);
    return EBUSY;
  }
  for (fres_t **pp = list; *pp; pp = &(*pp)->next)
    if (*pp == r) {
      *pp = r->next;
      break;
    }
  if (lock) pthread_mutex_unlock(lock);
  r->magic = 0;
  return 0;
}

/* The head of *list taken off with its magic cleared, or NULL. For ibv_close_device only (the NIC
 * is stopped; users are not counted down: everything goes). */
static fres_t *res_pop(fres_t **list) {
  fres_t *r = *list;
  if (r) {
    *list = r->next;
    r->magic = 0;
  }
  return r;
}

/* One more (d = 1) or one fewer (d = -1) user of each of the n objects r[]. */
static void res_use(fctx_t *c, int d, int n, fres_t *const r[]) {
  pthread_mutex_lock(&c->res_lock);
  for (int i = 0; i < n; i++) r[i]->nref += d;
  pthread_mutex_unlock(&c->res_lock);
}

/* MR table: lkey and rkey share their upper 24 bits (the index). mr_lock held. */
static fmr_t *mr_find(fctx_t *c, uint32_t key, int remote) {
  for (fres_t *r = c->mrs[(key >> 8) & 255]; r; r = r->next) {
    fmr_t *m = OBJ(fmr_t, r);
    if ((remote ? m->mr.rkey : m->mr.lkey) == key) return m;
  }
  return NULL;
}

/* Is [va, va + len) inside the MR (addressed by its iova)? */
static int mr_covers(const fmr_t *m, uint64_t va, uint64_t len) {
  return va >= m->iova && len <= m->mr.length && va - m->iova <= m->mr.length - len;
}
static uint8_t *mr_ptr(const fmr_t *m, uint64_t va) { return (uint8_t *)m->mr.addr + (va - m->iova); }

/* ---- completions --------------------------------------------------------------------------- */

static void cq_push(fcq_t *cq, const struct ibv_wc *wc) {
  pthread_mutex_lock(&cq->lock);
  if (!cq->overrun) {
    if (cq->head - cq->tail >= cq->cap) {
      cq->overrun = 1;
      fv_log("CQ %p overrun (%u entries): poll_cq fails from now on", (void *)cq, cq->cap);
    } else {
      cq->ring[cq->head++ % cq->cap] = *wc;
    }
  }
  pthread_mutex_unlock(&cq->lock);
}

static enum ibv_wc_opcode send_wc_opcode(int op) {
  return op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RDMA_WRITE : IBV_WC_SEND;
}

/* Completes the oldest unfinished send WR; q->lock held. */
static void sq_complete(fqp_t *q, int status) {
  swqe_t *w = &q->sq[q->sq_comp % q->cap.max_send_wr];
  if (status != IBV_WC_SUCCESS || w->signaled) {
    struct ibv_wc wc;
    memset(&wc, 0, sizeof wc);
    wc.wr_id = w->wr_id;
    wc.status = (enum ibv_wc_status)status;
    wc.opcode = send_wc_opcode(w->opcode);
    wc.vendor_err = status ? 0x100u + (uint32_t)status : 0;
    wc.qp_num = q->qpn;
    cq_push(q->scq, &wc);
    q->sq_tail = q->sq_comp + 1; /* this CQE releases it and every unsignaled WR before it */
  }
  q->sq_comp++;
}

static void rq_flush_one(fqp_t *q) {
  rwqe_t *r = &q->rq[q->rq_tail % q->cap.max_recv_wr];
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.wr_id = r->wr_id;
  wc.status = IBV_WC_WR_FLUSH_ERR;
  wc.opcode = IBV_WC_RECV;
  wc.vendor_err = 0x100u + IBV_WC_WR_FLUSH_ERR;
  wc.qp_num = q->qpn;
  cq_push(q->rcq, &wc);
  q->rq_tail++;
}

/* The QP enters the error state: every unfinished WR flushes; q->lock held. */
static void qp_error(fqp_t *q, int publish) {
  q->state = IBV_QPS_ERR;
  if (publish && !q->c->lost) ST(&q->c->f->qp[q->slot].state, (uint32_t)IBV_QPS_ERR);
  while (q->sq_comp < q->sq_head) sq_complete(q, IBV_WC_WR_FLUSH_ERR);
  q->sq_tail = q->sq_next = q->sq_head;
  q->tx_off = 0;
  q->tx_stopped = 0;
  while (q->rq_tail < q->rq_head) rq_flush_one(q);
}

/* ---- the requester side of the NIC --------------------------------------------------------- */

enum { D_READY, D_NOTREADY, D_DEAD, D_GONE };

/* Looks at the destination QP's slot: reachable? And its responder counters. */
static int dest_check(fctx_t *c, fqp_t *q, uint64_t *acked, uint64_t *nak) {
  fab_t *f = c->f;
  fab_qp_t *d = &f->qp[q->dest_qpn & 0xFF];
  const uint64_t o = LD(&d->own);
  if ((uint32_t)(o & 0xFFFFFF) != q->dest_qpn) return D_GONE;
  const uint32_t st = LD(&d->state), peer = LD(&d->dest_qpn);
  *acked = LD(&d->acked);
  *nak = LD(&d->nak);
  if (LD(&d->own) != o) return D_GONE;
  const uint32_t oslot = (uint32_t)(o >> 24) & 0xFF, otag = (uint32_t)(o >> 32) & 0xFFFFFF;
  if (!ctx_alive(f, oslot, otag, c->dead_ms)) return D_DEAD;
  if (c->port_down || c->unreachable || LD(&f->ctx[oslot].port_down)) return D_NOTREADY;
  if ((st != IBV_QPS_RTR && st != IBV_QPS_RTS) || peer != q->qpn) return D_NOTREADY;
  return D_READY;
}

/* Checks a WR when the NIC reaches it: its length and its local keys. 0 or a WC status. */
static int wr_check_local(fctx_t *c, fqp_t *q, const swqe_t *w) {
  if (w->total > c->max_msg) return IBV_WC_LOC_LEN_ERR;
  if (w->is_inline) return 0;
  int st = 0;
  pthread_mutex_lock(&c->mr_lock);
  for (int i = 0; i < w->nsge && !st; i++) {
    if (!w->sge[i].length) continue;
    fmr_t *m = mr_find(c, w->sge[i].lkey, 0);
    if (!m || m->pd != q->pd || !mr_covers(m, w->sge[i].addr, w->sge[i].length)) st = IBV_WC_LOC_PROT_ERR;
  }
  pthread_mutex_unlock(&c->mr_lock);
  return st;
}

/* Copies `len` bytes at message offset `off` of a non-inline WR into dst. 0 or a WC status. */
static int gather(fctx_t *c, fqp_t *q, const swqe_t *w, uint64_t off, uint8_t *dst, uint32_t len) {
  int st = 0;
  pthread_mutex_lock(&c->mr_lock);
  for (int i = 0; i < w->nsge && len && !st; i++) {
    const struct ibv_sge *s = &w->sge[i];
    if (off >= s->length) {
      off -= s->length;
      continue;
    }
    const uint32_t n = (uint32_t)(s->length - off) < len ? (uint32_t)(s->length - off) : len;
    fmr_t *m = mr_find(c, s->lkey, 0);
    if (!m || m->pd != q->pd || !mr_covers(m, s->addr + off, n)) {
      st = IBV_WC_LOC_PROT_ERR;
      break;
    }
    memcpy(dst, mr_ptr(m, s->addr + off), n);
    dst += n;
    len -= n;
    off = 0;
  }
  pthread_mutex_unlock(&c->mr_lock);
  return st;
}

/* Moves posted WRs into the destination's inbox; q->lock held. Returns whether it did work. */
static int sq_transmit(fctx_t *c, fqp_t *q) {
  if (q->state != IBV_QPS_RTS || q->tx_stopped || q->sq_next == q->sq_head || c->lost) return 0;
  uint64_t acked, nak;
  if (dest_check(c, q, &acked, &nak) != D_READY) return 0;
  fab_t *f = c->f;
  fab_qp_t *d = &f->qp[q->dest_qpn & 0xFF];
  uint8_t *ring = ring_of(f, (int)(q->dest_qpn & 0xFF));
  int did = 0;
  for (int budget = 0; budget < 8 && q->sq_next != q->sq_head; budget++) {
    swqe_t *w = &q->sq[q->sq_next % q->cap.max_send_wr];
    if (q->tx_off == 0) {
      const int st = wr_check_local(c, q, w);
      if (st) {
        w->local_status = st;
        q->tx_stopped = 1;
        return 1;
      }
    }
    const uint64_t left = w->total - q->tx_off;
    const uint32_t frag = left < FV_FRAG ? (uint32_t)left : FV_FRAG;
    const uint32_t need = (FV_REC + frag + FV_REC - 1) / FV_REC * FV_REC;
    uint64_t hw = LD(&d->ring_head);
    if ((uint32_t)(hw >> 32) != q->dest_qpn) return did;
    const uint32_t head = (uint32_t)hw, tail = LD(&d->ring_tail);
    const uint32_t used = head - tail, pos = head % FV_RING;
    const uint32_t pad = pos + need > FV_RING ? FV_RING - pos : 0;
    if (used > FV_RING || used + pad + need > FV_RING) return did; /* full: later */
    if (pad) {
      rec_t p;
      memset(&p, 0, sizeof p);
      p.kind = REC_PAD;
      p.rec_bytes = pad;
      memcpy(ring + pos, &p, sizeof p);
    }
    uint8_t *at = ring + (pos + pad) % FV_RING;
    if (frag) {
      if (w->is_inline) {
        memcpy(at + FV_REC, w->inl + q->tx_off, frag);
      } else {
        const int st = gather(c, q, w, q->tx_off, at + FV_REC, frag);
        if (st) { /* an MR went away under a WR in flight */
          w->local_status = st;
          q->tx_stopped = 1;
          return 1;
        }
      }
    }
    rec_t r;
    memset(&r, 0, sizeof r);
    r.kind = REC_MSG;
    r.rec_bytes = need;
    r.dst_qpn = q->dest_qpn;
    r.src_qpn = q->qpn;
    r.seq = q->sq_next;
    r.raddr = w->raddr + q->tx_off;
    r.rkey = w->rkey;
    r.len = frag;
    r.off = (uint32_t)q->tx_off;
    r.total = (uint32_t)w->total;
    r.imm = w->imm;
    r.sq_psn = q->sq_psn;
    r.flags = (uint16_t)((q->tx_off == 0 ? F_FIRST : 0) | (frag == left ? F_LAST : 0));
    r.opcode = (uint8_t)w->opcode;
    r.rnr_retry = q->rnr_retry;
    r.src_lid = c->roce ? 0 : (uint16_t)(c->slot + 1);
    memcpy(at, &r, sizeof r);
    const uint64_t nhw = (uint64_t)q->dest_qpn << 32 | (uint32_t)(head + pad + need);
    if (!CAS(&d->ring_head, &hw, nhw)) return did; /* the slot changed owner: dest_check sees it */
    did = 1;
    q->tx_off += frag;
    if (q->tx_off == w->total) {
      q->sq_next++;
      q->tx_off = 0;
    }
  }
  return did;
}

/* Completes acked WRs in order, and fails them on a NAK, a local error or an unreachable
 * destination; q->lock held. */
static int sq_progress(fctx_t *c, fqp_t *q) {
  if (q->state != IBV_QPS_RTS || q->sq_comp == q->sq_head) {
    q->wait_since = 0;
    return 0;
  }
  uint64_t acked = 0, nak = 0;
  const int d = c->lost ? D_GONE : dest_check(c, q, &acked, &nak);
  int did = 0;
  if (d != D_GONE) {
    if (acked > q->sq_next) acked = q->sq_next;
    while (q->sq_comp < acked) {
      sq_complete(q, IBV_WC_SUCCESS);
      did = 1;
    }
  }
  if (q->sq_comp == q->sq_head) {
    q->wait_since = 0;
    return did;
  }
  const swqe_t *w = &q->sq[q->sq_comp % q->cap.max_send_wr];
  int status = 0;
  if (q->sq_comp == q->sq_next && w->local_status) {
    status = w->local_status;
  } else if (d != D_GONE && nak && (nak & SEQ_MASK) == q->sq_comp) {
    status = (int)(nak >> 48);
  } else if (d == D_GONE || d == D_DEAD) {
    status = IBV_WC_RETRY_EXC_ERR;
  } else if (d == D_NOTREADY) {
    const int64_t now = now_ms();
    if (!q->wait_since)
      q->wait_since = now;
    else if (now - q->wait_since > c->dead_ms)
      status = IBV_WC_RETRY_EXC_ERR;
  } else {
    q->wait_since = 0;
  }
  if (status) {
    sq_complete(q, status);
    qp_error(q, 1);
    did = 1;
  }
  return did;
}

/* ---- the responder side of the NIC --------------------------------------------------------- */

static void set_nak(fctx_t *c, fqp_t *q, uint64_t seq, int status) {
  q->nak = (uint64_t)status << 48 | (seq & SEQ_MASK);
  ST(&c->f->qp[q->slot].nak, q->nak);
}

static void recv_complete(fqp_t *q, const rec_t *r, int status) {
  rwqe_t *rw = &q->rq[q->rq_tail % q->cap.max_recv_wr];
  struct ibv_wc wc;
  memset(&wc, 0, sizeof wc);
  wc.wr_id = rw->wr_id;
  wc.status = (enum ibv_wc_status)status;
  wc.opcode = r->opcode == IBV_WR_RDMA_WRITE_WITH_IMM ? IBV_WC_RECV_RDMA_WITH_IMM : IBV_WC_RECV;
  wc.vendor_err = status ? 0x100u + (uint32_t)status : 0;
  wc.byte_len = status ? 0 : r->total;
  if (r->opcode == IBV_WR_RDMA_WRITE_WITH_IMM || r->opcode == IBV_WR_SEND_WITH_IMM) {
    wc.imm_data = r->imm;
    wc.wc_flags = IBV_WC_WITH_IMM;
  }
  wc.qp_num = q->qpn;
  wc.src_qp = r->src_qpn;
  wc.slid = r->src_lid;
  cq_push(q->rcq, &wc);
  q->rq_tail++;
}

/* The SGEs of the head recv WQE covering the first `total` bytes: local MRs of the QP's PD
 * with local write. 0, IBV_WC_LOC_LEN_ERR or IBV_WC_LOC_PROT_ERR. */
static int recv_check(fctx_t *c, fqp_t *q, const rwqe_t *rw, uint64_t total) {
  uint64_t room = 0;
  for (int i = 0; i < rw->nsge; i++) room += rw->sge[i].length;
  if (total > room) return IBV_WC_LOC_LEN_ERR;
  int st = 0;
  pthread_mutex_lock(&c->mr_lock);
  for (int i = 0; i < rw->nsge && total && !st; i++) {
    const struct ibv_sge *s = &rw->sge[i];
    if (!s->length) continue;
    const uint64_t n = s->length < total ? s->length : total;
    fmr_t *m = mr_find(c, s->lkey, 0);
    if (!m || m->pd != q->pd || !(m->access & IBV_ACCESS_LOCAL_WRITE) || !mr_covers(m, s->addr, n))
      st = IBV_WC_LOC_PROT_ERR;
    total -= n;
  }
  pthread_mutex_unlock(&c->mr_lock);
  return st;
}

static int scatter(fctx_t *c, fqp_t *q, const rwqe_t *rw, uint64_t off, const uint8_t *src, uint32_t len) {
  int st = 0;
  pthread_mutex_lock(&c->mr_lock);
  for (int i = 0; i < rw->nsge && len; i++) {
    const struct ibv_sge *s = &rw->sge[i];
    if (off >= s->length) {
      off -= s->length;
      continue;
    }
    const uint32_t n = (uint32_t)(s->length - off) < len ? (uint32_t)(s->length - off) : len;
    fmr_t *m = mr_find(c, s->lkey, 0);
    if (!m || m->pd != q->pd || !(m->access & IBV_ACCESS_LOCAL_WRITE) || !mr_covers(m, s->addr + off, n)) {
      st = IBV_WC_LOC_PROT_ERR;
      break;
    }
    memcpy(mr_ptr(m, s->addr + off), src, n);
    src += n;
    len -= n;
    off = 0;
  }
  pthread_mutex_unlock(&c->mr_lock);
  return st;
}

/* An RDMA WRITE's bytes land like a NIC's DMA: in a ThreadSanitizer build the copy is not
 * recorded as this thread's writes. Its order against the process's earlier reads of that memory
 * runs through the peer process (a barrier, the peer's send), which TSan cannot see; reporting
 * each such copy as a race (even a suppressed one) costs TSan tens of ms per 16 KiB fragment,
 * enough to stall a transfer past a test's bound (session 39). */
#if defined(__SANITIZE_THREAD__)
void AnnotateIgnoreWritesBegin(const char *file, int line);
void AnnotateIgnoreWritesEnd(const char *file, int line);
#define DMA_BEGIN() AnnotateIgnoreWritesBegin(__FILE__, __LINE__)
#define DMA_END() AnnotateIgnoreWritesEnd(__FILE__, __LINE__)
#else
#define DMA_BEGIN() ((void)0)
#define DMA_END() ((void)0)
#endif

static int remote_write(fctx_t *c, fqp_t *q, uint32_t rkey, uint64_t raddr, const uint8_t *src, uint32_t len) {
  if (!(q->access & IBV_ACCESS_REMOTE_WRITE)) return 0;
  if (!len) return 1;
  int ok = 0;
  pthread_mutex_lock(&c->mr_lock);
  fmr_t *m = mr_find(c, rkey, 1);
  if (m && m->pd == q->pd && (m->access & IBV_ACCESS_REMOTE_WRITE) && mr_covers(m, raddr, len)) {
    DMA_BEGIN();
    memcpy(mr_ptr(m, raddr), src, len);
    DMA_END();
    ok = 1;
  }
  pthread_mutex_unlock(&c->mr_lock);
  return ok;
}

/* Applies one inbox record; q->lock held. Returns 0 to leave it in the inbox (RNR), else 1. */
static int rx_apply(fctx_t *c, fqp_t *q, const rec_t *r, const uint8_t *data) {
  if (q->state == IBV_QPS_ERR) return 1;
  if (r->dst_qpn != q->qpn || r->src_qpn != q->dest_qpn) return 1; /* stale: not my peer */
  if (q->nak && r->seq >= (q->nak & SEQ_MASK)) return 1;         /* after a refused WR */
  if (!q->psn_checked) {
    if (r->sq_psn != q->rq_psn) {
      set_nak(c, q, r->seq, IBV_WC_RETRY_EXC_ERR);
      return 1;
    }
    q->psn_checked = 1;
  }
  const int first = r->flags & F_FIRST, last = r->flags & F_LAST;
  const int op = r->opcode;
  const int needs_recv = op != IBV_WR_RDMA_WRITE;
  if (first && needs_recv && q->rq_tail == q->rq_head) {
    const int64_t now = now_ms();
    if (!q->rnr_since) q->rnr_since = now;
    if (r->rnr_retry != 7 && now - q->rnr_since >= (int64_t)FV_RNR_MS * (r->rnr_retry + 1)) {
      q->rnr_since = 0;
      set_nak(c, q, r->seq, IBV_WC_RNR_RETRY_EXC_ERR);
      return 1;
    }
    return 0;
  }
  q->rnr_since = 0;
  if (c->delay_us) {
    pthread_mutex_unlock(&q->lock);
    sleep_us(c->delay_us);
    pthread_mutex_lock(&q->lock);
    if (q->state == IBV_QPS_ERR) return 1;
  }
  fab_qp_t *s = &c->f->qp[q->slot];
  if (op == IBV_WR_RDMA_WRITE || op == IBV_WR_RDMA_WRITE_WITH_IMM) {
    if (!remote_write(c, q, r->rkey, r->raddr, data, r->len)) {
      set_nak(c, q, r->seq, IBV_WC_REM_ACCESS_ERR);
      qp_error(q, 1);
      return 1;
    }
    if (last) {
      if (op == IBV_WR_RDMA_WRITE_WITH_IMM) recv_complete(q, r, IBV_WC_SUCCESS);
      ST(&s->acked, r->seq + 1);
    }
    return 1;
  }
  if (op != IBV_WR_SEND && op != IBV_WR_SEND_WITH_IMM) {
    fv_log("QP 0x%x received a record with opcode %d: dropped", q->qpn, op);
    return 1;
  }
  const rwqe_t *rw = &q->rq[q->rq_tail % q->cap.max_recv_wr];
  int st = first ? recv_check(c, q, rw, r->total) : 0;
  if (!st) st = scatter(c, q, rw, r->off, data, r->len);
  if (st) {
    recv_complete(q, r, st);
    set_nak(c, q, r->seq, st == IBV_WC_LOC_LEN_ERR ? IBV_WC_REM_INV_REQ_ERR : IBV_WC_REM_OP_ERR);
    qp_error(q, 1);
    return 1;
  }
  if (last) {
    recv_complete(q, r, IBV_WC_SUCCESS);
    ST(&s->acked, r->seq + 1);
  }
  return 1;
}

/* Drains the QP's inbox in order; q->lock held. */
static int rq_receive(fctx_t *c, fqp_t *q) {
  if (c->lost || q->state < IBV_QPS_RTR) return 0;
  fab_qp_t *s = &c->f->qp[q->slot];
  uint8_t *ring = ring_of(c->f, q->slot);
  const uint64_t hw = LD(&s->ring_head);
  if ((uint32_t)(hw >> 32) != q->qpn) {
    fv_log("the inbox of QP 0x%x has owner 0x%x", q->qpn, (uint32_t)(hw >> 32));
    return 0;
  }
  const uint32_t head = (uint32_t)hw;
  uint32_t tail = __atomic_load_n(&s->ring_tail, __ATOMIC_RELAXED);
  int did = 0;
  for (int n = 0; tail != head && n < 64; n++) {
    const uint32_t pos = tail % FV_RING;
    rec_t r;
    memcpy(&r, ring + pos, sizeof r);
    if (r.rec_bytes < FV_REC || r.rec_bytes % FV_REC || pos + r.rec_bytes > FV_RING ||
        r.rec_bytes > head - tail || (r.kind == REC_MSG && (uint64_t)r.len + FV_REC > r.rec_bytes) ||
        (r.kind != REC_MSG && r.kind != REC_PAD)) {
      fv_log("a corrupt record in the inbox of QP 0x%x: the inbox is dropped", q->qpn);
      tail = head;
      ST(&s->ring_tail, tail);
      return 1;
    }
    if (r.kind == REC_MSG && !rx_apply(c, q, &r, ring + pos + FV_REC)) break;
    tail += r.rec_bytes;
    ST(&s->ring_tail, tail);
    did = 1;
    hb_tick(c);
  }
  return did;
}

static void *nic_main(void *arg) {
  fctx_t *c = arg;
  int idle = 0, was_lost = 0;
  while (!LD(&c->stop)) {
    hb_tick(c);
    int did = 0;
    pthread_mutex_lock(&c->nic_lock);
    for (fres_t *r = c->qps; r; r = r->next) {
      fqp_t *q = OBJ(fqp_t, r);
      pthread_mutex_lock(&q->lock);
      if (c->lost && !was_lost) {
        if (q->state != IBV_QPS_RESET && q->state != IBV_QPS_ERR) qp_error(q, 0);
      } else {
        did |= rq_receive(c, q);
        did |= sq_transmit(c, q);
        did |= sq_progress(c, q);
      }
      pthread_mutex_unlock(&q->lock);
    }
    if (c->lost) was_lost = 1;
    pthread_mutex_unlock(&c->nic_lock);
    if (did) {
      idle = 0;
    } else {
      idle++;
      sleep_us(idle < 100 ? 20 : 50);
    }
  }
  return NULL;
}

/* ---- devices and contexts ------------------------------------------------------------------ */

FV_EXPORT struct ibv_device **ibv_get_device_list(int *num_devices) {
  const int n = (int)env_int("FAKEVERBS_NDEV", 1, 0, FV_NDEV_MAX);
  pthread_mutex_lock(&g_lock);
  if (!g_devs_ready) {
    for (int i = 0; i < FV_NDEV_MAX; i++) {
      struct ibv_device *d = &g_devs[i];
      d->node_type = IBV_NODE_CA;
      d->transport_type = IBV_TRANSPORT_IB;
      snprintf(d->name, sizeof d->name, "fake%d", i);
      snprintf(d->dev_name, sizeof d->dev_name, "uverbs%d", i);
      snprintf(d->dev_path, sizeof d->dev_path, "/sys/class/infiniband_verbs/uverbs%d", i);
      snprintf(d->ibdev_path, sizeof d->ibdev_path, "/sys/class/infiniband/fake%d", i);
    }
    g_devs_ready = 1;
  }
  pthread_mutex_unlock(&g_lock);
  struct ibv_device **list = calloc((size_t)n + 1, sizeof *list);
  if (!list) {
    errno = ENOMEM;
    return NULL;
  }
  for (int i = 0; i < n; i++) list[i] = &g_devs[i];
  if (num_devices) *num_devices = n;
  return list;
}

FV_EXPORT void ibv_free_device_list(struct ibv_device **list) { free(list); }

static int dev_index(const struct ibv_device *d) {
  for (int i = 0; i < FV_NDEV_MAX; i++)
    if (d == &g_devs[i]) return i;
  return -1;
}

FV_EXPORT const char *ibv_get_device_name(struct ibv_device *device) {
  if (!device || dev_index(device) < 0) {
    errno = EINVAL;
    return NULL;
  }
  return device->name;
}

FV_EXPORT int ibv_fork_init(void) { return 0; }

static int fv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr);
static int fv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr);
static int fv_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc);
static int fv_req_notify_cq(struct ibv_cq *cq, int solicited_only) {
  (void)solicited_only;
  return to_cq(cq) ? 0 : EINVAL;
}

FV_EXPORT struct ibv_context *ibv_open_device(struct ibv_device *device) {
  const int dev = device ? dev_index(device) : -1;
  if (dev < 0) {
    errno = EINVAL;
    return NULL;
  }
  fctx_t *c = calloc(1, sizeof *c);
  if (!c) {
    errno = ENOMEM;
    return NULL;
  }
  c->dev = dev;
  c->dead_ms = (int)env_int("FAKEVERBS_DEAD_MS", 300, 10, 600000);
  c->max_msg = (uint32_t)env_int("FAKEVERBS_MAX_MSG", 1ll << 30, 1, UINT32_MAX);
  c->port_down = (int)env_int("FAKEVERBS_PORT_DOWN", 0, 0, 1);
  c->unreachable = (int)env_int("FAKEVERBS_UNREACHABLE", 0, 0, 1);
  c->roce = (int)env_int("FAKEVERBS_ROCE", 0, 0, 1);
  c->delay_us = (int)env_int("FAKEVERBS_DELAY_US", 0, 0, 10000000);
  pthread_mutex_lock(&g_lock);
  int e = fab_attach();
  if (!e) {
    c->f = g_fab;
    e = ctx_claim(c);
    if (e) fv_log("all %d context slots of the fabric are in use", FV_NCTX);
  }
  if (e) {
    pthread_mutex_unlock(&g_lock);
    free(c);
    errno = e;
    return NULL;
  }
  pthread_mutex_init(&c->nic_lock, NULL);
  pthread_mutex_init(&c->res_lock, NULL);
  pthread_mutex_init(&c->mr_lock, NULL);
  struct ibv_context *x = &c->ctx;
  x->device = device;
  x->cmd_fd = -1;
  x->async_fd = -1;
  x->num_comp_vectors = 1;
  x->abi_compat = NULL;
  pthread_mutex_init(&x->mutex, NULL);
  x->ops.post_send = fv_post_send;
  x->ops.post_recv = fv_post_recv;
  x->ops.poll_cq = fv_poll_cq;
  x->ops.req_notify_cq = fv_req_notify_cq;
  c->res.magic = M_CTX;
  /* The NIC thread takes no signals: they stay with the application's threads. */
  sigset_t all, old;
  sigfillset(&all);
  pthread_sigmask(SIG_SETMASK, &all, &old);
  e = pthread_create(&c->nic, NULL, nic_main, c);
  pthread_sigmask(SIG_SETMASK, &old, NULL);
  if (e) {
    uint64_t w = c->hb_word;
    CAS(&c->f->ctx[c->slot].word, &w, (uint64_t)0);
    pthread_mutex_unlock(&g_lock);
    c->res.magic = 0;
    free(c);
    errno = e;
    return NULL;
  }
  g_nopen++;
  pthread_mutex_unlock(&g_lock);
  return x;
}

static void qp_free(fctx_t *c, fqp_t *q);
static void cq_free(fcq_t *q);

FV_EXPORT int ibv_close_device(struct ibv_context *context) {
  fctx_t *c = to_ctx(context);
  if (!c) return EINVAL;
  ST(&c->stop, 1);
  pthread_join(c->nic, NULL);
  for (fres_t *r; (r = res_pop(&c->qps));) qp_free(c, OBJ(fqp_t, r));
  for (int i = 0; i < 256; i++)
    for (fres_t *r; (r = res_pop(&c->mrs[i]));) free(OBJ(fmr_t, r));
  for (fres_t *r; (r = res_pop(&c->cqs));) cq_free(OBJ(fcq_t, r));
  for (fres_t *r; (r = res_pop(&c->pds));) free(OBJ(fpd_t, r));
  uint64_t w = c->hb_word;
  if (!c->lost) CAS(&c->f->ctx[c->slot].word, &w, (uint64_t)0);
  pthread_mutex_lock(&g_lock);
  if (g_fab_pid == getpid() && g_nopen > 0) g_nopen--;
  pthread_mutex_unlock(&g_lock);
  c->res.magic = 0;
  pthread_mutex_destroy(&c->nic_lock);
  pthread_mutex_destroy(&c->res_lock);
  pthread_mutex_destroy(&c->mr_lock);
  pthread_mutex_destroy(&context->mutex);
  free(c);
  return 0;
}

FV_EXPORT int ibv_query_device(struct ibv_context *context, struct ibv_device_attr *attr) {
  fctx_t *c = to_ctx(context);
  if (!c || !attr) return EINVAL;
  memset(attr, 0, sizeof *attr);
  snprintf(attr->fw_ver, sizeof attr->fw_ver, "fakeverbs-%u", FV_VERSION);
  attr->node_guid = htobe64(0x0002c90300000000ull | (uint64_t)(c->slot + 1));
  attr->sys_image_guid = attr->node_guid;
  attr->max_mr_size = 1ull << 40;
  attr->page_size_cap = ~(uint64_t)4095;
  attr->vendor_id = 0x02c9;
  attr->vendor_part_id = 4123;
  attr->max_qp = FV_NQP;
  attr->max_qp_wr = FV_MAX_WR;
  attr->device_cap_flags = IBV_DEVICE_RC_RNR_NAK_GEN | IBV_DEVICE_PORT_ACTIVE_EVENT;
  attr->max_sge = FV_MAX_SGE;
  attr->max_sge_rd = FV_MAX_SGE;
  attr->max_cq = 1 << 16;
  attr->max_cqe = FV_MAX_CQE;
  attr->max_mr = 1 << 20;
  attr->max_pd = 1 << 16;
  attr->max_qp_rd_atom = 16;
  attr->max_res_rd_atom = 16 * FV_NQP;
  attr->max_qp_init_rd_atom = 16;
  attr->atomic_cap = IBV_ATOMIC_NONE;
  attr->max_pkeys = 1;
  attr->local_ca_ack_delay = 16;
  attr->phys_port_cnt = 1;
  return 0;
}

/* The real symbol: libibverbs 1.1's layout, the prefix of struct ibv_port_attr up to
 * link_layer (the header's inline wrapper passes a whole, zeroed struct ibv_port_attr). */
FV_EXPORT int ibv_query_port(struct ibv_context *context, uint8_t port_num,
                             struct _compat_ibv_port_attr *port_attr) {
  fctx_t *c = to_ctx(context);
  if (!c || !port_attr || port_num != 1) return EINVAL;
  struct ibv_port_attr a;
  memset(&a, 0, sizeof a);
  a.state = c->port_down ? IBV_PORT_DOWN : IBV_PORT_ACTIVE;
  a.max_mtu = IBV_MTU_4096;
  a.active_mtu = IBV_MTU_4096;
  a.gid_tbl_len = 4;
  a.port_cap_flags = c->roce ? IBV_PORT_IP_BASED_GIDS : IBV_PORT_CM_SUP;
  a.max_msg_sz = c->max_msg;
  a.pkey_tbl_len = 1;
  a.lid = c->roce ? 0 : (uint16_t)(c->slot + 1);
  a.sm_lid = c->roce ? 0 : 1;
  a.max_vl_num = 4;
  a.subnet_timeout = 18;
  a.active_width = 2;  /* 4x */
  a.active_speed = 32; /* EDR */
  a.phys_state = c->port_down ? 3 : 5;
  a.link_layer = c->roce ? IBV_LINK_LAYER_ETHERNET : IBV_LINK_LAYER_INFINIBAND;
  memcpy(port_attr, &a, offsetof(struct ibv_port_attr, link_layer) + 1);
  return 0;
}

FV_EXPORT int ibv_query_gid(struct ibv_context *context, uint8_t port_num, int index, union ibv_gid *gid) {
  fctx_t *c = to_ctx(context);
  if (!c || !gid || port_num != 1 || index < 0 || index >= 4) return EINVAL;
  gid_of(c->slot, c->roce, index, gid);
  return 0;
}

FV_EXPORT const char *ibv_wc_status_str(enum ibv_wc_status status) {
  static const char *const s[] = {
      [IBV_WC_SUCCESS] = "success",
      [IBV_WC_LOC_LEN_ERR] = "local length error",
      [IBV_WC_LOC_QP_OP_ERR] = "local QP operation error",
      [IBV_WC_LOC_EEC_OP_ERR] = "local EE context operation error",
      [IBV_WC_LOC_PROT_ERR] = "local protection error",
      [IBV_WC_WR_FLUSH_ERR] = "Work Request Flushed Error",
      [IBV_WC_MW_BIND_ERR] = "memory management operation error",
      [IBV_WC_BAD_RESP_ERR] = "bad response error",
      [IBV_WC_LOC_ACCESS_ERR] = "local access error",
      [IBV_WC_REM_INV_REQ_ERR] = "remote invalid request error",
      [IBV_WC_REM_ACCESS_ERR] = "remote access error",
      [IBV_WC_REM_OP_ERR] = "remote operation error",
      [IBV_WC_RETRY_EXC_ERR] = "transport retry counter exceeded",
      [IBV_WC_RNR_RETRY_EXC_ERR] = "RNR retry counter exceeded",
      [IBV_WC_LOC_RDD_VIOL_ERR] = "local RDD violation error",
      [IBV_WC_REM_INV_RD_REQ_ERR] = "remote invalid RD request",
      [IBV_WC_REM_ABORT_ERR] = "aborted error",
      [IBV_WC_INV_EECN_ERR] = "invalid EE context number",
      [IBV_WC_INV_EEC_STATE_ERR] = "invalid EE context state",
      [IBV_WC_FATAL_ERR] = "fatal error",
      [IBV_WC_RESP_TIMEOUT_ERR] = "response timeout error",
      [IBV_WC_GENERAL_ERR] = "general error",
      [IBV_WC_TM_ERR] = "TM error",
      [IBV_WC_TM_RNDV_INCOMPLETE] = "TM software rendezvous",
  };
  if ((unsigned)status < sizeof s / sizeof s[0] && s[status]) return s[status];
  return "unknown";
}

/* ---- PDs and MRs --------------------------------------------------------------------------- */

FV_EXPORT struct ibv_pd *ibv_alloc_pd(struct ibv_context *context) {
  fctx_t *c = to_ctx(context);
  if (!c) {
    errno = EINVAL;
    return NULL;
  }
  fpd_t *p = calloc(1, sizeof *p);
  if (!p) {
    errno = ENOMEM;
    return NULL;
  }
  p->pd.context = context;
  p->c = c;
  p->pd.handle = res_link(&c->res_lock, &c->pds, &p->res, M_PD);
  return &p->pd;
}

FV_EXPORT int ibv_dealloc_pd(struct ibv_pd *pd) {
  fpd_t *p = to_pd(pd);
  if (!p) return EINVAL;
  const int e = res_unlink(&p->c->res_lock, &p->c->pds, &p->res);
  if (!e) free(p);
  return e;
}

FV_EXPORT struct ibv_mr *ibv_reg_mr_iova2(struct ibv_pd *pd, void *addr, size_t length, uint64_t iova,
                                          unsigned int access) {
  fpd_t *p = to_pd(pd);
  const unsigned known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                         IBV_ACCESS_REMOTE_ATOMIC | IBV_ACCESS_RELAXED_ORDERING;
  if (!p || length == 0 || length > (1ull << 40) || (access & ~known) ||
      ((access & (IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_ATOMIC)) && !(access & IBV_ACCESS_LOCAL_WRITE)) ||
      iova > UINT64_MAX - length) {
    errno = EINVAL;
    return NULL;
  }
  /* The memory must be mapped (the kernel would pin it): msync fails with ENOMEM otherwise. */
  const uintptr_t page = (uintptr_t)sysconf(_SC_PAGESIZE), a = (uintptr_t)addr;
  if (!addr || a > UINTPTR_MAX - length ||
      msync((void *)(a & ~(page - 1)), length + (a & (page - 1)), MS_ASYNC) != 0) {
    errno = EFAULT;
    return NULL;
  }
  fctx_t *c = p->c;
  fmr_t *m = calloc(1, sizeof *m);
  if (!m) {
    errno = ENOMEM;
    return NULL;
  }
  uint32_t idx;
  do idx = (FADD(&c->f->next_key, 1u) + 1u) & 0xFFFFFFu;
  while (!idx);
  m->mr.context = pd->context;
  m->mr.pd = pd;
  m->mr.addr = addr;
  m->mr.length = length;
  m->mr.handle = idx;
  m->mr.lkey = idx << 8 | 0x3c;
  m->mr.rkey = idx << 8 | 0xc3;
  m->pd = p;
  m->access = access;
  m->iova = iova;
  res_use(c, 1, 1, (fres_t *[]){&p->res});
  res_link(&c->mr_lock, &c->mrs[idx & 255], &m->res, M_MR);
  return &m->mr;
}

FV_EXPORT struct ibv_mr *ibv_reg_mr(struct ibv_pd *pd, void *addr, size_t length, int access) {
  return ibv_reg_mr_iova2(pd, addr, length, (uintptr_t)addr, (unsigned)access);
}

FV_EXPORT int ibv_dereg_mr(struct ibv_mr *mr) {
  fmr_t *m = to_mr(mr);
  if (!m) return EINVAL;
  fctx_t *c = m->pd->c;
  /* mr_lock waits for a copy in progress: none after this */
  res_unlink(&c->mr_lock, &c->mrs[(m->mr.lkey >> 8) & 255], &m->res);
  res_use(c, -1, 1, (fres_t *[]){&m->pd->res});
  free(m);
  return 0;
}

/* ---- CQs ----------------------------------------------------------------------------------- */

FV_EXPORT struct ibv_cq *ibv_create_cq(struct ibv_context *context, int cqe, void *cq_context,
                                       struct ibv_comp_channel *channel, int comp_vector) {
  fctx_t *c = to_ctx(context);
  if (!c || cqe < 1 || cqe > FV_MAX_CQE || channel || comp_vector != 0) {
    errno = EINVAL;
    return NULL;
  }
  uint32_t cap = 1;
  while (cap < (uint32_t)cqe + 1) cap <<= 1;
  cap -= 1; /* as mlx5: 2^n - 1 >= cqe */
  fcq_t *q = calloc(1, sizeof *q);
  struct ibv_wc *ring = q ? calloc(cap, sizeof *ring) : NULL;
  if (!ring) {
    free(q);
    errno = ENOMEM;
    return NULL;
  }
  q->cq.context = context;
  q->cq.cq_context = cq_context;
  q->cq.cqe = (int)cap;
  pthread_mutex_init(&q->cq.mutex, NULL);
  pthread_cond_init(&q->cq.cond, NULL);
  q->c = c;
  q->ring = ring;
  q->cap = cap;
  pthread_mutex_init(&q->lock, NULL);
  q->cq.handle = res_link(&c->res_lock, &c->cqs, &q->res, M_CQ);
  return &q->cq;
}

/* Frees the memory; the CQ is off its list. */
static void cq_free(fcq_t *q) {
  pthread_mutex_destroy(&q->lock);
  pthread_mutex_destroy(&q->cq.mutex);
  pthread_cond_destroy(&q->cq.cond);
  free(q->ring);
  free(q);
}

FV_EXPORT int ibv_destroy_cq(struct ibv_cq *cq) {
  fcq_t *q = to_cq(cq);
  if (!q) return EINVAL;
  const int e = res_unlink(&q->c->res_lock, &q->c->cqs, &q->res);
  if (!e) cq_free(q);
  return e;
}

static int fv_poll_cq(struct ibv_cq *cq, int num_entries, struct ibv_wc *wc) {
  fcq_t *q = to_cq(cq);
  if (!q || num_entries < 0 || (num_entries > 0 && !wc)) return -1;
  pthread_mutex_lock(&q->lock);
  if (q->overrun) {
    pthread_mutex_unlock(&q->lock);
    return -1;
  }
  int n = 0;
  while (n < num_entries && q->tail != q->head) wc[n++] = q->ring[q->tail++ % q->cap];
  pthread_mutex_unlock(&q->lock);
  return n;
}

/* ---- QPs ----------------------------------------------------------------------------------- */

static int qp_claim(fctx_t *c, fqp_t *q) {
  fab_t *f = c->f;
  const uint32_t start = FADD(&f->next_slot, 1u);
  for (uint32_t k = 0; k < FV_NQP; k++) {
    const int i = (int)((start + k) % FV_NQP);
    fab_qp_t *s = &f->qp[i];
    uint64_t o = LD(&s->own);
    if (o && ctx_alive(f, (uint32_t)(o >> 24) & 0xFF, (uint32_t)(o >> 32) & 0xFFFFFF, c->dead_ms)) continue;
    const uint32_t gen = FADD(&f->next_gen, 1u) % 0xFFFFu + 1u;
    const uint32_t qpn = gen << 8 | (uint32_t)i;
    const uint64_t no = qpn | (uint64_t)c->slot << 24 | (uint64_t)c->tag << 32;
    if (!CAS(&s->own, &o, no)) continue;
    ST(&s->state, (uint32_t)IBV_QPS_RESET);
    ST(&s->dest_qpn, 0u);
    ST(&s->rq_psn, 0u);
    ST(&s->sq_psn, 0u);
    ST(&s->acked, (uint64_t)0);
    ST(&s->nak, (uint64_t)0);
    ST(&s->ring_tail, 0u);
    ST(&s->ring_head, (uint64_t)qpn << 32); /* a stale producer's CAS now fails */
    q->slot = i;
    q->qpn = qpn;
    q->own = no;
    return 0;
  }
  return ENOMEM;
}

/* Frees a QP's memory, parts of which may still be NULL (ibv_create_qp's failures, qp_free). */
static void qp_mem_free(fqp_t *q) {
  free(q->sq);
  free(q->rq);
  free(q->inl_buf);
  free(q);
}

FV_EXPORT struct ibv_qp *ibv_create_qp(struct ibv_pd *pd, struct ibv_qp_init_attr *attr) {
  fpd_t *p = to_pd(pd);
  if (!p || !attr) {
    errno = EINVAL;
    return NULL;
  }
  fctx_t *c = p->c;
  if (attr->qp_type != IBV_QPT_RC || attr->srq) {
    errno = EOPNOTSUPP;
    return NULL;
  }
  fcq_t *scq = to_cq(attr->send_cq), *rcq = to_cq(attr->recv_cq);
  const struct ibv_qp_cap *cap = &attr->cap;
  if (!scq || !rcq || scq->c != c || rcq->c != c || cap->max_send_wr < 1 || cap->max_send_wr > FV_MAX_WR ||
      cap->max_recv_wr > FV_MAX_WR || cap->max_send_sge > FV_MAX_SGE || cap->max_recv_sge > FV_MAX_SGE ||
      cap->max_inline_data > FV_MAX_INLINE || c->lost) {
    errno = EINVAL;
    return NULL;
  }
  fqp_t *q = calloc(1, sizeof *q);
  if (!q) {
    errno = ENOMEM;
    return NULL;
  }
  q->cap = *cap;
  const uint32_t nrq = cap->max_recv_wr ? cap->max_recv_wr : 1;
  q->sq = calloc(cap->max_send_wr, sizeof *q->sq);
  q->rq = calloc(nrq, sizeof *q->rq);
  q->inl_buf = cap->max_inline_data ? malloc((size_t)cap->max_send_wr * cap->max_inline_data) : NULL;
  if (!q->sq || !q->rq || (cap->max_inline_data && !q->inl_buf)) {
    qp_mem_free(q);
    errno = ENOMEM;
    return NULL;
  }
  for (uint32_t i = 0; i < cap->max_send_wr && q->inl_buf; i++)
    q->sq[i].inl = q->inl_buf + (size_t)i * cap->max_inline_data;
  q->c = c;
  q->pd = p;
  q->scq = scq;
  q->rcq = rcq;
  q->state = IBV_QPS_RESET;
  q->sig_all = attr->sq_sig_all;
  pthread_mutex_init(&q->lock, NULL);
  pthread_mutex_lock(&c->nic_lock);
  int e = qp_claim(c, q);
  if (e) {
    pthread_mutex_unlock(&c->nic_lock);
    pthread_mutex_destroy(&q->lock);
    qp_mem_free(q);
    errno = e;
    return NULL;
  }
  struct ibv_qp *x = &q->qp;
  x->context = pd->context;
  x->qp_context = attr->qp_context;
  x->pd = pd;
  x->send_cq = attr->send_cq;
  x->recv_cq = attr->recv_cq;
  x->srq = NULL;
  x->handle = (uint32_t)q->slot;
  x->qp_num = q->qpn;
  x->state = IBV_QPS_RESET;
  x->qp_type = IBV_QPT_RC;
  pthread_mutex_init(&x->mutex, NULL);
  pthread_cond_init(&x->cond, NULL);
  res_use(c, 1, 3, (fres_t *[]){&p->res, &scq->res, &rcq->res});
  res_link(NULL, &c->qps, &q->res, M_QP); /* nic_lock held */
  pthread_mutex_unlock(&c->nic_lock);
  return x;
}

/* Frees the slot and the memory; the QP is off the NIC's list (or the NIC is stopped). */
static void qp_free(fctx_t *c, fqp_t *q) {
  if (!c->lost) {
    fab_qp_t *s = &c->f->qp[q->slot];
    ST(&s->state, (uint32_t)IBV_QPS_RESET);
    uint64_t o = q->own;
    CAS(&s->own, &o, (uint64_t)0);
  }
  res_use(c, -1, 3, (fres_t *[]){&q->pd->res, &q->scq->res, &q->rcq->res});
  pthread_mutex_destroy(&q->lock);
  pthread_mutex_destroy(&q->qp.mutex);
  pthread_cond_destroy(&q->qp.cond);
  qp_mem_free(q);
}

FV_EXPORT int ibv_destroy_qp(struct ibv_qp *qp) {
  fqp_t *q = to_qp(qp);
  if (!q) return EINVAL;
  fctx_t *c = q->c;
  pthread_mutex_lock(&c->nic_lock); /* the NIC is between scans */
  res_unlink(NULL, &c->qps, &q->res);
  qp_free(c, q);
  pthread_mutex_unlock(&c->nic_lock);
  return 0;
}

/* Does the AV address the context in fabric slot `oslot`? */
static int av_ok(const fctx_t *c, const struct ibv_ah_attr *av, uint32_t oslot) {
  const int oroce = (int)LD(&c->f->ctx[oslot].roce);
  union ibv_gid g;
  if (oroce != c->roce) return 0;
  if (c->roce) {
    const int idx = av->grh.sgid_index;
    if (!av->is_global || (idx != 0 && idx != 3)) return 0;
    gid_of((int)oslot, 1, idx, &g);
    return memcmp(&g, &av->grh.dgid, sizeof g) == 0;
  }
  if (av->dlid != oslot + 1) return 0;
  if (av->is_global) {
    if (av->grh.sgid_index != 0) return 0;
    gid_of((int)oslot, 0, 0, &g);
    return memcmp(&g, &av->grh.dgid, sizeof g) == 0;
  }
  return 1;
}

FV_EXPORT int ibv_modify_qp(struct ibv_qp *qp, struct ibv_qp_attr *attr, int attr_mask) {
  fqp_t *q = to_qp(qp);
  if (!q || !attr || !(attr_mask & IBV_QP_STATE)) return EINVAL;
  fctx_t *c = q->c;
  fab_t *f = c->f;
  fab_qp_t *s = &f->qp[q->slot];
  const int mask = attr_mask;
  int rc = 0;
  pthread_mutex_lock(&q->lock);
  const int cur = q->state, to = attr->qp_state;
  if ((mask & IBV_QP_CUR_STATE) && (int)attr->cur_qp_state != cur) {
    rc = EINVAL;
  } else if (to == IBV_QPS_ERR) {
    qp_error(q, 1);
  } else {
    int req, opt;
    if (cur == IBV_QPS_RESET && to == IBV_QPS_INIT) {
      req = IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS;
      opt = 0;
    } else if (cur == IBV_QPS_INIT && to == IBV_QPS_RTR) {
      req = IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC |
            IBV_QP_MIN_RNR_TIMER;
      opt = IBV_QP_ACCESS_FLAGS | IBV_QP_PKEY_INDEX;
    } else if (cur == IBV_QPS_RTR && to == IBV_QPS_RTS) {
      req = IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY | IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC;
      opt = IBV_QP_ACCESS_FLAGS | IBV_QP_MIN_RNR_TIMER;
    } else {
      req = -1;
      opt = 0;
    }
    const unsigned acc_known = IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_REMOTE_READ |
                               IBV_ACCESS_REMOTE_ATOMIC;
    if (req < 0 || (mask & req) != req || (mask & ~(req | opt | IBV_QP_STATE | IBV_QP_CUR_STATE)) ||
        ((mask & IBV_QP_ACCESS_FLAGS) && (attr->qp_access_flags & ~acc_known)) ||
        ((mask & IBV_QP_PKEY_INDEX) && attr->pkey_index != 0) ||
        ((mask & IBV_QP_PORT) && attr->port_num != 1) ||
        ((mask & IBV_QP_PATH_MTU) && (attr->path_mtu < IBV_MTU_256 || attr->path_mtu > IBV_MTU_4096)) ||
        ((mask & IBV_QP_MAX_DEST_RD_ATOMIC) && attr->max_dest_rd_atomic > 16) ||
        ((mask & IBV_QP_MAX_QP_RD_ATOMIC) && attr->max_rd_atomic > 16) ||
        ((mask & IBV_QP_MIN_RNR_TIMER) && attr->min_rnr_timer > 31) ||
        ((mask & IBV_QP_TIMEOUT) && attr->timeout > 31) || ((mask & IBV_QP_RETRY_CNT) && attr->retry_cnt > 7) ||
        ((mask & IBV_QP_RNR_RETRY) && attr->rnr_retry > 7) ||
        ((mask & IBV_QP_RQ_PSN) && attr->rq_psn > 0xFFFFFF) || ((mask & IBV_QP_SQ_PSN) && attr->sq_psn > 0xFFFFFF)) {
      rc = EINVAL;
    } else if (to == IBV_QPS_RTR) {
      /* The destination must exist and the AV must address its owner. */
      const uint32_t dq = attr->dest_qp_num;
      const uint64_t o = dq > 0 && dq <= 0xFFFFFF ? LD(&f->qp[dq & 0xFF].own) : 0;
      const uint32_t oslot = (uint32_t)(o >> 24) & 0xFF, otag = (uint32_t)(o >> 32) & 0xFFFFFF;
      if (!o || (uint32_t)(o & 0xFFFFFF) != dq || !ctx_alive(f, oslot, otag, c->dead_ms) ||
          !av_ok(c, &attr->ah_attr, oslot))
        rc = EINVAL;
    }
    if (!rc) {
      if (mask & IBV_QP_ACCESS_FLAGS) q->access = attr->qp_access_flags;
      if (to == IBV_QPS_RTR) {
        q->dest_qpn = attr->dest_qp_num;
        q->rq_psn = attr->rq_psn;
        q->psn_checked = 0;
        q->rnr_since = 0;
        ST(&s->dest_qpn, q->dest_qpn);
        ST(&s->rq_psn, q->rq_psn);
      } else if (to == IBV_QPS_RTS) {
        q->sq_psn = attr->sq_psn;
        q->rnr_retry = attr->rnr_retry;
        q->retry_cnt = attr->retry_cnt;
        q->timeout = attr->timeout;
        ST(&s->sq_psn, q->sq_psn);
      }
      q->state = to;
      if (!c->lost) ST(&s->state, (uint32_t)to);
    }
  }
  if (!rc) qp->state = (enum ibv_qp_state)q->state;
  pthread_mutex_unlock(&q->lock);
  return rc;
}

static int fv_post_send(struct ibv_qp *qp, struct ibv_send_wr *wr, struct ibv_send_wr **bad_wr) {
  fqp_t *q = to_qp(qp);
  if (!q || !wr) {
    if (bad_wr) *bad_wr = wr;
    return EINVAL;
  }
  int rc = 0;
  pthread_mutex_lock(&q->lock);
  for (; wr; wr = wr->next) {
    const int op = wr->opcode;
    if ((q->state != IBV_QPS_RTS && q->state != IBV_QPS_ERR) ||
        (op != IBV_WR_RDMA_WRITE && op != IBV_WR_RDMA_WRITE_WITH_IMM && op != IBV_WR_SEND &&
         op != IBV_WR_SEND_WITH_IMM) ||
        wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_send_sge || (wr->num_sge > 0 && !wr->sg_list)) {
      rc = EINVAL;
      break;
    }
    uint64_t total = 0;
    for (int i = 0; i < wr->num_sge; i++) total += wr->sg_list[i].length;
    const int inl = (wr->send_flags & IBV_SEND_INLINE) != 0;
    if (inl) {
      int bad = total > q->cap.max_inline_data;
      for (int i = 0; i < wr->num_sge && !bad; i++) bad = wr->sg_list[i].length && !wr->sg_list[i].addr;
      if (bad) {
        rc = EINVAL;
        break;
      }
    }
    if (q->sq_head - q->sq_tail >= q->cap.max_send_wr) {
      rc = ENOMEM;
      break;
    }
    swqe_t *w = &q->sq[q->sq_head % q->cap.max_send_wr];
    w->wr_id = wr->wr_id;
    w->opcode = op;
    w->signaled = q->sig_all || (wr->send_flags & IBV_SEND_SIGNALED);
    w->is_inline = inl;
    w->imm = wr->imm_data;
    w->raddr = wr->wr.rdma.remote_addr;
    w->rkey = wr->wr.rdma.rkey;
    w->total = total;
    w->local_status = 0;
    w->nsge = wr->num_sge;
    for (int i = 0; i < wr->num_sge; i++) w->sge[i] = wr->sg_list[i];
    if (inl) {
      uint64_t o = 0;
      for (int i = 0; i < wr->num_sge; i++) {
        if (wr->sg_list[i].length) memcpy(w->inl + o, (const void *)(uintptr_t)wr->sg_list[i].addr, wr->sg_list[i].length);
        o += wr->sg_list[i].length;
      }
    }
    q->sq_head++;
    if (q->state == IBV_QPS_ERR) { /* (as a real HCA: a post to a QP in error completes flushed) */
      while (q->sq_comp < q->sq_head) sq_complete(q, IBV_WC_WR_FLUSH_ERR);
      q->sq_tail = q->sq_next = q->sq_head;
    }
  }
  pthread_mutex_unlock(&q->lock);
  if (rc && bad_wr) *bad_wr = wr;
  return rc;
}

static int fv_post_recv(struct ibv_qp *qp, struct ibv_recv_wr *wr, struct ibv_recv_wr **bad_wr) {
  fqp_t *q = to_qp(qp);
  if (!q || !wr) {
    if (bad_wr) *bad_wr = wr;
    return EINVAL;
  }
  int rc = 0;
  pthread_mutex_lock(&q->lock);
  for (; wr; wr = wr->next) {
    if (q->state == IBV_QPS_RESET || wr->num_sge < 0 || (uint32_t)wr->num_sge > q->cap.max_recv_sge ||
        (wr->num_sge > 0 && !wr->sg_list)) {
      rc = EINVAL;
      break;
    }
    if (q->rq_head - q->rq_tail >= q->cap.max_recv_wr) {
      rc = ENOMEM;
      break;
    }
    rwqe_t *r = &q->rq[q->rq_head % q->cap.max_recv_wr];
    r->wr_id = wr->wr_id;
    r->nsge = wr->num_sge;
    for (int i = 0; i < wr->num_sge; i++) r->sge[i] = wr->sg_list[i];
    q->rq_head++;
    if (q->state == IBV_QPS_ERR) rq_flush_one(q);
  }
  pthread_mutex_unlock(&q->lock);
  if (rc && bad_wr) *bad_wr = wr;
  return rc;
}
