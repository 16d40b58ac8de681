/*
 * meld.h — the one public header of meld: GPU-driven fused multi-GPU kernels for Hopper.
 *
 * Pure C (C11), usable from C++. Every function returns a meld_result_t; on failure a
 * sentence describing the cause is available from meld_last_error() on the same thread.
 * The library never calls exit() or abort().
 *
 * Collective calls (marked "collective") must be made by every rank of the communicator,
 * in the same order, with matching arguments.
 */
#ifndef MELD_H
#define MELD_H

#include <stddef.h>
#include <stdint.h>
#include <cuda_runtime_api.h>

#ifdef __cplusplus
extern "C" {
#endif

#define MELD_VERSION_MAJOR 0
#define MELD_VERSION_MINOR 1
#define MELD_VERSION_PATCH 0
/* One integer: major * 10000 + minor * 100 + patch. */
#define MELD_VERSION_CODE (MELD_VERSION_MAJOR * 10000 + MELD_VERSION_MINOR * 100 + MELD_VERSION_PATCH)

/* ---------------------------------------------------------------------------------------- */
/* Results and errors                                                                       */
/* ---------------------------------------------------------------------------------------- */

typedef enum {
  MELD_OK = 0,
  MELD_ERR_INVALID_ARG = 1,   /* a bad argument: NULL pointer, bad size, misalignment, ...  */
  MELD_ERR_CUDA = 2,          /* a CUDA runtime/driver call failed (or no usable GPU)       */
  MELD_ERR_SYSTEM = 3,        /* an operating-system call failed (socket, thread, memory)   */
  MELD_ERR_TIMEOUT = 4,       /* a wait passed its deadline (bootstrap or device protocol)  */
  MELD_ERR_ABORTED = 5,       /* the communicator was aborted (by a peer, or the user)      */
  MELD_ERR_UNSUPPORTED = 6,   /* valid, but not supported (yet) on this configuration       */
  MELD_ERR_OUT_OF_MEMORY = 7, /* device or host allocation failed, or workspace too small   */
  MELD_ERR_INTERNAL = 8,      /* a bug in meld: please report it with meld_last_error()     */
  MELD_NUM_RESULTS
} meld_result_t;

/* The short name of a result code ("MELD_ERR_TIMEOUT: timed out"). Never NULL. */
const char *meld_strerror(meld_result_t result);

/* The calling thread's last detailed error message, e.g.
 * "meld_comm_init: rank 5 >= nranks 4". Empty string if no error occurred on this thread.
 * The pointer stays valid until the thread's next meld call. Never NULL. */
const char *meld_last_error(void);

/* The library's version as MELD_VERSION_CODE of the build it was compiled from. */
int meld_version(void);

/* ---------------------------------------------------------------------------------------- */
/* Configuration                                                                            */
/* ---------------------------------------------------------------------------------------- */

#define MELD_CONFIG_VERSION 1

/* Configuration of a communicator. Initialize with MELD_CONFIG_INIT, then set fields.
 * A field left at its "unset" value (0 or -1 as noted, NULL for strings) takes the value of
 * its MELD_* environment variable if set, else the documented default. An explicitly set
 * field wins over the environment. Unknown MELD_* variables are warned about at init. */
typedef struct {
  size_t size;              /* sizeof(meld_config_t): set by MELD_CONFIG_INIT              */
  unsigned int version;     /* MELD_CONFIG_VERSION: set by MELD_CONFIG_INIT                */
  size_t workspace_bytes;   /* MELD_WORKSPACE_BYTES: symmetric staging per rank; 0 = unset,
                               default 64 MiB. Suffixes K, M, G accepted in the variable.   */
  int64_t timeout_ms;       /* MELD_TIMEOUT_MS: deadline of every device-side wait;
                               0 = unset, default 300000 (5 minutes)                       */
  int64_t bootstrap_timeout_ms; /* MELD_BOOTSTRAP_TIMEOUT_MS: deadline of each bootstrap
                               step; 0 = unset, default 120000                             */
  int port;                 /* MELD_PORT: TCP port of the bootstrap root; 0 = unset:
                               meld_get_unique_id picks a free one, meld_comm_init_env uses
                               MASTER_PORT + 1 (MASTER_PORT itself is torch's store)       */
  int node_id;              /* MELD_NODE_ID: override the node this rank belongs to (ranks
                               with equal ids form a node; lets one host emulate several
                               nodes); -1 = unset: ranks sharing a host form a node       */
  const char *trace_path;   /* MELD_TRACE: write a Chrome/Perfetto trace here; NULL = off  */
} meld_config_t;

#define MELD_CONFIG_INIT \
  { sizeof(meld_config_t), MELD_CONFIG_VERSION, 0, 0, 0, 0, -1, NULL }

/* ---------------------------------------------------------------------------------------- */
/* Communicator                                                                             */
/* ---------------------------------------------------------------------------------------- */

typedef struct meld_comm *meld_comm_t;

#define MELD_UNIQUE_ID_BYTES 128
/* Identifies one job's rendezvous: the root's address and port, and a random job key.
 * Created by meld_get_unique_id on one rank and sent to the others by the application. */
typedef struct {
  char internal[MELD_UNIQUE_ID_BYTES];
} meld_unique_id;

/* Creates a unique id for a new communicator. Call on ONE process (normally the one that
 * will be rank 0); it opens the listening socket of the rendezvous (port from config/env
 * MELD_PORT, else a free one) on this host's address (MELD_SOCKET_ADDR overrides).
 * Fails with MELD_ERR_SYSTEM if no socket can be opened, MELD_ERR_INVALID_ARG on NULL. */
meld_result_t meld_get_unique_id(meld_unique_id *id);

/* Creates a communicator of nranks ranks; this process is `rank`. Collective.
 * Uses the calling thread's current CUDA device. Ranks may be processes or threads of one
 * process (one call per thread, each with its own device set; the threads' streams must not
 * be the legacy default stream, and a rank's thread must not wait for the whole device, which
 * would wait for the peers' kernels). Rendezvous over TCP with the root named
 * in `id`, exchanges topology, allocates the symmetric workspace and maps same-node peers'.
 * When the ranks span several nodes it also builds the inter-node path: host-pinned staging
 * (2 x nranks x 4 x MELD_NET_CHUNK_BYTES each way), the proxy's command ring, TCP connections to
 * every rank of another node and the proxy thread; and where nodes have several ranks, the
 * hierarchy's two internal comms (MELD_NET_HIER).
 * config may be NULL (all defaults / environment).
 * Fails: MELD_ERR_INVALID_ARG (NULL comm, nranks <= 0, rank out of range, bad config),
 * MELD_ERR_TIMEOUT (a rank did not arrive within bootstrap_timeout_ms), MELD_ERR_CUDA (no
 * device, no peer access between GPUs of one node), MELD_ERR_OUT_OF_MEMORY, MELD_ERR_SYSTEM.
 * On failure *comm is NULL and nothing stays allocated. */
meld_result_t meld_comm_init(meld_comm_t *comm, int nranks, meld_unique_id id, int rank,
                             const meld_config_t *config);

/* Like meld_comm_init, with the rank layout read from the launcher's environment:
 * torchrun (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE, LOCAL_RANK, LOCAL_WORLD_SIZE),
 * Open MPI (OMPI_COMM_WORLD_RANK/SIZE/LOCAL_RANK/LOCAL_SIZE, with MELD_MASTER_ADDR and
 * MELD_PORT) or Slurm (SLURM_PROCID/NTASKS/LOCALID, with MELD_MASTER_ADDR and MELD_PORT).
 * meld's port defaults to MASTER_PORT + 1. The job key is derived from the job's variables
 * (plus MELD_JOB_KEY if set), so processes of another job cannot join.
 * Fails as meld_comm_init, and MELD_ERR_INVALID_ARG if the variables are missing or bad. */
meld_result_t meld_comm_init_env(meld_comm_t *comm, const meld_config_t *config);

#define MELD_SPLIT_NOCOLOR (-1)

/* Splits comm into disjoint communicators (e.g. tensor-parallel groups within nodes, data-
 * parallel groups across them): the ranks that pass the same color >= 0 form one, ranked by
 * key (ties: by rank in comm). Collective over comm: EVERY rank calls it, also those that pass
 * color MELD_SPLIT_NOCOLOR (they get *child = NULL). Each child is a full communicator (its own
 * workspace, pad and, when its ranks span nodes, inter-node path) on the calling thread's
 * current CUDA device, independent of comm (destroy each; either may go first). config NULL:
 * comm's settings. A bad argument or a failure on any rank fails every rank with the same
 * code, and then no rank keeps a child. Fails: MELD_ERR_INVALID_ARG (NULL comm or child, color
 * < MELD_SPLIT_NOCOLOR, bad config), and as meld_comm_init. */
meld_result_t meld_comm_split(meld_comm_t comm, int color, int key, const meld_config_t *config,
                              meld_comm_t *child);

/* Destroys a communicator: waits for its pending work on the device, unmaps peers, frees
 * the workspace. Not collective, but every rank should destroy its comm. NULL is a no-op. */
meld_result_t meld_comm_destroy(meld_comm_t comm);

/* Aborts a communicator: raises its abort flag locally and at every peer, so that every
 * device-side wait of every rank returns with MELD_ERR_ABORTED. Sticky: the comm must then
 * be destroyed. Safe to call from any thread. */
meld_result_t meld_comm_abort(meld_comm_t comm);

/* Returns MELD_OK, or the asynchronous error of the comm (MELD_ERR_TIMEOUT /
 * MELD_ERR_ABORTED from the device protocol; MELD_ERR_INVALID_ARG where a kernel found its input
 * unusable, e.g. a MoE capacity overflow; across nodes also the proxy's error, e.g. a peer whose
 * connection closed), with the error record as meld_last_error(). */
meld_result_t meld_comm_check(meld_comm_t comm);

typedef struct {
  int rank, nranks;          /* this rank and the communicator size                       */
  int local_rank, local_size;/* rank within its node, and the number of ranks of that node  */
  int node, nnodes;          /* the node index of this rank (0..nnodes-1), number of nodes  */
  int device;                /* CUDA device ordinal used by this rank (in this process)     */
  int sm_count;              /* multiprocessors of that device this rank plans with: all, or
                                its share when ranks that are threads of this process share
                                the GPU (their kernels run at once)                         */
  size_t workspace_bytes;    /* size of the symmetric workspace                              */
  char net_transport[8];     /* how bytes cross nodes: "ibv" (RDMA), "tcp", or "" (one node)  */
} meld_comm_info_t;

/* Fills *info. Fails with MELD_ERR_INVALID_ARG on NULL. */
meld_result_t meld_comm_info(meld_comm_t comm, meld_comm_info_t *info);

/* Allocates `bytes` of symmetric device memory: every rank allocates the same size and maps
 * its same-node peers' buffers, so kernels may read/write them directly (zero-copy use by
 * ops). Collective. *ptr is this rank's buffer, 256-byte aligned.
 * Fails: MELD_ERR_INVALID_ARG (NULL, bytes == 0, sizes differ between ranks),
 * MELD_ERR_OUT_OF_MEMORY, MELD_ERR_CUDA, MELD_ERR_TIMEOUT. */
meld_result_t meld_mem_alloc(meld_comm_t comm, size_t bytes, void **ptr);

/* Frees a buffer of meld_mem_alloc. Collective: every rank frees the same buffer (NULL on every
 * rank is a no-op). Fails with MELD_ERR_INVALID_ARG on every rank, freeing nothing, if ptr was
 * not returned by meld_mem_alloc on this comm on some rank, or ranks name different buffers. */
meld_result_t meld_mem_free(meld_comm_t comm, void *ptr);

/* Registers the caller's ordinary device memory [ptr, ptr + bytes) as symmetric: every rank
 * registers a range of the same size, and its same-node peers map it, so ops treat it like
 * meld_mem_alloc memory (zero copy, with the same offset inside the registered range on every
 * rank). Collective. The memory stays the caller's and must stay allocated until
 * meld_mem_deregister (or meld_comm_destroy). It may be any part of one cudaMalloc allocation
 * (e.g. a tensor of a caching allocator); ranges in one allocation share one mapping. Registration exchanges
 * handles over the bootstrap (host work, not capturable): do it once, outside the step.
 * Fails: MELD_ERR_INVALID_ARG (NULL, bytes == 0, sizes differ between ranks, not device memory
 * of this rank's GPU, overlaps memory already symmetric on this comm, runs past its
 * allocation), MELD_ERR_UNSUPPORTED (memory CUDA IPC cannot share: cudaMallocAsync pools,
 * cuMemCreate, expandable segments), MELD_ERR_CUDA, MELD_ERR_TIMEOUT; every rank fails alike. */
meld_result_t meld_mem_register(meld_comm_t comm, void *ptr, size_t bytes);

/* Ends a registration (ptr as registered). Collective: every rank ends the same range (NULL on
 * every rank is a no-op). Fails with MELD_ERR_INVALID_ARG on every rank, ending nothing, if ptr
 * is not the start of a range registered on this comm on some rank, or ranks name different
 * ranges. */
meld_result_t meld_mem_deregister(meld_comm_t comm, void *ptr);

/* The address at which this rank can access peer `peer`'s buffer that corresponds to its
 * own symmetric `ptr` (from meld_mem_alloc, or registered by meld_mem_register), or NULL in
 * *peer_ptr if that peer is on another node. Fails with MELD_ERR_INVALID_ARG if ptr is not the
 * start of such a buffer or peer is out of range. */
meld_result_t meld_mem_peer_ptr(meld_comm_t comm, const void *ptr, int peer, void **peer_ptr);

/* ---------------------------------------------------------------------------------------- */
/* GEMM alone (single GPU)                                                                   */
/* ---------------------------------------------------------------------------------------- */

typedef enum {
  MELD_B_NK = 0, /* B stored [N, K] row-major (nn.Linear weight layout): C = A * B^T */
  MELD_B_KN = 1  /* B stored [K, N] row-major:                            C = A * B   */
} meld_b_layout_t;

/* C[M,N] = A[M,K] x B, all bf16 (fp32 accumulation), row-major with leading dimensions
 * in elements. Needs: lda, ldb, ldc >= the row length; every row start 16-byte aligned
 * (leading dimensions multiple of 8, base pointers 16-byte aligned); K >= 1. */
typedef struct {
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  meld_b_layout_t b_layout;
  void *c;
  int64_t ldc;
  int64_t m, n, k;
  int sm_count; /* multiprocessors to use; 0 = all of the device */
} meld_gemm_args_t;

/* Enqueues C = A x B on `stream` (meld's persistent Hopper GEMM engine; sm_90 only).
 * Returns at once. Reproducibility: where the plan cuts a tile's K range into three or more
 * pieces (split-K / stream-K, on shapes with few tiles per SM), the pieces' fp32 partials are
 * summed in the order they finish, so the last bits of C may differ between runs; other plans
 * give bitwise equal results run to run. MELD_GEMM_DETERMINISTIC=1 (read once, at the first
 * call) keeps every plan reproducible: split-K of at most two pieces (two partials add the same
 * in either order), no stream-K; slower than the default only on shapes of few tiles.
 * Fails with MELD_ERR_INVALID_ARG (NULL, bad dims, misaligned pointers or leading dimensions),
 * MELD_ERR_UNSUPPORTED (not a Hopper GPU), MELD_ERR_CUDA. */
meld_result_t meld_gemm(const meld_gemm_args_t *args, cudaStream_t stream);

/* FP8 scaling (the .scaling field of the fp8 ops' arguments): per tensor (scale_a and scale_b
 * one fp32 each) or per row, each operand on its own. MELD_FP8_ROWWISE is torch._scaled_mm's
 * rowwise mode (scale_a [M, 1], scale_b [1, N]): C[i,j] = scale_a[i] scale_b[j] (A B^T)[i,j].
 * A NULL scale is 1 whatever the mode. */
typedef enum {
  MELD_FP8_PER_TENSOR = 0, /* scale_a: one fp32; scale_b: one fp32                        */
  MELD_FP8_ROWWISE_A = 1,  /* scale_a: one fp32 per row of A (M values); scale_b: one fp32 */
  MELD_FP8_ROWWISE_B = 2,  /* scale_a: one fp32; scale_b: one per row of B (N values: C's columns) */
  MELD_FP8_ROWWISE = 3     /* both per row                                                 */
} meld_fp8_scaling_t;

/* FP8 GEMM: C[M,N] (bf16) = (*scale_a) (*scale_b) A[M,K] x B^T, A [M,K] and B [N,K] (the
 * nn.Linear layout; the tensor cores read 8-bit operands K-major only) in OCP fp8 e4m3 (max
 * 448, no infinities; torch.float8_e4m3fn), row-major, leading dimensions in elements (=
 * bytes). Scales as torch._scaled_mm's: device pointers to one fp32 each (per tensor) or, by
 * .scaling, one per row (meld_fp8_scaling_t), read by the kernel (a CUDA graph replays whatever
 * they hold then); NULL = 1. Accumulation in fp32 in
 * the tensor cores' FP8 mode, as cuBLASLt's CUBLASLT_MATMUL_DESC_FAST_ACCUM (torch._scaled_mm
 * with use_fast_accum=True): no periodic promotion. Needs: k a multiple of 16; lda, ldb >= k and
 * multiples of 16; ldc >= n, a multiple of 8; a, b, c 16-byte aligned. Same engine, plans and
 * reproducibility as meld_gemm (a k-block is 128 fp8 elements), its small-M kernel included.
 * Fails with MELD_ERR_INVALID_ARG (with the reason), MELD_ERR_UNSUPPORTED (not Hopper),
 * MELD_ERR_CUDA. */
typedef struct {
  const void *a;          /* fp8 e4m3 [M, K] */
  int64_t lda;
  const void *b;          /* fp8 e4m3 [N, K] */
  int64_t ldb;
  const float *scale_a;   /* device fp32: one, or M (MELD_FP8_ROWWISE_A); NULL = 1 */
  const float *scale_b;   /* device fp32: one, or N (MELD_FP8_ROWWISE_B); NULL = 1 */
  meld_fp8_scaling_t scaling; /* MELD_FP8_PER_TENSOR (0) unless rowwise */
  void *c;                /* bf16 [M, N] */
  int64_t ldc;
  int64_t m, n, k;
  int sm_count;           /* multiprocessors to use; 0 = all of the device */
} meld_gemm_fp8_args_t;

meld_result_t meld_gemm_fp8(const meld_gemm_fp8_args_t *args, cudaStream_t stream);

/* FP8 quantization for the fp8 ops: out (e4m3) = x (448 / amax) rounded to the nearest e4m3
 * (saturating at +-448), scale = amax / 448 (1 where amax is 0; below amax = 448 / FLT_MAX,
 * where 448 / amax overflows, x FLT_MAX and 1 / FLT_MAX instead) of each row (rowwise = 1: rows
 * values, the operand's MELD_FP8_ROWWISE_* scale) or of the whole matrix (rowwise = 0: one
 * value, a per-tensor scale), written to device memory (stream-ordered: a following fp8 op on the
 * stream reads it). x finite (NaN and inf are not defined). Row-major, leading dimensions in
 * elements. Fails with MELD_ERR_INVALID_ARG (NULL, bad sizes, ldx / ldo < cols, misaligned x or
 * scale), MELD_ERR_CUDA. */
typedef struct {
  const void *x;    /* bf16 [rows, cols], ld ldx                                              */
  int64_t ldx;
  void *out;        /* e4m3 [rows, cols], ld ldo                                              */
  int64_t ldo;
  float *scale;     /* device fp32: rows values (rowwise) or 1                                */
  int64_t rows, cols;
  int rowwise;      /* 1: a scale per row; 0: one for the matrix                              */
} meld_fp8_quantize_args_t;

meld_result_t meld_fp8_quantize(const meld_fp8_quantize_args_t *args, cudaStream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Attention alone (single GPU): the compute core of the ring attention                     */
/* ---------------------------------------------------------------------------------------- */

/* Flash-attention forward, bf16 in and out, fp32 softmax and accumulation:
 *   O[b, i, h, :] = sum_j softmax_j(scale * Q[b, i, h, :] . K[b, j, h / G, :]) V[b, j, h / G, :]
 * with G = heads / heads_kv (grouped-query attention; 1 = multi-head). Layout [batch, seq,
 * heads, head_dim] (as flash-attention's), head_dim contiguous; a token's row may be wider than
 * heads * head_dim (packed QKV): stride_* is the distance between tokens in elements (0 = the
 * dense heads * head_dim; a multiple of 8), batches lie seq * stride_* apart.
 * Causal masks compare positions: query i sits at q_pos0 + i, key j at kv_pos0 + j, and key j
 * is visible to query i iff kv_pos0 + j <= q_pos0 + i (both 0: the top-left square mask of
 * torch's is_causal when seq_q == seq_kv; for a K/V block of another part of the sequence, as a
 * ring step sees it, give each part's first position). A query with no visible key gets O = 0
 * and LSE = -inf.
 * lse (optional, may be NULL): fp32 [batch, heads, seq_q], natural log of the softmax
 * denominator in the scaled domain (lse = log sum_j exp(scale * q . k_j)), for merging partial
 * results. */
typedef struct {
  const void *q;     /* bf16 [batch, seq_q, heads, head_dim]                                */
  const void *k;     /* bf16 [batch, seq_kv, heads_kv, head_dim]                            */
  const void *v;     /* bf16 [batch, seq_kv, heads_kv, head_dim]                            */
  void *o;           /* bf16 [batch, seq_q, heads, head_dim]                                */
  float *lse;        /* fp32 [batch, heads, seq_q], or NULL                                  */
  int64_t stride_q, stride_k, stride_v, stride_o; /* elements between tokens; 0 = dense      */
  int64_t batch, seq_q, seq_kv, heads, heads_kv, head_dim;
  int causal;        /* 0 or 1                                                              */
  float scale;       /* softmax scale; 0 = 1 / sqrt(head_dim)                                */
  int64_t q_pos0, kv_pos0; /* positions of the first query / key (causal masks only)          */
  int zigzag;        /* meld_ring_attention only (0 for meld_attention): 1 = each rank's part is
                        two halves, chunks r and 2P - 1 - r of the sequence cut in 2P pieces (the
                        causal load balance); 0 = rank r holds piece r of P                      */
} meld_attention_args_t;

/* Enqueues the attention forward on `stream` and returns at once (one kernel; sm_90 only).
 * head_dim 64 or 128. Pointers 16-byte aligned (lse 4-byte). CUDA-graph capturable.
 * Fails: MELD_ERR_INVALID_ARG (NULL, bad dims, heads not a multiple of heads_kv, misalignment;
 * the sentence names the argument), MELD_ERR_UNSUPPORTED (head_dim other than 64 or 128, not a
 * Hopper GPU), MELD_ERR_CUDA. */
meld_result_t meld_attention(const meld_attention_args_t *args, cudaStream_t stream);

/* Ring attention (forward) over the ranks of comm: the sequence is split in P parts, rank r
 * holding part r of Q, K and V (args as for meld_attention with this rank's part: seq_q ==
 * seq_kv = the part's length; q_pos0 = kv_pos0 = 0, the ring sets the positions: rank r's part
 * starts at r * seq_q; with zigzag = 1 it is pieces r and 2P - 1 - r of the sequence cut in 2P,
 * each of seq_q / 2 tokens, which gives every rank the same causal work), and rank r gets O and
 * LSE of its queries against the keys of every part (causal: those at earlier positions).
 * Collective: every rank calls it with the same shapes. Token strides as for meld_attention (a
 * packed QKV works: the fused path reads K and V where they are).
 * ONE kernel per launch on each rank (fused): comm CTAs push this rank's K and V, chunk by chunk,
 * into every peer's staging (the comm's workspace) while the attention runs on the own part,
 * and each peer's blocks are consumed as their chunks land (a wait with the comm's deadline).
 * The heads go in as many launches as the staging needs (2 x (P - 1) x batch x seq x head_dim x 2
 * bytes a K/V head: MELD_WORKSPACE_BYTES); where not even one head fits, K and V are all-gathered
 * first (into the comm's scratch, grown outside capture), then one kernel runs (also
 * MELD_RING_ATTN=unfused). CUDA-graph capturable (the fused path allocates nothing; the gathered
 * one after a first call outside capture). With one rank it is meld_attention. Ranks on several
 * nodes take the gathered path (the all-gather's inter-node path, see the collectives).
 * Fails as meld_attention does, and MELD_ERR_INVALID_ARG (NULL comm, non-zero positions,
 * seq_q != seq_kv, zigzag with a part not a multiple of 256 tokens), MELD_ERR_UNSUPPORTED
 * (the gathered path's scratch to grow during capture), and,
 * asynchronously (meld_comm_check), MELD_ERR_TIMEOUT / MELD_ERR_ABORTED (a peer did not take
 * part within the comm's timeout, or called with other shapes). */
meld_result_t meld_ring_attention(meld_comm_t comm, const meld_attention_args_t *args, cudaStream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Collectives alone (GPU-driven: NVLink within a node; several nodes: see below)           */
/* ---------------------------------------------------------------------------------------- */

/* Element types of the collectives. Sums accumulate in fp32 registers (bf16 partials travel
 * as bf16 and are rounded once, when the sum is written). */
typedef enum { MELD_BF16 = 0, MELD_FP32 = 1 } meld_dtype_t;

/* Common to the collectives below:
 * - Collective and stream-ordered like NCCL: every rank calls the same collectives in the
 *   same order with matching counts; each enqueues one kernel on `stream` and returns at
 *   once. Calls of one comm must be ordered (one stream, or streams ordered by events):
 *   they share the comm's workspace. CUDA-graph capture is supported (replays are correct:
 *   the call counter lives on the device).
 * - send/recv are ordinary device memory of this rank (cudaMalloc), aligned to the element
 *   size; 16-byte alignment is the fast path (other alignments take a narrower copy path).
 *   Data are staged through the comm's symmetric workspace in rings of slots with device-
 *   side credits, so any size works with a bounded workspace (see MELD_CHUNK_BYTES,
 *   MELD_COMM_CTAS). The kernel is launched cooperatively with a few CTAs.
 * - Zero copy: where the buffers that PEERS access come from meld_mem_alloc or are
 *   registered with meld_mem_register (all-gather and all-to-all: recv; reduce-scatter: send;
 *   all-reduce: send, and recv too for the two-shot form), calls above the small-message size
 *   skip the staging: each rank stores straight into the peers' recv or reads the peers' send
 *   (one pass per byte; 1.1-1.4x the staged bandwidth with 16 CTAs on 2 x H200). Every rank
 *   must then pass such buffers at the same offset of the same allocation or registered range
 *   (a rank passing ordinary memory while another passes a symmetric buffer fails the call on
 *   all ranks: MELD_ERR_ABORTED, "arguments differ");
 *   blocks must be 16-byte multiples (else the staged path). MELD_COLL_ZC=0 turns it off.
 * - Copy engines (opt-in, MELD_COLL_CE=1): an all-gather or all-to-all whose SEND is symmetric
 *   (meld_mem_alloc or registered; an in-place all-gather's send is its block of recv) moves
 *   its blocks with the GPU's copy engines instead of SMs, from MELD_COLL_CE_MIN_BYTES per peer
 *   (default 4 MiB): every rank pulls the peers' blocks (cudaMemcpyAsync on streams of the
 *   comm, forked from and joined back to the caller's stream: CUDA-graph capturable), between
 *   two one-thread kernels that make the handshakes. No SM is used for the data.
 * - Small-message and zero-copy kernels are launched with programmatic dependent launch: the
 *   launch overlaps the work before it on the stream, and the kernel waits on the device for
 *   that work (its grid and memory) before touching any buffer, so stream order holds as
 *   usual (~0.3 us less per call in CUDA graphs). MELD_COLL_PDL=0 launches them ordinarily.
 *   Not where ranks of one process share a GPU (MELD_SHARE_GPU): their kernels run at once,
 *   and a rank's early-launched next kernel could hold SMs a peer's current kernel needs.
 * - Small messages (up to ~1 MiB per peer) take the LL kernel, with a lean instantiation
 *   wherever every block is a multiple of 8 bytes (any number of ranks; 4 KB at 4 ranks as
 *   threads on one H200: ~4.5 us a call in CUDA graphs, 6.2-6.7 with the generic kernel).
 *   MELD_COLL_LL_LEAN=0 turns it off (2: the any-P instantiation at two ranks too).
 * - Counts are in elements. A count of 0 is a no-op success (nothing is launched); it must
 *   then be 0 on every rank.
 * - One rank: every op is a copy of the rank's one block, enqueued as one device-to-device
 *   cudaMemcpyAsync (nothing when send is recv's block), not a kernel.
 * - Several nodes (a first, functional version): every collective, all_to_allv included, works
 *   on a comm whose ranks span nodes (hosts, or MELD_NODE_ID groups). Each call is ONE kernel:
 *   every pair of ranks exchanges a stream of chunks of at most MELD_NET_CHUNK_BYTES (default
 *   256 KiB) through 4 slots per pair with credits: same-node peers through the workspace,
 *   remote peers through the comm's proxy (the kernel writes commands into a ring in
 *   host-pinned memory; the proxy thread moves the bytes over TCP into the peer's pinned
 *   staging and raises a flag there that the peer's kernel polls). Sums as above (rank order,
 *   fp32). The bytes between nodes pass through host memory (no RDMA yet): a correctness path,
 *   not a fast one; with same-node peers the workspace must hold nranks x 4 x
 *   MELD_NET_CHUNK_BYTES. Where several nodes have L > 1 ranks each, numbered node by node,
 *   all_reduce (count a multiple of L), reduce_scatter and all_gather are hierarchical (within
 *   the node, then across nodes on two internal comms made at init: L times fewer bytes between
 *   nodes; three kernels a call; MELD_NET_HIER=0 turns it off): their sums go within the node
 *   in rank order, then over the nodes, each step rounded to the dtype. Ranks of other nodes
 *   check each other's calls too (each pair's first chunk carries the sender's argument hash:
 *   different ops or sizes fail with MELD_ERR_ABORTED, "arguments differ"). The fused GEMM ops take
 *   their unfused paths across nodes; the MoE ops: see meld_moe_dispatch_gemm.
 * - send and recv must not overlap, except where an op says so.
 * - Fails (before launching anything): MELD_ERR_INVALID_ARG (NULL comm, NULL buffer with a
 *   non-zero count, unknown dtype, pointer not aligned to the element size, sizes that
 *   overflow), MELD_ERR_UNSUPPORTED (across nodes: more than 2^20 - 2 chunks between two
 *   ranks in one call; returned identically on every rank, so none is left waiting, except
 *   for all_to_allv, where only the pair's two ranks know its counts),
 *   MELD_ERR_OUT_OF_MEMORY (the workspace cannot hold the plan's slots; the message names
 *   the workspace size to configure), MELD_ERR_CUDA (the launch failed). Errors on the device
 *   (a peer that never arrives: MELD_ERR_TIMEOUT after timeout_ms; an abort:
 *   MELD_ERR_ABORTED) are reported by meld_comm_check() and by later calls. */

/* AllGather: recv[r * count + i] = send_of_rank_r[i]. send holds `count` elements, recv
 * count * nranks. In place allowed when send == recv + rank * count (NCCL convention). */
meld_result_t meld_all_gather(meld_comm_t comm, const void *send, void *recv, size_t count,
                              meld_dtype_t dtype, cudaStream_t stream);

/* ReduceScatter (sum): recv[i] = sum over ranks r of send_of_rank_r[rank * count + i].
 * send holds count * nranks elements, recv `count`. In place allowed when
 * recv == send + rank * count. */
meld_result_t meld_reduce_scatter(meld_comm_t comm, const void *send, void *recv, size_t count,
                                  meld_dtype_t dtype, cudaStream_t stream);

/* AllReduce (sum): recv[i] = sum over ranks of send[i], `count` elements each. In place
 * (send == recv) allowed. Small buffers take a one-shot schedule (every rank sums all
 * contributions), large ones reduce-scatter + all-gather (threshold in the plan). */
meld_result_t meld_all_reduce(meld_comm_t comm, const void *send, void *recv, size_t count,
                              meld_dtype_t dtype, cudaStream_t stream);

/* All-to-all: block q of send (elements [q * count, (q+1) * count)) goes to rank q, and lands
 * in block r of q's recv when r is the sender. send and recv hold count * nranks elements. */
meld_result_t meld_all_to_all(meld_comm_t comm, const void *send, void *recv,
                              size_t count_per_peer, meld_dtype_t dtype, cudaStream_t stream);

/* All-to-all with variable splits: send_counts[q] elements from send + send_offsets[q] go to
 * rank q, and recv_counts[r] elements from rank r land at recv + recv_offsets[r]. The four
 * arrays are HOST arrays of nranks entries, in elements, read before the call returns.
 * send_counts[q] on rank r must equal recv_counts[r] on rank q (a mismatch is not detected
 * on the host: the device waits end in MELD_ERR_TIMEOUT). Always launches (even when every
 * count of this rank is 0), since peers may exchange data in the same call. */
meld_result_t meld_all_to_allv(meld_comm_t comm, const void *send, const size_t *send_counts,
                               const size_t *send_offsets, void *recv, const size_t *recv_counts,
                               const size_t *recv_offsets, meld_dtype_t dtype,
                               cudaStream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Fused GEMM + ReduceScatter / AllReduce (row-parallel tensor parallelism)                  */
/* ---------------------------------------------------------------------------------------- */

/* How meld_gemm_rs / meld_gemm_ar run: chosen by the plan, or forced (tests, benchmarks). */
typedef enum {
  MELD_GEMM_RS_AUTO = 0,    /* fused where legal and the workspace holds the staging      */
  MELD_GEMM_RS_FUSED = 1,   /* one persistent kernel: GEMM, push of partial tiles, reduce  */
                            /* (with one rank: the same kernel, nothing to exchange)        */
  MELD_GEMM_RS_UNFUSED = 2  /* meld_gemm, then meld_reduce_scatter / meld_all_reduce       */
} meld_gemm_rs_algo_t;

/* Arguments of meld_gemm_rs and meld_gemm_ar. Each rank holds its K-slice: A [M, K] (lda)
 * and B [N, K] (MELD_B_NK, nn.Linear layout) or [K, N] (MELD_B_KN), bf16, where K is this
 * rank's K_loc; the partial products A x B are summed over ranks (in fp32, by the rank that
 * owns the rows; partials travel as bf16) and written as bf16 to C (ldc):
 *   meld_gemm_rs: rank r receives rows [r * R, min((r + 1) * R, M)) of the sum, R = ceil(M / P)
 *                 (the split of torch.chunk: the last ranks may get fewer rows, or none);
 *                 C holds those rows (meld_gemm_rs_rows gives their first row and count);
 *   meld_gemm_ar: every rank receives all M rows: C [M, N].
 * M, N, K and algo must be equal on every rank (checked on the device by the call's argument
 * handshake: a mismatch aborts the call on every rank, and meld_comm_check then returns
 * MELD_ERR_ABORTED with "the arguments differ between ranks"); pointers, leading dimensions
 * and b_layout are per rank. Alignment as meld_gemm: 16-byte aligned bases, leading
 * dimensions multiples of 8. */
typedef struct {
  const void *a;
  int64_t lda;
  const void *b;
  int64_t ldb;
  meld_b_layout_t b_layout;
  void *c;
  int64_t ldc;
  int64_t m, n, k;          /* M rows (all ranks' rows together), N, K = this rank's K_loc */
  meld_gemm_rs_algo_t algo; /* MELD_GEMM_RS_AUTO (0) unless forcing                        */
} meld_gemm_rs_args_t;

/* First row and row count of rank `rank` of meld_gemm_rs's output (see above).
 * Fails with MELD_ERR_INVALID_ARG on NULL outputs, m < 0, nranks < 1 or a bad rank. */
meld_result_t meld_gemm_rs_rows(int64_t m, int nranks, int rank, int64_t *first, int64_t *count);

/* GEMM + ReduceScatter. Collective and stream-ordered (enqueues on `stream`, returns at
 * once; CUDA-graph capture supported). Fused path: ONE cooperative persistent kernel in
 * which every CTA runs the GEMM in an order that computes the rows owned by the next ranks
 * first; each such tile is pushed as bf16 into its owner's workspace and flagged; the owner's
 * own tiles come last and their epilogue adds the arrived partials in fp32. Needs R a
 * multiple of 128, ranks of one node, and (P - 1) * R * roundup(N, 8) * 2 bytes + 4 KiB of
 * workspace (MELD_WORKSPACE_BYTES); otherwise AUTO takes the unfused path (meld_gemm into a
 * scratch buffer the library keeps per communicator, then meld_reduce_scatter), and FUSED fails
 * with MELD_ERR_UNSUPPORTED / MELD_ERR_OUT_OF_MEMORY naming the size. P = 1 is a plain GEMM.
 * Ranks on several nodes: AUTO takes the unfused path (its collective crosses nodes through the
 * collectives' inter-node path), FUSED fails with MELD_ERR_UNSUPPORTED.
 * Fails: MELD_ERR_INVALID_ARG (NULL, bad dims or alignment), MELD_ERR_UNSUPPORTED (FUSED across
 * nodes, not Hopper), MELD_ERR_OUT_OF_MEMORY, MELD_ERR_CUDA; device-side errors
 * (a missing rank: MELD_ERR_TIMEOUT; a mismatch or abort) come from meld_comm_check and
 * later calls. */
meld_result_t meld_gemm_rs(meld_comm_t comm, const meld_gemm_rs_args_t *args, cudaStream_t stream);

/* GEMM + AllReduce: as meld_gemm_rs, but every rank receives C [M, N]. Fused path: the rows
 * are owned in blocks of R' = roundup(ceil(M / P), 128); each owner reduces its tiles in the
 * epilogue (as above) and pushes the reduced bf16 tile into every peer's workspace, and each
 * rank copies the peers' reduced tiles into its C once its own GEMM is done. Workspace:
 * 2 * (P - 1) * R' * roundup(N, 8) * 2 bytes + 4 KiB. Unfused: meld_gemm into C, then
 * meld_all_reduce in place. Zero copy (the default where it applies; MELD_GEMM_AR_ZC=0 turns it
 * off, alike on every rank): with C from meld_mem_alloc or registered by meld_mem_register
 * (same offset on every rank, ldc == n, n % 8 == 0) the owners store their reduced tiles
 * straight into every rank's C: no result slots, no copy after the GEMM (5% faster sustained
 * at 8192 x 8192 x 8192 on 2 x H200); ranks that disagree fail the call with an argument
 * mismatch. Decode sizes (AUTO's unfused path with the small-M GEMM): opt-in
 * MELD_GEMM_AR_DECODE_FUSED=1 (alike on every rank) runs the GEMM and the all-reduce as ONE
 * kernel whose CTAs exchange their block of C as soon as it exists (up to half the workspace).
 * Fails as meld_gemm_rs. */
meld_result_t meld_gemm_ar(meld_comm_t comm, const meld_gemm_rs_args_t *args, cudaStream_t stream);

/* FP8 GEMM + ReduceScatter / AllReduce: as meld_gemm_rs / meld_gemm_ar with a [M, k] and b
 * [N, k] (nn.Linear layout only) in fp8 e4m3 and scales as meld_gemm_fp8's (per tensor, or
 * rowwise by .scaling: scale_a [M], scale_b [N], this rank's own): each
 * rank's product (*scale_a) (*scale_b) A_r x B_r^T in fp32, its partials sent in bf16 and summed
 * in fp32 by their owner, C bf16. Scales may differ per rank (each rank's own product is
 * scaled before the sum). Needs: k a multiple of 16; lda, ldb >= k and multiples of 16; ldc as
 * meld_gemm_rs. The one-kernel decode path (MELD_GEMM_AR_DECODE_FUSED) has no fp8 form: decode
 * sizes take the unfused path. Ranks that call the bf16 and fp8 forms together fail the call
 * with an argument mismatch. Fails as meld_gemm_rs / meld_gemm_ar. */
typedef struct {
  const void *a;            /* e4m3 [M, k], ld lda                                           */
  int64_t lda;
  const void *b;            /* e4m3 [N, k], ld ldb                                           */
  int64_t ldb;
  const float *scale_a;     /* device fp32: one, or M (MELD_FP8_ROWWISE_A); NULL = 1          */
  const float *scale_b;     /* device fp32: one, or N (MELD_FP8_ROWWISE_B); NULL = 1          */
  meld_fp8_scaling_t scaling; /* MELD_FP8_PER_TENSOR (0) unless rowwise                      */
  void *c;                  /* bf16: meld_gemm_rs_fp8 [rows, N] (meld_gemm_rs_rows), meld_gemm_ar_fp8 [M, N] */
  int64_t ldc;
  int64_t m, n, k;
  meld_gemm_rs_algo_t algo; /* MELD_GEMM_RS_AUTO (0) unless forcing                          */
} meld_gemm_rs_fp8_args_t;

meld_result_t meld_gemm_rs_fp8(meld_comm_t comm, const meld_gemm_rs_fp8_args_t *args, cudaStream_t stream);
meld_result_t meld_gemm_ar_fp8(meld_comm_t comm, const meld_gemm_rs_fp8_args_t *args, cudaStream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* Fused AllGather + GEMM                                                                   */
/* ---------------------------------------------------------------------------------------- */

/* One rank's view of C = AllGather(A) x B (tensor-parallel column-split linear layer).
 * All bf16, row-major, leading dimensions in elements (multiples of 8; base pointers 16-byte
 * aligned: TMA). M = m_loc * nranks; m_loc and k must be equal on every rank (checked on the
 * device by the argument handshake), n_loc may differ. */
typedef struct {
  const void *a_shard;      /* [m_loc, k], ld lda: this rank's rows of A (ordinary memory)  */
  int64_t lda;
  const void *b;            /* [n_loc, k] (MELD_B_NK, nn.Linear weight) or [k, n_loc] (KN)  */
  int64_t ldb;
  meld_b_layout_t b_layout;
  void *c;                  /* [M, n_loc], ld ldc: rows r * m_loc.. come from rank r's shard */
  int64_t ldc;
  void *a_gathered;         /* NULL, or [M, k] with ld ld_gathered: receives AllGather(A)    */
  int64_t ld_gathered;
  int64_t m_loc, n_loc, k;
} meld_ag_gemm_args_t;

/* Enqueues C = AllGather(A) x B on `stream` and returns at once. Collective: every rank of
 * the communicator calls it (same order, same m_loc and k). ONE persistent cooperative kernel:
 * some CTAs push this rank's shard into every peer's staging (the comm's symmetric workspace)
 * chunk by chunk with per-chunk signals, while the others run the GEMM on the rows that have
 * arrived (own rows first, then in arrival order). With one rank it is meld_gemm; for shards
 * under 128 rows that padding would make wasteful it runs meld_all_gather + meld_gemm.
 * CUDA-graph capturable; back-to-back calls need no host synchronization.
 * Needs: workspace_bytes (MELD_WORKSPACE_BYTES) >= nranks * roundup(m_loc, 128) * k * 2.
 * Tuning (environment): MELD_COMM_CTAS, MELD_CHUNK_BYTES, MELD_SCHEDULE=fused|unfused,
 * MELD_AG_GEMM_COMM_WARPS=1 (no comm CTAs: idle warps of every GEMM CTA push; measured slower
 * on one GPU, so off by default; not with a_gathered).
 * Fails before launching: MELD_ERR_INVALID_ARG (NULL comm/args/pointers, misalignment, bad
 * dims; the sentence names the argument), MELD_ERR_OUT_OF_MEMORY (workspace too small: the
 * message names the size to set), MELD_ERR_UNSUPPORTED (MELD_SCHEDULE=fused on ranks of several
 * nodes, which take the unfused schedule: meld_all_gather's inter-node path, then meld_gemm; not
 * a Hopper GPU), MELD_ERR_TIMEOUT / MELD_ERR_ABORTED (an earlier call failed: the comm is aborted),
 * MELD_ERR_CUDA. On the device: ranks with different m_loc or k -> every rank's call aborts
 * with a mismatch message; a rank that never calls -> MELD_ERR_TIMEOUT after timeout_ms;
 * both reported by meld_comm_check() and later calls. */
meld_result_t meld_ag_gemm(meld_comm_t comm, const meld_ag_gemm_args_t *args, cudaStream_t stream);

/* FP8 AllGather + GEMM: as meld_ag_gemm, with a_shard [m_loc, k] and b [n_loc, k] (nn.Linear
 * layout only) in fp8 e4m3 and scales as meld_gemm_fp8's: C (bf16) = (*scale_a) (*scale_b)
 * AllGather(A) x B^T. The shard travels in fp8 (half the bytes of bf16); a_gathered, if given,
 * receives the gathered e4m3 rows. A per-tensor scale_a: every rank passes the same value (the
 * kernel reads each rank's own: AllGather of A assumes one quantization of A). Rowwise by
 * .scaling: scale_a holds this rank's m_loc rows' scales (each rank quantizes its own shard),
 * scale_b this rank's n_loc columns'. The fused kernel's comm CTAs carry each chunk's row scales
 * with its rows (the workspace then needs nranks x roundup(m_loc, 128) x 4 bytes more); without
 * that room, on the unfused paths, or with MELD_AG_FP8_SCALES=gather, a small meld_all_gather of
 * the scales into the comm's scratch runs first (allocated at the first call of a size: run one
 * before capturing a graph). Every rank passes a per-row scale_a or none does (else the ranks'
 * calls differ: a mismatch or MELD_ERR_TIMEOUT). Needs: k a
 * multiple of 16; lda, ldb, ld_gathered >= k and multiples of 16; ldc >= n_loc, a multiple of 8;
 * workspace_bytes >= nranks * roundup(m_loc, 128) * k. Ranks that call meld_ag_gemm and
 * meld_ag_gemm_fp8 together fail the call with an argument mismatch. Fails as meld_ag_gemm. */
typedef struct {
  const void *a_shard;      /* e4m3 [m_loc, k], ld lda                                       */
  int64_t lda;
  const void *b;            /* e4m3 [n_loc, k], ld ldb                                       */
  int64_t ldb;
  const float *scale_a;     /* device fp32: one, or m_loc (MELD_FP8_ROWWISE_A); NULL = 1      */
  const float *scale_b;     /* device fp32: one, or n_loc (MELD_FP8_ROWWISE_B); NULL = 1      */
  meld_fp8_scaling_t scaling; /* MELD_FP8_PER_TENSOR (0) unless rowwise                      */
  void *c;                  /* bf16 [M, n_loc], ld ldc                                       */
  int64_t ldc;
  void *a_gathered;         /* NULL, or e4m3 [M, k] with ld ld_gathered                      */
  int64_t ld_gathered;
  int64_t m_loc, n_loc, k;
} meld_ag_gemm_fp8_args_t;

meld_result_t meld_ag_gemm_fp8(meld_comm_t comm, const meld_ag_gemm_fp8_args_t *args, cudaStream_t stream);

/* ---------------------------------------------------------------------------------------- */
/* MoE: token dispatch (all-to-all of the routed tokens) fused with the grouped GEMM         */
/* ---------------------------------------------------------------------------------------- */

/* One rank's view of an expert-parallel MoE layer's first half. The experts are spread over
 * the ranks: rank r holds experts [r E / P, (r + 1) E / P) (E = experts, a multiple of P) and
 * their weights. Each token of each rank goes, once per routed expert (its top-k ids), to the
 * rank holding that expert; every rank then computes, for each of its experts, the received
 * rows times the expert's weight. Only routed rows move (no dense broadcast), no token is
 * dropped. Output rows are grouped by local expert: expert e's rows are
 * y[expert_offsets[e] .. + expert_counts[e]), each expert's segment starting at a multiple of
 * 128 rows (a GEMM tile never spans two experts); rows between segments are padding (their
 * values are undefined). Within a segment the rows come by source rank, and within a source in
 * the order of its (token, slot) pairs; row_origin says where each row came from. */
typedef struct {
  const void *x;            /* bf16 [tokens, hidden], ld ldx: this rank's tokens             */
  int64_t ldx;              /* elements between tokens (0 = hidden; a multiple of 8)          */
  const int32_t *topk_ids;  /* int32 [tokens, topk] (device): global expert ids in [0, experts),
                               or -1 for none; a token names an expert at most once          */
  int64_t tokens;           /* this rank's tokens (may differ between ranks; 0 allowed)      */
  int32_t topk;             /* expert slots per token, 1..64                                  */
  int32_t experts;          /* E: a multiple of the ranks, at most 1024                       */
  int64_t hidden;           /* H (the GEMM's k): a multiple of 8                              */
  const void *w;            /* bf16 [E / P, n, hidden]: this rank's experts' weights, each in
                               nn.Linear layout [n, hidden], expert e at w + e * n * hidden   */
  int64_t n;                /* output features per expert (a multiple of 8)                   */
  void *y;                  /* bf16 [capacity, n] (dense rows): the experts' outputs          */
  int64_t capacity;         /* rows of y, a multiple of 128, equal on every rank: the sum over
                               this rank's experts of roundup(rows, 128) must fit in it       */
  int32_t *expert_offsets;  /* int32 [E / P + 1] (device, out): first row of each local expert's
                               segment; [E / P] = rows in use (the padded end)                */
  int32_t *expert_counts;   /* int32 [E / P] (device, out): rows of each local expert         */
  int32_t *row_origin;      /* NULL, or int32 [capacity, 2] (device, out): for each row in use,
                               (source rank, t * topk + j: the slot of the source's topk_ids);
                               (-1, -1) on padding rows                                       */
  int32_t activation;       /* MELD_MOE_ACT_NONE (0): y = rows x w^T, [capacity, n].
                               MELD_MOE_ACT_SWIGLU: each expert's w is [gate; up], gate rows
                               [0, n/2) then up rows [n/2, n) (a fused gate_up_proj); y =
                               silu(rows x gate^T) * (rows x up^T) in fp32, rounded once, is
                               [capacity, n/2]; n/2 a multiple of 128                         */
} meld_moe_args_t;

enum { MELD_MOE_ACT_NONE = 0, MELD_MOE_ACT_SWIGLU = 1 };

/* Enqueues the dispatch + grouped GEMM on `stream` and returns at once. Collective: every rank
 * calls it with the same experts, topk, hidden, n and capacity (checked on the device).
 * ONE persistent kernel a call: its comm CTAs first route (per-expert counts and each row's
 * place, the counts exchanged between the ranks, the layout), then copy the routed rows into
 * their expert's rank (its staging in the comm's workspace; this rank's own rows too), piece by
 * piece, each piece counted at its 128-row block, while the other CTAs run the grouped GEMM on
 * every block whose rows have all landed. (MELD_MOE_ROUTE_IN=0: the routing in a kernel of its
 * own before it.)
 * Needs: workspace_bytes (MELD_WORKSPACE_BYTES) >= meld_moe_workspace_bytes(...).
 * CUDA-graph capturable; back-to-back calls need no host synchronization.
 * Fails before launching: MELD_ERR_INVALID_ARG (NULL, bad dims, misalignment; the sentence names
 * the argument), MELD_ERR_OUT_OF_MEMORY (workspace too small: the message names the size),
 * MELD_ERR_UNSUPPORTED (not a Hopper GPU; across nodes: ranks not numbered node by node with
 * equal nodes, more than 16 ranks a node), MELD_ERR_CUDA. On the device,
 * reported by meld_comm_check() and later calls (the comm is then aborted): a rank whose
 * experts receive more rows than capacity holds (every rank fails alike; the record names the
 * rank, the rows needed and the capacity), ranks with different arguments, a rank that never
 * calls (MELD_ERR_TIMEOUT after timeout_ms). */
meld_result_t meld_moe_dispatch_gemm(meld_comm_t comm, const meld_moe_args_t *args, cudaStream_t stream);

/* Across nodes (a comm whose ranks span N nodes of L ranks each, numbered node by node; a first,
 * functional version): each MoE op is a short sequence of meld's calls on two internal comms,
 * the node's L ranks and this local rank's "rail" over the nodes (the hierarchy's, else made by
 * the first MoE call: make one before any CUDA-graph capture). The rail all-gathers its ranks'
 * tokens and ids (dense between nodes: each token to every node, which top-k routing over few
 * nodes nearly needs anyway); each node then runs the one-node op over the N x tokens gathered
 * tokens with only its own experts' ids (only routed rows move within the node); the combine
 * (and meld_moe_ffn) reduce-scatters each node's partial sums over the rail (fp32 sums of the
 * bf16 partials: one more rounding than on one node). Each op's first step on the rail, made by
 * every rank (a refused one too), all-gathers a header (the op, its shapes, the rank's state) and
 * compares them on the device: after a refused call, shapes that differ along the rail or a node
 * whose op failed, every rank's comm fails at once (the rail's and the nodes' internal comms are
 * aborted where the verdict reaches them; meld_comm_check says why) instead of leaving the other
 * nodes waiting; the combine checks again before its sum. (A refusal while capturing a CUDA graph
 * only records the agreement: its peers' replays then wait for their deadline.) Rules beyond one
 * node's: tokens equal on the ranks of a rail (the same local rank on every node), capacity >= N
 * x tokens x topk for the combine, and within a segment the rows come by (source's local rank,
 * source's node, pair) instead of by source rank; row_origin names global ranks as ever. Ranks
 * that are threads of one process (a test mode): MELD_NET_HIER=2 only. */

/* The MoE layer's second GEMM on the preceding dispatch's layout: for each local expert e, rows
 * [expert_offsets[e], + expert_counts[e]) of a, times w[e]^T, into the same rows of c (rows between
 * segments: padding, undefined). Local to this rank (no communication): it reads the layout the
 * last meld_moe_dispatch_gemm of this comm left in the workspace (pass that call's arguments), so
 * call it after that dispatch and before the next. ONE kernel (the GEMM engine over the 128-row
 * blocks in use, each with its expert's weight). */
typedef struct {
  const meld_moe_args_t *dispatch; /* the preceding dispatch's arguments on this rank           */
  const void *a;                   /* bf16 [capacity, k] dense rows (e.g. the activation of y)  */
  int64_t k;                       /* a multiple of 8                                            */
  const void *w;                   /* bf16 [E / P, n, k]: each expert's weight, nn.Linear layout */
  int64_t n;                       /* a multiple of 8                                            */
  void *c;                         /* bf16 [capacity, n] dense rows                              */
} meld_moe_gemm_args_t;

meld_result_t meld_moe_grouped_gemm(meld_comm_t comm, const meld_moe_gemm_args_t *args, cudaStream_t stream);

/* The combine, after meld_moe_dispatch_gemm and the expert computation the caller runs on its rows
 * (e.g. activation, then a grouped GEMM back to hidden): every rank's token t gets
 *   out[t] = sum_j topk_weights[t, j] * y2_d[row(t, j)]
 * summed in fp32 and rounded once, where d is the rank of expert topk_ids[t, j] and row(t, j) the
 * row the dispatch gave that slot there (slots with id -1 add nothing; a token with none gets 0).
 * Pass the dispatch's arguments: the layout of that call is used, so exactly one combine follows
 * each dispatch, in the same stream order on every rank. ONE kernel: every rank copies its rows
 * back to their tokens' ranks (into the staging: tokens x topk <= capacity; rows of its own tokens
 * are read where they are), then sums its tokens' slots. Fails as meld_moe_dispatch_gemm does
 * (arguments; device errors via meld_comm_check). */
typedef struct {
  const meld_moe_args_t *dispatch; /* the preceding dispatch's arguments on this rank           */
  const void *y2;                  /* bf16 [capacity, hidden] (dense rows): this rank's experts'
                                      outputs, rows as the dispatch laid them out in y          */
  const float *topk_weights;       /* fp32 [tokens, topk] (device)                                */
  void *out;                       /* bf16 [tokens, hidden], ld ldo                               */
  int64_t ldo;                     /* elements between output tokens (0 = hidden)               */
} meld_moe_combine_args_t;

meld_result_t meld_moe_combine(meld_comm_t comm, const meld_moe_combine_args_t *args, cudaStream_t stream);

/* The workspace bytes meld_moe_dispatch_gemm needs for these arguments on nranks ranks (the
 * staging of capacity rows of hidden, the blocks' counters, the exchanged counts and the
 * routing tables, sized for nranks x max_tokens tokens so that the same figure serves a comm
 * across nodes, whose node calls route the tokens of every node). */
size_t meld_moe_workspace_bytes(int nranks, int64_t max_tokens, int32_t topk, int32_t experts, int64_t hidden,
                                int64_t capacity);

/* A whole expert-parallel MoE layer (SwiGLU experts) in one call, routing on the device:
 *   out[t] = sum_j topk_weights[t, j] * W2_e (silu(W1gate_e x_t) * W1up_e x_t),  e = topk_ids[t, j]
 * (fp32 combine, rounded once). Collective like meld_moe_dispatch_gemm; three kernels, no host
 * synchronization: the routing and the dispatch fused with the first grouped GEMM and
 * its activation (the gate and up products never leave the registers: the GEMM's epilogue stores
 * silu(gate) x up), the second grouped GEMM, and the combine. With several ranks the second
 * GEMM's epilogue sends each row straight to its token's rank (the combine kernel then only
 * sums), so the way back overlaps that GEMM; MELD_MOE_FFN_SEND=0/1 forces it off / on. The layer's intermediates live in
 * `scratch` (meld_moe_ffn_scratch_bytes), staging and tables in the comm's workspace
 * (meld_moe_workspace_bytes with hidden). Fails as meld_moe_dispatch_gemm does. */
typedef struct {
  const void *x;              /* bf16 [tokens, hidden], ld ldx (0 = hidden)                     */
  int64_t ldx;
  const int32_t *topk_ids;    /* int32 [tokens, topk] (device), as in meld_moe_args_t           */
  const float *topk_weights;  /* fp32 [tokens, topk] (device)                                   */
  int64_t tokens;
  int32_t topk, experts;
  int64_t hidden;             /* a multiple of 8                                                */
  const void *w1;             /* bf16 [E / P, 2 ffn, hidden]: each expert's gate rows [0, ffn)
                                 then up rows [ffn, 2 ffn) (gate_up_proj, nn.Linear layout)     */
  const void *w2;             /* bf16 [E / P, hidden, ffn] (down_proj, nn.Linear layout)        */
  int64_t ffn;                /* the experts' intermediate size: a multiple of 128              */
  void *out;                  /* bf16 [tokens, hidden], ld ldo (0 = hidden)                     */
  int64_t ldo;
  int64_t capacity;           /* rows a rank's experts may receive in all, padded to 128 each
                                 (as in meld_moe_args_t); also >= tokens x topk                 */
  void *scratch;              /* device memory of meld_moe_ffn_scratch_bytes(), 256-aligned     */
  int32_t *expert_counts;     /* NULL, or int32 [E / P] (device, out): rows of each local expert */
} meld_moe_ffn_args_t;

meld_result_t meld_moe_ffn(meld_comm_t comm, const meld_moe_ffn_args_t *args, cudaStream_t stream);

/* Bytes of meld_moe_ffn's scratch: the activation [capacity, ffn], the second GEMM's rows
 * [capacity, hidden] and the layout's tables. */
size_t meld_moe_ffn_scratch_bytes(int nranks, int32_t experts, int64_t hidden, int64_t ffn, int64_t capacity);

#ifdef __cplusplus
}
#endif

#endif /* MELD_H */
