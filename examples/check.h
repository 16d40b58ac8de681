/* check.h — the examples' error checks: print the failing call and meld's sentence (or CUDA's),
 * then exit. */
#ifndef MELD_EXAMPLES_CHECK_H
#define MELD_EXAMPLES_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime.h>
#include <meld.h>

#define CHECK_MELD(call)                                                                         \
  do {                                                                                           \
    if ((call) != MELD_OK) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, meld_last_error());          \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)
#define CHECK_CUDA(call)                                                                         \
  do {                                                                                           \
    cudaError_t e_ = (call);                                                                     \
    if (e_ != cudaSuccess) {                                                                     \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_));     \
      exit(1);                                                                                   \
    }                                                                                            \
  } while (0)

#endif
