/* test_gemm_gpu.cu - ws_gemm on the GPU against the float64 reference, random data, output
 * poisoned before each run: dense BF16 at aligned, ragged and DeepSeek-V3 expert shapes
 * (every element for small shapes, 20000 random elements for large ones). Relative
 * error ||D - ref|| / ||ref|| must stay under 1e-2 (bf16 output of fp32 accumulation). */
#include "gpu_test.h"
#include "warpspec/fp8.h"
#include "warpspec/gemm.h"

#include <math.h>

static void run_bf16(int m, int n, int k) {
  const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  uint16_t *ha = (uint16_t *)malloc(na * 2), *hb = (uint16_t *)malloc(nb * 2), *hd = (uint16_t *)malloc(nd * 2);
  for (size_t i = 0; i < na; i++) ha[i] = ws_float_to_bf16((float)((int)(rng_u32() % 2001) - 1000) / 1000.0f);
  for (size_t i = 0; i < nb; i++) hb[i] = ws_float_to_bf16((float)((int)(rng_u32() % 2001) - 1000) / 1000.0f);
  void *a, *b, *d;
  CUDA_OK(cudaMalloc(&a, na * 2));
  CUDA_OK(cudaMalloc(&b, nb * 2));
  CUDA_OK(cudaMalloc(&d, nd * 2 + 256));
  CUDA_OK(cudaMemcpy(a, ha, na * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, hb, nb * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256)); /* poison: bf16 NaN */
  ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_DENSE, m, n, k, 1, a, b, d, NULL, NULL, NULL, NULL};
  WS_OK_OR_DIE(ws_gemm(&p, 0));
  WS_OK_OR_DIE(ws_sync(0));
  CUDA_OK(cudaMemcpy(hd, d, nd * 2, cudaMemcpyDeviceToHost));
  uint16_t guard[128];
  CUDA_OK(cudaMemcpy(guard, (uint8_t *)d + nd * 2, sizeof guard, cudaMemcpyDeviceToHost));
  const int full = nd <= (1u << 18);
  const size_t samples = full ? nd : 20000;
  double num = 0, den = 0;
  long nan_count = 0;
  for (size_t s = 0; s < samples; s++) {
    const size_t idx = full ? s : ((size_t)rng_u32() * 65536u + rng_u32()) % nd;
    const size_t r = idx / n, j = idx % n;
    double ref = 0;
    for (int kk = 0; kk < k; kk++) ref += (double)ws_bf16_to_float(ha[r * k + kk]) * ws_bf16_to_float(hb[j * k + kk]);
    const double got = ws_bf16_to_float(hd[idx]);
    if (isnan(got)) nan_count++;
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  int guard_ok = 1;
  for (int i = 0; i < 128; i++) guard_ok &= guard[i] == 0xFFFF;
  const double rel = sqrt(num / (den > 0 ? den : 1));
  printf("bf16 %5d x %5d x %5d: rel err %.2e over %zu elements, %ld unwritten%s\n", m, n, k, rel, samples, nan_count,
         guard_ok ? "" : ", WROTE PAST D");
  CHECK(nan_count == 0 && rel < 1e-2 && guard_ok);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  free(ha);
  free(hb);
  free(hd);
}

int main(void) {
  require_hopper();
  rng_seed_from_time();
  run_bf16(128, 256, 64);     /* one tile, one K step   */
  run_bf16(256, 512, 1024);   /* several tiles and steps */
  run_bf16(1, 256, 128);      /* M = 1                   */
  run_bf16(300, 264, 192);    /* ragged M and N          */
  run_bf16(4096, 4096, 7168); /* DeepSeek-V3 L1 expert   */
  run_bf16(2048, 7168, 2048); /* DeepSeek-V3 L2 expert   */
  /* argument errors before the GPU */
  ws_gemm_problem bad = {WS_GEMM_BF16, WS_GEMM_DENSE, 64, 256, 100, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL};
  CHECK_STATUS(ws_gemm(&bad, 0), WS_ERR_INVALID);
  return test_finish("test_gemm_gpu");
}
