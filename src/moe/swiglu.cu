/* swiglu.cu - the L1 epilogue of an MoE expert as its own pass: silu(gate) x up in fp32,
 * then E4M3 with 1 x 128 block scales (the unfused path; the fused MegaMoE kernel does
 * the same in its L1 epilogue). One warp per 128-column block of a row: each lane takes
 * 4 columns of gate and of up, the warp reduces |max|, scale = amax / 448 (1 for zeros),
 * every value e4m3(a x (1 / scale)) -- swiglu.cuh's steps, the fused kernel's bits. */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/device/fp8.cuh"
#include "swiglu.cuh"
#include "swiglu_internal.h"
#include "warpspec/moe.h"

#include <cuda_bf16.h>

__global__ void __launch_bounds__(256) swiglu_quant_kernel(const __nv_bfloat16 *h, size_t rows, const int *live_rows,
                                                           size_t inter, uint8_t *q, float *scale, size_t scale_ld) {
  if (live_rows) rows = min(rows, (size_t)max(0, *live_rows)); /* rows past it are unused */
  const size_t kb = inter / 128, blocks = rows * kb;
  const size_t warp = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  for (size_t w = warp; w < blocks; w += (size_t)gridDim.x * blockDim.x / 32) {
    const size_t r = w / kb, c0 = (w % kb) * 128 + (size_t)lane * 4;
    const __nv_bfloat162 *g2 = (const __nv_bfloat162 *)(h + r * 2 * inter + c0);
    const __nv_bfloat162 *u2 = (const __nv_bfloat162 *)(h + r * 2 * inter + inter + c0);
    const float2 g0 = __bfloat1622float2(g2[0]), g1 = __bfloat1622float2(g2[1]);
    const float2 u0 = __bfloat1622float2(u2[0]), u1 = __bfloat1622float2(u2[1]);
    const float a0 = moe_silu_mul(g0.x, u0.x), a1 = moe_silu_mul(g0.y, u0.y), a2 = moe_silu_mul(g1.x, u1.x), a3 = moe_silu_mul(g1.y, u1.y);
    float amax = fmaxf(fmaxf(fabsf(a0), fabsf(a1)), fmaxf(fabsf(a2), fabsf(a3)));
#pragma unroll
    for (int o = 16; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
    const float s = ws_fp8_scale_of(amax), f = moe_act_inv_scale(s);
    *(uint32_t *)(q + r * inter + c0) = ws_to_e4m3x2(a0 * f, a1 * f) | (uint32_t)ws_to_e4m3x2(a2 * f, a3 * f) << 16;
    if (lane == 0) scale[scale_ld ? (w % kb) * scale_ld + r : w] = s;
  }
}

extern "C" ws_status moe_swiglu_quant_live(const void *h, size_t rows, const int *live_rows, size_t inter, uint8_t *q,
                                           float *scale, size_t scale_ld, cudaStream_t stream) {
  WS_REQUIRE(h && q && scale, "ws_moe_swiglu_quant: h, q or scale is NULL");
  WS_REQUIRE(inter > 0 && inter % 128 == 0, "ws_moe_swiglu_quant: inter %zu is not a positive multiple of 128", inter);
  WS_REQUIRE(scale_ld == 0 || (scale_ld >= rows && scale_ld % 4 == 0),
             "ws_moe_swiglu_quant: scale_ld %zu must be 0 (row-major) or >= rows %zu and a multiple of 4", scale_ld, rows);
  WS_REQUIRE(((uintptr_t)h & 7u) == 0 && ((uintptr_t)q & 3u) == 0, "ws_moe_swiglu_quant: h must be 8-byte and q "
             "4-byte aligned");
  size_t bytes = 0; /* h: rows x 2 inter bf16; the grid's warp count below cannot wrap then */
  WS_REQUIRE(ws_size_mul3(rows, inter, 4, &bytes) && ws_span_fits(h, bytes),
             "ws_moe_swiglu_quant: rows %zu x 2 inter %zu bf16 values run past the end of the address space", rows, inter);
  if (rows == 0) return WS_OK;
  /* a grid-stride loop over warps of 8 per CTA, at most 4096 CTAs: with a device-side
   * row count most of a worst-case grid would only launch and leave */
  const size_t warps = rows * (inter / 128);
  const unsigned grid = (unsigned)((warps + 7) / 8 < 4096 ? (warps + 7) / 8 : 4096);
  swiglu_quant_kernel<<<grid, 256, 0, stream>>>((const __nv_bfloat16 *)h, rows, live_rows, inter, q, scale, scale_ld);
  WS_CUDA_TRY(cudaGetLastError());
  return WS_OK;
}

extern "C" ws_status ws_moe_swiglu_quant(const void *h, size_t rows, size_t inter, uint8_t *q, float *scale,
                                         size_t scale_ld, cudaStream_t stream) {
  return moe_swiglu_quant_live(h, rows, NULL, inter, q, scale, scale_ld, stream);
}
