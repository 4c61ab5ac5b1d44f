/* quantize.cu - BF16 -> FP8 E4M3 with DeepSeek-style block scales, on the GPU.
 *
 * 1 x 128 (activations): one warp per block of 128 values of a row: each lane holds 4,
 * the warp reduces |max| by shuffles, scale = amax / 448 (1 for an all-zero block), and
 * every value becomes e4m3(x / scale) (round to nearest even, saturating: the same
 * numbers as ws_fp8_quantize_1x128_host, which the tests compare bit for bit).
 * 128 x 128 (weights): one CTA per block: a block-wide |max|, then the same conversion.
 * Tested on the GPU bit for bit against the host definition (tests/gpu/test_gemm_gpu). */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/fp8.h"

#include <cuda_bf16.h>

#include "warpspec/device/fp8.cuh"

/* scale_ld 0: scale[r][cols / 128]; else K-block-major scale[cols / 128][scale_ld]. */
__global__ void __launch_bounds__(256) quantize_1x128_kernel(const __nv_bfloat16 *x, size_t rows, size_t cols, size_t ld,
                                                             uint8_t *q, float *scale, size_t scale_ld) {
  const size_t kb = cols / 128, blocks = rows * kb;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  for (size_t w = warp; w < blocks; w += (size_t)gridDim.x * blockDim.x / 32) {
    const size_t r = w / kb, c0 = (w % kb) * 128 + (size_t)lane * 4;
    const __nv_bfloat162 *src = (const __nv_bfloat162 *)(x + r * ld + c0);
    const float2 v0 = __bfloat1622float2(src[0]), v1 = __bfloat1622float2(src[1]);
    float amax = fmaxf(fmaxf(fabsf(v0.x), fabsf(v0.y)), fmaxf(fabsf(v1.x), fabsf(v1.y)));
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = ws_fp8_scale_of(amax);
    const uint32_t packed = ws_to_e4m3x2(v0.x / s, v0.y / s) | (uint32_t)ws_to_e4m3x2(v1.x / s, v1.y / s) << 16;
    *(uint32_t *)(q + r * cols + c0) = packed;
    if (lane == 0) scale[scale_ld ? (w % kb) * scale_ld + r : w] = s;
  }
}

__global__ void __launch_bounds__(256) quantize_128x128_kernel(const __nv_bfloat16 *x, size_t rows, size_t cols, size_t ld,
                                                               uint8_t *q, float *scale) {
  __shared__ float warp_max[8];
  const size_t kb = cols / 128, rb = blockIdx.y, cb = blockIdx.x;
  const size_t r_end = (rb + 1) * 128 < rows ? (rb + 1) * 128 : rows;
  float amax = 0.0f;
  for (size_t r = rb * 128 + threadIdx.x / 64; r < r_end; r += 4) {
    const __nv_bfloat162 v = *(const __nv_bfloat162 *)(x + r * ld + cb * 128 + (threadIdx.x % 64) * 2);
    const float2 f = __bfloat1622float2(v);
    amax = fmaxf(amax, fmaxf(fabsf(f.x), fabsf(f.y)));
  }
#pragma unroll
  for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  if (threadIdx.x % 32 == 0) warp_max[threadIdx.x / 32] = amax;
  __syncthreads();
  amax = 0.0f;
#pragma unroll
  for (int i = 0; i < 8; i++) amax = fmaxf(amax, warp_max[i]);
  const float s = ws_fp8_scale_of(amax);
  for (size_t r = rb * 128 + threadIdx.x / 64; r < r_end; r += 4) {
    const size_t c = cb * 128 + (threadIdx.x % 64) * 2;
    const float2 f = __bfloat1622float2(*(const __nv_bfloat162 *)(x + r * ld + c));
    *(uint16_t *)(q + r * cols + c) = ws_to_e4m3x2(f.x / s, f.y / s);
  }
  if (threadIdx.x == 0) scale[rb * kb + cb] = s;
}

/* rows x ld inputs fit the address space: the grids' block counts below cannot wrap */
static ws_status check(const char *fn, const void *x, size_t rows, size_t cols, size_t ld, const void *q,
                       const float *scale) {
  WS_REQUIRE(x && q && scale, "%s: x, q or scale is NULL", fn);
  WS_REQUIRE(cols % 128 == 0, "%s: cols %zu is not a multiple of 128", fn, cols);
  WS_REQUIRE(ld >= cols && ld % 2 == 0, "%s: ld %zu must be even and >= cols %zu", fn, ld, cols);
  size_t bytes = 0;
  WS_REQUIRE(ws_size_mul3(rows, ld, 2, &bytes) && ws_span_fits(x, bytes),
             "%s: rows %zu x ld %zu bf16 values run past the end of the address space", fn, rows, ld);
  WS_REQUIRE(((uintptr_t)x & 7u) == 0 && ((uintptr_t)q & 3u) == 0, "%s: x must be 8-byte and q 4-byte aligned", fn);
  return WS_OK;
}

static ws_status quantize_1x128(const char *fn, const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q,
                                float *scale, size_t scale_ld, cudaStream_t stream) {
  ws_status s = check(fn, x_bf16, rows, cols, ld, q, scale);
  if (s != WS_OK || rows == 0) return s;
  const size_t warps = rows * (cols / 128);
  const unsigned grid = (unsigned)((warps + 7) / 8 < 65535 * 8 ? (warps + 7) / 8 : 65535 * 8);
  quantize_1x128_kernel<<<grid, 256, 0, stream>>>((const __nv_bfloat16 *)x_bf16, rows, cols, ld, q, scale, scale_ld);
  WS_CUDA_TRY(cudaGetLastError());
  return WS_OK;
}

extern "C" ws_status ws_fp8_quantize_1x128(const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q,
                                           float *scale, cudaStream_t stream) {
  return quantize_1x128("ws_fp8_quantize_1x128", x_bf16, rows, cols, ld, q, scale, 0, stream);
}

extern "C" ws_status ws_fp8_quantize_1x128_kmajor(const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q,
                                                  float *scale, size_t scale_ld, cudaStream_t stream) {
  WS_REQUIRE(scale_ld >= rows && scale_ld % 4 == 0,
             "ws_fp8_quantize_1x128_kmajor: scale_ld %zu must be >= rows %zu and a multiple of 4", scale_ld, rows);
  return quantize_1x128("ws_fp8_quantize_1x128_kmajor", x_bf16, rows, cols, ld, q, scale, scale_ld, stream);
}

extern "C" ws_status ws_fp8_quantize_128x128(const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q,
                                             float *scale, cudaStream_t stream) {
  ws_status s = check("ws_fp8_quantize_128x128", x_bf16, rows, cols, ld, q, scale);
  if (s != WS_OK || rows == 0) return s;
  WS_REQUIRE((rows + 127) / 128 <= 65535, "ws_fp8_quantize_128x128: %zu rows is too many", rows);
  const dim3 grid((unsigned)(cols / 128), (unsigned)((rows + 127) / 128), 1);
  quantize_128x128_kernel<<<grid, 256, 0, stream>>>((const __nv_bfloat16 *)x_bf16, rows, cols, ld, q, scale);
  WS_CUDA_TRY(cudaGetLastError());
  return WS_OK;
}
