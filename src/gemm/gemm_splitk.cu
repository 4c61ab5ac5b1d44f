/* gemm_splitk.cu - split-K's second pass. With few output tiles (a dense problem with a
 * handful of rows) the GEMM kernels give each tile's K range to several CTAs, each of
 * which writes an fp32 partial tile; this kernel sums the partials in split order (the
 * same result on every run, unlike atomics) and rounds once to bf16. Four elements per
 * thread with 16-byte loads: m x n is a multiple of 8 (n is, ws_gemm_check). */
#include "../core/internal.h"
#include "gemm_args.h"
#include "warpspec/device/ptx.cuh"

#include <cuda_bf16.h>

__global__ void gemm_splitk_reduce_kernel(const float4 *partial, int splits, size_t count4, uint2 *d) {
  ws_griddepcontrol_wait(); /* chained: the GEMM's partials are complete and visible from here */
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < count4; i += (size_t)gridDim.x * blockDim.x) {
    float4 acc = partial[i];
    for (int s = 1; s < splits; s++) {
      const float4 v = partial[(size_t)s * count4 + i];
      acc.x += v.x; acc.y += v.y; acc.z += v.z; acc.w += v.w;
    }
    const __nv_bfloat162 lo = __floats2bfloat162_rn(acc.x, acc.y), hi = __floats2bfloat162_rn(acc.z, acc.w);
    uint2 out;
    out.x = *(const uint32_t *)&lo;
    out.y = *(const uint32_t *)&hi;
    d[i] = out;
  }
}

extern "C" ws_status gemm_splitk_reduce(const float *partial, int splits, size_t count, uint16_t *d, cudaStream_t stream) {
  WS_REQUIRE(count % 4 == 0, "gemm split-K: %zu outputs, not a multiple of 4", count);
  const size_t count4 = count / 4;
  const unsigned blocks = (unsigned)(count4 / 256 + 1 < 4096 ? count4 / 256 + 1 : 4096);
  /* Chained to the GEMM: its launch and its blocks' start overlap the GEMM's last tiles; a
   * plain launch left a gap of a few microseconds in 24-66 us calls (design_gemm.md, 6). */
  const float4 *p4 = (const float4 *)partial;
  uint2 *d2 = (uint2 *)d;
  void *args[] = {(void *)&p4, &splits, (void *)&count4, &d2};
  return ws_launch_chained((const void *)gemm_splitk_reduce_kernel, dim3(blocks, 1, 1), dim3(256, 1, 1), stream, args);
}
