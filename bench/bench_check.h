/* bench_check.h - what the benchmark programs share: error checks that print where and
 * what and make the enclosing function return -1, and the median of timings. */
#ifndef WARPSPEC_BENCH_CHECK_H
#define WARPSPEC_BENCH_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "warpspec/comm.h"
#include "warpspec/knobs.h"
#include "warpspec/status.h"

#define BENCH_FAIL(what, why)                                                   \
  do {                                                                          \
    fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, (what), (why));       \
    return -1;                                                                  \
  } while (0)

/* A CUDA runtime call. */
#define CK(call)                                                                \
  do {                                                                          \
    cudaError_t e_ = (call);                                                    \
    if (e_ != cudaSuccess) BENCH_FAIL(#call, cudaGetErrorString(e_));           \
  } while (0)

/* A warpspec call: the status name and the library's message. */
#define WK(call)                                                                \
  do {                                                                          \
    ws_status s_ = (call);                                                      \
    if (s_ != WS_OK) {                                                          \
      fprintf(stderr, "%s:%d %s: %s: %s\n", __FILE__, __LINE__, #call, ws_strerror(s_), ws_last_error()); \
      return -1;                                                                \
    }                                                                           \
  } while (0)

/* Force a library knob (value NULL: unset it) between two variants of a benchmark: the
 * library reads its knobs once (docs/knobs.md), so the change is followed by a reload. */
static inline int bench_set_knob(const char *name, const char *value) {
  if ((value ? setenv(name, value, 1) : unsetenv(name)) != 0) BENCH_FAIL(value ? "setenv" : "unsetenv", name);
  WK(ws_knobs_reload());
  return 0;
}

/* A benchmark run under `warpspec run -n N`: the communicator the launcher's environment
 * describes, this rank, the number of ranks and this rank's device. */
static inline int bench_comm_open(ws_comm **comm, int *rank, int *nranks, struct cudaDeviceProp *prop) {
  WK(ws_comm_init_from_env(comm));
  WK(ws_comm_rank(*comm, rank));
  WK(ws_comm_size(*comm, nranks));
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(prop, dev));
  return 0;
}

/* Work on several GPUs at once, timed: an event on each GPU g's stream st[g] (n <= 8), then
 * launch(ctx), which queues the work on those streams, then an event on each again; *ms the
 * slowest GPU's time, best of 5 rounds after one warm-up round, every GPU idle before each. */
#define BENCH_MAX_GPUS 8
static inline int bench_gpus_best_ms(int n, cudaStream_t *st, int (*launch)(void *ctx), void *ctx, double *ms) {
  if (n < 1 || n > BENCH_MAX_GPUS) BENCH_FAIL("bench_gpus_best_ms", "1 to 8 GPUs");
  cudaEvent_t beg[BENCH_MAX_GPUS], end[BENCH_MAX_GPUS];
  for (int g = 0; g < n; g++) {
    CK(cudaSetDevice(g));
    CK(cudaEventCreate(&beg[g]));
    CK(cudaEventCreate(&end[g]));
  }
  double best = 1e30;
  for (int rep = 0; rep < 6; rep++) {
    for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); CK(cudaDeviceSynchronize()); }
    for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); CK(cudaEventRecord(beg[g], st[g])); }
    if (launch(ctx)) return -1;
    for (int g = 0; g < n; g++) { CK(cudaSetDevice(g)); CK(cudaEventRecord(end[g], st[g])); }
    double worst = 0;
    for (int g = 0; g < n; g++) {
      CK(cudaSetDevice(g));
      CK(cudaEventSynchronize(end[g]));
      float t;
      CK(cudaEventElapsedTime(&t, beg[g], end[g]));
      if (t > worst) worst = t;
    }
    if (rep > 0 && worst < best) best = worst; /* rep 0 warms up */
  }
  for (int g = 0; g < n; g++) {
    CK(cudaSetDevice(g));
    CK(cudaEventDestroy(beg[g]));
    CK(cudaEventDestroy(end[g]));
  }
  *ms = best;
  return 0;
}

/* The median of n timings (sorts them in place). */
static inline int bench_cmp_float_(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}
static inline float bench_median(float *v, int n) {
  qsort(v, (size_t)n, sizeof v[0], bench_cmp_float_);
  return v[n / 2];
}

#endif
