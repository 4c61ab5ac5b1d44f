/* fp8_convert.cuh - the device side of the 1 x 128 quantisation, shared by the quantiser
 * kernels and the MoE low-latency dispatch, so both give the same bits as
 * ws_fp8_quantize_1x128_host: scale = amax / 448 (1 for an all-zero block), each value
 * e4m3(x / scale), round to nearest even, saturating. */
#ifndef WARPSPEC_FP8_CONVERT_CUH
#define WARPSPEC_FP8_CONVERT_CUH

#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include "warpspec/fp8.h"

static __device__ __forceinline__ uint16_t ws_to_e4m3x2(float a, float b) {
  return (uint16_t)__nv_cvt_float2_to_fp8x2(make_float2(a, b), __NV_SATFINITE, __NV_E4M3);
}

/* Two e4m3 values (low byte first) to floats, exact (cvt.rn.f16x2.e4m3x2, then f16 -> f32). */
static __device__ __forceinline__ float2 ws_from_e4m3x2(uint16_t v) {
  const __half2_raw h = __nv_cvt_fp8x2_to_halfraw2((__nv_fp8x2_storage_t)v, __NV_E4M3);
  return __half22float2(*(const __half2 *)&h);
}

static __device__ __forceinline__ float ws_fp8_scale_of(float amax) {
  return amax > 0.0f ? amax / WS_FP8_E4M3_MAX : 1.0f;
}

#endif
