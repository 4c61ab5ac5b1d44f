/* attn_device.cuh - device helpers the attention kernels share. */
#ifndef WARPSPEC_ATTN_DEVICE_CUH
#define WARPSPEC_ATTN_DEVICE_CUH

#include <cuda_bf16.h>
#include <stdint.h>

/* 2^x on the SFU (ex2.approx, flush-to-zero): the softmax's exponent with the scale and
 * log2(e) folded into one FMA before it; 2^-inf = +0. */
static __device__ __forceinline__ float attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Two floats as bf16x2 (lo in the low half: the lower column), round to nearest even. */
static __device__ __forceinline__ uint32_t attn_pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *(const uint32_t *)&h;
}

#define ATTN_LN2 0.69314718055994531f
#define ATTN_LOG2E 1.4426950408889634f

#endif
