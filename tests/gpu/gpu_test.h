/* gpu_test.h - shared by the GPU tests: skip without an sm_90 GPU, checked CUDA
 * calls, fresh random data (the stream of testdata/random.h, seeded from the time). */
#ifndef WARPSPEC_GPU_TEST_H
#define WARPSPEC_GPU_TEST_H

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cuda_runtime_api.h>

#include "../../testdata/random.h"
#include "../test.h"
#include "warpspec/config.h"

#define CUDA_OK(call)                                                                        \
  do {                                                                                       \
    cudaError_t e_ = (call);                                                                 \
    if (e_ != cudaSuccess) {                                                                 \
      fprintf(stderr, "%s:%d: %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

#define WS_OK_OR_DIE(call)                                                                   \
  do {                                                                                       \
    ws_status s_ = (call);                                                                   \
    if (s_ != WS_OK) {                                                                       \
      fprintf(stderr, "%s:%d: %s: %s: %s\n", __FILE__, __LINE__, #call, ws_strerror(s_), ws_last_error()); \
      exit(1);                                                                               \
    }                                                                                        \
  } while (0)

/* Zeroed host memory for count x size bytes (plus `extra`), or exit with the size that failed.
 * The product is checked: a size the compiler can prove may wrap is a bug, not a warning. */
static inline void *host_alloc(size_t count, size_t size, size_t extra) {
  if (size && count > (SIZE_MAX - extra) / size) {
    fprintf(stderr, "host_alloc: %zu x %zu + %zu bytes overflows size_t\n", count, size, extra);
    exit(1);
  }
  void *p = calloc(count * size + extra, 1);
  if (!p) {
    fprintf(stderr, "host_alloc: calloc(%zu) failed\n", count * size + extra);
    exit(1);
  }
  return p;
}

/* Exit 77 (CTest: skipped) unless an sm_90 GPU is present. */
static inline void require_hopper(void) {
  int n = 0;
  if (cudaGetDeviceCount(&n) != cudaSuccess || n == 0) {
    printf("no CUDA device: skipped\n");
    exit(TEST_SKIP);
  }
  int major = 0;
  CUDA_OK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0));
  if (major != 9) {
    printf("device 0 is not sm_90: skipped\n");
    exit(TEST_SKIP);
  }
}

/* The test's stream, one per translation unit; the generators of testdata/ take &rng_state. */
static uint64_t rng_state = TD_RNG_START;
static inline void rng_seed_from_time(void) {
  rng_state ^= (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull;
  printf("random seed %llu\n", (unsigned long long)rng_state);
}
static inline uint32_t rng_u32(void) { return td_rng_u32(&rng_state); }
static inline void rng_fill(void *p, size_t bytes) {
  uint8_t *b = (uint8_t *)p;
  for (size_t i = 0; i < bytes; i++) b[i] = (uint8_t)rng_u32();
}

#endif
