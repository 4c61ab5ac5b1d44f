/* bench_fill.cuh - random FP8 operands and block scales for the GEMM benchmarks
 * (bench_gemm.cu, bench_gemm_gather.cu): the same data from the same seed in both. Static:
 * each benchmark file has its own copy of the kernels. */
#ifndef WARPSPEC_BENCH_FILL_CUH
#define WARPSPEC_BENCH_FILL_CUH

#include <stddef.h>
#include <stdint.h>

static __global__ void fill_fp8(uint8_t *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 31;
    const uint8_t b = (uint8_t)(x >> 24);
    p[i] = (b & 0x7F) == 0x7F ? (uint8_t)(b & 0xF0) : b; /* no NaN */
  }
}

static __global__ void fill_scale(float *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x)
    p[i] = 1.0f / 64 + (float)(((seed + i) * 2654435761u) % 1000) / 64000.0f;
}

#endif
