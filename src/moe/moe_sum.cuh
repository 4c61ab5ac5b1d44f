/* moe_sum.cuh - one chunk of a token's weighted sum of expert rows, shared by the combine
 * kernels (combine.cu) and the whole-layer kernel's combine items (layer_items.cuh),
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

/* A lane's sums, U vectors of 8 floats, zeroed (all in registers once inlined). */
template <int U = MOE_SUM_UNROLL>
static __device__ __forceinline__ void moe_zero_acc(float (*acc)[8]) {
#pragma unroll
  for (int u = 0; u < U; u++)
#pragma unroll
    for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
}

/* The warp's lane vectors v0 + 32 u (u < MOE_SUM_UNROLL, below nvec) of
 *   dst = bf16(sum over slots j < K, in order, of w[j] x y[rows[j]])
 * with a slot of row -1 skipped (no slot: zeros). rows and weights are read from L2 (the
 * caller may have written them in the same kernel); y too when y_in_kernel, else by the read-only
 * path. A whole warp calls it (K <= 32): lane j holds slot j's row and weight, and the
 * slots go GROUP at a time, their rows' loads all out (predicated) before their sums in
 * slot order. The loop over the groups is not unrolled: this code runs once per call on a
 * cold instruction cache, and unrolled over WS_EP_MAX_TOPK slots it was several KB of
 * instructions fetched one miss after another (at 1 token the whole-layer kernel's
 * combine took 15 us after the last L2 tile, H100). GROUP x U x 4 registers
 * hold the loads. */
template <int GROUP, int U = MOE_SUM_UNROLL>
static __device__ __forceinline__ void moe_sum_rows_of(int my_row, float my_w, int K, const uint16_t *y, int hidden,
                                                       int v0, int nvec, uint4 *dst, int y_in_kernel);

template <int GROUP, int U = MOE_SUM_UNROLL>
static __device__ __forceinline__ void moe_sum_rows(const int *rows, const float *w, int K, const uint16_t *y,
                                                    int hidden, int v0, int nvec, uint4 *dst, int y_in_kernel) {
  const int lane = (int)(threadIdx.x % 32);
  moe_sum_rows_of<GROUP, U>(lane < K ? __ldcg(rows + lane) : -1, lane < K ? __ldcg(w + lane) : 0.0f, K, y, hidden, v0,
                            nvec, dst, y_in_kernel);
}

/* The same with slot `lane`'s row and weight already loaded (my_row, my_w; -1 / 0 past K):
 * a caller walking many chunks loads the next chunk's while this one's rows are summed.
 * U: vectors per lane (MOE_SUM_UNROLL; fewer where registers are short): each value's
 * sum is the same whatever U. */
template <int GROUP, int U>
static __device__ __forceinline__ void moe_sum_rows_of(int my_row, float my_w, int K, const uint16_t *y, int hidden,
                                                       int v0, int nvec, uint4 *dst, int y_in_kernel) {
  const uint4 *y4 = (const uint4 *)y;
  const size_t row_vecs = (size_t)hidden / 8;
  float acc[U][8];
  moe_zero_acc<U>(acc);
#pragma unroll 1
  for (int j0 = 0; j0 < K; j0 += GROUP) {
    int r[GROUP];
    float wj[GROUP];
    uint4 p[GROUP][U];
#pragma unroll
    for (int j = 0; j < GROUP; j++) { /* lanes past K hold row -1 */
      r[j] = __shfl_sync(0xffffffffu, my_row, (j0 + j) & 31);
      wj[j] = __shfl_sync(0xffffffffu, my_w, (j0 + j) & 31);
      if (j0 + j >= 32) r[j] = -1;
    }
#pragma unroll
    for (int j = 0; j < GROUP; j++)
#pragma unroll
      for (int u = 0; u < U; u++)
        if (r[j] >= 0 && v0 + 32 * u < nvec) {
          const uint4 *q = y4 + (size_t)r[j] * row_vecs + v0 + 32 * u;
          p[j][u] = y_in_kernel ? ws_ld_global_cg_v4(q) : ws_ld_global_nc_v4(q);
        }
#pragma unroll
    for (int j = 0; j < GROUP; j++) {
      if (r[j] < 0) continue; /* skipped, not added as zeros: the same bits as before */
#pragma unroll
      for (int u = 0; u < U; u++)
        if (v0 + 32 * u < nvec) moe_fma8(acc[u], p[j][u], wj[j]);
    }
  }
#pragma unroll
  for (int u = 0; u < U; u++)
    if (v0 + 32 * u < nvec) ws_st_global_v4(dst + v0 + 32 * u, moe_pack8(acc[u]));
}

#endif
