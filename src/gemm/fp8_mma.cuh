/* fp8_mma.cuh - one 128-wide K block of an FP8 tile on the tensor cores, shared by the
 * FP8 GEMM (gemm_fp8.cu) and the fused MoE experts kernel (src/moe/layer/layer_kernel.cu): wait
 * for the pipe's stage and issue four dependent m64n128k32 wgmmas into a fresh fp32
 * accumulator (the caller promotes it with the block's scales). */
#ifndef WARPSPEC_FP8_MMA_CUH
#define WARPSPEC_FP8_MMA_CUH

#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"

/* Wait for the stage at cursor k (unless the probe already saw it full) and issue its 4
 * wgmmas into acc (overwriting it). */
static __device__ __forceinline__ void fp8_issue(float *acc, const ws_pipe *pipe, const ws_ctx *ctx, uint64_t da0,
                                                 uint64_t db0, uint32_t stage_bytes, ws_cursor k, uint32_t full,
                                                 int generic_a = 0) {
  ws_pipe_wait_probed_at(pipe, ctx, k, full);
  /* A written by cp.async (gemm_loader.cuh's gathered rows): in the generic proxy, read
   * here by wgmma in the async proxy */
  if (generic_a) ws_fence_proxy_async_shared_cta();
  const uint32_t stage_off = k.stage * stage_bytes;
  const uint64_t da = ws_wgmma_desc_advance(da0, stage_off), db = ws_wgmma_desc_advance(db0, stage_off);
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < 128 / 32; kk++) {
    ws_wgmma_m64n128k32_e4m3(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32), kk > 0);
  }
  ws_wgmma_commit_group();
}

#endif
