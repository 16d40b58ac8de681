/* ref_gemm.h — the readable reference GEMM (C, fp32 accumulation) and bf16 helpers shared by
 * the CPU and GPU tests and benchmarks. */
#ifndef MELD_TESTS_REF_GEMM_H
#define MELD_TESTS_REF_GEMM_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

/* bf16 <-> float (round to nearest even; NaN stays NaN). */
float ref_bf16_to_f32(uint16_t h);
uint16_t ref_f32_to_bf16(float f);

/* C[m,n] (fp32, ldc) = A[m,k] (bf16, lda) x B, B bf16 stored [n,k] (b_kn = 0: C = A B^T)
 * or [k,n] (b_kn = 1: C = A B), leading dimensions in elements. */
void ref_gemm_bf16(const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int b_kn,
                   float *c, int64_t ldc, int64_t m, int64_t n, int64_t k);

/* Relative Frobenius error ||got - want|| / ||want|| over an m x n block; got is bf16 with
 * ld_got, want fp32 with ld_want. Returns +inf if any got value is NaN or Inf. */
double ref_rel_err_bf16(const uint16_t *got, int64_t ld_got, const float *want, int64_t ld_want,
                        int64_t m, int64_t n);

#ifdef __cplusplus
}
#endif

#endif
