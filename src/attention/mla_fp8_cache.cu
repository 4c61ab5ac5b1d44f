/* mla_fp8_cache.cu - BF16 latent cache rows [rows][576] into the FP8 rows the MLA decode
 * takes with kv_fp8 = 1 (WS_MLA_FP8_ROW_BYTES, warpspec/attention.h), on the GPU, bit for
 * bit what ws_mla_kv_quantize_fp8_host writes: per 128-column tile a power-of-two scale
 * 2^ceil(log2(amax / 448)) (1 for a zero tile), every value e4m3(x / scale) (nearest even,
 * saturating: the quantiser's own conversion), the rope dims copied.
 * One warp per row: lane l takes columns 4l .. 4l + 3 of each tile (one 8-byte load), the
 * warp reduces the tile's amax, and lanes 0..7 copy the 128 bytes of rope. */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/device/fp8.cuh"
#include "mla_fp8_scale.h"
#include "warpspec/attention.h"

#include <cuda_bf16.h>

__global__ void __launch_bounds__(256) mla_kv_quantize_fp8_kernel(const uint16_t *kv, size_t rows, uint8_t *out) {
  const int lane = threadIdx.x % 32;
  for (size_t r = (blockIdx.x * (size_t)blockDim.x + threadIdx.x) / 32; r < rows; r += (size_t)gridDim.x * blockDim.x / 32) {
    const uint16_t *x = kv + r * 576;
    uint8_t *o = out + r * WS_MLA_FP8_ROW_BYTES;
#pragma unroll
    for (int t = 0; t < WS_MLA_FP8_TILES; t++) {
      const uint2 raw = *(const uint2 *)(x + t * 128 + 4 * lane);
      const float2 v01 = __bfloat1622float2(*(const __nv_bfloat162 *)&raw.x);
      const float2 v23 = __bfloat1622float2(*(const __nv_bfloat162 *)&raw.y);
      float amax = fmaxf(fmaxf(fabsf(v01.x), fabsf(v01.y)), fmaxf(fabsf(v23.x), fabsf(v23.y)));
#pragma unroll
      for (int d = 16; d > 0; d /= 2) amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, d));
      const float sc = mla_fp8_tile_scale(amax);
      *(uint32_t *)(o + t * 128 + 4 * lane) =
          ws_to_e4m3x2(v01.x / sc, v01.y / sc) | (uint32_t)ws_to_e4m3x2(v23.x / sc, v23.y / sc) << 16;
      if (lane == 0) *(float *)(o + 512 + 4 * t) = sc;
    }
    if (lane < 8) *(uint4 *)(o + 528 + 16 * lane) = *(const uint4 *)(x + 512 + 8 * lane);
  }
}

extern "C" ws_status ws_mla_kv_quantize_fp8(const void *kv, size_t rows, void *out, cudaStream_t stream) {
  WS_REQUIRE(rows == 0 || (kv != NULL && out != NULL), "ws_mla_kv_quantize_fp8: kv or out is NULL");
  WS_REQUIRE(((uintptr_t)kv & 15u) == 0 && ((uintptr_t)out & 15u) == 0,
             "ws_mla_kv_quantize_fp8: kv and out must be 16-byte aligned");
  size_t in_bytes = 0; /* the larger side: 1152-byte BF16 rows in, 656-byte rows out */
  WS_REQUIRE(ws_size_mul3(rows, 576 * sizeof(uint16_t), 1, &in_bytes) && ws_span_fits(kv, in_bytes) &&
                 ws_span_fits(out, rows * WS_MLA_FP8_ROW_BYTES),
             "ws_mla_kv_quantize_fp8: rows %zu of 1152 bytes run past the end of the address space", rows);
  if (rows == 0) return WS_OK;
  const size_t ctas = (rows + 7) / 8;
  mla_kv_quantize_fp8_kernel<<<(unsigned)(ctas < 4096 ? ctas : 4096), 256, 0, stream>>>((const uint16_t *)kv, rows,
                                                                                         (uint8_t *)out);
  WS_CUDA_TRY(cudaGetLastError());
  return WS_OK;
}
