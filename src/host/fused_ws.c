/* fused_ws.c — the fused kernels' split-K / stream-K workspaces (fused_ws.h). */
#include "fused_ws.h"

#include <pthread.h>
#include <string.h>

#define FUSED_WS_MAX 64
typedef struct {
  int used, owner, dev;
  cudaStream_t stream;
  void *ws;
  size_t ws_bytes;
  uint32_t *counters;
  size_t words;
} fused_ws_t;
static fused_ws_t g_fws[FUSED_WS_MAX];
static pthread_mutex_t g_fws_lock = PTHREAD_MUTEX_INITIALIZER;

int fused_ws_get(int owner, cudaStream_t stream, size_t bytes, size_t words, float **ws,
                            uint32_t **counters) {
  int dev = 0, rc = 1;
  if (cudaGetDevice(&dev) != cudaSuccess) return 1;
  enum cudaStreamCaptureStatus cs = cudaStreamCaptureStatusNone;
  if (cudaStreamIsCapturing(stream, &cs) != cudaSuccess) return 1;
  pthread_mutex_lock(&g_fws_lock);
  fused_ws_t *e = NULL;
  for (int i = 0; i < FUSED_WS_MAX && !e; i++)
    if (g_fws[i].used && g_fws[i].owner == owner && g_fws[i].dev == dev && g_fws[i].stream == stream) e = &g_fws[i];
  for (int i = 0; i < FUSED_WS_MAX && !e; i++)
    if (!g_fws[i].used) {
      e = &g_fws[i];
      memset(e, 0, sizeof *e);
      e->used = 1, e->owner = owner, e->dev = dev, e->stream = stream;
    }
  if (e && (e->ws_bytes < bytes || e->words < words) && cs == cudaStreamCaptureStatusNone) {
    if (cudaStreamSynchronize(stream) == cudaSuccess) { /* earlier calls may still use them */
      cudaFree(e->ws);
      cudaFree(e->counters);
      e->ws = NULL, e->counters = NULL, e->ws_bytes = 0, e->words = 0;
      if (cudaMalloc(&e->ws, bytes) == cudaSuccess && cudaMalloc((void **)&e->counters, words * 4) == cudaSuccess &&
          cudaMemset(e->counters, 0, words * 4) == cudaSuccess) {
        e->ws_bytes = bytes, e->words = words;
      } else {
        (void)cudaGetLastError();
        cudaFree(e->ws);
        cudaFree(e->counters);
        e->ws = NULL, e->counters = NULL;
      }
    }
  }
  if (e && e->ws_bytes >= bytes && e->words >= words) {
    *ws = (float *)e->ws;
    *counters = e->counters;
    rc = 0;
  }
  pthread_mutex_unlock(&g_fws_lock);
  return rc;
}
