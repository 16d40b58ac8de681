/* test_net_plan.c — the inter-node path's arithmetic (src/common/net.h) and its knob: chunks
 * cover every byte of a piece exactly once, in pieces no longer than a staging slot; all-reduce
 * parts; slots of the two parities never overlap and parity repeats every second epoch (the
 * reuse argument); stamps and credits; a model of one pair's slot protocol under random
 * interleavings; a host model of the hierarchical collectives' steps and permutations against
 * the flat results, and where the hierarchy applies; MELD_NET_CHUNK_BYTES parsing and refusals. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "common/net.h"
#include "error.h"
#include "net.h"

/* Chunks cover every byte of a piece exactly once, in order, none longer than a slot; an empty
 * piece still has one (empty) chunk. */
static void test_chunks(void **state) {
  (void)state;
  const uint64_t blocks[] = {MELD_NET_BLOCK_MIN, 65536, MELD_NET_BLOCK_DEFAULT};
  const uint64_t sizes[] = {0, 1, 2, 4095, 4096, 4097, 65536, 65537, 140002, 3u << 20, (3u << 20) + 6};
  for (size_t b = 0; b < sizeof blocks / sizeof *blocks; b++)
    for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
      const uint64_t B = blocks[b], n = sizes[s], L = meld_net_chunks(n, B);
      assert_int_equal(L, n == 0 ? 1 : (n + B - 1) / B);
      uint64_t covered = 0;
      for (uint64_t j = 0; j < L; j++) {
        const uint64_t len = meld_net_chunk_len(n, B, j);
        assert_true(len <= B);
        if (n) assert_true(len > 0);
        covered += len;
      }
      assert_int_equal(covered, n);
      assert_int_equal(meld_net_chunk_len(n, B, L), 0); /* one past the last: empty */
    }
}

/* An all-reduce's parts (ceil(count / P) elements, the last shorter or empty) cover the buffer
 * exactly, in whole elements. */
static void test_parts(void **state) {
  (void)state;
  const uint64_t counts[] = {1, 2, 3, 1000, 1001, 70001, 70003, 262145, 1u << 20};
  const int ranks[] = {2, 3, 4, 5, 8};
  for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++)
    for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++)
      for (int es = 2; es <= 4; es += 2) {
        const int P = ranks[ri];
        const uint64_t total = counts[ci] * (uint64_t)es, part = (counts[ci] + P - 1) / P * (uint64_t)es;
        uint64_t covered = 0;
        for (int q = 0; q < P; q++) {
          const uint64_t len = meld_net_part_len(part, total, q);
          assert_true(len <= part);
          assert_int_equal(len % (uint64_t)es, 0);
          if (len) assert_int_equal((uint64_t)q * part, covered); /* contiguous */
          covered += len;
        }
        assert_int_equal(covered, total);
      }
}

/* Staging slots: inside the staging, 256-byte aligned, pairwise apart within an epoch and from
 * the next epoch's, the same every second epoch; flag words and workspace rows distinct. */
static void test_slots(void **state) {
  (void)state;
  const int P = 5;
  const uint64_t B = 65536;
  const uint32_t S = MELD_NET_SLOTS;
  assert_int_equal(meld_net_stage_bytes(P, B), 2ull * P * S * B);
  assert_int_equal(meld_net_words(P), (uint32_t)P * S);
  /* the argument words: after both halves (data stamps, credits), one per (parity, sender), all
   * distinct, inside the flags; calls e and e + 2 share a word, e and e + 1 never */
  assert_int_equal(meld_net_flag_words(P), 2u * P * S + 2u * (uint32_t)P);
  for (uint64_t e = 1; e < 5; e++)
    for (int q = 0; q < P; q++) {
      const uint32_t w = meld_net_args_word(P, e, q);
      assert_true(w >= 2u * meld_net_words(P));
      assert_true(w < meld_net_flag_words(P));
      assert_int_equal(w, meld_net_args_word(P, e + 2, q));
      for (int r = 0; r < P; r++) {
        assert_int_not_equal(w, meld_net_args_word(P, e + 1, r));
        if (r != q) assert_int_not_equal(w, meld_net_args_word(P, e, r));
      }
    }
  for (uint64_t e = 1; e < 4; e++)
    for (int q = 0; q < P; q++)
      for (uint32_t k = 0; k < S; k++) {
        const uint64_t s = meld_net_slot(e, q, k, P, B);
        assert_true(s + B <= meld_net_stage_bytes(P, B));
        assert_int_equal(s % 256, 0);
        assert_int_equal(s, meld_net_slot(e + 2, q, k, P, B)); /* parity repeats */
        assert_true(meld_net_word(q, k) < meld_net_words(P));
        for (int r = 0; r < P; r++)
          for (uint32_t m = 0; m < S; m++) {
            const uint64_t t = meld_net_slot(e + 1, r, m, P, B); /* the next epoch's: apart */
            assert_true(t + B <= s || s + B <= t);
            if (r != q || m != k) {
              const uint64_t u = meld_net_slot(e, r, m, P, B);
              assert_true(u + B <= s || s + B <= u);
              assert_int_not_equal(meld_net_word(r, m), meld_net_word(q, k));
            }
          }
      }
}

/* Stamps grow with the chunk and with the epoch; the credit a chunk needs is the stamp of the
 * chunk S before it, and exactly the chunks some later chunk waits for have their credit
 * returned. */
static void test_stamps_credits(void **state) {
  (void)state;
  const uint64_t S = MELD_NET_SLOTS;
  for (uint64_t e = 1; e < 4; e++) {
    assert_true(meld_net_stamp(e, MELD_NET_MAX_CHUNKS - 1) < meld_net_stamp(e + 1, 0));
    for (uint64_t n = 1; n < 3 * S + 2; n++)
      for (uint64_t c = 0; c < n; c++) {
        if (c + 1 < n) assert_true(meld_net_stamp(e, c) < meld_net_stamp(e, c + 1));
        const uint64_t need = meld_net_credit_needed(e, c);
        if (c < S) {
          assert_int_equal(need, 0);
        } else {
          assert_int_equal(need, meld_net_stamp(e, c - S));
          assert_true(meld_net_credit_returned(c - S, n)); /* someone returns it */
        }
        /* a returned credit is waited for by chunk c + S of the same call */
        assert_int_equal(meld_net_credit_returned(c, n), c + S < n);
      }
  }
}

/* The slot protocol of one pair, run with random interleavings of its four actors (the sender
 * writes chunk c into slot c % S once it holds the needed credit; the receiver reads chunk c once
 * the slot's data word holds its stamp, then returns the credit if one is owed), over two calls:
 * no chunk is ever overwritten before it was read, every chunk is read once, in every call, and
 * the words only grow. (The device protocol with per-slot words, as coll_net.cu runs it.) */
static void test_slot_protocol_model(void **state) {
  (void)state;
  const uint32_t S = MELD_NET_SLOTS;
  uint64_t rng = 12345;
  for (int trial = 0; trial < 300; trial++) {
    uint64_t data[MELD_NET_SLOTS] = {0}, credit[MELD_NET_SLOTS] = {0};
    for (uint64_t e = 1; e <= 2; e++) {
      rng = rng * 6364136223846793005ull + 1442695040888963407ull;
      const uint64_t n = 1 + (rng >> 33) % (4 * S + 3);
      int64_t content[MELD_NET_SLOTS]; /* the chunk a slot holds, -1: read (free) */
      for (uint32_t k = 0; k < S; k++) content[k] = -1;
      uint64_t sent = 0, got = 0;
      for (int steps = 0; got < n; steps++) {
        assert_true(steps < 100000); /* progress: no deadlock */
        rng = rng * 6364136223846793005ull + 1442695040888963407ull;
        if ((rng >> 40) & 1) {
          if (sent < n) { /* sender */
            const uint64_t need = meld_net_credit_needed(e, sent);
            const uint32_t k = (uint32_t)(sent % S);
            if (need == 0 || credit[k] >= need) {
              assert_int_equal(content[k], -1); /* never overwrites an unread chunk */
              content[k] = (int64_t)sent;
              assert_true(meld_net_stamp(e, sent) > data[k]);
              data[k] = meld_net_stamp(e, sent);
              sent++;
            }
          }
        } else { /* receiver */
          const uint32_t k = (uint32_t)(got % S);
          if (data[k] >= meld_net_stamp(e, got)) {
            assert_int_equal(content[k], (int64_t)got); /* the chunk it waits for, no other */
            content[k] = -1;
            if (meld_net_credit_returned(got, n)) {
              assert_true(meld_net_stamp(e, got) > credit[k]);
              credit[k] = meld_net_stamp(e, got);
            }
            got++;
          }
        }
      }
      assert_int_equal(sent, n);
    }
  }
}

/* Two ranks exchanging a stream each way in every call, each rank starting its next call as soon
 * as its own sends and receives of this one are done (so one may run a call ahead of the other),
 * under random interleavings of the four actors (each rank's sender and receiver): the argument
 * words (meld_net_args_word, by parity) always hold the receiver's own call when it checks chunk
 * 0, and the staging by parity never loses an unread chunk. With ONE word per sender (parities =
 * 1) the check reads the next call's word in some interleavings: the model must see that too. */
static int args_model(int parities, uint64_t seed) {
  const uint32_t S = MELD_NET_SLOTS;
  enum { CALLS = 6 };
  uint64_t rng = seed, n[CALLS + 2];
  for (int e = 1; e <= CALLS; e++) {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    n[e] = 1 + (rng >> 33) % (2 * S + 1); /* the same both ways: a valid program */
  }
  /* at rank r, what the other rank sends it: data words, argument words, staging by parity */
  uint64_t data[2][MELD_NET_SLOTS] = {{0}}, credit[2][MELD_NET_SLOTS] = {{0}}, argsw[2][2] = {{0}};
  int64_t content[2][2][MELD_NET_SLOTS]; /* [rank][parity][slot]: (call << 16 | chunk) or -1 */
  for (int r = 0; r < 2; r++)
    for (int p = 0; p < 2; p++)
      for (uint32_t k = 0; k < S; k++) content[r][p][k] = -1;
  uint64_t e_of[2] = {1, 1}, sent[2] = {0, 0}, got[2] = {0, 0};
  int args_sent[2] = {0, 0}, false_mismatch = 0;
  for (int steps = 0; e_of[0] <= CALLS || e_of[1] <= CALLS; steps++) {
    assert_true(steps < 200000); /* progress */
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    const int q = (int)((rng >> 40) & 1), r = 1 - q; /* actor of rank q; its peer r */
    const uint64_t e = e_of[q];
    if (e > CALLS) continue;
    if ((rng >> 41) & 1) { /* q's sender toward r: the argument word first, then the chunks */
      if (!args_sent[q]) {
        argsw[r][parities == 2 ? (e & 1) : 0] = e;
        args_sent[q] = 1;
      } else if (sent[q] < n[e]) {
        const uint64_t c = sent[q], need = meld_net_credit_needed(e, c);
        const uint32_t k = (uint32_t)(c % S);
        if (need == 0 || credit[q][k] >= need) {
          assert_int_equal(content[r][e & 1][k], -1); /* the reuse argument: nothing unread lost */
          content[r][e & 1][k] = (int64_t)(e << 16 | c);
          data[r][k] = meld_net_stamp(e, c);
          sent[q]++;
        }
      }
    } else if (got[q] < n[e]) { /* q's receiver of r's stream */
      const uint64_t c = got[q];
      const uint32_t k = (uint32_t)(c % S);
      if (data[q][k] >= meld_net_stamp(e, c)) {
        if (c == 0 && argsw[q][parities == 2 ? (e & 1) : 0] != e) false_mismatch = 1;
        assert_int_equal(content[q][e & 1][k], (int64_t)(e << 16 | c));
        content[q][e & 1][k] = -1;
        if (meld_net_credit_returned(c, n[e])) credit[r][k] = meld_net_stamp(e, c);
        got[q]++;
      }
    }
    if (e_of[q] <= CALLS && args_sent[q] && sent[q] == n[e] && got[q] == n[e]) /* q's call ends */
      e_of[q]++, sent[q] = got[q] = 0, args_sent[q] = 0;
  }
  return false_mismatch;
}

static void test_args_word_model(void **state) {
  (void)state;
  int one_word_failed = 0;
  for (uint64_t t = 1; t <= 3000; t++) {
    assert_int_equal(args_model(2, t * 7919), 0); /* by parity: never a false mismatch */
    one_word_failed += args_model(1, t * 7919);
  }
  if (!one_word_failed) fail_msg("the model never reached a call-ahead sender: it cannot test the parity");
}

/* ---- the hierarchy: a host model of net_hier's steps on P = Nn x L simulated ranks (integer
 * values: sums are exact in any order) against the flat results, through the same strided-copy
 * arithmetic (meld_hier_rs_perm / meld_hier_ag_perm) ---- */

static void copy2d(float *dst, const float *src, meld_copy2d_t c) {
  for (uint64_t h = 0; h < c.height; h++)
    memcpy((uint8_t *)dst + c.dst_off + h * c.dpitch, (const uint8_t *)src + c.src_off + h * c.spitch, c.width);
}

static void test_hier_model(void **state) {
  (void)state;
  const int nodes[] = {2, 3}, locals[] = {2, 3, 4};
  const size_t counts[] = {1, 5};
  for (int a = 0; a < 2; a++)
    for (int b = 0; b < 3; b++)
      for (int k = 0; k < 2; k++) {
        const int Nn = nodes[a], L = locals[b], P = Nn * L;
        const size_t c = counts[k], blk = c * sizeof(float);
        float *send = calloc((size_t)P * P * c, sizeof(float)); /* [rank][P * c] */
        float *s1 = calloc((size_t)P * P * c, sizeof(float)), *s2 = calloc((size_t)P * P * c, sizeof(float));
        float *out = calloc((size_t)P * P * c, sizeof(float));
        for (int r = 0; r < P; r++)
          for (size_t i = 0; i < (size_t)P * c; i++) send[(size_t)r * P * c + i] = (float)((r * 131 + (int)i * 7) % 50);
#define SND(r) (send + (size_t)(r) * P * c)
#define S1(r) (s1 + (size_t)(r) * P * c)
#define S2(r) (s2 + (size_t)(r) * P * c)
#define OUT(r) (out + (size_t)(r) * P * c)
        /* reduce_scatter: permute; within the node (count Nn * c); across (count c) */
        for (int r = 0; r < P; r++)
          for (int l = 0; l < L; l++) copy2d(S1(r), SND(r), meld_hier_rs_perm(l, L, Nn, blk));
        for (int r = 0; r < P; r++) {
          const int n = r / L, l = r % L;
          for (size_t i = 0; i < (size_t)Nn * c; i++) {
            float t = 0;
            for (int m = 0; m < L; m++) t += S1(n * L + m)[(size_t)l * Nn * c + i];
            S2(r)[i] = t;
          }
        }
        for (int r = 0; r < P; r++) {
          const int n = r / L, l = r % L;
          for (size_t i = 0; i < c; i++) {
            float t = 0, want = 0;
            for (int m = 0; m < Nn; m++) t += S2(m * L + l)[(size_t)n * c + i];
            for (int q = 0; q < P; q++) want += SND(q)[(size_t)r * c + i];
            assert_true(t == want);
          }
        }
        /* all_gather of each rank's first c elements: across (count c), within (count Nn * c),
         * permute into recv */
        for (int r = 0; r < P; r++) {
          const int l = r % L;
          for (int m = 0; m < Nn; m++) memcpy(S1(r) + (size_t)m * c, SND(m * L + l), blk);
        }
        for (int r = 0; r < P; r++) {
          const int n = r / L;
          for (int m = 0; m < L; m++) memcpy(S2(r) + (size_t)m * Nn * c, S1(n * L + m), (size_t)Nn * blk);
        }
        for (int r = 0; r < P; r++) {
          for (int l = 0; l < L; l++) copy2d(OUT(r), S2(r), meld_hier_ag_perm(l, L, Nn, blk));
          for (int q = 0; q < P; q++) assert_memory_equal(OUT(r) + (size_t)q * c, SND(q), blk);
        }
        /* all_reduce of P * c elements (a multiple of L): RS in the node into part l, AR of the
         * part across, AG in the node (in place) */
        const size_t N = (size_t)P * c, part = N / (size_t)L;
        for (int r = 0; r < P; r++) {
          const int n = r / L, l = r % L;
          for (size_t i = 0; i < part; i++) {
            float t = 0;
            for (int m = 0; m < L; m++) t += SND(n * L + m)[(size_t)l * part + i];
            OUT(r)[(size_t)l * part + i] = t;
          }
        }
        for (int l = 0; l < L; l++)
          for (size_t i = 0; i < part; i++) {
            float t = 0;
            for (int m = 0; m < Nn; m++) t += OUT(m * L + l)[(size_t)l * part + i];
            for (int m = 0; m < Nn; m++) S1(m * L + l)[(size_t)l * part + i] = t;
          }
        for (int r = 0; r < P; r++) {
          const int n = r / L;
          for (int m = 0; m < L; m++) memcpy(OUT(r) + (size_t)m * part, S1(n * L + m) + (size_t)m * part, part * sizeof(float));
          for (size_t i = 0; i < N; i++) {
            float want = 0;
            for (int q = 0; q < P; q++) want += SND(q)[i];
            assert_true(OUT(r)[i] == want);
          }
        }
#undef SND
#undef S1
#undef S2
#undef OUT
        free(send), free(s1), free(s2), free(out);
      }
}

/* Where the hierarchy applies: several nodes of equal size > 1, numbered node by node. */
static void test_hier_layout(void **state) {
  (void)state;
  int node[12], local[12];
  for (int r = 0; r < 12; r++) node[r] = r / 4, local[r] = r % 4;
  assert_true(meld_hier_layout(node, local, 12, 4));
  assert_false(meld_hier_layout(node, local, 4, 4));  /* one node */
  assert_false(meld_hier_layout(node, local, 12, 1)); /* one rank a node */
  assert_false(meld_hier_layout(node, local, 10, 4)); /* unequal nodes */
  /* node by node (the MoE ops across nodes need it, one rank a node included) */
  assert_true(meld_node_by_node(node, local, 12, 4));
  assert_true(meld_node_by_node(node, local, 4, 4));
  assert_false(meld_node_by_node(node, local, 10, 4)); /* unequal nodes */
  assert_false(meld_node_by_node(node, local, 12, 0));
  for (int r = 0; r < 12; r++) node[r] = r, local[r] = 0;
  assert_true(meld_node_by_node(node, local, 12, 1));
  assert_false(meld_hier_layout(node, local, 12, 1));
  for (int r = 0; r < 12; r++) node[r] = r % 3, local[r] = r / 3; /* round robin over the nodes */
  assert_false(meld_hier_layout(node, local, 12, 4));
  assert_false(meld_node_by_node(node, local, 12, 4));
}

/* The two ends of every pair agree on its stream (the chunk counts a sender sends are the ones
 * its receiver waits for: else a wait never ends), and on phase 1's bytes, for every op from
 * meld_net_sizes, at several rank counts, block sizes and counts (all_to_allv: a random count
 * matrix with zeros). The receive offsets of the copy kinds tile recv without overlap. */
static void test_stream_agreement(void **state) {
  (void)state;
  const int ranks[] = {2, 3, 4, 5, 8};
  const uint64_t blocks[] = {4096, 65536};
  /* (65537 at 8 ranks: parts of 8193 elements, the last of 8186: 9 vs 8 chunks of 4 KiB) */
  const size_t counts[] = {0, 1, 7, 1000, 65537, 70001};
  static meld_net_sizes_t sz[8];
  static meld_coll_args_t args[8];
  uint64_t rng = 99;
  for (size_t ri = 0; ri < sizeof ranks / sizeof *ranks; ri++)
    for (size_t bi = 0; bi < 2; bi++)
      for (int op = 0; op < 4; op++)
        for (size_t ci = 0; ci < sizeof counts / sizeof *counts; ci++) {
          const int P = ranks[ri];
          const uint64_t B = blocks[bi];
          size_t mat[8][8]; /* all_to_allv: elements r sends q */
          for (int r = 0; r < P; r++)
            for (int q = 0; q < P; q++) {
              rng = rng * 6364136223846793005ull + 1442695040888963407ull;
              mat[r][q] = (rng >> 33) % 3 == 0 ? 0 : (size_t)((rng >> 40) % (counts[ci] + 1));
            }
          for (int r = 0; r < P; r++) {
            meld_coll_args_t *a = &args[r];
            memset(a, 0, sizeof *a);
            a->op = (meld_coll_op_t)(op == 0 ? MELD_COLL_ALL_GATHER : op == 1 ? MELD_COLL_ALL_TO_ALL
                                                 : op == 2 ? MELD_COLL_REDUCE_SCATTER : MELD_COLL_ALL_REDUCE);
            a->dtype = MELD_FP32;
            a->count = counts[ci];
            a->vector = op == 1;
            size_t so = 0, ro = 0;
            for (int q = 0; q < P; q++) {
              a->send_counts[q] = mat[r][q], a->send_offsets[q] = so, so += mat[r][q];
              a->recv_counts[q] = mat[q][r], a->recv_offsets[q] = ro, ro += mat[q][r];
            }
            assert_int_equal(meld_net_sizes(a, P, r, &sz[r]), 0);
          }
          for (int r = 0; r < P; r++)
            for (int q = 0; q < P; q++) {
              if (q == r) continue;
              const meld_net_sizes_t *s = &sz[r], *t = &sz[q];
              assert_int_equal(meld_net_ntx(s->kind, s->tx_bytes[q], s->own_bytes, B),
                               meld_net_nrx(t->kind, t->rx_bytes[r], t->tx_bytes[r], B));
              if (s->kind == MELD_NET_RS || s->kind == MELD_NET_AR) {
                assert_int_equal(s->tx_bytes[q], t->own_bytes); /* r sends q q's part, summed there */
                assert_int_equal(t->rx_bytes[r], t->own_bytes);
                if (s->kind == MELD_NET_AR) assert_int_equal(s->own_bytes, t->tx_bytes[r]); /* phase 2 */
              } else {
                assert_int_equal(s->tx_bytes[q], t->rx_bytes[r]);
              }
            }
          if (op == 0 || op == 1) /* recv tiled: [rx_off, + rx_bytes) of every peer and the own block */
            for (int r = 0; r < P; r++) {
              uint64_t end = 0;
              for (int q = 0; q < P; q++) {
                const uint64_t off = q == r ? sz[r].own_dst : sz[r].rx_off[q];
                const uint64_t len = q == r ? sz[r].own_bytes : sz[r].rx_bytes[q];
                assert_int_equal(off, end);
                end += len;
              }
            }
        }
}

static void test_block_env(void **state) {
  (void)state;
  uint64_t b = 0;
  unsetenv("MELD_NET_CHUNK_BYTES");
  assert_int_equal(meld_net_block_env(&b), MELD_OK);
  assert_int_equal(b, MELD_NET_BLOCK_DEFAULT);
  setenv("MELD_NET_CHUNK_BYTES", "64K", 1);
  assert_int_equal(meld_net_block_env(&b), MELD_OK);
  assert_int_equal(b, 65536);
  const char *bad[] = {"100", "4000", "1G", "65537", "-4096", "abc", "64KX"};
  for (size_t i = 0; i < sizeof bad / sizeof *bad; i++) {
    setenv("MELD_NET_CHUNK_BYTES", bad[i], 1);
    assert_int_equal(meld_net_block_env(&b), MELD_ERR_INVALID_ARG);
    assert_non_null(strstr(meld_last_error(), "MELD_NET_CHUNK_BYTES"));
    assert_non_null(strstr(meld_last_error(), "multiple of 256"));
  }
  unsetenv("MELD_NET_CHUNK_BYTES");
  assert_true(meld_net_block_valid(MELD_NET_BLOCK_MIN) && meld_net_block_valid(MELD_NET_BLOCK_MAX));
  assert_false(meld_net_block_valid(MELD_NET_BLOCK_MIN - 256) || meld_net_block_valid(MELD_NET_BLOCK_MAX + 256));
}

/* MELD_NET_TRANSPORT and every rank's ability decide the inter-node transport alike. */
static void test_transport_choice(void **state) {
  (void)state;
  assert_int_equal(meld_net_transport_want(NULL), 2);
  assert_int_equal(meld_net_transport_want(""), 2);
  assert_int_equal(meld_net_transport_want("auto"), 2);
  assert_int_equal(meld_net_transport_want("tcp"), 0);
  assert_int_equal(meld_net_transport_want("ibv"), 1);
  assert_int_equal(meld_net_transport_want("IBV"), -1);
  assert_int_equal(meld_net_transport_want("rdma"), -1);
  const char *kind = NULL;
  int cannot = 7;
  /* auto, all can: ibv; auto, rank 2 cannot: tcp, and rank 2 is named for the log */
  int32_t a1[8] = {2, 1, 2, 1, 2, 1, 2, 1};
  assert_int_equal(meld_net_transport_pick(a1, 4, &kind, &cannot), MELD_OK);
  assert_string_equal(kind, "ibv");
  assert_int_equal(cannot, -1);
  int32_t a2[8] = {2, 1, 2, 1, 2, 0, 2, 0};
  assert_int_equal(meld_net_transport_pick(a2, 4, &kind, &cannot), MELD_OK);
  assert_string_equal(kind, "tcp");
  assert_int_equal(cannot, 2);
  /* ibv forced where rank 1 cannot: every rank fails, naming it */
  int32_t a3[6] = {1, 1, 1, 0, 1, 1};
  assert_int_equal(meld_net_transport_pick(a3, 3, &kind, &cannot), MELD_ERR_UNSUPPORTED);
  assert_int_equal(cannot, 1);
  assert_non_null(strstr(meld_last_error(), "MELD_NET_TRANSPORT=ibv, but rank 1 cannot use ibverbs"));
  /* tcp forced: tcp even where all could use ibv (their probe is skipped: can = 0) */
  int32_t a4[4] = {0, 0, 0, 0};
  assert_int_equal(meld_net_transport_pick(a4, 2, &kind, &cannot), MELD_OK);
  assert_string_equal(kind, "tcp");
  /* wants that differ: refused on every rank */
  int32_t a5[6] = {2, 1, 2, 1, 0, 0};
  assert_int_equal(meld_net_transport_pick(a5, 3, &kind, &cannot), MELD_ERR_INVALID_ARG);
  assert_non_null(strstr(meld_last_error(), "MELD_NET_TRANSPORT differs between ranks (rank 2 and rank 0)"));
  /* one rank */
  int32_t a6[2] = {2, 1};
  assert_int_equal(meld_net_transport_pick(a6, 1, &kind, &cannot), MELD_OK);
  assert_string_equal(kind, "ibv");
}

int main(void) {
  const struct CMUnitTest tests[] = {
      cmocka_unit_test(test_chunks),
      cmocka_unit_test(test_parts),
      cmocka_unit_test(test_slots),
      cmocka_unit_test(test_stamps_credits),
      cmocka_unit_test(test_slot_protocol_model),
      cmocka_unit_test(test_args_word_model),
      cmocka_unit_test(test_hier_model),
      cmocka_unit_test(test_stream_agreement),
      cmocka_unit_test(test_hier_layout),
      cmocka_unit_test(test_block_env),
      cmocka_unit_test(test_transport_choice),
  };
  return cmocka_run_group_tests(tests, NULL, NULL);
}
