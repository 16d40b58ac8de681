/* ref_gemm.c — see ref_gemm.h. Deliberately plain: the triple loop is the specification. */
#include "ref_gemm.h"

#include <math.h>
#include <string.h>

float ref_bf16_to_f32(uint16_t h) {
  uint32_t u = (uint32_t)h << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t ref_f32_to_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, sizeof u);
  if ((u & 0x7fffffffu) > 0x7f800000u) return (uint16_t)((u >> 16) | 0x40); /* quiet NaN */
  u += 0x7fffu + ((u >> 16) & 1u); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

void ref_gemm_bf16(const uint16_t *a, int64_t lda, const uint16_t *b, int64_t ldb, int b_kn,
                   float *c, int64_t ldc, int64_t m, int64_t n, int64_t k) {
  for (int64_t i = 0; i < m; i++) {
    const uint16_t *arow = a + i * lda;
    float *crow = c + i * ldc;
    if (b_kn) { /* C[i,:] = sum_p A[i,p] * B[p,:]: streams rows of B */
      for (int64_t j = 0; j < n; j++) crow[j] = 0.0f;
      for (int64_t p = 0; p < k; p++) {
        const float av = ref_bf16_to_f32(arow[p]);
        const uint16_t *brow = b + p * ldb;
        for (int64_t j = 0; j < n; j++) crow[j] += av * ref_bf16_to_f32(brow[j]);
      }
    } else { /* C[i,j] = dot(A[i,:], B[j,:]): both rows contiguous */
      for (int64_t j = 0; j < n; j++) {
        const uint16_t *brow = b + j * ldb;
        float s = 0.0f;
        for (int64_t p = 0; p < k; p++) s += ref_bf16_to_f32(arow[p]) * ref_bf16_to_f32(brow[p]);
        crow[j] = s;
      }
    }
  }
}

double ref_rel_err_bf16(const uint16_t *got, int64_t ld_got, const float *want, int64_t ld_want,
                        int64_t m, int64_t n) {
  double num = 0.0, den = 0.0;
  for (int64_t i = 0; i < m; i++)
    for (int64_t j = 0; j < n; j++) {
      const double g = ref_bf16_to_f32(got[i * ld_got + j]);
      const double w = want[i * ld_want + j];
      if (!isfinite(g)) return INFINITY;
      num += (g - w) * (g - w);
      den += w * w;
    }
  if (den == 0.0) return num == 0.0 ? 0.0 : INFINITY;
  return sqrt(num / den);
}
