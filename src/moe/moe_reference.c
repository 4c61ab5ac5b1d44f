/* moe_reference.c - the MoE layer on the host, the tests' ground truth for the unfused
 * path and the fused MegaMoE kernel: float64 sums, rounded where the GPU path rounds
 * (bf16 after each GEMM, the 1 x 128 FP8 quantiser on the activation). */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/fp8.h"
#include "warpspec/moe.h"

#include <math.h>
#include <stdatomic.h>
#include <stdlib.h>

ws_status ws_moe_swiglu_quant_host(const uint16_t *h, size_t rows, size_t inter, uint8_t *q, float *scale) {
  WS_REQUIRE(h && q && scale, "ws_moe_swiglu_quant_host: h, q or scale is NULL");
  WS_REQUIRE(inter > 0 && inter % 128 == 0, "ws_moe_swiglu_quant_host: inter %zu is not a positive multiple of 128", inter);
  size_t bytes = 0;
  WS_REQUIRE(ws_size_mul3(rows ? rows : 1, inter, sizeof(float), &bytes),
             "ws_moe_swiglu_quant_host: rows %zu x inter %zu floats of scratch do not fit size_t", rows, inter);
  float *a = (float *)malloc(bytes);
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
      acc += ws_fp8_e4m3_decode(a[c]) * sa[c / 128] * ws_fp8_e4m3_decode(b[(size_t)j * k + c]) *
             sb[(size_t)(j / 128) * kb + c / 128];
    d[j] = ws_float_to_bf16((float)acc);
  }
}

/* One token per item on all cores (core/parallel.c): each writes its own row of out, in
 * the same order on any thread. Per worker: h, aq, as, y. */
typedef struct {
  const ws_moe_shape *sh;
  const uint8_t *xq, *w1, *w2;
  const float *xs, *w, *w1s, *w2s;
  const int *idx;
  double *out;
  uint16_t *h, *y;
  uint8_t *aq;
  float *as;
  atomic_int failed; /* a worker's ws_moe_swiglu_quant_host ran out of memory */
} moe_ref_job;

static void moe_ref_item(void *ctx, int t, int worker) {
  moe_ref_job *j = (moe_ref_job *)ctx;
  const int H = j->sh->hidden, I = j->sh->inter, E = j->sh->experts, K = j->sh->topk, hb = H / 128, ib = I / 128;
  uint16_t *h = j->h + (size_t)worker * 2 * I, *y = j->y + (size_t)worker * H;
  uint8_t *aq = j->aq + (size_t)worker * I;
  float *as = j->as + (size_t)worker * ib;
  double *out = j->out + (size_t)t * H;
  for (int c = 0; c < H; c++) out[c] = 0;
  for (int k = 0; k < K; k++) {
    const int e = j->idx[(size_t)t * K + k];
    if (e < 0 || e >= E) continue;
    fp8_row_gemm(j->xq + (size_t)t * H, j->xs + (size_t)t * hb, j->w1 + (size_t)e * 2 * I * H,
                 j->w1s + (size_t)e * (2 * ib) * hb, 2 * I, H, h);
    if (ws_moe_swiglu_quant_host(h, 1, (size_t)I, aq, as) != WS_OK) {
      atomic_store(&j->failed, 1);
      return;
    }
    fp8_row_gemm(aq, as, j->w2 + (size_t)e * H * I, j->w2s + (size_t)e * hb * ib, H, I, y);
    for (int c = 0; c < H; c++) out[c] += (double)j->w[(size_t)t * K + k] * ws_bf16_to_float(y[c]);
  }
}

ws_status ws_moe_reference(const ws_moe_shape *sh, int tokens, const uint8_t *xq, const float *xs, const int *idx,
                           const float *w, const uint8_t *w1, const float *w1s, const uint8_t *w2, const float *w2s,
                           double *out) {
  WS_REQUIRE(sh != NULL, "ws_moe_reference: shape is NULL");
  const int H = sh->hidden, I = sh->inter, E = sh->experts, K = sh->topk;
  WS_REQUIRE(H > 0 && H % 128 == 0 && I > 0 && I % 128 == 0, "ws_moe_reference: hidden %d and inter %d must be positive "
             "multiples of 128", H, I);
  WS_REQUIRE(I <= (1 << 29), "ws_moe_reference: inter %d, at most 2^29 (2 x inter is the L1 GEMM's n)", I);
  WS_REQUIRE(E >= 1 && K >= 1 && tokens >= 0, "ws_moe_reference: experts %d, topk %d, tokens %d", E, K, tokens);
  WS_REQUIRE(out && (tokens == 0 || (xq && xs && idx && w)) && w1 && w1s && w2 && w2s, "ws_moe_reference: a NULL argument");
  const size_t workers = (size_t)ws_host_workers();
  moe_ref_job j = {sh, xq, w1, w2, xs, w, w1s, w2s, idx, out,
                   (uint16_t *)malloc(sizeof(uint16_t) * 2 * (size_t)I * workers),
                   (uint16_t *)malloc(sizeof(uint16_t) * (size_t)H * workers), (uint8_t *)malloc((size_t)I * workers),
                   (float *)malloc(sizeof(float) * (size_t)(I / 128) * workers), 0};
  ws_status st = WS_OK;
  if (!j.h || !j.aq || !j.as || !j.y) st = ws_fail(WS_ERR_NOMEM, "ws_moe_reference: out of host memory");
  else ws_parallel_for(tokens, (int)workers, moe_ref_item, &j);
  if (st == WS_OK && atomic_load(&j.failed)) st = ws_fail(WS_ERR_NOMEM, "ws_moe_reference: out of host memory");
  free(j.h); free(j.aq); free(j.as); free(j.y);
  return st;
}
