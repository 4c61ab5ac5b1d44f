/* swiglu.cuh - the one SwiGLU both L1 epilogues use (the pass in swiglu.cu and the fused
 * experts kernel), so the two give the same bits: silu(g) x u in fp32 on the bf16-rounded
 * L1 outputs, then the 1 x 128 quantiser's conversion (fp8_convert.cuh). */
#ifndef WARPSPEC_SWIGLU_CUH
#define WARPSPEC_SWIGLU_CUH

#include <math.h>

static __device__ __forceinline__ float moe_silu_mul(float g, float u) { return g / (1.0f + expf(-g)) * u; }

#endif
