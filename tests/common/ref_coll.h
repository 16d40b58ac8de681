/* ref_coll.h — readable C references of the collectives on host arrays, and the helpers the
 * tests compare with: bf16 <-> float, relative Frobenius error.
 *
 * Inputs are per-rank arrays `send[r]` (what rank r passes as send); outputs are what ONE
 * rank (`rank`) must find in its recv. Sums are taken in fp64 (ref_*_f64 give the exact
 * reference) and, for the bitwise-style checks, in fp32 in rank order (ref_*_f32). */
#ifndef MELD_TESTS_REF_COLL_H
#define MELD_TESTS_REF_COLL_H

#include <stddef.h>
#include <stdint.h>

#include "meld.h"
#include "ref_gemm.h" /* ref_f32_to_bf16, ref_bf16_to_f32 (round to nearest even) */

#ifdef __cplusplus
extern "C" {
#endif

/* Element i of a dtype array, as double. */
double ref_load(const void *buf, meld_dtype_t dtype, size_t i);
/* Stores v (rounded to dtype) at element i. */
void ref_store(void *buf, meld_dtype_t dtype, size_t i, double v);
size_t ref_elem_bytes(meld_dtype_t dtype);

/* AllGather: recv[r * count + i] = send[r][i]. Exact (a byte copy). */
void ref_all_gather(int nranks, const void *const *send, void *recv, size_t count, meld_dtype_t dtype);

/* ReduceScatter for `rank`: out[i] = sum_r send[r][rank * count + i], in fp64. */
void ref_reduce_scatter_f64(int nranks, int rank, const void *const *send, double *out,
                            size_t count, meld_dtype_t dtype);

/* AllReduce: out[i] = sum_r send[r][i], in fp64. */
void ref_all_reduce_f64(int nranks, const void *const *send, double *out, size_t count,
                        meld_dtype_t dtype);
/* Same sum in fp32, ranks in order 0..P-1, rounded to dtype at the end (what an fp32-
 * accumulating kernel computes up to summation order). */
void ref_all_reduce_f32(int nranks, const void *const *send, void *out, size_t count,
                        meld_dtype_t dtype);

/* All-to-all(v) for `rank`: block from rank r (send[r] + send_offsets[r][rank], send_counts[r]
 * [rank] elements) lands at recv + recv_offsets[r]. counts/offsets are [nranks][nranks]
 * row-major (row = the sending rank's arrays). Exact. */
void ref_all_to_allv(int nranks, int rank, const void *const *send, const size_t *send_counts,
                     const size_t *send_offsets, void *recv, const size_t *recv_offsets,
                     meld_dtype_t dtype);

/* Relative Frobenius error ||got - ref|| / ||ref|| of n elements (ref all zero: absolute).
 * Returns INFINITY if any element of got is NaN or infinite. */
double ref_rel_err(const void *got, meld_dtype_t dtype, const double *ref, size_t n);
/* Largest |got - ref| / (|ref| + atol) over n elements (INFINITY on NaN). */
double ref_max_rel_err(const void *got, meld_dtype_t dtype, const double *ref, size_t n, double atol);

#ifdef __cplusplus
}
#endif

#endif
