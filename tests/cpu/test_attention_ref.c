/* test_attention_ref.c - the attention references hold what they promise, on cases with
 * a known answer (no GPU): identical keys give the mean of the visible values and
 * lse = s + log(n); one key gives its value; the three masks; rows that see no key;
 * GQA equals the same problem with the kv heads repeated; a variable-length batch equals
 * its sequences run alone; the default scale; sparse MLA with masked (-1, out of range)
 * and duplicate indices, and with all indices equal to dense single-head attention;
 * sparse MLA decode as the prefill over the batch's tokens (BF16 and FP8 cache).
 * One thread and several give the same bits. Plus the argument checks, and the size
 * limits: shapes whose products pass 32 bits are refused, not wrapped. */
#include "../test.h"
#include "warpspec/attention.h"
#include "warpspec/fp8.h"

#include <math.h>
#include <stdlib.h>

static uint32_t rng = 12345;
static float frand(void) {
  rng = rng * 1664525u + 1013904223u;
  return (float)((rng >> 8) % 2001) / 1000.0f - 1.0f;
}
static uint16_t *rand_bf16(size_t n) {
  uint16_t *x = (uint16_t *)malloc(n * 2 + 16);
  for (size_t i = 0; i < n; i++) x[i] = ws_float_to_bf16(frand());
  return x;
}
static double bf(uint16_t x) { return ws_bf16_to_float(x); }
static int near_eq(double a, double b) { return fabs(a - b) <= 1e-9 * (1 + fabs(b)); }

static ws_attn_problem problem(int B, int Sq, int Sk, int Hq, int Hk, int d, ws_attn_mask mask, const uint16_t *q,
                               const uint16_t *k, const uint16_t *v) {
  ws_attn_problem p = {B, Sq, Sk, NULL, NULL, Hq, Hk, d, d, mask, 0.0f, q, k, v, (void *)16, NULL, 0, 0};
  return p;
}

/* All keys equal: every visible key has the same score, so o = mean of visible v rows. */
static void identical_keys(void) {
  const int Sq = 7, Sk = 11, d = 64;
  uint16_t *q = rand_bf16((size_t)Sq * d), *k1 = rand_bf16(d), *v = rand_bf16((size_t)Sk * d);
  uint16_t *k = (uint16_t *)malloc((size_t)Sk * d * 2);
  for (int j = 0; j < Sk; j++) memcpy(k + (size_t)j * d, k1, (size_t)d * 2);
  double *o = (double *)malloc(sizeof(double) * Sq * d), lse[Sq];
  const ws_attn_mask masks[3] = {WS_ATTN_NO_MASK, WS_ATTN_CAUSAL_TOP_LEFT, WS_ATTN_CAUSAL_BOTTOM_RIGHT};
  for (int mi = 0; mi < 3; mi++) {
    ws_attn_problem p = problem(1, Sq, Sk, 1, 1, d, masks[mi], q, k, v);
    CHECK_STATUS(ws_attn_reference(&p, o, lse), WS_OK);
    for (int i = 0; i < Sq; i++) {
      const int n = mi == 0 ? Sk : mi == 1 ? i + 1 : i + Sk - Sq + 1;
      double s = 0;
      for (int c = 0; c < d; c++) s += bf(q[i * d + c]) * bf(k1[c]);
      s /= sqrt((double)d);
      CHECK(near_eq(lse[i], s + log((double)n)));
      for (int c = 0; c < d; c += 13) {
        double mean = 0;
        for (int j = 0; j < n; j++) mean += bf(v[(size_t)j * d + c]);
        CHECK(near_eq(o[i * d + c], mean / n));
      }
    }
  }
  /* bottom-right with more queries than keys: the first Sq - Sk rows see nothing */
  ws_attn_problem p = problem(1, Sk, Sq, 1, 1, d, WS_ATTN_CAUSAL_BOTTOM_RIGHT, q, k, v); /* 11 queries, 7 keys */
  uint16_t *q2 = rand_bf16((size_t)Sk * d);
  p.q = q2;
  double *o2 = (double *)malloc(sizeof(double) * Sk * d), lse2[Sk];
  CHECK_STATUS(ws_attn_reference(&p, o2, lse2), WS_OK);
  for (int i = 0; i < Sk - Sq; i++) {
    CHECK(isinf(lse2[i]) && lse2[i] < 0);
    CHECK(o2[i * d] == 0.0 && o2[i * d + d - 1] == 0.0);
  }
  CHECK(isfinite(lse2[Sk - Sq]));
  /* top-left causal, row 0 sees key 0 only: o = v[0] */
  p = problem(1, Sq, Sk, 1, 1, d, WS_ATTN_CAUSAL_TOP_LEFT, q, rand_bf16((size_t)Sk * d), v);
  CHECK_STATUS(ws_attn_reference(&p, o, lse), WS_OK);
  for (int c = 0; c < d; c++) CHECK(near_eq(o[c], bf(v[c])));
  free((void *)p.k);
  free(q); free(k1); free(v); free(k); free(o); free(q2); free(o2);
}

/* GQA: 4 query heads on 2 kv heads equals 4 query heads on the kv heads repeated. */
static void gqa_and_scale(void) {
  const int S = 9, d = 128, Hq = 4, Hk = 2;
  uint16_t *q = rand_bf16((size_t)S * Hq * d), *k = rand_bf16((size_t)S * Hk * d), *v = rand_bf16((size_t)S * Hk * d);
  uint16_t *k4 = (uint16_t *)malloc((size_t)S * Hq * d * 2), *v4 = (uint16_t *)malloc((size_t)S * Hq * d * 2);
  for (int t = 0; t < S; t++)
    for (int h = 0; h < Hq; h++) {
      memcpy(k4 + ((size_t)t * Hq + h) * d, k + ((size_t)t * Hk + h / 2) * d, (size_t)d * 2);
      memcpy(v4 + ((size_t)t * Hq + h) * d, v + ((size_t)t * Hk + h / 2) * d, (size_t)d * 2);
    }
  const size_t n = (size_t)S * Hq * d;
  double *o1 = (double *)malloc(n * 8), *o2 = (double *)malloc(n * 8), l1[Hq * S], l2[Hq * S];
  ws_attn_problem a = problem(1, S, S, Hq, Hk, d, WS_ATTN_CAUSAL_TOP_LEFT, q, k, v);
  ws_attn_problem b = problem(1, S, S, Hq, Hq, d, WS_ATTN_CAUSAL_TOP_LEFT, q, k4, v4);
  CHECK_STATUS(ws_attn_reference(&a, o1, l1), WS_OK);
  CHECK_STATUS(ws_attn_reference(&b, o2, l2), WS_OK);
  CHECK(memcmp(o1, o2, n * 8) == 0 && memcmp(l1, l2, sizeof l1) == 0);
  b.softmax_scale = (float)(1.0 / sqrt(128.0)); /* the default, given explicitly (as a float) */
  CHECK_STATUS(ws_attn_reference(&b, o2, l2), WS_OK);
  double worst = 0;
  for (size_t i = 0; i < n; i++) worst = fmax(worst, fabs(o1[i] - o2[i]));
  CHECK(worst < 1e-6);
  free(q); free(k); free(v); free(k4); free(v4); free(o1); free(o2);
}

/* A variable-length batch equals each of its sequences alone. */
static void varlen(void) {
  const int d = 64, H = 2, lq[2] = {5, 9}, lk[2] = {8, 3};
  const int cq[3] = {0, 5, 14}, ck[3] = {0, 8, 11};
  uint16_t *q = rand_bf16((size_t)14 * H * d), *k = rand_bf16((size_t)11 * H * d), *v = rand_bf16((size_t)11 * H * d);
  double *o = (double *)malloc(sizeof(double) * 14 * H * d), lse[2 * 14];
  ws_attn_problem p = problem(2, 9, 8, H, H, d, WS_ATTN_CAUSAL_BOTTOM_RIGHT, q, k, v);
  p.cu_seqlens_q = cq;
  p.cu_seqlens_k = ck;
  CHECK_STATUS(ws_attn_reference(&p, o, lse), WS_OK);
  for (int b = 0; b < 2; b++) {
    ws_attn_problem s = problem(1, lq[b], lk[b], H, H, d, WS_ATTN_CAUSAL_BOTTOM_RIGHT, q + (size_t)cq[b] * H * d,
                                k + (size_t)ck[b] * H * d, v + (size_t)ck[b] * H * d);
    double *os = (double *)malloc(sizeof(double) * lq[b] * H * d), ls[2 * 9];
    CHECK_STATUS(ws_attn_reference(&s, os, ls), WS_OK);
    CHECK(memcmp(os, o + (size_t)cq[b] * H * d, sizeof(double) * lq[b] * H * d) == 0);
    for (int h = 0; h < H; h++)
      for (int i = 0; i < lq[b]; i++) {
        const double x = ls[h * lq[b] + i], y = lse[h * 14 + cq[b] + i];
        CHECK((isinf(x) && isinf(y)) || x == y);
      }
    free(os);
  }
  /* a sequence longer than seqlen_q is an error, not a read past the end */
  p.seqlen_q = 8;
  CHECK_STATUS(ws_attn_reference(&p, o, lse), WS_ERR_INVALID);
  CHECK_MSG("longer than seqlen_q");
  free(q); free(k); free(v); free(o);
}

/* Sparse MLA: masked entries skipped, duplicates counted, and all rows selected equals
 * dense attention over every row. */
static void sparse(void) {
  const int Sq = 3, H = 2, Skv = 6, dq = 128, dv = 64;
  uint16_t *q = rand_bf16((size_t)Sq * H * dq), *kv = rand_bf16((size_t)Skv * dq);
  const int with_holes[3 * 4] = {1, -1, 4, 999, 0, 5, -7, 2, 3, 3, -1, -1};
  const int compact[3 * 2] = {1, 4, 0, 5, 3, 3};
  double o1[3 * 2 * 64], o2[3 * 2 * 64], l1[6], l2[6];
  ws_mla_sparse_problem a = {Sq, H, Skv, 4, dq, dv, 0.0f, q, kv, with_holes, (void *)16, NULL};
  CHECK_STATUS(ws_mla_sparse_reference(&a, o1, l1), WS_OK);
  /* query 1 saw {0, 5, 2}; compare the compact form on queries 0 and 2 */
  ws_mla_sparse_problem b = {Sq, H, Skv, 2, dq, dv, 0.0f, q, kv, compact, (void *)16, NULL};
  CHECK_STATUS(ws_mla_sparse_reference(&b, o2, l2), WS_OK);
  for (int h = 0; h < H; h++) {
    for (int c = 0; c < dv; c++) CHECK(near_eq(o1[(0 * H + h) * dv + c], o2[(0 * H + h) * dv + c]));
    CHECK(near_eq(l1[0 * H + h], l2[0 * H + h]));
    /* query 2: index 3 twice = one key with twice the weight: o = v[3], lse = s + log 2 */
    for (int c = 0; c < dv; c++) CHECK(near_eq(o1[(2 * H + h) * dv + c], bf(kv[3 * dq + c])));
    double s = 0;
    for (int c = 0; c < dq; c++) s += bf(q[((size_t)2 * H + h) * dq + c]) * bf(kv[3 * dq + c]);
    CHECK(near_eq(l1[2 * H + h], s / sqrt((double)dq) + log(2.0)));
  }
  /* every row selected once == dense attention with one kv head (dims 128/128 here, so
   * the dense reference takes it: V = the first 64 columns is checked on its part) */
  int all[Sq * Skv];
  for (int i = 0; i < Sq; i++)
    for (int j = 0; j < Skv; j++) all[i * Skv + j] = j;
  ws_mla_sparse_problem c = {Sq, H, Skv, Skv, dq, dq, 0.0f, q, kv, all, (void *)16, NULL};
  double oc[3 * 2 * 128], lc[6], od[3 * 2 * 128], ld[2 * 3];
  CHECK_STATUS(ws_mla_sparse_reference(&c, oc, lc), WS_OK);
  ws_attn_problem d = problem(1, Sq, Skv, H, 1, dq, WS_ATTN_NO_MASK, q, kv, kv);
  CHECK_STATUS(ws_attn_reference(&d, od, ld), WS_OK);
  for (int i = 0; i < Sq * H * dq; i++) CHECK(near_eq(oc[i], od[i]));
  for (int i = 0; i < Sq; i++)
    for (int h = 0; h < H; h++) CHECK(near_eq(lc[i * H + h], ld[h * Sq + i]));
  /* every index masked: o = 0, lse = -inf */
  const int none[3 * 2] = {-1, 6, -1, 100, -5, -1};
  ws_mla_sparse_problem e = {Sq, H, Skv, 2, dq, dv, 0.0f, q, kv, none, (void *)16, NULL};
  CHECK_STATUS(ws_mla_sparse_reference(&e, o1, l1), WS_OK);
  CHECK(o1[0] == 0.0 && isinf(l1[0]) && l1[0] < 0);
  free(q); free(kv);
}

/* MLA decode over a shuffled paged cache equals the sparse reference over the same
 * physical rows (the paging is only addressing); with s_q = 2 the first query sees one
 * key fewer; a sequence of 0 tokens gives o = 0 and lse = -inf; a page id out of range
 * in the used part of the table is an error. */
static void mla_decode(void) {
  const int B = 3, S = 2, H = 2, dq = 128, dv = 64, P = 4, pages = 9, maxp = 3;
  const int lens[3] = {5, 12, 0};
  const int table[3][3] = {{7, 0, 0}, {2, 8, 5}, {0, 0, 0}};
  uint16_t *q = rand_bf16((size_t)B * S * H * dq), *kv = rand_bf16((size_t)pages * P * dq);
  ws_mla_decode_problem p = {B, S, H, dq, dv, P, pages, maxp, 0, 0.0f, q, kv, &table[0][0], lens, (void *)16, NULL, 0};
  double *o = (double *)malloc(sizeof(double) * B * S * H * dv), lse[3 * 2 * 2];
  CHECK_STATUS(ws_mla_decode_reference(&p, o, lse), WS_OK);
  for (int b = 0; b < B; b++)
    for (int i = 0; i < S; i++) {
      const int visible = lens[b] - S + i + 1;
      int idx[16];
      for (int j = 0; j < visible; j++) idx[j] = table[b][j / P] * P + j % P;
      if (visible <= 0) {
        for (int h = 0; h < H; h++) CHECK(isinf(lse[(b * S + i) * H + h]) && o[((b * S + i) * H) * dv] == 0.0);
        continue;
      }
      double os[2 * 64], ls[2];
      ws_mla_sparse_problem sp = {1, H, pages * P, visible, dq, dv, 0.0f, q + (size_t)(b * S + i) * H * dq, kv, idx,
                                  (void *)16, NULL};
      CHECK_STATUS(ws_mla_sparse_reference(&sp, os, ls), WS_OK);
      for (int h = 0; h < H; h++) {
        CHECK(near_eq(lse[(b * S + i) * H + h], ls[h]));
        for (int c = 0; c < dv; c++) CHECK(near_eq(o[((size_t)(b * S + i) * H + h) * dv + c], os[h * dv + c]));
      }
    }
  int bad[3][3] = {{7, 0, 0}, {2, 9, 5}, {0, 0, 0}}; /* page 9 of 9 */
  p.block_table = &bad[0][0];
  CHECK_STATUS(ws_mla_decode_reference(&p, o, lse), WS_ERR_INVALID);
  CHECK_MSG("page 1 of its block_table is 9");
  p.block_table = &table[0][0];
  p.dim_v = 96;
  CHECK_STATUS(ws_mla_decode_check(&p), WS_ERR_INVALID);
  free(q); free(kv); free(o);
}

/* The FP8 latent cache: scales are powers of two, each value within E4M3's rounding of the
 * BF16 one, the rope dims untouched, a zero tile gives scale 1 and zero bytes,
 * quantising the dequantised rows gives the same bytes; decode over FP8 rows equals decode
 * over their (exact) BF16 dequantisation and stays within FP8's error of the BF16 cache. */
static void mla_fp8_cache(void) {
  const int rows = 40;
  uint16_t *kv = rand_bf16((size_t)rows * 576);
  for (int i = 0; i < 576; i++) kv[5 * 576 + i] = ws_float_to_bf16(300.0f * frand()); /* a row of large values */
  for (int i = 128; i < 256; i++) kv[6 * 576 + i] = 0;                                 /* a zero tile */
  for (int i = 0; i < 128; i++) kv[7 * 576 + i] = ws_float_to_bf16(1e-6f * frand());   /* tiny values */
  uint8_t *f8 = (uint8_t *)malloc((size_t)rows * WS_MLA_FP8_ROW_BYTES + 16), *f8b = (uint8_t *)malloc((size_t)rows * WS_MLA_FP8_ROW_BYTES + 16);
  uint16_t *deq = (uint16_t *)malloc((size_t)rows * 576 * 2 + 16);
  CHECK_STATUS(ws_mla_kv_quantize_fp8_host(kv, rows, f8), WS_OK);
  CHECK_STATUS(ws_mla_kv_dequantize_fp8_host(f8, rows, deq), WS_OK);
  int pow2 = 1, close = 1, rope = 1;
  for (int r = 0; r < rows; r++) {
    const uint8_t *row = f8 + (size_t)r * WS_MLA_FP8_ROW_BYTES;
    for (int t = 0; t < WS_MLA_FP8_TILES; t++) {
      float sc;
      memcpy(&sc, row + 512 + 4 * t, 4);
      int e = 0;
      pow2 &= sc > 0.0f && frexpf(sc, &e) == 0.5f;
      for (int i = 0; i < 128; i++) {
        const double x = bf(kv[r * 576 + t * 128 + i]), y = bf(deq[r * 576 + t * 128 + i]);
        close &= fabs(x - y) <= fabs(x) / 16.0 + sc * ldexp(1.0, -10) && fabs(y) <= 448.0 * sc;
      }
    }
    rope &= memcmp(kv + r * 576 + 512, deq + r * 576 + 512, 128) == 0 && memcmp(row + 528, kv + r * 576 + 512, 128) == 0;
  }
  CHECK(pow2);
  CHECK(close);
  CHECK(rope);
  float sc6;
  memcpy(&sc6, f8 + 6 * WS_MLA_FP8_ROW_BYTES + 512 + 4, 4);
  CHECK(sc6 == 1.0f && f8[6 * WS_MLA_FP8_ROW_BYTES + 128] == 0 && f8[6 * WS_MLA_FP8_ROW_BYTES + 255] == 0);
  CHECK_STATUS(ws_mla_kv_quantize_fp8_host(deq, rows, f8b), WS_OK);
  CHECK(memcmp(f8, f8b, (size_t)rows * WS_MLA_FP8_ROW_BYTES) == 0);
  /* decode: 2 sequences over 5 pages of 8 rows */
  const int B = 2, S = 1, H = 2, P = 8, pages = 5, maxp = 3, lens[2] = {13, 24}, table[2][3] = {{4, 1, 0}, {0, 2, 3}};
  uint16_t *q = rand_bf16((size_t)B * S * H * 576);
  ws_mla_decode_problem p = {B, S, H, 576, 512, P, pages, maxp, 0, 0.0f, q, f8, &table[0][0], lens, (void *)16, NULL, 1};
  double *o8 = (double *)malloc(sizeof(double) * B * S * H * 512), *od = (double *)malloc(sizeof(double) * B * S * H * 512);
  double *ob = (double *)malloc(sizeof(double) * B * S * H * 512), l8[4], ld[4], lb[4];
  CHECK_STATUS(ws_mla_decode_reference(&p, o8, l8), WS_OK);
  p.kv_fp8 = 0;
  p.kv_cache = deq;
  CHECK_STATUS(ws_mla_decode_reference(&p, od, ld), WS_OK);
  p.kv_cache = kv;
  CHECK_STATUS(ws_mla_decode_reference(&p, ob, lb), WS_OK);
  double num = 0, den = 0;
  int same = 1;
  for (int i = 0; i < B * S * H * 512; i++) {
    same &= o8[i] == od[i];
    num += (o8[i] - ob[i]) * (o8[i] - ob[i]);
    den += ob[i] * ob[i];
  }
  for (int i = 0; i < B * S * H; i++) same &= l8[i] == ld[i];
  CHECK(same);
  CHECK(sqrt(num / den) < 5e-2);
  /* the checks: kv_fp8 is 0 or 1, FP8 rows only for 576/512 */
  p.kv_fp8 = 2;
  CHECK_STATUS(ws_mla_decode_check(&p), WS_ERR_INVALID);
  CHECK_MSG("kv_fp8 2");
  p.kv_fp8 = 1;
  p.dim_qk = 512;
  CHECK_STATUS(ws_mla_decode_check(&p), WS_ERR_INVALID);
  CHECK_MSG("FP8 cache rows");
  free(kv); free(f8); free(f8b); free(deq); free(q); free(o8); free(od); free(ob);
}

/* Sparse MLA decode: the sparse prefill's reference over the batch x s_q tokens and the
 * cache's flat rows, bit for bit; a list of only -1 gives o = 0, lse = -inf; the FP8
 * cache gives the BF16 reference of its dequantised rows, bit for bit; an index outside
 * -1 .. rows - 1 is refused, named by sequence, token and position; the checks. */
static void mla_sparse_decode(void) {
  enum { B = 2, S = 2, H = 2, K = 6, P = 8, PAGES = 5, ROWS = P * PAGES };
  uint16_t *kv = rand_bf16((size_t)ROWS * 576), *q = rand_bf16((size_t)B * S * H * 576);
  int idx[B][S][K] = {{{3, 39, -1, 3, 17, 8}, {0, 1, 2, -1, -1, 33}}, {{12, 12, 12, 5, -1, 20}, {-1, -1, -1, -1, -1, -1}}};
  ws_mla_sparse_decode_problem p = {B, S, H, 576, 512, P, PAGES, K, 0.0f, q, kv, &idx[0][0][0], (void *)16, NULL, 0};
  const size_t no = (size_t)B * S * H * 512;
  double *o = (double *)malloc(sizeof(double) * no), *o2 = (double *)malloc(sizeof(double) * no);
  double l[B * S * H], l2[B * S * H];
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_OK);
  CHECK_STATUS(ws_mla_sparse_decode_reference(&p, o, l), WS_OK);
  ws_mla_sparse_problem sp = {B * S, H, ROWS, K, 576, 512, 0.0f, q, kv, &idx[0][0][0], (void *)16, NULL};
  CHECK_STATUS(ws_mla_sparse_reference(&sp, o2, l2), WS_OK);
  CHECK(memcmp(o, o2, sizeof(double) * no) == 0 && memcmp(l, l2, sizeof l) == 0);
  int empty = 1;
  for (int h = 0; h < H; h++) {
    empty &= isinf(l[3 * H + h]) && l[3 * H + h] < 0;
    for (int c = 0; c < 512; c++) empty &= o[(size_t)(3 * H + h) * 512 + c] == 0.0;
  }
  CHECK(empty);
  /* FP8 rows: the reference of their dequantised BF16 rows */
  uint8_t *f8 = (uint8_t *)malloc((size_t)ROWS * WS_MLA_FP8_ROW_BYTES + 16);
  uint16_t *deq = (uint16_t *)malloc((size_t)ROWS * 576 * 2 + 16);
  CHECK_STATUS(ws_mla_kv_quantize_fp8_host(kv, ROWS, f8), WS_OK);
  CHECK_STATUS(ws_mla_kv_dequantize_fp8_host(f8, ROWS, deq), WS_OK);
  p.kv_fp8 = 1;
  p.kv_cache = f8;
  CHECK_STATUS(ws_mla_sparse_decode_reference(&p, o, l), WS_OK);
  p.kv_fp8 = 0;
  p.kv_cache = deq;
  CHECK_STATUS(ws_mla_sparse_decode_reference(&p, o2, l2), WS_OK);
  CHECK(memcmp(o, o2, sizeof(double) * no) == 0 && memcmp(l, l2, sizeof l) == 0);
  p.kv_cache = kv;
  /* an index past the cache, and one below -1 */
  idx[1][0][3] = ROWS;
  CHECK_STATUS(ws_mla_sparse_decode_reference(&p, o, l), WS_ERR_INVALID);
  CHECK_MSG("indices[1][0][3]");
  idx[1][0][3] = -2;
  CHECK_STATUS(ws_mla_sparse_decode_reference(&p, o, l), WS_ERR_INVALID);
  idx[1][0][3] = 5;
  /* the checks */
  CHECK_STATUS(ws_mla_sparse_decode_check(NULL), WS_ERR_INVALID);
  p.topk = 0;
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_ERR_INVALID);
  CHECK_MSG("topk 0");
  p.topk = K;
  p.kv_fp8 = 2;
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_ERR_INVALID);
  CHECK_MSG("kv_fp8 2");
  p.kv_fp8 = 1;
  p.dim_qk = 512;
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_ERR_INVALID);
  CHECK_MSG("FP8 cache rows");
  p.kv_fp8 = 0;
  p.dim_qk = 576;
  p.num_pages = 1 << 26; /* x 8 rows fits; x 64 rows does not */
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_OK);
  p.page_size = 64;
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_ERR_INVALID);
  CHECK_MSG("cache rows");
  p.page_size = P;
  p.num_pages = PAGES;
  p.indices = NULL;
  CHECK_STATUS(ws_mla_sparse_decode_check(&p), WS_ERR_INVALID);
  CHECK_STATUS(ws_mla_sparse_decode_reference(&p, o, l), WS_ERR_INVALID);
  free(kv); free(q); free(o); free(o2); free(f8); free(deq);
}

/* NSA: every block selected is causal attention; a block listed twice leaves o as it is
 * and adds ln 2 to lse; -1 and past-the-end entries are skipped. */
static void nsa(void) {
  const int T = 150, Hq = 4, Hk = 2, d = 64, blk = 64, nb = 3; /* 150 tokens: blocks 0..2 */
  uint16_t *q = rand_bf16((size_t)T * Hq * d), *k = rand_bf16((size_t)T * Hk * d), *v = rand_bf16((size_t)T * Hk * d);
  int *all = (int *)malloc(sizeof(int) * T * Hk * (nb + 2));
  for (int i = 0; i < T * Hk; i++) {
    all[i * (nb + 2) + 0] = 2; /* any order */
    all[i * (nb + 2) + 1] = -1;
    all[i * (nb + 2) + 2] = 0;
    all[i * (nb + 2) + 3] = 7; /* past the end: skipped */
    all[i * (nb + 2) + 4] = 1;
  }
  ws_nsa_problem p = {T, Hq, Hk, d, d, blk, nb + 2, 0.0f, q, k, v, all, (void *)16, NULL};
  double *o = (double *)malloc(sizeof(double) * T * Hq * d), *lse = (double *)malloc(sizeof(double) * T * Hq);
  double *od = (double *)malloc(sizeof(double) * T * Hq * d), *ld = (double *)malloc(sizeof(double) * T * Hq);
  CHECK_STATUS(ws_nsa_reference(&p, o, lse), WS_OK);
  ws_attn_problem a = problem(1, T, T, Hq, Hk, d, WS_ATTN_CAUSAL_TOP_LEFT, q, k, v);
  CHECK_STATUS(ws_attn_reference(&a, od, ld), WS_OK);
  int same = 1;
  for (size_t i = 0; i < (size_t)T * Hq * d; i++) same &= near_eq(o[i], od[i]);
  for (int i = 0; i < T; i++)
    for (int h = 0; h < Hq; h++) same &= near_eq(lse[i * Hq + h], ld[(size_t)h * T + i]); /* lse layouts differ */
  CHECK(same);
  /* block 0 twice against once */
  int *once = (int *)malloc(sizeof(int) * T * Hk), *twice = (int *)malloc(sizeof(int) * T * Hk * 2);
  for (int i = 0; i < T * Hk; i++) { once[i] = 0; twice[2 * i] = 0; twice[2 * i + 1] = 0; }
  ws_nsa_problem p1 = p, p2 = p;
  p1.topn = 1; p1.block_indices = once;
  p2.topn = 2; p2.block_indices = twice;
  CHECK_STATUS(ws_nsa_reference(&p1, o, lse), WS_OK);
  CHECK_STATUS(ws_nsa_reference(&p2, od, ld), WS_OK);
  same = 1;
  for (size_t i = 0; i < (size_t)T * Hq * d; i++) same &= fabs(o[i] - od[i]) <= 1e-12 * (1 + fabs(o[i]));
  for (int i = 0; i < T * Hq; i++) same &= near_eq(ld[i], lse[i] + log(2.0));
  CHECK(same);
  p.dim_qk = 96;
  CHECK_STATUS(ws_nsa_check(&p), WS_ERR_INVALID);
  p.dim_qk = 64; p.heads_q = 3;
  CHECK_STATUS(ws_nsa_check(&p), WS_ERR_INVALID);
  /* the kernel's own limits, refused before any GPU call (so also on a machine without one) */
  ws_nsa_problem g = {64, 32, 2, 128, 128, 64, 8, 0.0f, q, k, v, all, (void *)16, NULL};
  g.block = 32;
  CHECK_STATUS(ws_nsa_forward(&g, 0), WS_ERR_UNSUPPORTED);
  CHECK_MSG("blocks of 64");
  g.block = 64; g.heads_q = 16; g.heads_kv = 2; /* 8 query heads per kv head */
  CHECK_STATUS(ws_nsa_forward(&g, 0), WS_ERR_UNSUPPORTED);
  CHECK_MSG("16, 32, 64 or 128");
  g.heads_q = 32; g.topn = 65;
  CHECK_STATUS(ws_nsa_forward(&g, 0), WS_ERR_INVALID);
  CHECK_MSG("topn 65");
  g.topn = 8; g.dim_qk = 64; g.dim_v = 64;
  CHECK_STATUS(ws_nsa_forward(&g, 0), WS_ERR_UNSUPPORTED);
  CHECK_MSG("128/128 and 192/128");
  g.dim_qk = 192; g.dim_v = 128; g.tokens = 65536 + 64;
  CHECK_STATUS(ws_nsa_forward(&g, 0), WS_ERR_UNSUPPORTED);
  CHECK_MSG("at most 65536 tokens");
  free(q); free(k); free(v); free(all); free(o); free(lse); free(od); free(ld); free(once); free(twice);
}

/* The references run their rows on several threads (WARPSPEC_HOST_THREADS; default the
 * CPUs): one thread and five give the same bits, on a varlen causal GQA batch, sparse MLA,
 * paged MLA decode and NSA. */
static int same_bits(const double *a, const double *b, size_t n) { return memcmp(a, b, n * sizeof(double)) == 0; }

static void threads_same_bits(void) {
  const int B = 3, Hq = 4, Hk = 2, d = 64, T = 150;
  const int cq[4] = {0, 37, 38, 101}, ck[4] = {0, 50, 51, 130};
  uint16_t *q = rand_bf16((size_t)T * Hq * 192), *k = rand_bf16((size_t)T * Hk * 192), *v = rand_bf16((size_t)T * Hk * 192);
  const size_t no = (size_t)T * Hq * 128, nl = (size_t)T * Hq;
  double *o[2], *l[2];
  for (int r = 0; r < 2; r++) { o[r] = (double *)malloc(no * sizeof(double)); l[r] = (double *)malloc(nl * sizeof(double)); }
  for (int r = 0; r < 2; r++) {
    test_set_knob(WS_HOST_THREADS_ENV, r ? "5" : "1");
    ws_attn_problem a = problem(B, 63, 79, Hq, Hk, d, WS_ATTN_CAUSAL_BOTTOM_RIGHT, q, k, v);
    a.cu_seqlens_q = cq; a.cu_seqlens_k = ck;
    CHECK_STATUS(ws_attn_reference(&a, o[r], l[r]), WS_OK);
  }
  CHECK(same_bits(o[0], o[1], (size_t)101 * Hq * d) && same_bits(l[0], l[1], (size_t)101 * Hq));
  int *idx = (int *)malloc(sizeof(int) * 40 * 24);
  for (int i = 0; i < 40 * 24; i++) idx[i] = (int)(rng = rng * 1664525u + 1013904223u) % 70 - 5; /* some -1 .. -5 */
  for (int r = 0; r < 2; r++) {
    test_set_knob(WS_HOST_THREADS_ENV, r ? "5" : "1");
    ws_mla_sparse_problem m = {40, 2, 60, 24, 192, 128, 0.0f, q, k, idx, (void *)16, NULL};
    CHECK_STATUS(ws_mla_sparse_reference(&m, o[r], l[r]), WS_OK);
  }
  CHECK(same_bits(o[0], o[1], (size_t)40 * 2 * 128) && same_bits(l[0], l[1], (size_t)40 * 2));
  const int lens[3] = {9, 0, 14}, table[3][4] = {{3, 1, 0, 0}, {0, 0, 0, 0}, {2, 0, 4, 5}};
  for (int r = 0; r < 2; r++) {
    test_set_knob(WS_HOST_THREADS_ENV, r ? "5" : "1");
    ws_mla_decode_problem dp = {3, 2, 2, 128, 64, 4, 6, 4, 0, 0.0f, q, k, &table[0][0], lens, (void *)16, NULL, 0};
    CHECK_STATUS(ws_mla_decode_reference(&dp, o[r], l[r]), WS_OK);
  }
  CHECK(same_bits(o[0], o[1], (size_t)3 * 2 * 2 * 64) && same_bits(l[0], l[1], (size_t)3 * 2 * 2));
  int *sel = (int *)malloc(sizeof(int) * T * Hk * 3);
  for (int i = 0; i < T * Hk * 3; i++) sel[i] = (int)((rng = rng * 1664525u + 1013904223u) >> 8) % 4 - 1;
  for (int r = 0; r < 2; r++) {
    test_set_knob(WS_HOST_THREADS_ENV, r ? "5" : "1");
    ws_nsa_problem n = {T, Hq, Hk, d, d, 64, 3, 0.0f, q, k, v, sel, (void *)16, NULL};
    CHECK_STATUS(ws_nsa_reference(&n, o[r], l[r]), WS_OK);
  }
  CHECK(same_bits(o[0], o[1], (size_t)T * Hq * d) && same_bits(l[0], l[1], (size_t)T * Hq));
  test_set_knob(WS_HOST_THREADS_ENV, NULL);
  for (int r = 0; r < 2; r++) { free(o[r]); free(l[r]); }
  free(q); free(k); free(v); free(idx); free(sel);
}

static void checks(void) {
  uint16_t *x = rand_bf16(64);
  ws_attn_problem p = problem(1, 4, 4, 2, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  CHECK_STATUS(ws_attn_check(&p), WS_OK);
  CHECK_STATUS(ws_attn_check(NULL), WS_ERR_INVALID);
  p.heads_q = 3; p.heads_kv = 2;
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  CHECK_MSG("multiple of heads_kv");
  p = problem(1, 4, 4, 2, 1, 96, WS_ATTN_NO_MASK, x, x, x);
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  CHECK_MSG("96/96");
  p = problem(1, 4, 4, 2, 1, 64, (ws_attn_mask)5, x, x, x);
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  p = problem(1, 0, 4, 2, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  p = problem(1, 4, 4, 2, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  p.cu_seqlens_q = (const int *)x; /* without cu_seqlens_k */
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  p = problem(1, 4, 4, 2, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  p.softmax_scale = -1.0f;
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  p = problem(1, 4, 4, 2, 1, 64, WS_ATTN_NO_MASK, (const uint16_t *)((const char *)x + 2), x, x);
  CHECK_STATUS(ws_attn_check(&p), WS_ERR_INVALID);
  CHECK_MSG("aligned");
  const int idx[1] = {0};
  ws_mla_sparse_problem s = {1, 1, 1, 1, 576, 512, 0.0f, x, x, idx, (void *)16, NULL};
  CHECK_STATUS(ws_mla_sparse_check(&s), WS_OK);
  s.dim_v = 640;
  CHECK_STATUS(ws_mla_sparse_check(&s), WS_ERR_INVALID);
  s.dim_v = 512; s.indices = NULL;
  CHECK_STATUS(ws_mla_sparse_check(&s), WS_ERR_INVALID);
  free(x);
}

/* Shapes whose sizes pass 32 bits are refused, by checks that compute them in 64 bits,
 * instead of passing with a wrapped product (each case passed the checks when they
 * multiplied in int). */
static void size_limits(void) {
  uint16_t *x = rand_bf16(64);
  const int lens[1] = {0}, table[1] = {0};
  /* 2^26 pages of 64 rows: 2^32 keys a sequence, 0 in 32 bits */
  ws_mla_decode_problem d = {1, 1, 64, 576, 512, 64, 1, 1 << 26, 0, 0.0f, x, x, table, lens, (void *)16, NULL, 0};
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("max_pages 67108864 x page_size 64");
  d.max_pages = 1 << 24; /* 2^30 keys: the limit itself */
  CHECK_STATUS(ws_mla_decode_check(&d), WS_OK);
  d.max_seqlen = 1 << 30;
  CHECK_STATUS(ws_mla_decode_check(&d), WS_OK);
  d.max_pages = 1; d.max_seqlen = 0; d.num_pages = 1 << 25; /* 2^31 rows in the cache */
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("num_pages 33554432 x page_size 64");
  d.num_pages = 1; d.batch = 1 << 16; d.s_q = 1 << 15; /* 2^37 query rows x heads */
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("batch 65536 x s_q 32768 x heads 64");
  const int idx[1] = {0};
  ws_mla_sparse_problem s = {1, 64, 1, 0x7FFFFFFF, 576, 512, 0.0f, x, x, idx, (void *)16, NULL};
  CHECK_STATUS(ws_mla_sparse_check(&s), WS_ERR_INVALID); /* the kernel's key blocks: topk + 63 */
  CHECK_MSG("topk 2147483647");
  ws_nsa_problem n = {1, 16, 1, 128, 128, 1 << 16, 1 << 16, 0.0f, x, x, x, idx, (void *)16, NULL};
  CHECK_STATUS(ws_nsa_check(&n), WS_ERR_INVALID); /* 2^32 keys listed per query */
  CHECK_MSG("topn 65536 x block 65536");
  n.topn = 1; n.block = 64; n.tokens = 0x7FFFFFFF; /* tokens + 63 in the block count */
  CHECK_STATUS(ws_nsa_check(&n), WS_ERR_INVALID);
  CHECK_MSG("tokens 2147483647");
  /* the NSA kernel's TMA column of kv head g is g x dim_qk, an int: 2^24 heads x 128 is 2^31 */
  n.tokens = 1; n.heads_q = 1 << 28; n.heads_kv = 1 << 24; n.block = 64;
  CHECK_STATUS(ws_nsa_forward(&n, 0), WS_ERR_INVALID);
  CHECK_MSG("heads_kv 16777216 x dim_qk 128");
  /* dense batches: 2^16 sequences of 2^16 tokens are 2^32 rows */
  ws_attn_problem a = problem(1 << 16, 1 << 16, 1, 1, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  CHECK_STATUS(ws_attn_check(&a), WS_ERR_INVALID);
  CHECK_MSG("batch 65536 x seqlen_q 65536");
  a = problem(1 << 16, 1, 1 << 16, 1, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  CHECK_STATUS(ws_attn_check(&a), WS_ERR_INVALID);
  CHECK_MSG("batch 65536 x seqlen_k 65536");
  int qb = 0, lq = 0, kb = 0, lk = 0; /* sequence 2^15 would start at row 2^31 */
  CHECK_STATUS(ws_attn_sequence(&a, 1 << 15, &qb, &lq, &kb, &lk), WS_ERR_INVALID);
  /* variable length: seqlen_q is the longest sequence; + 127 in the kernel's query blocks */
  const int cu[3] = {0, -2, 0x7FFFFFFF};
  a = problem(2, 0x7FFFFFFF, 4, 1, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  a.cu_seqlens_q = cu; a.cu_seqlens_k = cu;
  CHECK_STATUS(ws_attn_check(&a), WS_ERR_INVALID);
  CHECK_MSG("seqlen_q 2147483647");
  /* offsets checked one sequence at a time: -2 .. 2^31 - 1 is no length */
  a.seqlen_q = 1 << 30;
  CHECK_STATUS(ws_attn_sequence(&a, 1, &qb, &lq, &kb, &lk), WS_ERR_INVALID);
  /* the flash kernel's TMA column of head h is h x dim_qk, an int */
  a = problem(1, 1, 1, 1 << 24, 1 << 24, 128, WS_ATTN_NO_MASK, x, x, x);
  CHECK_STATUS(ws_attn_forward(&a, 0), WS_ERR_INVALID);
  CHECK_MSG("heads_q 16777216 x dim_qk 128");
  /* the reference's work items (heads x 16-query chunks) are an int: 2^15 x 2^17 is 2^32 */
  a = problem(1, 1 << 21, 1, 1 << 15, 1, 64, WS_ATTN_NO_MASK, x, x, x);
  double o[1];
  CHECK_STATUS(ws_attn_reference(&a, o, NULL), WS_ERR_INVALID);
  CHECK_MSG("heads_q 32768");
  /* FP8 cache rows: rows x 656 bytes past size_t wrapped the grid's row count */
  CHECK_STATUS(ws_mla_kv_quantize_fp8(x, SIZE_MAX / 512, (void *)(uintptr_t)0x1000, 0), WS_ERR_INVALID);
  CHECK_MSG("rows");
  free(x);
}

int main(void) {
  identical_keys();
  gqa_and_scale();
  varlen();
  sparse();
  mla_decode();
  mla_fp8_cache();
  mla_sparse_decode();
  nsa();
  threads_same_bits();
  checks();
  size_limits();
  return test_finish("test_attention_ref");
}
