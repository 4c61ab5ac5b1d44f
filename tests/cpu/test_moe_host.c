/* test_moe_host.c - MoE dispatch/combine without a GPU: config validation (every field,
 * named in the message), the worst-case row count, the host reference layout (padded
 * offsets, once-per-rank fan-out, -1 slots, row order) on a hand-checked example and on
 * random routings, argument errors before any launch (dispatch/combine and the
 * whole-layer call), and sizes past 32 bits refused instead of wrapped. */
#include "../test.h"
#include "warpspec/fp8.h"
#include "warpspec/moe.h"
#include "warpspec/moe_layer.h"
#include "../../src/comm/comm_internal.h"
#include "../../src/moe/layer/layer_kernel.h"
#include "../../src/moe/layer/layer_auto.h"
#include "../../src/moe/ep_buffers.h"
#include "../../src/moe/ep_overlap.h"
#include "../../testdata/random.h"
#include "warpspec/config.h"

#include <math.h>
#include <stdlib.h>

static ws_ep_config base(void) {
  ws_ep_config c = {512, 8, 2, 16, WS_EP_FP8, 1, 0, WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
  return c;
}

static void config_checks(void) {
  ws_ep_config c = base();
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_OK);
  CHECK_STATUS(ws_ep_config_check(NULL, 2), WS_ERR_INVALID);
  CHECK_STATUS(ws_ep_config_check(&c, 0), WS_ERR_INVALID);
  c.hidden = 200; /* FP8 needs multiples of 128 */
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  CHECK_MSG("hidden 200");
  c.payload = WS_EP_BF16; /* BF16: multiples of 8 */
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_OK);
  c = base(); c.experts = 9;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  CHECK_MSG("not a multiple of the 2 ranks");
  c = base(); c.experts = WS_EP_MAX_EXPERTS + 2;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  c = base(); c.topk = WS_EP_MAX_TOPK + 1;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  CHECK_MSG("topk");
  c = base(); c.topk = 0;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  c = base(); c.max_tokens = 0;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  CHECK_MSG("max_tokens");
  c = base(); c.row_align = 0;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  c = base(); c.num_sms = WS_EP_MAX_SMS + 1;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  CHECK_MSG("num_sms");
  c = base(); c.payload = (ws_ep_payload)7;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  /* the transfer kernels' CTAs: num_sms, else 64 for a decode handle and 24 above */
  c = base(); c.max_tokens = WS_EP_DECODE_MAX_TOKENS;
  CHECK(ws_ep_config_sms(&c) == WS_EP_DECODE_SMS);
  c.max_tokens = WS_EP_DECODE_MAX_TOKENS + 1;
  CHECK(ws_ep_config_sms(&c) == WS_EP_DEFAULT_SMS);
  c.num_sms = 10;
  CHECK(ws_ep_config_sms(&c) == 10);
  CHECK(ws_ep_config_sms(NULL) == 0);
  /* the largest config the limits allow stays inside ws_gemm's int rows */
  c = base(); c.max_tokens = 1 << 20; c.topk = 16; c.experts = 1024; c.hidden = 128; c.row_align = 1024;
  CHECK_STATUS(ws_ep_config_check(&c, 64), WS_OK);
  CHECK(ws_ep_max_rows(&c, 64) < ((size_t)1 << 31));
}

static void max_rows(void) {
  ws_ep_config c = base(); /* 8 experts, 2 ranks: 4 local; K 2; 16 tokens */
  CHECK(ws_ep_max_rows(&c, 2) == 2 * 16 * 2);
  c.row_align = 128;
  CHECK(ws_ep_max_rows(&c, 2) == 2 * 16 * 2 + 4 * 127);
  c.topk = 8; c.row_align = 1; /* 4 local experts, yet 8 entries a token (repeats) */
  CHECK(ws_ep_max_rows(&c, 2) == 2 * 16 * 8);
  c.mode = WS_EP_LOW_LATENCY; /* masked: local experts x ranks x max_tokens */
  CHECK(ws_ep_max_rows(&c, 2) == 4 * 2 * 16);
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_OK);
  c.mode = (ws_ep_mode)3;
  CHECK_STATUS(ws_ep_config_check(&c, 2), WS_ERR_INVALID);
  CHECK_MSG("mode");
  CHECK(ws_ep_max_rows(NULL, 2) == 0);
}

static void reference_example(void) {
  /* 2 ranks, 4 experts (2 local each), top-2, align 2. Rank 0's tokens: {0, 3}, {2, -1};
   * rank 1's: {1, 0}, {3, 2}, {-1, -1}. Rank 1 hosts experts 2, 3. */
  ws_ep_config c = {256, 4, 2, 4, WS_EP_BF16, 2, 0, WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
  const int r0[] = {0, 3, 2, -1}, r1[] = {1, 0, 3, 2, -1, -1};
  const int *idx[2] = {r0, r1};
  const int ntok[2] = {2, 3};
  int counts[2], offs[3], rows[3 * 8];
  CHECK_STATUS(ws_ep_reference_layout(&c, 2, 1, idx, ntok, counts, offs, rows), WS_OK);
  /* expert 2: (0, 1, 0) and (1, 1, 1); expert 3: (0, 0, 1), (1, 1, 0) */
  CHECK(counts[0] == 2 && counts[1] == 2);
  CHECK(offs[0] == 0 && offs[1] == 2 && offs[2] == 4);
  const int want[] = {0, 1, 0, 1, 1, 1, 0, 0, 1, 1, 1, 0};
  CHECK(memcmp(rows, want, sizeof want) == 0);
  /* rank 0 hosts 0, 1: expert 0 gets (0, 0, 0), (1, 0, 1); expert 1 gets (1, 0, 0) + 1 padding row */
  CHECK_STATUS(ws_ep_reference_layout(&c, 2, 0, idx, ntok, counts, offs, rows), WS_OK);
  CHECK(counts[0] == 2 && counts[1] == 1 && offs[1] == 2 && offs[2] == 4);
  CHECK(rows[3 * 2] == 1 && rows[3 * 2 + 1] == 0 && rows[3 * 2 + 2] == 0);
  CHECK(rows[3 * 3] == -1); /* padding */
  CHECK_STATUS(ws_ep_reference_layout(&c, 2, 2, idx, ntok, counts, offs, rows), WS_ERR_INVALID);
}

/* Random routings: every valid (token, slot) lands exactly once on its expert's rank,
 * offsets are padded prefix sums, and no rank gets more than ws_ep_max_rows. */
static void reference_random(void) {
  srand(12345);
  for (int trial = 0; trial < 50; trial++) {
    const int n = 1 + rand() % 4, L = 1 + rand() % 6, K = 1 + rand() % 8, T = rand() % 40;
    ws_ep_config c = {128, n * L, K, 40, WS_EP_FP8, 1 + rand() % 8, 0, WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
    int *idx[4], ntok[4];
    long valid = 0;
    for (int r = 0; r < n; r++) {
      ntok[r] = T;
      idx[r] = (int *)malloc(sizeof(int) * (size_t)(T * K + 1));
      for (int t = 0; t < T; t++)
        for (int k = 0; k < K; k++) {
          int e = rand() % (c.experts + 1) - 1;
          for (int j = 0; j < k; j++)
            if (idx[r][t * K + j] == e) e = -1;
          idx[r][t * K + k] = e;
          valid += e >= 0;
        }
    }
    long got = 0;
    for (int me = 0; me < n; me++) {
      int counts[8], offs[9];
      CHECK_STATUS(ws_ep_reference_layout(&c, n, me, (const int *const *)idx, ntok, counts, offs, NULL), WS_OK);
      for (int l = 0; l < L; l++) {
        got += counts[l];
        const int padded = (counts[l] + c.row_align - 1) / c.row_align * c.row_align;
        CHECK(offs[l + 1] - offs[l] == padded);
      }
      CHECK((size_t)offs[L] <= ws_ep_max_rows(&c, n));
    }
    CHECK(got == valid);
    for (int r = 0; r < n; r++) free(idx[r]);
  }
}

static void argument_errors(void) {
  char buf[64];
  CHECK_STATUS(ws_ep_create(NULL, NULL, NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_ep_dispatch(NULL, buf, NULL, NULL, NULL, 1, NULL, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("ep is NULL");
  CHECK_STATUS(ws_ep_combine(NULL, buf, buf, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_ep_destroy(NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_ep_recv_layout(NULL, NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_ep_check(NULL, 0), WS_ERR_INVALID);
}

static float urand(void) { return (float)rand() / (float)RAND_MAX * 2.0f - 1.0f; }

/* The L1 epilogue's host definition: silu(gate) x up, then 1 x 128 blocks. */
static void swiglu_host(void) {
  const size_t rows = 3, I = 256;
  uint16_t h[3 * 512];
  double a[3 * 256];
  for (size_t r = 0; r < rows; r++)
    for (size_t c = 0; c < I; c++) {
      const float g = r == 1 && c < 128 ? 0.0f : urand() * 4, u = urand() * 2;
      h[r * 2 * I + c] = ws_float_to_bf16(g);
      h[r * 2 * I + I + c] = ws_float_to_bf16(u);
      const double gd = ws_bf16_to_float(h[r * 2 * I + c]), ud = ws_bf16_to_float(h[r * 2 * I + I + c]);
      a[r * I + c] = gd / (1.0 + exp(-gd)) * ud;
    }
  uint8_t q[3 * 256];
  float sc[3 * 2];
  CHECK_STATUS(ws_moe_swiglu_quant_host(h, rows, I, q, sc), WS_OK);
  CHECK(sc[1 * 2 + 0] == 1.0f); /* row 1's first block: gate 0, so silu 0: an all-zero block */
  for (size_t r = 0; r < rows; r++)
    for (size_t b = 0; b < 2; b++) {
      double amax = 0;
      for (size_t c = b * 128; c < b * 128 + 128; c++) amax = fmax(amax, fabs((double)(float)a[r * I + c]));
      if (amax > 0) CHECK(fabs(sc[r * 2 + b] - amax / 448.0) <= 1e-6 * amax);
      for (size_t c = b * 128; c < b * 128 + 128; c++) {
        const double got = ws_fp8_e4m3_decode(q[r * I + c]) * sc[r * 2 + b];
        CHECK(fabs(got - a[r * I + c]) <= fabs(a[r * I + c]) * 0.0625 + sc[r * 2 + b] * 0.002);
      }
    }
  CHECK_STATUS(ws_moe_swiglu_quant_host(h, rows, 100, q, sc), WS_ERR_INVALID);
}

/* The MoE reference against a float64 layer without its rounding points (bf16 after each
 * GEMM, the FP8 activation): close, not equal; -1 slots add nothing. */
static void moe_reference(void) {
  const ws_moe_shape sh = {256, 128, 4, 2};
  const int H = 256, I = 128, E = 4, K = 2, T = 5, hb = 2, ib = 1;
  float *xf = (float *)malloc(sizeof(float) * T * H), *w1f = (float *)malloc(sizeof(float) * E * 2 * I * H);
  float *w2f = (float *)malloc(sizeof(float) * E * H * I);
  for (int i = 0; i < T * H; i++) xf[i] = urand();
  for (int i = 0; i < E * 2 * I * H; i++) w1f[i] = urand() * 0.1f;
  for (int i = 0; i < E * H * I; i++) w2f[i] = urand() * 0.1f;
  uint8_t *xq = (uint8_t *)malloc((size_t)T * H), *w1 = (uint8_t *)malloc((size_t)E * 2 * I * H);
  uint8_t *w2 = (uint8_t *)malloc((size_t)E * H * I);
  float xs[5 * 2], w1s[4 * 2 * 2], w2s[4 * 2 * 1];
  CHECK_STATUS(ws_fp8_quantize_1x128_host(xf, T, H, H, xq, xs), WS_OK);
  for (int e = 0; e < E; e++) {
    CHECK_STATUS(ws_fp8_quantize_128x128_host(w1f + (size_t)e * 2 * I * H, 2 * I, H, H, w1 + (size_t)e * 2 * I * H,
                                              w1s + e * 2 * hb), WS_OK);
    CHECK_STATUS(ws_fp8_quantize_128x128_host(w2f + (size_t)e * H * I, H, I, I, w2 + (size_t)e * H * I, w2s + e * hb * ib),
                 WS_OK);
  }
  const int idx[5 * 2] = {0, 3, 2, -1, -1, -1, 1, 1, 3, 0};
  const float w[5 * 2] = {0.7f, 0.3f, 1.0f, 0.5f, 0.2f, 0.9f, 0.4f, 0.6f, 0.25f, 0.75f};
  double out[5 * 256], want[5 * 256];
  CHECK_STATUS(ws_moe_reference(&sh, T, xq, xs, idx, w, w1, w1s, w2, w2s, out), WS_OK);
  /* the same layer in float64 throughout, from the same quantised inputs and weights */
  for (int t = 0; t < T; t++) {
    for (int j = 0; j < H; j++) want[t * H + j] = 0;
    for (int k = 0; k < K; k++) {
      const int e = idx[t * K + k];
      if (e < 0) continue;
      double hh[256], act[128];
      for (int j = 0; j < 2 * I; j++) {
        double acc = 0;
        for (int c = 0; c < H; c++)
          acc += ws_fp8_e4m3_decode(xq[t * H + c]) * xs[t * hb + c / 128] * ws_fp8_e4m3_decode(w1[((size_t)e * 2 * I + j) * H + c]) *
                 w1s[e * 2 * hb + (j / 128) * hb + c / 128];
        hh[j] = acc;
      }
      for (int c = 0; c < I; c++) act[c] = hh[c] / (1.0 + exp(-hh[c])) * hh[I + c];
      for (int j = 0; j < H; j++) {
        double acc = 0;
        for (int c = 0; c < I; c++) acc += act[c] * ws_fp8_e4m3_decode(w2[((size_t)e * H + j) * I + c]) * w2s[e * hb * ib + (j / 128) * ib];
        want[t * H + j] += w[t * K + k] * acc;
      }
    }
  }
  double num = 0, den = 0;
  for (int i = 0; i < T * H; i++) { num += (out[i] - want[i]) * (out[i] - want[i]); den += want[i] * want[i]; }
  const double rel = sqrt(num / den);
  CHECK(rel < 3e-2 && rel > 0); /* the rounding points show, but only as rounding */
  for (int j = 0; j < H; j++) CHECK(out[2 * H + j] == 0.0); /* token 2: no expert */
  /* tokens run on several threads (WARPSPEC_HOST_THREADS): one and three give the same bits */
  double one[5 * 256];
  test_set_knob(WS_HOST_THREADS_ENV, "1");
  CHECK_STATUS(ws_moe_reference(&sh, T, xq, xs, idx, w, w1, w1s, w2, w2s, one), WS_OK);
  test_set_knob(WS_HOST_THREADS_ENV, "3");
  CHECK_STATUS(ws_moe_reference(&sh, T, xq, xs, idx, w, w1, w1s, w2, w2s, out), WS_OK);
  test_set_knob(WS_HOST_THREADS_ENV, NULL);
  CHECK(memcmp(one, out, sizeof one) == 0);
  CHECK_STATUS(ws_moe_reference(&sh, T, xq, xs, idx, w, NULL, w1s, w2, w2s, out), WS_ERR_INVALID);
  free(xf); free(w1f); free(w2f); free(xq); free(w1); free(w2);
}

/* The layer's config and weight checks come before the communicator is touched (a
 * dummy pointer stands for it here), each naming what is wrong. */
static void layer_arguments(void) {
  ws_moe_layer *l = (ws_moe_layer *)1;
  ws_comm *comm = (ws_comm *)16; /* never dereferenced by the failing checks */
  static uint4 w[4];
  ws_moe_layer_config c = {512, 256, 8, 2, 64, 0, WS_MOE_UNFUSED};
  CHECK_STATUS(ws_moe_layer_create(NULL, comm, &c, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK_STATUS(ws_moe_layer_create(&l, NULL, &c, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK(l == NULL);
  c.hidden = 500;
  CHECK_STATUS(ws_moe_layer_create(&l, comm, &c, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK_MSG("hidden 500");
  c.hidden = 512; c.inter = 0;
  CHECK_STATUS(ws_moe_layer_create(&l, comm, &c, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK_MSG("inter 0");
  c.inter = 256; c.path = (ws_moe_path)4;
  CHECK_STATUS(ws_moe_layer_create(&l, comm, &c, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK_MSG("path 4");
  c.path = WS_MOE_UNFUSED;
  CHECK_STATUS(ws_moe_layer_create(&l, comm, &c, w, NULL, w, (const float *)w), WS_ERR_INVALID);
  CHECK_MSG("weight-scale pointer is NULL");
  CHECK_STATUS(ws_moe_layer_create(&l, comm, &c, (const char *)w + 4, (const float *)w, w, (const float *)w),
               WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  CHECK_STATUS(ws_moe_layer_forward(NULL, w, NULL, NULL, NULL, 0, w, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_moe_layer_destroy(NULL), WS_ERR_INVALID);
  ws_moe_path path;
  CHECK_STATUS(ws_moe_layer_path_for(NULL, 1, &path), WS_ERR_INVALID);
}

/* The fused experts kernel's launcher checks its problem before any GPU call. */
static void experts_arguments(void) {
  static uint4 buf[64];
  uint32_t counters[8];
  moe_experts_problem p;
  memset(&p, 0, sizeof p);
  p.hidden = 256; p.inter = 128; p.groups = 2; p.max_rows = 128;
  p.offsets = (const int *)buf; p.x = buf; p.x_scale = (const float *)buf; p.x_scale_ld = 128;
  p.w1 = buf; p.w1_scale = (const float *)buf; p.w2 = buf; p.w2_scale = (const float *)buf;
  p.act = (uint8_t *)buf; p.act_scale = (float *)buf; p.act_ld = 128; p.y = buf; p.counters = counters;
  CHECK(moe_experts_counter_words(128, 256) == 2 * 2 + 9 + 1);
  CHECK(moe_experts_counter_words(129, 256) == 2 * 3 + 9 + 1);
  CHECK_STATUS(moe_experts_launch(NULL, 0), WS_ERR_INVALID);
  p.hidden = 200;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("hidden 200");
  p.hidden = 256; p.y = NULL;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("NULL");
  p.y = buf; p.act_ld = 100;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("scale strides");
  p.act_ld = 128; p.act = (uint8_t *)buf + 8;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  /* the whole layer's inputs (one GPU) */
  p.act = (uint8_t *)buf;
  int rows[8];
  moe_layer_io io;
  memset(&io, 0, sizeof io);
  io.tokens = 2; io.topk = 17; io.topk_idx = (const int *)buf; io.topk_weights = (const float *)buf;
  io.x = buf; io.out = buf; io.entry_row = rows; io.bad_id = rows;
  p.layer = &io;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("top-17");
  io.topk = 2; io.topk_idx = NULL;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("topk_idx, topk_weights, x or out is NULL");
  io.topk_idx = (const int *)buf; io.x = (const char *)buf + 4;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  io.x = buf; io.topk_weights = (const float *)((const char *)buf + 2);
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("4-byte aligned");
}

/* WS_MOE_AUTO's rule at the edges of its thresholds (config.h): one GPU, the whole layer
 * below WS_MOE_AUTO_LAYER_ROWS rows per local expert, else unfused; several ranks, the
 * whole layer at decode, then fused experts, then unfused. */
static void auto_rule(void) {
  CHECK(WS_MOE_AUTO_EP_LAYER_ROWS < WS_MOE_AUTO_FUSED_ROWS); /* each band of several ranks is not empty */
  const double below = 1e-9;
  CHECK(moe_layer_auto_path(1, 0.0) == WS_MOE_FUSED_LAYER);
  CHECK(moe_layer_auto_path(1, WS_MOE_AUTO_LAYER_ROWS - below) == WS_MOE_FUSED_LAYER);
  CHECK(moe_layer_auto_path(1, WS_MOE_AUTO_LAYER_ROWS) == WS_MOE_UNFUSED);
  for (int n = 2; n <= 8; n *= 2) {
    CHECK(moe_layer_auto_path(n, 0.0) == WS_MOE_FUSED_LAYER);
    CHECK(moe_layer_auto_path(n, WS_MOE_AUTO_EP_LAYER_ROWS - below) == WS_MOE_FUSED_LAYER);
    CHECK(moe_layer_auto_path(n, WS_MOE_AUTO_EP_LAYER_ROWS) == WS_MOE_FUSED_EXPERTS);
    CHECK(moe_layer_auto_path(n, WS_MOE_AUTO_FUSED_ROWS - below) == WS_MOE_FUSED_EXPERTS);
    CHECK(moe_layer_auto_path(n, WS_MOE_AUTO_FUSED_ROWS) == WS_MOE_UNFUSED);
  }
  /* the measured points (docs/benchmarks.md, session 16): DeepSeek-V3 on two ranks, rows
   * per local expert T x 8 / 128 */
  CHECK(moe_layer_auto_path(2, 1 * 8 / 128.0) == WS_MOE_FUSED_LAYER);
  CHECK(moe_layer_auto_path(2, 512 * 8 / 128.0) == WS_MOE_FUSED_EXPERTS);
  CHECK(moe_layer_auto_path(2, 4096 * 8 / 128.0) == WS_MOE_UNFUSED);
}

/* Sizes past 32 bits are refused before any allocation or launch: inter whose 2 x inter
 * (the L1 GEMM's n) would wrap, an experts kernel whose rows or work items pass its
 * int counters, SwiGLU buffers whose byte size wraps size_t. */
/* The dispatch's overlap (ep_overlap.h): never at decode (low latency), forced by the
 * knob, else from WS_EP_OVERLAP_MIN_SMS SMs and WS_EP_OVERLAP_MIN_TOKENS tokens: the
 * standalone default of 24 SMs stays plain, the layer's 128 SMs at 4096 tokens overlap. */
static void overlap_rule(void) {
  const int S = WS_EP_OVERLAP_MIN_SMS, T = WS_EP_OVERLAP_MIN_TOKENS;
  CHECK(ep_overlap_rule(1, 1, 128, 4096, 0, 4) == 0); /* low latency: never, even forced */
  CHECK(ep_overlap_rule(0, 1, 1, 0, 0, 4) == 1 && ep_overlap_rule(0, 0, 128, 4096, 0, 4) == 0);
  CHECK(ep_overlap_rule(0, -1, S, T, 0, 2) == 1 && ep_overlap_rule(0, -1, 128, 4096, 0, 4) == 1);
  CHECK(ep_overlap_rule(0, -1, S - 1, 4096, 0, 4) == 0 && ep_overlap_rule(0, -1, 128, T - 1, 0, 4) == 0);
  CHECK(ep_overlap_rule(0, -1, WS_EP_DEFAULT_SMS, 4096, 0, 4) == 0);
  /* the index receive (no rows to copy beside the send): only where the phased send is the
   * faster send itself; forced, always */
  const int SI = WS_EP_OVERLAP_INDEX_MIN_SMS, RI = WS_EP_OVERLAP_INDEX_MIN_RANKS;
  CHECK(ep_overlap_rule(0, -1, S, 4096, 1, RI) == (S >= SI) && ep_overlap_rule(0, -1, SI, 4096, 1, RI) == 1);
  CHECK(ep_overlap_rule(0, -1, SI - 1, 4096, 1, RI) == 0 && ep_overlap_rule(0, -1, SI, 4096, 1, RI - 1) == 0);
  CHECK(ep_overlap_rule(0, -1, SI, T - 1, 1, RI) == 0 && ep_overlap_rule(0, 1, S, 4096, 1, 2) == 1);
  CHECK(WS_EP_OVERLAP_DEFAULT == -1);
}

static void size_limits(void) {
  ws_moe_layer *l = NULL;
  ws_comm *comm = (ws_comm *)16; /* never dereferenced by the failing checks */
  static uint4 w[64];
  ws_moe_layer_config c = {512, (1 << 29) + 128, 8, 2, 64, 0, WS_MOE_UNFUSED};
  CHECK_STATUS(ws_moe_layer_create(&l, comm, &c, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK_MSG("inter 536871040");
  /* 64 ranks x 2^20 tokens x top-16 is 2^30 rows, plus each expert's padding: past 2^30 */
  static struct ws_comm ranks64;
  ranks64.nranks = 64;
  ws_moe_layer_config big = {128, 128, 1024, 16, 1 << 20, 24, WS_MOE_UNFUSED};
  CHECK_STATUS(ws_moe_layer_create(&l, &ranks64, &big, w, (const float *)w, w, (const float *)w), WS_ERR_INVALID);
  CHECK_MSG("receive rows");
  const ws_moe_shape sh = {256, (1 << 29) + 128, 4, 2};
  double out[1];
  CHECK_STATUS(ws_moe_reference(&sh, 0, NULL, NULL, NULL, NULL, (const uint8_t *)w, (const float *)w, (const uint8_t *)w,
                                (const float *)w, out),
               WS_ERR_INVALID);
  CHECK_MSG("inter 536871040");
  uint32_t counters[8];
  moe_experts_problem p;
  memset(&p, 0, sizeof p);
  p.hidden = 128; p.inter = 128; p.groups = 1; p.max_rows = 0x7FFFFFFC; /* + 63 in its 64-row blocks */
  p.offsets = (const int *)w; p.x = w; p.x_scale = (const float *)w; p.x_scale_ld = 0x7FFFFFFC;
  p.w1 = w; p.w1_scale = (const float *)w; p.w2 = w; p.w2_scale = (const float *)w;
  p.act = (uint8_t *)w; p.act_scale = (float *)w; p.act_ld = 0x7FFFFFFC; p.y = w; p.counters = counters;
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("max_rows 2147483644");
  p.max_rows = p.x_scale_ld = p.act_ld = 1 << 30; p.inter = 1 << 17; /* 2^24 row blocks x 2^10 L1 items each */
  CHECK_STATUS(moe_experts_launch(&p, 0), WS_ERR_INVALID);
  CHECK_MSG("work items");
  static uint4 qb[16];
  uint8_t *q = (uint8_t *)qb;
  float sc[4];
  CHECK_STATUS(ws_moe_swiglu_quant((const void *)w, SIZE_MAX / 256, 128, q, sc, 0, 0), WS_ERR_INVALID);
  CHECK_MSG("rows");
  /* 2^57 rows x 128 x 4 bytes of scratch is 2^66: 0 bytes once wrapped */
  CHECK_STATUS(ws_moe_swiglu_quant_host((const uint16_t *)w, (size_t)1 << 57, 128, q, sc), WS_ERR_INVALID);
  CHECK_MSG("rows");
}

/* The symmetric buffer's layout (ep_buffers.h) for configs the library accepts: every
 * object aligned and in order, at least as large as the kernels index it, none
 * overlapping the next, and inbox rows 16-byte multiples that hold payload, scales and
 * the meta block. */
static void buffer_layout(void) {
  const int hidden[4] = {128, 512, 4096, 7168}, experts[3] = {8, 64, 256}, topk[3] = {1, 4, 8};
  const int ranks[4] = {1, 2, 4, 8}, tokens[3] = {1, 128, 4096}, sms[3] = {1, 24, WS_EP_MAX_SMS};
  long cases = 0, bad = 0;
  for (int h = 0; h < 4; h++)
    for (int e = 0; e < 3; e++)
      for (int k = 0; k < 3; k++)
        for (int r = 0; r < 4; r++)
          for (int t = 0; t < 3; t++)
            for (int g = 0; g < 3; g++)
              for (int v = 0; v < 4; v++) { /* the payload, and whether the senders write entry records */
                const int fp8 = v & 1, records = v >> 1;
                const ws_ep_config c = {hidden[h], experts[e], topk[k], tokens[t], fp8 ? WS_EP_FP8 : WS_EP_BF16, 1, sms[g],
                                        WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
                if (ws_ep_config_check(&c, ranks[r]) != WS_OK) continue;
                const size_t N = (size_t)ranks[r], L = (size_t)(experts[e] / ranks[r]), T = (size_t)tokens[t];
                const size_t G = (size_t)sms[g], H = (size_t)hidden[h];
                const ep_buffers b =
                    ep_buffers_make(ranks[r], (int)L, tokens[t], hidden[h], fp8, topk[k], sms[g], records);
                const size_t at[11] = {b.counts, b.count_flag, b.inbox, b.data_flag, b.ack, b.comb_inbox, b.comb_flag,
                                       b.comb_ack, b.comb_prog, b.comb_done, b.rec};
                const size_t need[11] = {N * (L + 1) * 4, N * 8, N * T * b.inbox_row, N * G * 8, N * 8, N * T * H * 2,
                                         N * G * 8, N * 8, N * G * EP_PROG_WARPS * 8, N * 8,
                                         records ? N * L * T * EP_RECORD_BYTES : 0};
                int ok = b.inbox_row % EP_ROW_ALIGN == 0 &&
                         b.inbox_row >= H * (fp8 ? 1 : 2) + (fp8 ? H / 128 * 4 : 0) + 16 * (size_t)(1 + topk[k]);
                for (int i = 0; i < 11; i++) {
                  ok &= at[i] % EP_OBJECT_ALIGN == 0;
                  ok &= at[i] + need[i] <= (i + 1 < 11 ? at[i + 1] : b.bytes); /* in order, none overlapping */
                }
                ok &= b.counts == 0 && b.bytes % EP_OBJECT_ALIGN == 0;
                cases++;
                if (!ok && bad++ < 3)
                  printf("  ep_buffers: H %d E %d K %d ranks %d T %d sms %d fp8 %d records %d: a bad layout\n",
                         hidden[h], experts[e], topk[k], ranks[r], tokens[t], sms[g], fp8, records);
              }
  CHECK(cases > 500 && bad == 0);
  /* DeepSeek-V3's FP8 row: 7168 + 224 scale bytes + 9 meta entries = 7536, on a line: 7552 */
  CHECK(ep_inbox_row_bytes(7168, 1, 8) == 7552 && ep_inbox_row_bytes(7168, 0, 8) == 14592);
}

/* ep_row_source, the records' bookkeeping's way back from a layout row to (expert, source,
 * position): against the forward formula of ep_layout_row on random counts, with empty
 * experts, empty sources, padding to row_align (normal) and the masked blocks (low
 * latency); every padding row maps to no source. */
static void row_source(void) {
  uint64_t st = TD_RNG_START;
  int bad = 0, rows_checked = 0;
  for (int trial = 0; trial < 400; trial++) {
    const int N = 1 + (int)(td_rng_u32(&st) % 8), L = 1 + (int)(td_rng_u32(&st) % 40), ll = trial % 4 == 3;
    const int align = ll ? 1 : 1 << (td_rng_u32(&st) % 7), T = 64;
    int rc[8 * 41], off[41];
    for (int s = 0; s < N; s++)
      for (int l = 0; l <= L; l++) /* a third of the counts zero, the rest 1 .. 64 */
        rc[s * (L + 1) + l] = l < L && td_rng_u32(&st) % 3 ? 1 + (int)(td_rng_u32(&st) % T) : 0;
    off[0] = 0;
    for (int l = 0; l < L; l++) {
      int rows = 0;
      for (int s = 0; s < N; s++) rows += rc[s * (L + 1) + l];
      off[l + 1] = off[l] + (ll ? N * T : (rows + align - 1) / align * align);
    }
    int *seen = (int *)calloc((size_t)off[L] + 1, sizeof(int));
    REQUIRE(seen != NULL);
    for (int l = 0; l < L; l++) /* forward: every (l, s, p) to its row, and back */
      for (int s = 0, base = off[l]; s < N; base += rc[s * (L + 1) + l], s++)
        for (int p = 0; p < rc[s * (L + 1) + l]; p++) {
          int l2 = -1, p2 = -1;
          const int s2 = ep_row_source(rc, off, L, N, base + p, &l2, &p2);
          bad += s2 != s || l2 != l || p2 != p;
          seen[base + p] = 1;
          rows_checked++;
        }
    for (int r = 0; r < off[L]; r++) /* the rest is padding */
      if (!seen[r]) {
        int l2, p2;
        bad += ep_row_source(rc, off, L, N, r, &l2, &p2) != N;
      }
    free(seen);
  }
  CHECK(bad == 0 && rows_checked > 10000);
}

/* ws_ep_recv_gemm on the three layouts a dispatch leaves (no GPU: the fields only). */
static void recv_gemm(void) {
  ws_ep_recv r;
  memset(&r, 0, sizeof r);
  ws_gemm_problem p;
  memset(&p, 0, sizeof p);
  CHECK_STATUS(ws_ep_recv_gemm(NULL, &p), WS_ERR_INVALID);
  CHECK_STATUS(ws_ep_recv_gemm(&r, &p), WS_ERR_INVALID); /* no layout yet */
  CHECK_MSG("no layout");
  int offs[5], counts[4], index[64];
  float xs[4];
  static uint8_t rows[8192], x[64];
  /* the copy receive: grouped contiguous over x, K-block-major scales; the counts bound
   * each expert's rows in use (the tile choice may skip the padding after them) */
  r.x = x; r.x_scale = xs; r.scale_ld = 64; r.max_rows = 64; r.local_experts = 4; r.expert_offsets = offs;
  r.expert_counts = counts; r.fp8 = 1;
  CHECK_STATUS(ws_ep_recv_gemm(&r, &p), WS_OK);
  CHECK(p.layout == WS_GEMM_GROUPED_CONTIGUOUS && p.m == 64 && p.groups == 4 && p.group_offsets == offs &&
        p.group_rows == counts && p.a == x && p.a_scale == xs && p.a_scale_ld == 64 && p.a_rows == NULL &&
        p.a_rows_total == 0 && p.a_row_bytes == 0 && p.a_scale_stride == 0);
  /* the index receive: the same groups, A gathered from the receive buffer */
  r.row_index = index; r.rows = rows; r.row_scales = (const float *)(rows + 7168); r.row_bytes = 7552; /* the inbox row of DeepSeek-V3 */
  r.rows_total = 8192;
  CHECK_STATUS(ws_ep_recv_gemm(&r, &p), WS_OK);
  CHECK(p.layout == WS_GEMM_GROUPED_CONTIGUOUS && p.a == rows && p.a_rows == index && p.a_rows_total == 8192 &&
        p.a_row_bytes == 7552 && p.a_scale == r.row_scales && p.a_scale_stride == 7552 / 4 && p.a_scale_ld == 0);
  /* low latency: the masked layout, m = max_rows / local experts, counts as group_rows */
  r.masked = 1; r.row_index = NULL;
  CHECK_STATUS(ws_ep_recv_gemm(&r, &p), WS_OK);
  CHECK(p.layout == WS_GEMM_GROUPED_MASKED && p.m == 16 && p.groups == 4 && p.group_rows == counts &&
        p.group_offsets == NULL && p.a == x && p.a_rows == NULL);
}

int main(void) {
  config_checks();
  buffer_layout();
  row_source();
  recv_gemm();
  max_rows();
  reference_example();
  reference_random();
  argument_errors();
  swiglu_host();
  moe_reference();
  layer_arguments();
  experts_arguments();
  auto_rule();
  overlap_rule();
  size_limits();
  return test_finish("test_moe_host");
}
