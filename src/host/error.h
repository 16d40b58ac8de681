/* error.h — result codes with a sentence: the thread's last error, and CHECK macros. */
#ifndef MELD_HOST_ERROR_H
#define MELD_HOST_ERROR_H

#include <stdio.h>

#include "meld.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Records the calling thread's last error message (printf format) and returns `result`, so
 * that `return meld_error(MELD_ERR_INVALID_ARG, "meld_x: k %d < 1", k);` reads naturally.
 * Also logs the message at level INFO (MELD_DEBUG=INFO): the caller gets it from
 * meld_last_error(), and asynchronous failures are logged at WARN where they are found. */
meld_result_t meld_error(meld_result_t result, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));

/* Prefixes the thread's current message with "prefix: " (adds context while unwinding). */
void meld_error_prefix(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* Clears the thread's last error (called at the entry of public functions). */
void meld_error_clear(void);

#ifdef __cplusplus
}
#endif

/* For legality checks of the form `int check(..., char *why, size_t len)` that return 0 when
 * legal: writes the sentence into why (if given) and returns 1. */
#define MELD_WHY(...)                                    \
  do {                                                   \
    if (why && len) snprintf(why, len, __VA_ARGS__);     \
    return 1;                                            \
  } while (0)

/* Propagate a meld_result_t; jump to a cleanup label on error. */
#define MELD_CHECK(expr)                       \
  do {                                         \
    meld_result_t meld_r_ = (expr);            \
    if (meld_r_ != MELD_OK) return meld_r_;    \
  } while (0)

#define MELD_CHECK_GOTO(expr, res, label)      \
  do {                                         \
    (res) = (expr);                            \
    if ((res) != MELD_OK) goto label;          \
  } while (0)

/* A CUDA runtime call; on failure records "what: cudaErrorName (message)". */
#define MELD_CUDA_CHECK(call)                                                            \
  do {                                                                                   \
    cudaError_t meld_e_ = (call);                                                        \
    if (meld_e_ != cudaSuccess)                                                          \
      return meld_error(MELD_ERR_CUDA, "%s:%d %s: %s (%s)", __FILE__, __LINE__, #call,   \
                        cudaGetErrorName(meld_e_), cudaGetErrorString(meld_e_));         \
  } while (0)

#define MELD_CUDA_CHECK_GOTO(call, res, label)                                           \
  do {                                                                                   \
    cudaError_t meld_e_ = (call);                                                        \
    if (meld_e_ != cudaSuccess) {                                                        \
      (res) = meld_error(MELD_ERR_CUDA, "%s:%d %s: %s (%s)", __FILE__, __LINE__, #call,  \
                         cudaGetErrorName(meld_e_), cudaGetErrorString(meld_e_));        \
      goto label;                                                                        \
    }                                                                                    \
  } while (0)

#endif
