/* ref_coll.c — C references of the collectives (see ref_coll.h). Written for clarity. */
#include "ref_coll.h"

#include <math.h>
#include <string.h>

size_t ref_elem_bytes(meld_dtype_t dtype) { return dtype == MELD_BF16 ? 2 : 4; }

double ref_load(const void *buf, meld_dtype_t dtype, size_t i) {
  if (dtype == MELD_BF16) return ref_bf16_to_f32(((const uint16_t *)buf)[i]);
  return ((const float *)buf)[i];
}

void ref_store(void *buf, meld_dtype_t dtype, size_t i, double v) {
  if (dtype == MELD_BF16) ((uint16_t *)buf)[i] = ref_f32_to_bf16((float)v);
  else ((float *)buf)[i] = (float)v;
}

void ref_all_gather(int nranks, const void *const *send, void *recv, size_t count, meld_dtype_t dtype) {
  size_t bytes = count * ref_elem_bytes(dtype);
  for (int r = 0; r < nranks; r++) memcpy((char *)recv + (size_t)r * bytes, send[r], bytes);
}

void ref_reduce_scatter_f64(int nranks, int rank, const void *const *send, double *out,
                            size_t count, meld_dtype_t dtype) {
  for (size_t i = 0; i < count; i++) {
    double s = 0;
    for (int r = 0; r < nranks; r++) s += ref_load(send[r], dtype, (size_t)rank * count + i);
    out[i] = s;
  }
}

void ref_all_reduce_f64(int nranks, const void *const *send, double *out, size_t count,
                        meld_dtype_t dtype) {
  for (size_t i = 0; i < count; i++) {
    double s = 0;
    for (int r = 0; r < nranks; r++) s += ref_load(send[r], dtype, i);
    out[i] = s;
  }
}

void ref_all_reduce_f32(int nranks, const void *const *send, void *out, size_t count,
                        meld_dtype_t dtype) {
  for (size_t i = 0; i < count; i++) {
    float s = 0.0f;
    for (int r = 0; r < nranks; r++) s += (float)ref_load(send[r], dtype, i);
    ref_store(out, dtype, i, s);
  }
}

void ref_all_to_allv(int nranks, int rank, const void *const *send, const size_t *send_counts,
                     const size_t *send_offsets, void *recv, const size_t *recv_offsets,
                     meld_dtype_t dtype) {
  size_t es = ref_elem_bytes(dtype);
  for (int r = 0; r < nranks; r++) {
    size_t n = send_counts[(size_t)r * nranks + rank];
    size_t so = send_offsets[(size_t)r * nranks + rank];
    memcpy((char *)recv + recv_offsets[r] * es, (const char *)send[r] + so * es, n * es);
  }
}

double ref_rel_err(const void *got, meld_dtype_t dtype, const double *ref, size_t n) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    double g = ref_load(got, dtype, i);
    if (!isfinite(g)) return INFINITY;
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return den > 0 ? sqrt(num / den) : sqrt(num);
}

double ref_max_rel_err(const void *got, meld_dtype_t dtype, const double *ref, size_t n, double atol) {
  double m = 0;
  for (size_t i = 0; i < n; i++) {
    double g = ref_load(got, dtype, i);
    if (!isfinite(g)) return INFINITY;
    double e = fabs(g - ref[i]) / (fabs(ref[i]) + atol);
    if (e > m) m = e;
  }
  return m;
}
