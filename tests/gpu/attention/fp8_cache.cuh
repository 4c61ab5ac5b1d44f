/* fp8_cache.cuh - test_attention: the FP8 MLA latent cache (656-byte rows: E4M3 latent
 * with a scale per 128 columns, the rope part in BF16). The GPU quantiser
 * (ws_mla_kv_quantize_fp8) must write exactly the host quantiser's bytes, because the
 * decode reference reads the host's; the decode cases on the FP8 cache are in
 * mla_decode.cuh (their fp8 flag). */
#ifndef WARPSPEC_TEST_ATTN_FP8_CACHE_CUH
#define WARPSPEC_TEST_ATTN_FP8_CACHE_CUH

#include "attn_common.cuh"

/* The FP8 latent cache quantiser on the GPU writes exactly the host quantiser's bytes:
 * random rows of several magnitudes, one with a zero tile, output poisoned first. */
static int check_fp8_cache(void) {
  const size_t rows = 1000;
  uint16_t *kv = (uint16_t *)malloc(rows * 576 * 2);
  uint8_t *want = (uint8_t *)malloc(rows * WS_MLA_FP8_ROW_BYTES), *got = (uint8_t *)malloc(rows * WS_MLA_FP8_ROW_BYTES);
  for (size_t r = 0; r < rows; r++) fill_uniform(kv + r * 576, 576, r % 7 == 0 ? 300.0f : r % 7 == 1 ? 1e-5f : 1.0f);
  for (int i = 256; i < 384; i++) kv[3 * 576 + i] = 0;
  void *dkv, *dout;
  CUDA_OK(cudaMalloc(&dkv, rows * 576 * 2));
  CUDA_OK(cudaMalloc(&dout, rows * WS_MLA_FP8_ROW_BYTES));
  CUDA_OK(cudaMemcpy(dkv, kv, rows * 576 * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(dout, 0xA5, rows * WS_MLA_FP8_ROW_BYTES));
  int fails = ws_mla_kv_quantize_fp8_host(kv, rows, want) != WS_OK;
  fails += ws_mla_kv_quantize_fp8(dkv, rows, dout, 0) != WS_OK || ws_sync(0) != WS_OK;
  CUDA_OK(cudaMemcpy(got, dout, rows * WS_MLA_FP8_ROW_BYTES, cudaMemcpyDeviceToHost));
  size_t diff = 0;
  for (size_t i = 0; i < rows * WS_MLA_FP8_ROW_BYTES; i++) diff += got[i] != want[i];
  fails += diff != 0;
  printf("FP8 MLA cache quantiser, %zu rows: %zu bytes differ from the host's: %s\n", rows, diff, diff ? "FAILED" : "ok");
  cudaFree(dkv); cudaFree(dout); free(kv); free(want); free(got);
  return fails;
}

#endif
