/* moe_sum.cuh - one chunk of a token's weighted sum of expert rows, shared by the combine
 * kernels (combine.cu) and the whole-layer kernel's combine items (moe_layer_items.cuh),
 * so both give the same bits: fp32 in slot order, BF16 out. */
#ifndef WARPSPEC_MOE_SUM_CUH
#define WARPSPEC_MOE_SUM_CUH

#include <cuda_bf16.h>

#include "warpspec/device/ptx.cuh"
#include "warpspec/moe.h"

#define MOE_SUM_UNROLL 4                    /* 16-byte vectors per lane in flight          */
#define MOE_SUM_CHUNK (32 * MOE_SUM_UNROLL) /* vectors of a row per warp and chunk (2 KB)  */

/* 8 bf16 (one 16-byte vector) times w, added into acc. */
static __device__ __forceinline__ void moe_fma8(float *acc, uint4 v, float w) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    acc[2 * i] += w * __uint_as_float(u[i] << 16);
    acc[2 * i + 1] += w * __uint_as_float(u[i] & 0xFFFF0000u);
  }
}

static __device__ __forceinline__ uint4 moe_pack8(const float *acc) {
  uint32_t u[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(acc[2 * i], acc[2 * i + 1]);
    u[i] = *(const uint32_t *)&h;
  }
  return make_uint4(u[0], u[1], u[2], u[3]);
}

/* The warp's lane vectors v0 + 32 u (u < MOE_SUM_UNROLL, below nvec) of
 *   dst = bf16(sum over slots j < K, in order, of w[j] x y[rows[j]])
 * with a slot of row -1 skipped (no slot: zeros). rows and weights are read from L2 (the
 * caller may have written them in the same kernel); y too when y_in_kernel, else by the read-only
 * path. */
static __device__ __forceinline__ void moe_sum_rows(const int *rows, const float *w, int K, const uint16_t *y,
                                                    int hidden, int v0, int nvec, uint4 *dst, int y_in_kernel) {
  /* the token's rows and weights first, all loads in flight at once: reading each slot's
   * row index just before its data made a chain of dependent loads */
  const uint4 *src[WS_EP_MAX_TOPK];
  float wj[WS_EP_MAX_TOPK];
#pragma unroll
  for (int j = 0; j < WS_EP_MAX_TOPK; j++) {
    const int r = j < K ? __ldcg(rows + j) : -1;
    src[j] = r >= 0 ? (const uint4 *)(y + (size_t)r * hidden) : NULL;
    wj[j] = j < K ? __ldcg(w + j) : 0.0f;
  }
  float acc[MOE_SUM_UNROLL][8];
#pragma unroll
  for (int u = 0; u < MOE_SUM_UNROLL; u++)
#pragma unroll
    for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
#pragma unroll
  for (int j = 0; j < WS_EP_MAX_TOPK; j++) {
    if (src[j] == NULL) continue;
    uint4 p[MOE_SUM_UNROLL];
#pragma unroll
    for (int u = 0; u < MOE_SUM_UNROLL; u++)
      if (v0 + 32 * u < nvec)
        p[u] = y_in_kernel ? ws_ld_global_cg_v4(src[j] + v0 + 32 * u) : ws_ld_global_nc_v4(src[j] + v0 + 32 * u);
#pragma unroll
    for (int u = 0; u < MOE_SUM_UNROLL; u++)
      if (v0 + 32 * u < nvec) moe_fma8(acc[u], p[u], wj[j]);
  }
#pragma unroll
  for (int u = 0; u < MOE_SUM_UNROLL; u++)
    if (v0 + 32 * u < nvec) ws_st_global_v4(dst + v0 + 32 * u, moe_pack8(acc[u]));
}

#endif
