/* transport_ibv.c — the ibverbs transport: one reliable-connected (RC) queue pair per pair of
 * ranks on different nodes; data by RDMA WRITE straight into the peer's registered region,
 * the flag by a small SEND that the peer's receiver thread turns into a release store.
 *
 * libibverbs is loaded at run time (dlopen "libibverbs.so.1", or MELD_IB_LIB: the CPU tests
 * load a fake HCA, tests/fake/fakeverbs.c), so libmeld runs on machines without rdma-core and
 * picks tcp there. Only the three fast-path calls are the header's inline wrappers
 * (ibv_post_send, ibv_post_recv, ibv_poll_cq: they call through the context's ops); every
 * other verb is looked up by name.
 *
 * The ordering argument (transport.h's guarantee). A write is: its data as RDMA WRITEs of at
 * most max_msg_sz bytes each, then, if it has a flag, a SEND of a 32-byte control message
 * {region, offset, value} (inline: the source is copied at post) on the SAME queue pair. An
 * RC responder executes a QP's requests in order, and reports the SEND's receive completion
 * only after the earlier WRITEs' bytes are placed in its memory. The destination's receiver
 * thread polls that completion and only then release-stores the value into the flag slot
 * (as the tcp transport's receiver does after recv() returns), so an observer that acquires
 * the flag sees the data. The regions meld registers are pinned host memory; writes into GPU
 * memory (GPUDirect RDMA) would also need a flush before the flag (DESIGN section 6: later).
 * What the argument rests on, and what it must not be changed into:
 *   - the COMPLETION, not memory: RDMA WRITE data may be placed in any order (ConnectX with
 *     adaptive routing places packets out of order; ibv_query_qp_data_in_order(3) promises
 *     in-order placement only within one WQE, never between WQEs), so a flag sent as a second
 *     RDMA WRITE and polled in memory would NOT be ordered after the data. The responder
 *     writes a receive's CQE only after the message and everything before it on the QP is
 *     placed; the receiver thread polls the CQE (the provider's poll_cq orders the CQE read
 *     before later loads) and only then stores the flag.
 *   - PCIe ordering of the HCA's writes: data, then the CQE. IBV_ACCESS_RELAXED_ORDERING on a
 *     data MR would let data writes pass each other but not the strongly-ordered CQE write
 *     (this is why kernel ULPs, which read only after the CQE, run relaxed), so it would stay
 *     correct here; it is not set (a platform's root complex must honour it to gain).
 *   - one QP per pair: a second QP (multi-rail, several QPs a peer) would lose the order.
 *
 * Registration: regions LOCAL_WRITE | REMOTE_WRITE (peers write into them; sources are only
 * read, which needs no flag), the receive buffers LOCAL_WRITE; QPs allow REMOTE_WRITE only.
 * ibv_fork_init is called when the library loads (see api_load).
 *
 * Completions. Only a write's last work request is signaled (wr_id = peer << 44 | sequence),
 * so a QP's send-queue slots are freed by the write's completion, in order per QP. Writes to
 * different peers complete out of order; poll reports the count of writes all of whose
 * predecessors are complete too (the oldest incomplete write's sequence), which is what the
 * proxy's `done` needs (transport.h: writes complete in order).
 *
 * Flow control. Each QP has sq_depth send slots (a write waits, bounded, for room by polling
 * its completions) and IBV_RECVS posted receives; the receiver thread re-posts each receive as
 * soon as it has applied its message, and rnr_retry 7 makes the HCA retry a SEND that found
 * none yet (so a burst of flags waits, it never fails). A peer that died is found by the HCA's
 * transport retries (MELD_IB_TIMEOUT, default 18 = 1.07 s a try, x (1 + retry_cnt 7)): its
 * writes fail with IBV_WC_RETRY_EXC_ERR, a sticky error naming the peer. A peer that is alive
 * but whose receiver thread stopped (it failed) is NOT found that way: rnr_retry 7 retries
 * forever, and our writes to it wait until the proxy's timeouts.
 *
 * Connect: every rank takes part in both all-gathers (addresses, then QP numbers and random
 * starting PSNs) even when its local preparation failed, publishing the failure instead, so
 * the collectives stay in step and the others name it.
 *
 * Close: a BYE control message to every peer, then wait (bounded) for every peer's BYE and
 * our own completions: after a peer's BYE nothing more of it is addressed to our regions, so
 * they can be deregistered. */
#include <dlfcn.h>
#include <errno.h>
#include <net/if.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#include "config.h"
#include "error.h"
#include "log.h"
#include "pci.h"
#include "sock.h"
#include "transport.h"

#if !defined(MELD_NO_VERBS) && defined(__has_include)
#if __has_include(<infiniband/verbs.h>)
#define MELD_HAVE_VERBS 1
#endif
#endif

#ifndef MELD_HAVE_VERBS

#define NO_VERBS                                                                                 \
  "meld was built without rdma-core's headers (<infiniband/verbs.h>, Debian libibverbs-dev): " \
  "rebuild with them for the ibverbs transport, or set MELD_NET_TRANSPORT=tcp"

meld_result_t meld_transport_ibv_probe(void) { return meld_error(MELD_ERR_UNSUPPORTED, NO_VERBS); }

meld_result_t meld_transport_ibv_create(int rank, int nranks, int node, int local_index,
                                        const char *gpu_bus_id, int64_t timeout_ms,
                                        meld_transport_t **out) {
  (void)rank, (void)nranks, (void)node, (void)local_index, (void)gpu_bus_id, (void)timeout_ms;
  if (out) *out = NULL;
  return meld_error(MELD_ERR_UNSUPPORTED, NO_VERBS);
}

#else

#include <infiniband/verbs.h>

#define IBV_MAGIC 0x6d6c6469u /* "mldi" */
#define IBV_RECVS 128         /* receives posted per peer: control messages in flight a pair */
#define IBV_SQ_DEPTH 1024     /* send work requests per QP (fewer if the CQ cannot hold them) */
#define IBV_WR_MAX (1ull << 30) /* bytes per RDMA WRITE (and at most the port's max_msg_sz) */
#define IBV_PEER_SHIFT 44     /* wr_id = peer << 44 | sequence */
#define IBV_POLL_BATCH 32
#define FLUSH_GRACE_MS 200    /* a flushed receive waits this long for its cause to be recorded */

enum { CTL_FLAG = 1, CTL_BYE = 2, CTL_HELLO = 3 };

/* A control message: the flag of a write, or goodbye. 32 bytes, sent inline. */
typedef struct {
  uint32_t magic, type, region, pad;
  uint64_t offset, value;
} ctl_t;
_Static_assert(sizeof(ctl_t) == 32, "control message is 32 bytes");

/* ---- the library, loaded once ---------------------------------------------------------- */

typedef struct {
  void *h;
  struct ibv_device **(*get_device_list)(int *);
  void (*free_device_list)(struct ibv_device **);
  const char *(*get_device_name)(struct ibv_device *);
  struct ibv_context *(*open_device)(struct ibv_device *);
  int (*close_device)(struct ibv_context *);
  int (*query_device)(struct ibv_context *, struct ibv_device_attr *);
  int (*query_port)(struct ibv_context *, uint8_t, struct ibv_port_attr *); /* the 1.1 symbol */
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
} ibv_api_t;

static ibv_api_t g_api;
static pthread_once_t g_api_once = PTHREAD_ONCE_INIT;
static char g_api_err[400]; /* empty: loaded */

static void api_load(void) {
  const char *lib = getenv("MELD_IB_LIB");
  if (!lib || !*lib) lib = "libibverbs.so.1";
  void *h = dlopen(lib, RTLD_NOW | RTLD_LOCAL);
  if (!h) {
    snprintf(g_api_err, sizeof g_api_err, "cannot load %s (%s): install rdma-core's libibverbs "
             "or set MELD_NET_TRANSPORT=tcp", lib, dlerror());
    return;
  }
  ibv_api_t a = {.h = h};
  struct {
    const char *name;
    void **slot;
  } syms[] = {
      {"ibv_get_device_list", (void **)&a.get_device_list},
      {"ibv_free_device_list", (void **)&a.free_device_list},
      {"ibv_get_device_name", (void **)&a.get_device_name},
      {"ibv_open_device", (void **)&a.open_device},
      {"ibv_close_device", (void **)&a.close_device},
      {"ibv_query_device", (void **)&a.query_device},
      {"ibv_query_port", (void **)&a.query_port},
      {"ibv_query_gid", (void **)&a.query_gid},
      {"ibv_alloc_pd", (void **)&a.alloc_pd},
      {"ibv_dealloc_pd", (void **)&a.dealloc_pd},
      {"ibv_reg_mr", (void **)&a.reg_mr},
      {"ibv_dereg_mr", (void **)&a.dereg_mr},
      {"ibv_create_cq", (void **)&a.create_cq},
      {"ibv_destroy_cq", (void **)&a.destroy_cq},
      {"ibv_create_qp", (void **)&a.create_qp},
      {"ibv_modify_qp", (void **)&a.modify_qp},
      {"ibv_destroy_qp", (void **)&a.destroy_qp},
      {"ibv_wc_status_str", (void **)&a.wc_status_str},
  };
  for (size_t i = 0; i < sizeof syms / sizeof syms[0]; i++) {
    *syms[i].slot = dlsym(h, syms[i].name);
    if (!*syms[i].slot) {
      snprintf(g_api_err, sizeof g_api_err, "%s has no symbol %s (not libibverbs?)", lib,
               syms[i].name);
      dlclose(h);
      return;
    }
  }
  /* Fork safety (ibv_fork_init(3)): on kernels that do not copy DMA-pinned pages at fork
   * (before 5.13), a fork() after registration (a data loader's workers, system()) leaves the
   * parent's registered pages copy-on-write: the parent's next store moves it to a new page
   * while the HCA keeps using the old one, and data is lost silently. ibv_fork_init makes
   * every registration MADV_DONTFORK; it must come before any registration, so here, first
   * thing (it is a no-op where the kernel is fork-safe). MELD_IB_FORK_INIT=0 skips it. */
  const char *fe = getenv("MELD_IB_FORK_INIT");
  int (*fork_init)(void) = NULL;
  *(void **)&fork_init = dlsym(h, "ibv_fork_init");
  if (fork_init && !(fe && strcmp(fe, "0") == 0)) {
    const int e = fork_init();
    if (e)
      MELD_INFO(MELD_SUB_PROXY, "ibverbs transport: ibv_fork_init failed (%s: memory was "
                "registered before meld loaded libibverbs): do not fork() while meld runs, or "
                "set RDMAV_FORK_SAFE=1", strerror(e));
  }
  g_api = a; /* kept for the process's lifetime: contexts come and go, the library stays */
}

static const ibv_api_t *api(void) {
  pthread_once(&g_api_once, api_load);
  return g_api_err[0] ? NULL : &g_api;
}

static const char *wc_str(enum ibv_wc_status s) {
  const char *r = g_api.wc_status_str ? g_api.wc_status_str(s) : NULL;
  return r ? r : "unknown status";
}

/* ---- device choice ------------------------------------------------------------------------ */

typedef struct {
  char name[64];
  int port;
  int ib; /* link layer InfiniBand (else Ethernet: RoCE) */
} hca_t;

/* The active ports of every device, in device order (port 1 first). At most `cap`. */
static int active_ports(const ibv_api_t *a, hca_t *out, int cap, char *why, size_t why_n) {
  int ndev = 0, k = 0;
  struct ibv_device **devs = a->get_device_list(&ndev);
  if (!devs) {
    snprintf(why, why_n, "ibv_get_device_list failed: %s", strerror(errno));
    return -1;
  }
  for (int d = 0; d < ndev && k < cap; d++) {
    struct ibv_context *ctx = a->open_device(devs[d]);
    if (!ctx) continue;
    struct ibv_device_attr da;
    memset(&da, 0, sizeof da);
    int nports = a->query_device(ctx, &da) == 0 && da.phys_port_cnt > 0 ? da.phys_port_cnt : 1;
    for (int p = 1; p <= nports && k < cap; p++) {
      struct ibv_port_attr pa;
      memset(&pa, 0, sizeof pa);
      if (a->query_port(ctx, (uint8_t)p, &pa) == 0 && pa.state == IBV_PORT_ACTIVE) {
        snprintf(out[k].name, sizeof out[k].name, "%s", a->get_device_name(devs[d]));
        out[k].ib = pa.link_layer != IBV_LINK_LAYER_ETHERNET;
        out[k++].port = p;
      }
    }
    a->close_device(ctx);
  }
  a->free_device_list(devs);
  if (k == 0)
    snprintf(why, why_n, "%d RDMA devices, none with an active port (ibv_devinfo shows the "
             "ports' states; MELD_NET_TRANSPORT=tcp works without them)", ndev);
  return k;
}

/* Picks the device and port: MELD_IB_HCA "name[:port]", else among the active ports those of
 * the NICs nearest the GPU on the PCI tree (sysfs; all, where it says nothing), and among
 * those the local_index-th modulo their number (ranks of a node spread over equal NICs). */
static meld_result_t choose_hca(const ibv_api_t *a, int local_index, const char *gpu_bus_id,
                                hca_t *h) {
  const char *env = getenv("MELD_IB_HCA");
  if (env && *env) {
    char name[64];
    snprintf(name, sizeof name, "%s", env);
    char *colon = strchr(name, ':');
    int port = 1;
    if (colon) {
      *colon = 0;
      char *end = NULL;
      long p = strtol(colon + 1, &end, 10);
      if (!*(colon + 1) || *end || p < 1 || p > 255)
        return meld_error(MELD_ERR_INVALID_ARG, "MELD_IB_HCA=%s: give a device name, optionally "
                          "with :port (e.g. mlx5_0:1)", env);
      port = (int)p;
    }
    snprintf(h->name, sizeof h->name, "%s", name);
    h->port = port;
    return MELD_OK;
  }
  enum { MAXP = 64 };
  hca_t list[MAXP];
  char why[200] = "";
  int n = active_ports(a, list, MAXP, why, sizeof why);
  /* InfiniBand ports where there are any: an Ethernet port beside them is likely a frontend or
   * storage NIC (MELD_IB_HCA picks one explicitly). */
  int nib = 0;
  for (int i = 0; i < n; i++) nib += list[i].ib;
  if (nib > 0 && nib < n) {
    int k = 0;
    for (int i = 0; i < n; i++)
      if (list[i].ib) list[k++] = list[i];
    n = k;
  }
  if (n <= 0) return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: %s", why);
  char(*paths)[512] = calloc(MAXP, sizeof *paths);
  if (!paths) return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld ibverbs transport: out of host memory");
  const char *nic[MAXP];
  char gpu[512] = "";
  const int have_gpu = gpu_bus_id && meld_pci_path_of_bus_id("/sys", gpu_bus_id, gpu, sizeof gpu) == 0;
  for (int i = 0; i < n; i++)
    nic[i] = meld_pci_path_of_ibdev("/sys", list[i].name, paths[i], sizeof paths[i]) == 0 ? paths[i] : NULL;
  const int k = meld_pci_pick_nic(have_gpu ? gpu : NULL, nic, n, local_index);
  *h = list[k];
  MELD_INFO(MELD_SUB_PROXY, "ibverbs transport: %s port %d of %d active ports%s%s (PCI distance %d)",
            h->name, h->port, n, have_gpu ? ", nearest GPU " : "", have_gpu ? gpu_bus_id : "",
            have_gpu ? meld_pci_distance(gpu, nic[k]) : -1);
  free(paths);
  return MELD_OK;
}

meld_result_t meld_transport_ibv_probe(void) {
  const ibv_api_t *a = api();
  if (!a) return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: %s", g_api_err);
  hca_t list[1];
  char why[200] = "";
  if (active_ports(a, list, 1, why, sizeof why) <= 0)
    return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: %s", why);
  return MELD_OK;
}

/* ---- state ---------------------------------------------------------------------------------- */

typedef struct {
  struct ibv_qp *qp;
  uint64_t raddr[MELD_TRANSPORT_MAX_REGIONS]; /* the peer's regions */
  uint32_t rkey[MELD_TRANSPORT_MAX_REGIONS];
  /* proxy thread: writes in flight on this QP, oldest first (sequence, work requests) */
  uint64_t *fseq;
  uint32_t *fnwr;
  uint64_t fhead, ftail; /* fifo indices, running free (slot = index % sq_depth) */
  uint32_t sq_used;      /* work requests posted and not yet completed */
  /* receiver thread */
  int bye, hello;
} ipeer_t;

/* What every rank publishes at connect (all-gathered), then the QP numbers and first PSNs
 * (rank x rank). Every rank takes part in both all-gathers even when its local preparation
 * failed (status): a rank that skipped them would put the others' collectives out of step. */
typedef struct {
  int32_t status;                        /* MELD_OK, or why this rank cannot connect */
  uint32_t lid, link_layer, mtu, by_gid; /* by_gid: the rank addresses peers by GID */
  uint8_t gid[16];
  uint64_t addr[MELD_TRANSPORT_MAX_REGIONS];
  uint32_t rkey[MELD_TRANSPORT_MAX_REGIONS];
} ibv_info_t;

typedef struct {
  uint32_t qpn, psn; /* [from * n + to]: from's QP toward `to`, and the PSN it starts sending at */
} ibv_qpx_t;

typedef struct {
  meld_transport_t *t;
  const ibv_api_t *a;
  hca_t hca;
  struct ibv_context *ctx;
  struct ibv_pd *pd;
  struct ibv_cq *scq, *rcq;
  struct ibv_mr *mr[MELD_TRANSPORT_MAX_REGIONS];
  struct ibv_mr *ctl_mr;
  ctl_t *ctl;              /* [nranks][IBV_RECVS] receive buffers */
  struct ibv_port_attr port;
  int gid_index;           /* -1: address by LID (InfiniBand) */
  union ibv_gid gid;
  uint8_t ack_timeout;     /* MELD_IB_TIMEOUT: 4.096 us x 2^t per transport retry */
  uint8_t tclass, sl;      /* MELD_IB_TC (RoCE DSCP << 2 | ECN, IB GRH), MELD_IB_SL */
  uint64_t wr_max;         /* bytes per RDMA WRITE */
  uint32_t sq_depth;
  ipeer_t *peers;          /* [nranks] */
  int nremote;
  /* proxy thread */
  uint64_t seq;            /* writes issued */
  /* receiver thread */
  pthread_t rx;
  int rx_started;
  atomic_int stop;
  atomic_int open;         /* peers that have not said BYE */
  atomic_int hellos;       /* peers whose HELLO arrived (ready) */
  int64_t flushed_ms;      /* receiver thread: when a flushed receive was first seen (0: none) */
  int flushed_peer;
} ibv_t;

/* A random 24-bit starting PSN (exchanged): a fixed one per rank pair would let a stale packet
 * of an earlier connection between the same ranks (a retransmission still in the fabric while
 * its QP number is reused) fall inside the new QP's PSN window. */
static uint32_t random_psn(uint64_t salt) {
  uint64_t x = 0;
  if (getrandom(&x, sizeof x, GRND_NONBLOCK) != (ssize_t)sizeof x) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    x = (uint64_t)ts.tv_nsec ^ (uint64_t)ts.tv_sec << 30 ^ (uint64_t)getpid() << 40;
  }
  x ^= salt * 0x9e3779b97f4a7c15ull;
  x ^= x >> 33, x *= 0xff51afd7ed558ccdull, x ^= x >> 33;
  return (uint32_t)x & 0xffffffu;
}

/* ---- the receiver thread: control messages -> release stores ---------------------------- */

static int post_recv(ibv_t *c, int peer, int slot) {
  ctl_t *buf = &c->ctl[(size_t)peer * IBV_RECVS + slot];
  struct ibv_sge sge = {(uintptr_t)buf, sizeof *buf, c->ctl_mr->lkey};
  struct ibv_recv_wr wr = {.wr_id = (uint64_t)peer * IBV_RECVS + (uint64_t)slot,
                           .sg_list = &sge, .num_sge = 1};
  struct ibv_recv_wr *bad = NULL;
  return ibv_post_recv(c->peers[peer].qp, &wr, &bad);
}

/* Applies one receive completion. 0, or -1 (failure recorded). */
static int rx_one(ibv_t *c, const struct ibv_wc *wc) {
  meld_transport_t *t = c->t;
  const int peer = (int)(wc->wr_id / IBV_RECVS), slot = (int)(wc->wr_id % IBV_RECVS);
  if (wc->status != IBV_WC_SUCCESS) {
    if (wc->status == IBV_WC_WR_FLUSH_ERR && atomic_load(&c->stop)) return 0; /* teardown */
    if (wc->status == IBV_WC_WR_FLUSH_ERR && peer >= 0 && peer < t->nranks) {
      /* A consequence: the QP went to error, mostly because a send on it failed, whose
       * completion (the cause, with the better sentence) the proxy thread takes: give it
       * FLUSH_GRACE_MS to be recorded first (rx_main). */
      if (!c->flushed_ms) c->flushed_ms = meld_now_ms(), c->flushed_peer = peer;
      return 0;
    }
    meld_transport_fail(t, MELD_ERR_SYSTEM,
                        "meld ibverbs transport: rank %d: receiving from rank %d failed: %s "
                        "(vendor error 0x%x; rank %d died, or its QP broke)",
                        t->rank, peer, wc_str(wc->status), wc->vendor_err, peer);
    return -1;
  }
  if (peer < 0 || peer >= t->nranks || !c->peers[peer].qp) {
    meld_transport_fail(t, MELD_ERR_INTERNAL, "meld ibverbs transport: rank %d: a receive "
                        "completion with unknown wr_id %llu", t->rank,
                        (unsigned long long)wc->wr_id);
    return -1;
  }
  const ctl_t m = c->ctl[wc->wr_id];
  if (wc->byte_len != sizeof m || m.magic != IBV_MAGIC || (m.type != CTL_FLAG && m.type != CTL_BYE && m.type != CTL_HELLO)) {
    meld_transport_fail(t, MELD_ERR_INTERNAL, "meld ibverbs transport: rank %d: rank %d sent a "
                        "bad control message (%u bytes, magic 0x%x, type %u)", t->rank, peer,
                        wc->byte_len, m.magic, m.type);
    return -1;
  }
  if (m.type == CTL_BYE) {
    c->peers[peer].bye = 1;
    atomic_fetch_sub(&c->open, 1);
    return 0; /* nothing more comes from it: no receive to re-post */
  }
  if (m.type == CTL_HELLO) {
    if (!__atomic_exchange_n(&c->peers[peer].hello, 1, __ATOMIC_RELAXED)) atomic_fetch_add(&c->hellos, 1);
  } else {
    uint64_t *flag = meld_transport_local(t, m.region, m.offset, 8);
    if (!flag || (uintptr_t)flag % 8) {
      meld_transport_fail(t, MELD_ERR_INTERNAL, "meld ibverbs transport: rank %d: rank %d set a "
                          "flag outside our regions (region %u offset %llu)", t->rank, peer,
                          m.region, (unsigned long long)m.offset);
      return -1;
    }
    /* The SEND's completion follows the WRITEs' placement (RC order): now the flag. */
    atomic_store_explicit((_Atomic uint64_t *)flag, m.value, memory_order_release);
  }
  int e = post_recv(c, peer, slot);
  if (e) {
    meld_transport_fail(t, MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: re-posting a "
                        "receive for rank %d: %s", t->rank, peer, strerror(e));
    return -1;
  }
  return 0;
}

/* After the receiver thread failed: every QP to the error state, so that the peers' SENDs
 * (which would otherwise wait forever for receives nobody re-posts: rnr_retry 7) fail at their
 * HCA's retry limit and their ranks learn of it, instead of waiting out the device timeout. */
static void qps_to_error(ibv_t *c) {
  for (int p = 0; p < c->t->nranks; p++) {
    if (!c->peers[p].qp) continue;
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof a);
    a.qp_state = IBV_QPS_ERR;
    c->a->modify_qp(c->peers[p].qp, &a, IBV_QP_STATE);
  }
}

static void *rx_main(void *arg) {
  ibv_t *c = arg;
  struct ibv_wc wc[IBV_POLL_BATCH];
  unsigned idle = 0;
  while (!atomic_load(&c->stop)) {
    int n = ibv_poll_cq(c->rcq, IBV_POLL_BATCH, wc);
    if (n < 0) {
      meld_transport_fail(c->t, MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: polling the "
                          "receive completion queue failed (%d)", c->t->rank, n);
      qps_to_error(c);
      break;
    }
    for (int i = 0; i < n; i++)
      if (rx_one(c, &wc[i]) != 0) {
        qps_to_error(c);
        return NULL;
      }
    if (c->flushed_ms && meld_now_ms() - c->flushed_ms > FLUSH_GRACE_MS) {
      meld_transport_fail(c->t, MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: the connection "
                          "to rank %d broke (its receives were flushed: rank %d died, or a transfer "
                          "on it failed)", c->t->rank, c->flushed_peer, c->flushed_peer);
      qps_to_error(c);
      return NULL;
    }
    if (n > 0) {
      idle = 0;
      continue;
    }
    /* Idle: yield a while (a flag's latency), then sleep 20 us, after ~1 s idle 200 us. */
    if (idle++ < 256) {
      sched_yield();
      continue;
    }
    struct timespec ts = {0, idle < 50000 ? 20000 : 200000};
    nanosleep(&ts, NULL);
  }
  return NULL;
}

/* ---- sending ------------------------------------------------------------------------------- */

/* Takes send completions: frees send-queue slots, records failures. Proxy thread (or close). */
static meld_result_t drain_send(ibv_t *c) {
  meld_transport_t *t = c->t;
  struct ibv_wc wc[IBV_POLL_BATCH];
  for (;;) {
    int n = ibv_poll_cq(c->scq, IBV_POLL_BATCH, wc);
    if (n < 0)
      return meld_transport_fail(t, MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: polling "
                                 "the send completion queue failed (%d)", t->rank, n);
    for (int i = 0; i < n; i++) {
      const int p = (int)(wc[i].wr_id >> IBV_PEER_SHIFT);
      const uint64_t seq = wc[i].wr_id & ((1ull << IBV_PEER_SHIFT) - 1);
      if (wc[i].status != IBV_WC_SUCCESS)
        return meld_transport_fail(
            t, MELD_ERR_SYSTEM,
            "meld ibverbs transport: rank %d: a write to rank %d failed: %s (vendor error 0x%x)%s",
            t->rank, p, wc_str(wc[i].status), wc[i].vendor_err,
            wc[i].status == IBV_WC_RETRY_EXC_ERR ? ": it stopped answering (died, or the network "
            "between us is down)" : wc[i].status == IBV_WC_REM_ACCESS_ERR ? ": it refused the "
            "address or key (a bug: please report)" : "");
      ipeer_t *pe = p >= 0 && p < t->nranks ? &c->peers[p] : NULL;
      if (!pe || !pe->qp || pe->fhead == pe->ftail || pe->fseq[pe->fhead % c->sq_depth] != seq)
        return meld_transport_fail(t, MELD_ERR_INTERNAL, "meld ibverbs transport: rank %d: a "
                                   "completion for write %llu to rank %d that is not its oldest",
                                   t->rank, (unsigned long long)seq, p);
      pe->sq_used -= pe->fnwr[pe->fhead % c->sq_depth];
      pe->fhead++;
    }
    if (n < IBV_POLL_BATCH) return MELD_OK;
  }
}

/* The local region holding [p, p + n), or -1. */
static int region_of(const meld_transport_t *t, const void *p, uint64_t n) {
  for (int i = 0; i < t->nregions; i++) {
    const char *b = t->regions[i].base;
    if ((const char *)p >= b && (uint64_t)((const char *)p - b) <= t->regions[i].bytes &&
        n <= t->regions[i].bytes - (uint64_t)((const char *)p - b))
      return i;
  }
  return -1;
}

static meld_result_t ibv_write(meld_transport_t *t, const meld_write_t *w) {
  ibv_t *c = t->impl;
  if (meld_transport_failed(t)) return meld_transport_sticky(t);
  const int p = w->dst_rank;
  ipeer_t *pe = &c->peers[p];
  if (!pe->qp)
    return meld_error(MELD_ERR_INTERNAL, "meld ibverbs transport: no queue pair to rank %d", p);
  /* The write's sequence: taken only by a write that is accepted (posted, or empty), so that
   * poll's count stays the number of writes the caller saw succeed. */
  const uint64_t seq = c->seq;
  const int has_flag = w->flag_region != MELD_TRANSPORT_NO_FLAG;
  const uint64_t ndata = (w->bytes + c->wr_max - 1) / c->wr_max;
  const uint64_t nwr = ndata + (uint64_t)has_flag;
  if (nwr == 0) { /* nothing to move: complete at once */
    c->seq++;
    return MELD_OK;
  }
  if (nwr > c->sq_depth)
    return meld_error(MELD_ERR_INVALID_ARG, "meld ibverbs transport: a %llu-byte write needs "
                      "%llu work requests, more than the send queue's %u",
                      (unsigned long long)w->bytes, (unsigned long long)nwr, c->sq_depth);
  int src_region = -1;
  if (w->bytes > 0 && (src_region = region_of(t, w->src, w->bytes)) < 0)
    return meld_error(MELD_ERR_INVALID_ARG, "meld ibverbs transport: the source of a %llu-byte "
                      "write (%p) is not inside a registered region (RDMA reads only registered "
                      "memory)", (unsigned long long)w->bytes, w->src);
  /* Room in the send queue: take completions until there is (bounded). */
  const int64_t deadline = meld_now_ms() + t->timeout_ms;
  while (pe->sq_used + nwr > c->sq_depth) {
    MELD_CHECK(drain_send(c));
    if (pe->sq_used + nwr <= c->sq_depth) break;
    if (meld_transport_failed(t)) return meld_transport_sticky(t);
    if (__atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE))
      return meld_error(MELD_ERR_ABORTED, "meld ibverbs transport: rank %d: aborted while "
                        "waiting for send-queue room to rank %d", t->rank, p);
    if (meld_now_ms() >= deadline)
      return meld_transport_fail(t, MELD_ERR_TIMEOUT, "meld ibverbs transport: rank %d: no "
                                 "send-queue room to rank %d for %lld ms (its writes do not "
                                 "complete)", t->rank, p, (long long)t->timeout_ms);
    sched_yield();
  }
  /* The work requests: data WRITEs, then the flag's SEND; the last one signaled. Chained and
   * posted at once (a write has at most sq_depth of them; typically 1 or 2). */
  struct ibv_send_wr stack_wr[4], *wrs = stack_wr;
  struct ibv_sge stack_sge[4], *sges = stack_sge;
  if (nwr > 4) {
    wrs = calloc(nwr, sizeof *wrs);
    sges = calloc(nwr, sizeof *sges);
    if (!wrs || !sges) {
      free(wrs == stack_wr ? NULL : wrs), free(sges == stack_sge ? NULL : sges);
      return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld ibverbs transport: out of host memory");
    }
  } else {
    memset(stack_wr, 0, sizeof stack_wr);
    memset(stack_sge, 0, sizeof stack_sge);
  }
  ctl_t m = {IBV_MAGIC, CTL_FLAG, w->flag_region, 0, w->flag_offset, w->flag_value};
  const uint64_t wr_id = (uint64_t)p << IBV_PEER_SHIFT | (seq & ((1ull << IBV_PEER_SHIFT) - 1));
  for (uint64_t i = 0; i < nwr; i++) {
    struct ibv_send_wr *r = &wrs[i];
    r->next = i + 1 < nwr ? &wrs[i + 1] : NULL;
    r->wr_id = wr_id; /* (an unsignaled WR's error completion carries it too) */
    r->num_sge = 1;
    r->sg_list = &sges[i];
    if (i < ndata) {
      const uint64_t off = i * c->wr_max, len = w->bytes - off < c->wr_max ? w->bytes - off : c->wr_max;
      sges[i] = (struct ibv_sge){(uintptr_t)w->src + off, (uint32_t)len, c->mr[src_region]->lkey};
      r->opcode = IBV_WR_RDMA_WRITE;
      r->wr.rdma.remote_addr = pe->raddr[w->dst_region] + w->dst_offset + off;
      r->wr.rdma.rkey = pe->rkey[w->dst_region];
    } else {
      sges[i] = (struct ibv_sge){(uintptr_t)&m, sizeof m, 0};
      r->opcode = IBV_WR_SEND;
      r->send_flags = IBV_SEND_INLINE;
    }
  }
  wrs[nwr - 1].send_flags |= IBV_SEND_SIGNALED;
  struct ibv_send_wr *bad = NULL;
  const int e = ibv_post_send(pe->qp, wrs, &bad);
  if (wrs != stack_wr) free(wrs), free(sges);
  if (e)
    return meld_transport_fail(t, MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: posting a "
                               "%llu-byte write to rank %d failed: %s", t->rank,
                               (unsigned long long)w->bytes, p, strerror(e));
  c->seq++;
  pe->fseq[pe->ftail % c->sq_depth] = seq;
  pe->fnwr[pe->ftail % c->sq_depth] = (uint32_t)nwr;
  pe->ftail++;
  pe->sq_used += (uint32_t)nwr;
  return MELD_OK;
}

static meld_result_t ibv_poll(meld_transport_t *t, uint64_t *completed) {
  ibv_t *c = t->impl;
  meld_result_t rc = drain_send(c);
  /* The oldest write still in flight on any QP bounds the complete prefix. */
  uint64_t low = c->seq;
  for (int p = 0; p < t->nranks; p++) {
    const ipeer_t *pe = &c->peers[p];
    if (pe->fhead != pe->ftail && pe->fseq[pe->fhead % c->sq_depth] < low)
      low = pe->fseq[pe->fhead % c->sq_depth];
  }
  *completed = low;
  if (rc != MELD_OK) return rc;
  return meld_transport_failed(t) ? meld_transport_sticky(t) : MELD_OK;
}

/* ---- connect and close ---------------------------------------------------------------------- */

static int gid_is_v4(const union ibv_gid *g) {
  static const uint8_t pre[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
  return memcmp(g->raw, pre, 12) == 0;
}

static int gid_is_zero(const union ibv_gid *g) {
  static const uint8_t z[16];
  return memcmp(g->raw, z, 16) == 0;
}

static int gid_is_link_local(const union ibv_gid *g) {
  return g->raw[0] == 0xfe && (g->raw[1] & 0xc0) == 0x80;
}

/* A GID entry's attribute from sysfs (gid_attrs/<what>/<idx>): its type, "RoCE v2" or
 * "IB/RoCE v1", or the network interface it mirrors; "" where it cannot be read (old
 * kernels, a fake device). */
static void gid_attr(const char *dev, int port, const char *what, int idx, char *out, size_t n) {
  char path[256];
  out[0] = 0;
  snprintf(path, sizeof path, "/sys/class/infiniband/%s/ports/%d/gid_attrs/%s/%d", dev, port,
           what, idx);
  FILE *f = fopen(path, "r");
  if (!f) return;
  if (!fgets(out, (int)n, f)) out[0] = 0;
  fclose(f);
  out[strcspn(out, "\n")] = 0;
}

/* 0 if entry idx mirrors an interface that this process's network namespace does not have
 * (a container sees the whole port's table, the host's addresses included), else 1. */
static int gid_in_our_netns(const char *dev, int port, int idx) {
  char ndev[IF_NAMESIZE + 8];
  gid_attr(dev, port, "ndevs", idx, ndev, sizeof ndev);
  return !ndev[0] || if_nametoindex(ndev) != 0;
}

/* The GID to address peers by: MELD_IB_GID_INDEX, else none on InfiniBand (LIDs), else on
 * Ethernet the first RoCE v2 entry holding an IPv4 address, else the first RoCE v2 entry of
 * a routable IPv6 address (the kernel lists each address once per RoCE version, in an order
 * that changes as addresses come and go: the type is read, not guessed from the position),
 * of an interface in our network namespace.
 * Where the kernel does not say the types: the port's first IPv4 entry, the second of an
 * equal pair (providers list v1 then v2), else index 0. */
static meld_result_t choose_gid(ibv_t *c) {
  meld_transport_t *t = c->t;
  int64_t v = -1;
  const char *env = getenv("MELD_IB_GID_INDEX");
  if (env && *env && meld_parse_int64(env, 0, 255, &v) != 0)
    return meld_error(MELD_ERR_INVALID_ARG, "MELD_IB_GID_INDEX=%s: give a GID table index 0..255",
                      env);
  const int roce = c->port.link_layer == IBV_LINK_LAYER_ETHERNET;
  if (v < 0 && !roce) {
    if (c->port.lid == 0)
      return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: rank %d: %s port %d has "
                        "no LID (is a subnet manager running?)", t->rank, c->hca.name, c->hca.port);
    c->gid_index = -1;
    return MELD_OK;
  }
  char type[32] = "";
  if (v < 0) {
    const int n = c->port.gid_tbl_len > 0 && c->port.gid_tbl_len < 256 ? c->port.gid_tbl_len : 256;
    int v2_ipv4 = -1, v2_ipv6 = -1, first_ipv4 = -1, typed = 0;
    union ibv_gid g, next;
    for (int i = 0; i < n && v2_ipv4 < 0; i++) {
      if (c->a->query_gid(c->ctx, (uint8_t)c->hca.port, i, &g) != 0 || gid_is_zero(&g)) continue;
      gid_attr(c->hca.name, c->hca.port, "types", i, type, sizeof type);
      typed |= type[0] != 0;
      const int v2 = strcmp(type, "RoCE v2") == 0 && gid_in_our_netns(c->hca.name, c->hca.port, i);
      if (v2 && gid_is_v4(&g)) v2_ipv4 = i;
      if (v2 && !gid_is_v4(&g) && !gid_is_link_local(&g) && v2_ipv6 < 0) v2_ipv6 = i;
      if (gid_is_v4(&g) && first_ipv4 < 0) {
        first_ipv4 = i;
        if (i + 1 < n && c->a->query_gid(c->ctx, (uint8_t)c->hca.port, i + 1, &next) == 0 &&
            memcmp(&g, &next, sizeof g) == 0)
          first_ipv4 = i + 1;
      }
    }
    v = v2_ipv4 >= 0 ? v2_ipv4 : v2_ipv6 >= 0 ? v2_ipv6 : first_ipv4 >= 0 ? first_ipv4 : 0;
    if (typed && v2_ipv4 < 0 && v2_ipv6 < 0)
      MELD_WARN(MELD_SUB_PROXY, "ibverbs transport: rank %d: %s port %d has no RoCE v2 GID with an "
                "IP address (is the interface up, with an address?): using GID %d; set "
                "MELD_IB_GID_INDEX if that is wrong", t->rank, c->hca.name, c->hca.port, (int)v);
  }
  c->gid_index = (int)v;
  if (c->a->query_gid(c->ctx, (uint8_t)c->hca.port, c->gid_index, &c->gid) != 0 ||
      gid_is_zero(&c->gid))
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: GID %d of %s port %d "
                      "cannot be read or is empty (show_gids or the port's sysfs gids/ list the "
                      "valid ones: set MELD_IB_GID_INDEX)", t->rank, c->gid_index, c->hca.name,
                      c->hca.port);
  gid_attr(c->hca.name, c->hca.port, "types", c->gid_index, type, sizeof type);
  MELD_INFO(MELD_SUB_PROXY, "ibverbs transport: rank %d addresses peers by GID %d of %s port "
            "%d%s%s", t->rank, c->gid_index, c->hca.name, c->hca.port, type[0] ? ", " : "", type);
  return MELD_OK;
}

static meld_result_t qp_connect(ibv_t *c, int p, const ibv_info_t *peer, ibv_qpx_t to_us,
                               uint32_t our_psn) {
  meld_transport_t *t = c->t;
  struct ibv_qp_attr a;
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTR;
  a.path_mtu = c->port.active_mtu < (enum ibv_mtu)peer->mtu ? c->port.active_mtu : (enum ibv_mtu)peer->mtu;
  a.dest_qp_num = to_us.qpn;
  a.rq_psn = to_us.psn;
  a.max_dest_rd_atomic = 1;
  a.min_rnr_timer = 12; /* 0.64 ms between a SEND's retries while no receive is posted */
  a.ah_attr.port_num = (uint8_t)c->hca.port;
  a.ah_attr.sl = c->sl;
  if (c->gid_index < 0) {
    a.ah_attr.dlid = (uint16_t)peer->lid;
  } else {
    a.ah_attr.is_global = 1;
    memcpy(a.ah_attr.grh.dgid.raw, peer->gid, 16);
    a.ah_attr.grh.sgid_index = (uint8_t)c->gid_index;
    a.ah_attr.grh.hop_limit = 255;
    a.ah_attr.grh.traffic_class = c->tclass;
  }
  int e = c->a->modify_qp(c->peers[p].qp, &a,
                          IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN |
                              IBV_QP_RQ_PSN | IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER);
  if (e)
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: connecting the queue "
                      "pair to rank %d (RTR: qpn %u, %s %u) failed: %s%s", t->rank, p, to_us.qpn,
                      c->gid_index < 0 ? "lid" : "gid index", c->gid_index < 0 ? peer->lid :
                      (unsigned)c->gid_index, strerror(e),
                      c->port.link_layer == IBV_LINK_LAYER_ETHERNET
                          ? " (RoCE: is the peer's IP address reachable from this port's "
                            "interface, and is this GID the right one? MELD_IB_GID_INDEX picks "
                            "another)"
                          : "");
  memset(&a, 0, sizeof a);
  a.qp_state = IBV_QPS_RTS;
  a.timeout = c->ack_timeout; /* 4.096 us x 2^timeout per try */
  a.retry_cnt = 7;
  a.rnr_retry = 7; /* retry forever while the peer has no receive posted */
  a.sq_psn = our_psn;
  a.max_rd_atomic = 1;
  e = c->a->modify_qp(c->peers[p].qp, &a,
                      IBV_QP_STATE | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                          IBV_QP_SQ_PSN | IBV_QP_MAX_QP_RD_ATOMIC);
  if (e)
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: the queue pair to rank "
                      "%d refused RTS: %s", t->rank, p, strerror(e));
  return MELD_OK;
}

/* This rank's half of connect, before the exchange: CQs, memory registrations, a QP per
 * remote rank in INIT with its receives posted. Fills info[rank] and qpx[rank][*]. */
static meld_result_t connect_local(ibv_t *c, ibv_info_t *me, ibv_qpx_t *qpx) {
  meld_transport_t *t = c->t;
  const ibv_api_t *a = c->a;
  const int n = t->nranks;
  for (int p = 0; p < n; p++) c->nremote += meld_transport_is_remote(t, p);
  /* Send completions in flight are at most nremote x sq_depth (one signaled a write). */
  struct ibv_device_attr da;
  memset(&da, 0, sizeof da);
  if (a->query_device(c->ctx, &da) != 0) da.max_cqe = 1 << 22, da.max_qp_wr = IBV_SQ_DEPTH;
  uint64_t depth = IBV_SQ_DEPTH;
  if (da.max_qp_wr > 0 && (uint64_t)da.max_qp_wr < depth) depth = (uint64_t)da.max_qp_wr;
  if (c->nremote > 0 && (uint64_t)c->nremote * depth + 16 > (uint64_t)da.max_cqe)
    depth = ((uint64_t)da.max_cqe - 16) / (uint64_t)c->nremote;
  if (depth < 4 || (uint64_t)c->nremote * IBV_RECVS + 16 > (uint64_t)da.max_cqe)
    return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: rank %d: %s cannot hold the "
                      "completions of %d peers (max_cqe %d): use fewer ranks, or "
                      "MELD_NET_TRANSPORT=tcp", t->rank, c->hca.name, c->nremote, da.max_cqe);
  c->sq_depth = (uint32_t)depth;
  const int scq_n = c->nremote * (int)c->sq_depth + 16, rcq_n = c->nremote * IBV_RECVS + 16;
  if (!(c->scq = a->create_cq(c->ctx, scq_n, NULL, NULL, 0)) ||
      !(c->rcq = a->create_cq(c->ctx, rcq_n, NULL, NULL, 0)))
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: cannot create completion "
                      "queues (%d and %d entries) on %s: %s (locked-memory limit: ulimit -l?)",
                      t->rank, scq_n, rcq_n, c->hca.name, strerror(errno));
  /* Regions: registered for remote writes (the peers' data lands there directly). */
  for (int i = 0; i < t->nregions; i++) {
    c->mr[i] = a->reg_mr(c->pd, t->regions[i].base, t->regions[i].bytes,
                         IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
    if (!c->mr[i])
      return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: registering region %d "
                        "(%llu bytes at %p) with %s failed: %s (locked-memory limit: ulimit -l?)",
                        t->rank, i, (unsigned long long)t->regions[i].bytes, t->regions[i].base,
                        c->hca.name, strerror(errno));
    me->addr[i] = (uintptr_t)t->regions[i].base;
    me->rkey[i] = c->mr[i]->rkey;
  }
  /* Receive buffers: whole pages of their own (a registration under ibv_fork_init marks its
   * pages MADV_DONTFORK, which must not catch unrelated heap data). */
  const size_t page = (size_t)sysconf(_SC_PAGESIZE) > 0 ? (size_t)sysconf(_SC_PAGESIZE) : 4096;
  const size_t ctl_bytes = ((size_t)n * IBV_RECVS * sizeof(ctl_t) + page - 1) / page * page;
  if (posix_memalign((void **)&c->ctl, page, ctl_bytes) != 0) {
    c->ctl = NULL;
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld ibverbs transport: rank %d: out of host "
                      "memory", t->rank);
  }
  memset(c->ctl, 0, ctl_bytes);
  if (!(c->ctl_mr = a->reg_mr(c->pd, c->ctl, ctl_bytes, IBV_ACCESS_LOCAL_WRITE)))
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: registering %zu bytes of "
                      "receive buffers failed: %s (locked-memory limit: ulimit -l?)", t->rank,
                      ctl_bytes, strerror(errno));
  /* A queue pair per remote rank, to INIT, with its receives posted. */
  for (int p = 0; p < n; p++) {
    if (!meld_transport_is_remote(t, p)) continue;
    ipeer_t *pe = &c->peers[p];
    pe->fseq = calloc(c->sq_depth, sizeof *pe->fseq);
    pe->fnwr = calloc(c->sq_depth, sizeof *pe->fnwr);
    if (!pe->fseq || !pe->fnwr)
      return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld ibverbs transport: rank %d: out of host "
                        "memory", t->rank);
    struct ibv_qp_init_attr qa;
    memset(&qa, 0, sizeof qa);
    qa.send_cq = c->scq;
    qa.recv_cq = c->rcq;
    qa.qp_type = IBV_QPT_RC;
    qa.cap.max_send_wr = c->sq_depth;
    qa.cap.max_recv_wr = IBV_RECVS;
    qa.cap.max_send_sge = 1;
    qa.cap.max_recv_sge = 1;
    qa.cap.max_inline_data = sizeof(ctl_t);
    if (!(pe->qp = a->create_qp(c->pd, &qa)))
      return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: cannot create a queue "
                        "pair for rank %d on %s (%u send, %d receive requests, %zu inline bytes): "
                        "%s", t->rank, p, c->hca.name, c->sq_depth, IBV_RECVS, sizeof(ctl_t),
                        strerror(errno));
    struct ibv_qp_attr at;
    memset(&at, 0, sizeof at);
    at.qp_state = IBV_QPS_INIT;
    at.pkey_index = 0;
    at.port_num = (uint8_t)c->hca.port;
    at.qp_access_flags = IBV_ACCESS_REMOTE_WRITE;
    int e = a->modify_qp(pe->qp, &at, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                          IBV_QP_ACCESS_FLAGS);
    for (int s = 0; s < IBV_RECVS && !e; s++) e = post_recv(c, p, s);
    if (e)
      return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: preparing the queue "
                        "pair for rank %d failed: %s", t->rank, p, strerror(e));
    qpx[p] = (ibv_qpx_t){pe->qp->qp_num, random_psn(((uint64_t)t->rank << 32) ^ (uint64_t)p)};
  }
  me->lid = c->port.lid;
  me->link_layer = c->port.link_layer;
  me->mtu = (uint32_t)c->port.active_mtu;
  me->by_gid = c->gid_index >= 0;
  if (me->by_gid) memcpy(me->gid, c->gid.raw, 16);
  return MELD_OK;
}

static meld_result_t ibv_connect(meld_transport_t *t, meld_bootstrap_t *b) {
  ibv_t *c = t->impl;
  const int n = t->nranks;
  meld_result_t rc = MELD_OK;
  ibv_info_t *info = calloc((size_t)n, sizeof *info);
  ibv_qpx_t *qpx = calloc((size_t)n * (size_t)n, sizeof *qpx);
  if (!info || !qpx) { /* (cannot take part in the exchange: the others time out in it) */
    free(info), free(qpx);
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld ibverbs transport: rank %d: out of host "
                      "memory for the address exchange of %d ranks", t->rank, n);
  }
  ibv_info_t *me = &info[t->rank];
  /* The local half; a failure is published (status) instead of skipping the exchange. */
  const meld_result_t local = connect_local(c, me, qpx + (size_t)t->rank * n);
  char why[512] = "";
  if (local != MELD_OK) snprintf(why, sizeof why, "%s", meld_last_error());
  me->status = (int32_t)local;
  MELD_CHECK_GOTO(meld_bootstrap_allgather(b, info, sizeof *info), rc, out);
  MELD_CHECK_GOTO(meld_bootstrap_allgather(b, qpx, (size_t)n * sizeof *qpx), rc, out);
  if (local != MELD_OK) {
    rc = meld_error(local, "%s", why);
    goto out;
  }
  for (int p = 0; p < n; p++)
    if (info[p].status != MELD_OK && meld_transport_is_remote(t, p)) {
      rc = meld_error((meld_result_t)info[p].status, "meld ibverbs transport: rank %d failed to "
                      "connect (%s, before the address exchange); its log says why", p,
                      meld_strerror((meld_result_t)info[p].status));
      goto out;
    }
  for (int p = 0; p < n; p++) {
    if (!meld_transport_is_remote(t, p)) continue;
    if (info[p].link_layer != me->link_layer) {
      rc = meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: rank %d's port is %s, ours "
                      "(rank %d) %s: one fabric is needed (MELD_IB_HCA picks the NIC)", p,
                      info[p].link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand",
                      t->rank, me->link_layer == IBV_LINK_LAYER_ETHERNET ? "Ethernet" : "InfiniBand");
      goto out;
    }
    if (info[p].by_gid != me->by_gid) {
      rc = meld_error(MELD_ERR_INVALID_ARG, "meld ibverbs transport: rank %d addresses peers by "
                      "%s, rank %d by %s: set MELD_IB_GID_INDEX alike on every rank", p,
                      info[p].by_gid ? "GID" : "LID", t->rank, me->by_gid ? "GID" : "LID");
      goto out;
    }
    memcpy(c->peers[p].raddr, info[p].addr, sizeof info[p].addr);
    memcpy(c->peers[p].rkey, info[p].rkey, sizeof info[p].rkey);
    MELD_CHECK_GOTO(qp_connect(c, p, &info[p], qpx[(size_t)p * n + t->rank],
                               qpx[(size_t)t->rank * n + p].psn),
                    rc, out);
  }
  atomic_store(&c->open, c->nremote);
  if (pthread_create(&c->rx, NULL, rx_main, c) != 0) {
    rc = meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: cannot start the receiver "
                    "thread", t->rank);
    goto out;
  }
  c->rx_started = 1;
  MELD_INFO(MELD_SUB_PROXY, "ibverbs transport: rank %d on %s port %d (%s, %s %d), %d peers, "
            "%u-deep send queues, %llu bytes a WRITE", t->rank, c->hca.name, c->hca.port,
            c->port.link_layer == IBV_LINK_LAYER_ETHERNET ? "RoCE" : "InfiniBand",
            c->gid_index < 0 ? "lid" : "gid index", c->gid_index < 0 ? c->port.lid : c->gid_index,
            c->nremote, c->sq_depth, (unsigned long long)c->wr_max);
out:
  free(info);
  free(qpx);
  return rc; /* on failure close frees what was made */
}

/* Posts a control message (BYE, HELLO) to peer p: a signaled SEND, counted as a write in
 * flight. The caller made room in p's send queue. */
static meld_result_t send_ctl(ibv_t *c, int p, uint32_t type) {
  ipeer_t *pe = &c->peers[p];
  ctl_t m = {IBV_MAGIC, type, 0, 0, 0, 0};
  struct ibv_sge sge = {(uintptr_t)&m, sizeof m, 0};
  const uint64_t seq = c->seq++;
  struct ibv_send_wr wr = {.wr_id = (uint64_t)p << IBV_PEER_SHIFT | seq, .sg_list = &sge,
                           .num_sge = 1, .opcode = IBV_WR_SEND,
                           .send_flags = IBV_SEND_INLINE | IBV_SEND_SIGNALED};
  struct ibv_send_wr *bad = NULL;
  int e = ibv_post_send(pe->qp, &wr, &bad);
  if (e)
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: posting a %s to rank "
                      "%d: %s", c->t->rank, type == CTL_BYE ? "goodbye" : "hello", p, strerror(e));
  pe->fseq[pe->ftail % c->sq_depth] = seq;
  pe->fnwr[pe->ftail % c->sq_depth] = 1;
  pe->ftail++;
  pe->sq_used++;
  return MELD_OK;
}

static int in_flight(const ibv_t *c) {
  for (int p = 0; p < c->t->nranks; p++)
    if (c->peers[p].fhead != c->peers[p].ftail) return 1;
  return 0;
}

/* ready: a HELLO to every peer, then wait (bounded) for every peer's HELLO and our sends'
 * completions. A peer the fabric cannot reach shows here as a failed send (retry exceeded) or
 * a missing HELLO, with a sentence saying what to check. The sequence restarts at 0 after it:
 * the proxy counts its own writes from 0. */
static meld_result_t ibv_ready(meld_transport_t *t) {
  ibv_t *c = t->impl;
  for (int p = 0; p < t->nranks; p++)
    if (c->peers[p].qp) MELD_CHECK(send_ctl(c, p, CTL_HELLO)); /* (queues are empty: room) */
  const int64_t deadline = meld_now_ms() + t->timeout_ms;
  meld_result_t rc = MELD_OK;
  while ((atomic_load(&c->hellos) < c->nremote || in_flight(c)) && rc == MELD_OK) {
    rc = drain_send(c);
    if (rc == MELD_OK && meld_transport_failed(t)) rc = meld_transport_sticky(t);
    if (rc == MELD_OK && __atomic_load_n(&t->aborted, __ATOMIC_ACQUIRE))
      rc = meld_error(MELD_ERR_ABORTED, "meld ibverbs transport: rank %d: aborted at connect", t->rank);
    if (rc == MELD_OK && meld_now_ms() >= deadline) {
      char list[256] = "";
      size_t len = 0;
      for (int p = 0; p < t->nranks && len + 16 < sizeof list; p++)
        if (c->peers[p].qp && !__atomic_load_n(&c->peers[p].hello, __ATOMIC_RELAXED))
          len += (size_t)snprintf(list + len, sizeof list - len, "%s%d", len ? ", " : "", p);
      rc = meld_error(MELD_ERR_TIMEOUT, "meld ibverbs transport: rank %d: no hello from ranks %s "
                      "within %lld ms", t->rank, list, (long long)t->timeout_ms);
    }
    if (rc == MELD_OK) meld_sleep_ms(1);
  }
  if (rc != MELD_OK)
    return meld_error(rc, "%s (at connect, over %s port %d by %s %d: the fabric does not carry "
                      "messages between these ranks; check the NIC and its routing, MELD_IB_HCA, "
                      "MELD_IB_GID_INDEX, or set MELD_NET_TRANSPORT=tcp)", meld_last_error(),
                      c->hca.name, c->hca.port, c->gid_index < 0 ? "LID" : "GID index",
                      c->gid_index < 0 ? (int)c->port.lid : c->gid_index);
  c->seq = 0;
  return MELD_OK;
}

static void ibv_close(meld_transport_t *t, int64_t timeout_ms) {
  ibv_t *c = t->impl;
  const ibv_api_t *a = c->a;
  const int64_t deadline = meld_now_ms() + (timeout_ms > 0 ? timeout_ms : 0);
  if (c->rx_started) {
    /* BYE to every peer (room permitting), then wait for theirs and our completions. */
    for (int p = 0; p < t->nranks && !meld_transport_failed(t); p++) {
      ipeer_t *pe = &c->peers[p];
      if (!pe->qp) continue;
      while (pe->sq_used + 1 > c->sq_depth && !meld_transport_failed(t) && meld_now_ms() < deadline)
        if (drain_send(c) != MELD_OK) break;
      if (pe->sq_used + 1 > c->sq_depth) continue; /* (the others still get theirs) */
      send_ctl(c, p, CTL_BYE);
    }
    while ((atomic_load(&c->open) > 0 || in_flight(c)) && !meld_transport_failed(t) &&
           meld_now_ms() < deadline) {
      if (drain_send(c) != MELD_OK) break;
      meld_sleep_ms(1);
    }
    if ((atomic_load(&c->open) > 0 || in_flight(c)) && !meld_transport_failed(t) && timeout_ms > 0)
      MELD_WARN(MELD_SUB_PROXY, "ibverbs transport: rank %d closed with %d peers still "
                "connected (they did not close within %lld ms)", t->rank, atomic_load(&c->open),
                (long long)timeout_ms);
    atomic_store(&c->stop, 1);
    pthread_join(c->rx, NULL);
  }
  for (int p = 0; p < t->nranks; p++) {
    if (c->peers[p].qp) a->destroy_qp(c->peers[p].qp);
    free(c->peers[p].fseq);
    free(c->peers[p].fnwr);
  }
  if (c->scq) a->destroy_cq(c->scq);
  if (c->rcq) a->destroy_cq(c->rcq);
  for (int i = 0; i < MELD_TRANSPORT_MAX_REGIONS; i++)
    if (c->mr[i]) a->dereg_mr(c->mr[i]);
  if (c->ctl_mr) a->dereg_mr(c->ctl_mr);
  free(c->ctl);
  if (c->pd) a->dealloc_pd(c->pd);
  if (c->ctx) a->close_device(c->ctx);
  free(c->peers);
  free(c);
  t->impl = NULL;
}

static const meld_transport_ops_t g_ibv_ops = {.name = "ibv", .connect = ibv_connect,
                                               .write_with_flag = ibv_write, .poll = ibv_poll,
                                               .close = ibv_close, .ready = ibv_ready};

/* Opens the chosen device and port (the part of create that can fail). */
static meld_result_t ibv_open(ibv_t *c, int local_index, const char *gpu_bus_id) {
  const ibv_api_t *a = c->a;
  meld_transport_t *t = c->t;
  MELD_CHECK(choose_hca(a, local_index, gpu_bus_id, &c->hca));
  int ndev = 0;
  struct ibv_device **devs = a->get_device_list(&ndev);
  if (!devs)
    return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: ibv_get_device_list "
                      "failed: %s", strerror(errno));
  for (int d = 0; d < ndev && !c->ctx; d++)
    if (strcmp(a->get_device_name(devs[d]), c->hca.name) == 0) c->ctx = a->open_device(devs[d]);
  a->free_device_list(devs);
  if (!c->ctx)
    return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: rank %d: no device %s "
                      "could be opened (%d devices; ibv_devices lists their names for "
                      "MELD_IB_HCA)", t->rank, c->hca.name, ndev);
  memset(&c->port, 0, sizeof c->port);
  if (a->query_port(c->ctx, (uint8_t)c->hca.port, &c->port) != 0)
    return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: rank %d: %s has no port %d "
                      "(MELD_IB_HCA=name:port)", t->rank, c->hca.name, c->hca.port);
  if (c->port.state != IBV_PORT_ACTIVE)
    return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: rank %d: %s port %d is not "
                      "active (state %d: the link, or on InfiniBand the subnet manager; "
                      "ibstat shows it)", t->rank, c->hca.name, c->hca.port, (int)c->port.state);
  c->wr_max = c->port.max_msg_sz > 0 && c->port.max_msg_sz < IBV_WR_MAX ? c->port.max_msg_sz
                                                                        : IBV_WR_MAX;
  MELD_CHECK(choose_gid(c));
  /* Path settings. The local ACK timeout: 18 (1.07 s a try, x 8 tries before a peer counts as
   * gone) rides out congestion and PFC pauses of a large fabric, where 14 (67 ms) gives
   * spurious "retry exceeded" failures. TC: RoCE v2's DSCP << 2 (lossless RoCE needs the
   * DSCP its switches map to the PFC priority) or the IB GRH traffic class; SL: the IB
   * service level (QoS) or, on RoCE, the VLAN priority. */
  static const struct {
    const char *name;
    int64_t lo, hi, def;
  } knob[] = {{"MELD_IB_TIMEOUT", 1, 31, 18}, {"MELD_IB_TC", 0, 255, 0}, {"MELD_IB_SL", 0, 15, 0}};
  int64_t val[3];
  for (int i = 0; i < 3; i++) {
    const char *e = getenv(knob[i].name);
    val[i] = knob[i].def;
    if (e && *e && meld_parse_int64(e, knob[i].lo, knob[i].hi, &val[i]) != 0)
      return meld_error(MELD_ERR_INVALID_ARG, "%s=%s: give an integer %lld..%lld", knob[i].name,
                        e, (long long)knob[i].lo, (long long)knob[i].hi);
  }
  c->ack_timeout = (uint8_t)val[0], c->tclass = (uint8_t)val[1], c->sl = (uint8_t)val[2];
  if (!(c->pd = a->alloc_pd(c->ctx)))
    return meld_error(MELD_ERR_SYSTEM, "meld ibverbs transport: rank %d: cannot allocate a "
                      "protection domain on %s: %s", t->rank, c->hca.name, strerror(errno));
  return MELD_OK;
}

meld_result_t meld_transport_ibv_create(int rank, int nranks, int node, int local_index,
                                        const char *gpu_bus_id, int64_t timeout_ms,
                                        meld_transport_t **out) {
  if (out) *out = NULL;
  const ibv_api_t *a = api();
  if (!a) return meld_error(MELD_ERR_UNSUPPORTED, "meld ibverbs transport: %s", g_api_err);
  meld_transport_t *t = NULL;
  MELD_CHECK(meld_transport_new(&g_ibv_ops, NULL, rank, nranks, node, timeout_ms, &t));
  ibv_t *c = calloc(1, sizeof *c);
  ipeer_t *peers = calloc((size_t)nranks, sizeof *peers);
  if (!c || !peers) {
    free(c), free(peers);
    meld_transport_close(t, 0);
    return meld_error(MELD_ERR_OUT_OF_MEMORY, "meld ibverbs transport: out of host memory");
  }
  c->t = t;
  c->a = a;
  c->peers = peers;
  c->gid_index = -1;
  t->impl = c;
  meld_result_t rc = ibv_open(c, local_index, gpu_bus_id);
  if (rc != MELD_OK) {
    meld_transport_close(t, 0); /* ibv_close frees what was opened */
    return rc;
  }
  *out = t;
  return MELD_OK;
}

#endif /* MELD_HAVE_VERBS */
