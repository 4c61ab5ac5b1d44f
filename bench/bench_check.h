/* bench_check.h - error checks of the benchmark programs: print where and what, and
 * make the enclosing function return -1. */
#ifndef WARPSPEC_BENCH_CHECK_H
#define WARPSPEC_BENCH_CHECK_H

#include <stdio.h>

#include <cuda_runtime_api.h>

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

#endif
