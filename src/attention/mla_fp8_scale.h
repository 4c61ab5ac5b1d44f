/* mla_fp8_scale.h - the FP8 latent cache's tile scale, one definition for the host
 * quantiser (attn_reference.c) and the GPU one (mla_fp8_cache.cu), which must write the
 * same bytes: 2^ceil(log2(amax / 448)), 1 for an all-zero tile. A power of two, so
 * x / scale is exact before the rounding to E4M3 and e4m3 x scale is exact in BF16. */
#ifndef WARPSPEC_MLA_FP8_SCALE_H
#define WARPSPEC_MLA_FP8_SCALE_H

#include <math.h>

#include "warpspec/fp8.h"

#ifdef __CUDACC__
#define MLA_FP8_HD static __host__ __device__ __forceinline__
#else
#define MLA_FP8_HD static inline
#endif

MLA_FP8_HD float mla_fp8_tile_scale(float amax) {
  if (!(amax > 0.0f)) return 1.0f;
  int e = 0;
  const float m = frexpf(amax / WS_FP8_E4M3_MAX, &e); /* amax / 448 = m 2^e, m in [0.5, 1) */
  return ldexpf(1.0f, m == 0.5f ? e - 1 : e);
}

#endif
