/* moe_reference.c - the MoE layer on the host, the tests' ground truth for the unfused
 * path and the fused MegaMoE kernel: float64 sums, rounded where the GPU path rounds
 * (bf16 after each GEMM, the 1 x 128 FP8 quantiser on the activation). */
#include "../core/internal.h"
#include "warpspec/fp8.h"
#include "warpspec/moe.h"

#include <math.h>
#include <stdlib.h>

ws_status ws_moe_swiglu_quant_host(const uint16_t *h, size_t rows, size_t inter, uint8_t *q, float *scale) {
  WS_REQUIRE(h && q && scale, "ws_moe_swiglu_quant_host: h, q or scale is NULL");
  WS_REQUIRE(inter > 0 && inter % 128 == 0, "ws_moe_swiglu_quant_host: inter %zu is not a positive multiple of 128", inter);
  float *a = (float *)malloc(sizeof(float) * (rows ? rows : 1) * inter);
  if (!a) return ws_fail(WS_ERR_NOMEM, "ws_moe_swiglu_quant_host: out of host memory");
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < inter; c++) {
      const double g = ws_bf16_to_float(h[r * 2 * inter + c]), u = ws_bf16_to_float(h[r * 2 * inter + inter + c]);
      a[r * inter + c] = (float)(g / (1.0 + exp(-g)) * u);
    }
  const ws_status s = rows ? ws_fp8_quantize_1x128_host(a, rows, inter, inter, q, scale) : WS_OK;
  free(a);
  return s;
}

/* D[r][j] = bf16(sum_c A[r][c] sa[r][c / 128] B[j][c] sb[j / 128][c / 128]) for one row r. */
static void fp8_row_gemm(const uint8_t *a, const float *sa, const uint8_t *b, const float *sb, int n, int k, uint16_t *d) {
  const int kb = k / 128;
  for (int j = 0; j < n; j++) {
    double acc = 0;
    for (int c = 0; c < k; c++)
      acc += ws_fp8_e4m3_decode(a[c]) * sa[c / 128] * ws_fp8_e4m3_decode(b[(size_t)j * k + c]) * sb[(j / 128) * kb + c / 128];
    d[j] = ws_float_to_bf16((float)acc);
  }
}

ws_status ws_moe_reference(const ws_moe_shape *sh, int tokens, const uint8_t *xq, const float *xs, const int *idx,
                           const float *w, const uint8_t *w1, const float *w1s, const uint8_t *w2, const float *w2s,
                           double *out) {
  WS_REQUIRE(sh != NULL, "ws_moe_reference: shape is NULL");
  const int H = sh->hidden, I = sh->inter, E = sh->experts, K = sh->topk;
  WS_REQUIRE(H > 0 && H % 128 == 0 && I > 0 && I % 128 == 0, "ws_moe_reference: hidden %d and inter %d must be positive "
             "multiples of 128", H, I);
  WS_REQUIRE(E >= 1 && K >= 1 && tokens >= 0, "ws_moe_reference: experts %d, topk %d, tokens %d", E, K, tokens);
  WS_REQUIRE(out && (tokens == 0 || (xq && xs && idx && w)) && w1 && w1s && w2 && w2s, "ws_moe_reference: a NULL argument");
  uint16_t *h = (uint16_t *)malloc(sizeof(uint16_t) * 2 * (size_t)I);
  uint8_t *aq = (uint8_t *)malloc((size_t)I);
  float *as = (float *)malloc(sizeof(float) * (size_t)(I / 128));
  uint16_t *y = (uint16_t *)malloc(sizeof(uint16_t) * (size_t)H);
  if (!h || !aq || !as || !y) {
    free(h); free(aq); free(as); free(y);
    return ws_fail(WS_ERR_NOMEM, "ws_moe_reference: out of host memory");
  }
  const int hb = H / 128, ib = I / 128;
  for (size_t i = 0; i < (size_t)tokens * H; i++) out[i] = 0;
  ws_status st = WS_OK;
  for (int t = 0; t < tokens && st == WS_OK; t++)
    for (int k = 0; k < K && st == WS_OK; k++) {
      const int e = idx[(size_t)t * K + k];
      if (e < 0 || e >= E) continue;
      fp8_row_gemm(xq + (size_t)t * H, xs + (size_t)t * hb, w1 + (size_t)e * 2 * I * H, w1s + (size_t)e * (2 * ib) * hb,
                   2 * I, H, h);
      if ((st = ws_moe_swiglu_quant_host(h, 1, (size_t)I, aq, as)) != WS_OK) break;
      fp8_row_gemm(aq, as, w2 + (size_t)e * H * I, w2s + (size_t)e * hb * ib, H, I, y);
      for (int j = 0; j < H; j++) out[(size_t)t * H + j] += (double)w[(size_t)t * K + k] * ws_bf16_to_float(y[j]);
    }
  free(h); free(aq); free(as); free(y);
  return st;
}
