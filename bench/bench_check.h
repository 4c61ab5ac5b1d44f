/* bench_check.h - what the benchmark programs share: error checks that print where and
 * what and make the enclosing function return -1, and the median of timings. */
#ifndef WARPSPEC_BENCH_CHECK_H
#define WARPSPEC_BENCH_CHECK_H

#include <stdio.h>
#include <stdlib.h>

#include <cuda_runtime_api.h>

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
