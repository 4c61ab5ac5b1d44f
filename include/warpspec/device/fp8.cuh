/* warpspec/device/fp8.cuh - the FP8 (E4M3) codec on the device: conversions both ways and
 * the 1 x 128 block quantisation, one definition for every kernel that quantises or reads
 * FP8 (the quantisers, GEMM-side consumers, the MoE dispatch and layer, the MLA cache), so
 * all give the same bits as ws_fp8_quantize_1x128_host: scale = amax / 448 (1 for an
 * all-zero block), each value e4m3(x / scale), round to nearest even, saturating. */
#ifndef WARPSPEC_DEVICE_FP8_CUH
#define WARPSPEC_DEVICE_FP8_CUH

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "warpspec/fp8.h"

static __device__ __forceinline__ uint16_t ws_to_e4m3x2(float a, float b) {
  return (uint16_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

/* The e4m3 pair in the low (lo) or high (hi) 16 bits of w to an f16 pair (bits), exact: one
 * F2FP each, the high half by the instruction's H1 operand (shifting it down first in C
 * costs a SHF more per pair: 64 a thread and KV block in the few-head MLA decode's keys). */
static __device__ __forceinline__ uint32_t ws_e4m3x2_lo_to_f16x2(uint32_t w) {
  uint32_t r;
  asm("{.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, lo;}" : "=r"(r) : "r"(w));
  return r;
}
static __device__ __forceinline__ uint32_t ws_e4m3x2_hi_to_f16x2(uint32_t w) {
  uint32_t r;
  asm("{.reg .b16 lo, hi;\n\tmov.b32 {lo, hi}, %1;\n\tcvt.rn.f16x2.e4m3x2 %0, hi;}" : "=r"(r) : "r"(w));
  return r;
}
static __device__ __forceinline__ float2 ws_half2_bits_to_float2(uint32_t h) {
  return __half22float2(*(const __half2 *)&h);
}

/* Two e4m3 values (low byte first) to floats, exact (cvt.rn.f16x2.e4m3x2, then f16 -> f32). */
static __device__ __forceinline__ float2 ws_from_e4m3x2(uint16_t v) {
  return ws_half2_bits_to_float2(ws_e4m3x2_lo_to_f16x2(v));
}

static __device__ __forceinline__ float ws_fp8_scale_of(float amax) {
  return amax > 0.0f ? amax / WS_FP8_E4M3_MAX : 1.0f;
}

/* A lane's 8 bf16 (one 16-byte vector) quantised 1 x 128 where a half-warp holds each
 * 128-block (16 lanes x 8 values): the half-warp's |max| (every lane of the warp calls it;
 * one without values passes zeros), *scale, the 8 e4m3 bytes. */
static __device__ __forceinline__ uint2 ws_quantize_bf16x8_1x128(uint4 v, float *scale) {
  const uint32_t w[4] = {v.x, v.y, v.z, v.w};
  float f[8], amax = 0.0f;
#pragma unroll
  for (int e = 0; e < 4; e++) {
    f[2 * e] = __uint_as_float(w[e] << 16);
    f[2 * e + 1] = __uint_as_float(w[e] & 0xFFFF0000u);
    amax = fmaxf(amax, fmaxf(fabsf(f[2 * e]), fabsf(f[2 * e + 1])));
  }
#pragma unroll
  for (int o = 8; o > 0; o /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, o));
  const float s = ws_fp8_scale_of(amax);
  *scale = s;
  uint2 q;
  q.x = ws_to_e4m3x2(f[0] / s, f[1] / s) | (uint32_t)ws_to_e4m3x2(f[2] / s, f[3] / s) << 16;
  q.y = ws_to_e4m3x2(f[4] / s, f[5] / s) | (uint32_t)ws_to_e4m3x2(f[6] / s, f[7] / s) << 16;
  return q;
}

#endif
