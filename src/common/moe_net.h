/* moe_net.h — the index arithmetic of the MoE ops across nodes (src/ops/moe_net.cu), in plain C
 * shared by the host, the device and the CPU tests (tests/unit/test_moe_plan.c). DESIGN.md
 * section 7b.
 *
 * P = N nodes x L ranks, numbered node by node (rank a L + l is local rank l of node a); experts
 * E, a multiple of P: rank r holds experts [r E/P, (r + 1) E/P), so node b holds the E/N experts
 * [b E/N, (b + 1) E/N). Every rank has T tokens (equal along a rail: the ranks l of every node).
 *
 * The scheme: each rail (local rank l of every node) all-gathers its ranks' tokens and topk ids
 * (dense between nodes: with top-k routing over few nodes nearly every node receives nearly
 * every token anyway, e.g. 1 - (1/2)^8 of them at top-8 over 2 nodes); gathered token g = a T + t
 * is token t of rank a L + l. Rank b L + l keeps, of every gathered id, those of its node's
 * experts renumbered from 0 (moe_net_local_id; -1 for the rest) and runs the one-node op on the
 * node's comm (L ranks, E/N experts) over its N T gathered tokens: within the node only routed
 * rows move. The one-node op's origins (l, g topk + j) name the node-comm rank l and the gathered
 * slot; moe_net_origin turns them into the global (a L + l, t topk + j). The combine's partial
 * sums (each gathered token's slots on this node's experts) are then reduce-scattered over the
 * rail: the owner of token t gets the sum over the nodes. */
#ifndef MELD_COMMON_MOE_NET_H
#define MELD_COMMON_MOE_NET_H

#include <stdint.h>

#include "proto.h" /* MELD_HD */

#ifdef __cplusplus
extern "C" {
#endif

/* A gathered topk id as node `node` sees it: renumbered among its e_node = E / N experts, or -1
 * (another node's expert, or no expert). */
MELD_HD int32_t moe_net_local_id(int32_t id, int node, int32_t e_node) {
  const int64_t lo = (int64_t)node * e_node;
  return id >= lo && id < lo + e_node ? (int32_t)(id - lo) : -1;
}

/* The global origin of a row the node's op received from its node-comm rank l as gathered slot
 * `slot` (= g topk + j, g = a T + t): *rank = a L + l, *pair = t topk + j. tokens = T > 0. */
MELD_HD void moe_net_origin(int32_t l, int32_t slot, int32_t topk, int64_t tokens, int L, int32_t *rank,
                            int32_t *pair) {
  const int64_t per_node = tokens * (int64_t)topk; /* slots of one rank's tokens */
  const int32_t a = (int32_t)(slot / per_node);
  *rank = a * L + l;
  *pair = (int32_t)(slot - (int64_t)a * per_node);
}

#ifdef __cplusplus
}
#endif

#endif
