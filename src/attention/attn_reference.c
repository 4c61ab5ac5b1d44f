/* attn_reference.c - the attention problems' float64 references (the tests' ground truth;
 * each problem's argument check lives with its op: flash_fwd.cu, mla_sparse.cu,
 * mla_decode.cu, nsa_fwd.cu). Softmax in float64 with the row maximum
 * subtracted; every masked key is skipped, never read. */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "mla_fp8_scale.h"
#include "warpspec/attention.h"
#include "warpspec/fp8.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

ws_status ws_attn_sequence(const ws_attn_problem *p, int b, int *q_begin, int *q_len, int *k_begin, int *k_len) {
  WS_REQUIRE(p && q_begin && q_len && k_begin && k_len, "ws_attn_sequence: a NULL argument");
  WS_REQUIRE(b >= 0 && b < p->batch, "ws_attn_sequence: sequence %d of %d", b, p->batch);
  if (!p->cu_seqlens_q) {
    WS_REQUIRE(ws_mul_sat(p->batch, p->seqlen_q) <= WS_INDEX_MAX && ws_mul_sat(p->batch, p->seqlen_k) <= WS_INDEX_MAX,
               "ws_attn_sequence: batch %d of %d x %d tokens, more rows than an int counts", p->batch, p->seqlen_q,
               p->seqlen_k);
    *q_begin = b * p->seqlen_q; *q_len = p->seqlen_q;
    *k_begin = b * p->seqlen_k; *k_len = p->seqlen_k;
    return WS_OK;
  }
  const int *cq = p->cu_seqlens_q, *ck = p->cu_seqlens_k;
  WS_REQUIRE(cq[0] == 0 && ck[0] == 0, "ws_attn: cu_seqlens must start at 0");
  /* offsets >= 0 and not decreasing: their differences cannot overflow */
  WS_REQUIRE(cq[b] >= 0 && ck[b] >= 0 && cq[b + 1] >= cq[b] && ck[b + 1] >= ck[b],
             "ws_attn: cu_seqlens decrease or go negative at sequence %d", b);
  WS_REQUIRE(cq[b + 1] - cq[b] <= p->seqlen_q && ck[b + 1] - ck[b] <= p->seqlen_k,
             "ws_attn: sequence %d is %d x %d tokens, longer than seqlen_q %d / seqlen_k %d", b, cq[b + 1] - cq[b],
             ck[b + 1] - ck[b], p->seqlen_q, p->seqlen_k);
  *q_begin = cq[b]; *q_len = cq[b + 1] - cq[b];
  *k_begin = ck[b]; *k_len = ck[b + 1] - ck[b];
  return WS_OK;
}

static double bf(const uint16_t *x, size_t i) { return (double)ws_bf16_to_float(x[i]); }

/* One query row against n keys (key j at krow[j], -1 skipped): o[dim_v] and lse. */
static void softmax_row(const uint16_t *q, const uint16_t *kv_k, const uint16_t *kv_v, const long *krow, int n,
                        size_t k_stride, size_t v_stride, int dim_qk, int dim_v, double scale, double *s, double *o,
                        double *lse) {
  double m = -INFINITY;
  for (int j = 0; j < n; j++) {
    if (krow[j] < 0) continue;
    double d = 0;
    const uint16_t *k = kv_k + (size_t)krow[j] * k_stride;
    for (int c = 0; c < dim_qk; c++) d += bf(q, c) * bf(k, c);
    s[j] = scale * d;
    if (s[j] > m) m = s[j];
  }
  for (int c = 0; c < dim_v; c++) o[c] = 0;
  if (m == -INFINITY) { /* no key: o = 0, lse = -inf */
    if (lse) *lse = -INFINITY;
    return;
  }
  double den = 0;
  for (int j = 0; j < n; j++) {
    if (krow[j] < 0) continue;
    const double e = exp(s[j] - m);
    den += e;
    const uint16_t *v = kv_v + (size_t)krow[j] * v_stride;
    for (int c = 0; c < dim_v; c++) o[c] += e * bf(v, c);
  }
  for (int c = 0; c < dim_v; c++) o[c] /= den;
  if (lse) *lse = m + log(den);
}

static size_t tokens_q(const ws_attn_problem *p) {
  if (!p->cu_seqlens_q) return (size_t)p->batch * p->seqlen_q;
  return p->total_q > 0 ? (size_t)p->total_q : (size_t)p->cu_seqlens_q[p->batch]; /* lse's row length */
}

/* The references run their rows on all cores (core/parallel.c): each item owns its output
 * rows and every worker its scratch (rows, s: `width` entries a worker), so the bits do
 * not depend on the threads. */
typedef struct {
  const void *p; /* the problem */
  double *o, *lse, scale;
  size_t width;
  long *rows;
  double *s;
} ref_job;

/* The job's scratch for `workers` workers; on failure WS_ERR_NOMEM naming `who`. */
static ws_status ref_job_init(ref_job *j, const void *p, double *o, double *lse, double scale, size_t width, int workers,
                              const char *who) {
  j->p = p; j->o = o; j->lse = lse; j->scale = scale; j->width = width > 0 ? width : 1;
  j->rows = (long *)malloc(sizeof(long) * j->width * (size_t)workers);
  j->s = (double *)malloc(sizeof(double) * j->width * (size_t)workers);
  return j->rows && j->s ? WS_OK : ws_fail(WS_ERR_NOMEM, "%s: out of host memory", who);
}
static void ref_job_free(ref_job *j) { free(j->rows); free(j->s); }
static long *ref_rows(const ref_job *j, int worker) { return j->rows + (size_t)worker * j->width; }
static double *ref_s(const ref_job *j, int worker) { return j->s + (size_t)worker * j->width; }
static double ref_scale(float given, int dim_qk) { return given > 0 ? given : 1.0 / sqrt((double)dim_qk); }

#define REF_CHUNK 16 /* query tokens of one flash-reference item */

typedef struct {
  ref_job r;
  size_t Tq;
  int chunks, *chunk_b, *chunk_i0; /* chunk -> its sequence and first query of it */
} attn_ref_job;

static void attn_ref_item(void *ctx, int item, int worker) {
  const attn_ref_job *j = (const attn_ref_job *)ctx;
  const ws_attn_problem *p = (const ws_attn_problem *)j->r.p;
  const int Hq = p->heads_q, Hk = p->heads_kv, dq = p->dim_qk, dv = p->dim_v, group = Hq / Hk;
  const int h = item / j->chunks, ch = item % j->chunks, b = j->chunk_b[ch], g = h / group;
  int qb, lq, kb, lk;
  ws_attn_sequence(p, b, &qb, &lq, &kb, &lk); /* checked before the items ran */
  long *rows = ref_rows(&j->r, worker);
  double *s = ref_s(&j->r, worker);
  const uint16_t *Q = (const uint16_t *)p->q, *K = (const uint16_t *)p->k, *V = (const uint16_t *)p->v;
  for (int i = j->chunk_i0[ch]; i < lq && i < j->chunk_i0[ch] + REF_CHUNK; i++) {
    /* the keys row i sees: all, j <= i (top-left), j <= i + lk - lq (bottom-right) */
    const long last = p->mask == WS_ATTN_NO_MASK ? lk - 1 : p->mask == WS_ATTN_CAUSAL_TOP_LEFT ? (long)i : (long)i + lk - lq;
    for (int c = 0; c < lk; c++) rows[c] = c <= last ? (long)(kb + c) * Hk + g : -1;
    const size_t t = (size_t)(qb + i);
    softmax_row(Q + (t * Hq + h) * dq, K, V, rows, lk, (size_t)dq, (size_t)dv, dq, dv, j->r.scale, s,
                j->r.o + (t * Hq + h) * dv, j->r.lse ? &j->r.lse[(size_t)h * j->Tq + t] : NULL);
  }
}

ws_status ws_attn_reference(const ws_attn_problem *p, double *o, double *lse) {
  ws_status st = ws_attn_check(p);
  if (st != WS_OK) return st;
  WS_REQUIRE(o != NULL, "ws_attn_reference: o is NULL");
  attn_ref_job j = {{0}, tokens_q(p), 0, NULL, NULL};
  for (int b = 0; b < p->batch && st == WS_OK; b++) {
    int qb, lq, kb, lk;
    if ((st = ws_attn_sequence(p, b, &qb, &lq, &kb, &lk)) == WS_OK) j.chunks += (lq + REF_CHUNK - 1) / REF_CHUNK;
  }
  if (st != WS_OK) return st;
  WS_REQUIRE(ws_mul_sat(p->heads_q, j.chunks) <= WS_INDEX_MAX,
             "ws_attn_reference: heads_q %d x %d chunks of %d queries is more work items than an int counts", p->heads_q,
             j.chunks, REF_CHUNK);
  const int workers = ws_host_workers();
  st = ref_job_init(&j.r, p, o, lse, ref_scale(p->softmax_scale, p->dim_qk), (size_t)p->seqlen_k, workers,
                    "ws_attn_reference");
  j.chunk_b = (int *)malloc(sizeof(int) * (size_t)(j.chunks + 1));
  j.chunk_i0 = (int *)malloc(sizeof(int) * (size_t)(j.chunks + 1));
  if (st == WS_OK && (!j.chunk_b || !j.chunk_i0)) st = ws_fail(WS_ERR_NOMEM, "ws_attn_reference: out of host memory");
  for (int b = 0, c = 0; b < p->batch && st == WS_OK; b++) {
    int qb, lq, kb, lk;
    ws_attn_sequence(p, b, &qb, &lq, &kb, &lk);
    for (int i0 = 0; i0 < lq; i0 += REF_CHUNK, c++) {
      j.chunk_b[c] = b;
      j.chunk_i0[c] = i0;
    }
  }
  if (st == WS_OK) ws_parallel_for(p->heads_q * j.chunks, workers, attn_ref_item, &j);
  free(j.chunk_b);
  free(j.chunk_i0);
  ref_job_free(&j.r);
  return st;
}

static void mla_ref_item(void *ctx, int i, int worker) {
  const ref_job *j = (const ref_job *)ctx;
  const ws_mla_sparse_problem *p = (const ws_mla_sparse_problem *)j->p;
  const int H = p->heads, dq = p->dim_qk, dv = p->dim_v, K = p->topk;
  const uint16_t *Q = (const uint16_t *)p->q, *KV = (const uint16_t *)p->kv;
  long *rows = ref_rows(j, worker);
  double *s = ref_s(j, worker);
  for (int c = 0; c < K; c++) {
    const int r = p->indices[(size_t)i * K + c];
    rows[c] = r >= 0 && r < p->s_kv ? r : -1; /* -1 and out of range: masked, never read */
  }
  for (int h = 0; h < H; h++)
    softmax_row(Q + ((size_t)i * H + h) * dq, KV, KV, rows, K, (size_t)dq, (size_t)dq, dq, dv, j->scale, s,
                j->o + ((size_t)i * H + h) * dv, j->lse ? &j->lse[(size_t)i * H + h] : NULL);
}

ws_status ws_mla_sparse_reference(const ws_mla_sparse_problem *p, double *o, double *lse) {
  ws_status st = ws_mla_sparse_check(p);
  if (st != WS_OK) return st;
  WS_REQUIRE(o != NULL, "ws_mla_sparse_reference: o is NULL");
  ref_job j;
  const int workers = ws_host_workers();
  st = ref_job_init(&j, p, o, lse, ref_scale(p->softmax_scale, p->dim_qk), (size_t)p->topk, workers,
                    "ws_mla_sparse_reference");
  if (st == WS_OK) ws_parallel_for(p->s_q, workers, mla_ref_item, &j);
  ref_job_free(&j);
  return st;
}

/* ---- MLA decode (paged latent cache) and NSA selected-block attention ---------------- */
/* ---- the FP8 latent cache (WS_MLA_FP8_ROW_BYTES rows) ------------------------------- */
ws_status ws_mla_kv_quantize_fp8_host(const uint16_t *kv, size_t rows, uint8_t *out) {
  WS_REQUIRE(rows == 0 || (kv != NULL && out != NULL), "ws_mla_kv_quantize_fp8_host: kv or out is NULL");
  for (size_t r = 0; r < rows; r++) {
    const uint16_t *x = kv + r * 576;
    uint8_t *o = out + r * WS_MLA_FP8_ROW_BYTES;
    for (int t = 0; t < WS_MLA_FP8_TILES; t++) {
      float amax = 0.0f;
      for (int i = 0; i < 128; i++) amax = fmaxf(amax, fabsf(ws_bf16_to_float(x[t * 128 + i])));
      const float sc = mla_fp8_tile_scale(amax);
      for (int i = 0; i < 128; i++) o[t * 128 + i] = ws_fp8_e4m3_encode(ws_bf16_to_float(x[t * 128 + i]) / sc);
      memcpy(o + 512 + 4 * t, &sc, 4);
    }
    memcpy(o + 528, x + 512, 64 * sizeof(uint16_t));
  }
  return WS_OK;
}

ws_status ws_mla_kv_dequantize_fp8_host(const uint8_t *in, size_t rows, uint16_t *kv) {
  WS_REQUIRE(rows == 0 || (kv != NULL && in != NULL), "ws_mla_kv_dequantize_fp8_host: in or kv is NULL");
  for (size_t r = 0; r < rows; r++) {
    const uint8_t *x = in + r * WS_MLA_FP8_ROW_BYTES;
    uint16_t *o = kv + r * 576;
    for (int t = 0; t < WS_MLA_FP8_TILES; t++) {
      float sc;
      memcpy(&sc, x + 512 + 4 * t, 4);
      for (int i = 0; i < 128; i++) o[t * 128 + i] = ws_float_to_bf16((float)(ws_fp8_e4m3_decode(x[t * 128 + i]) * sc));
    }
    memcpy(o + 512, x + 528, 64 * sizeof(uint16_t));
  }
  return WS_OK;
}

/* Query i of sequence b (item b S + i): token n - S + i of it, keys 0 .. n - S + i. */
static void dec_ref_item(void *ctx, int item, int worker) {
  const ref_job *j = (const ref_job *)ctx;
  const ws_mla_decode_problem *p = (const ws_mla_decode_problem *)j->p;
  const int H = p->heads, dq = p->dim_qk, dv = p->dim_v, S = p->s_q, b = item / S, i = item % S;
  const int n = p->seqlens[b], visible = n - S + i + 1;
  const uint16_t *Q = (const uint16_t *)p->q, *KV = (const uint16_t *)p->kv_cache;
  long *rows = ref_rows(j, worker);
  double *s = ref_s(j, worker);
  for (int c = 0; c < visible; c++)
    rows[c] = (long)p->block_table[(size_t)b * p->max_pages + c / p->page_size] * p->page_size + c % p->page_size;
  for (int h = 0; h < H; h++) {
    const size_t qi = ((size_t)b * S + i) * H + h;
    softmax_row(Q + qi * dq, KV, KV, rows, visible > 0 ? visible : 0, (size_t)dq, (size_t)dq, dq, dv, j->scale, s,
                j->o + qi * dv, j->lse ? &j->lse[qi] : NULL);
  }
}

ws_status ws_mla_decode_reference(const ws_mla_decode_problem *p, double *o, double *lse) {
  ws_status st = ws_mla_decode_check(p);
  if (st != WS_OK) return st;
  WS_REQUIRE(o != NULL, "ws_mla_decode_reference: o is NULL");
  if (p->kv_fp8) { /* dequantised to BF16 (exact: power-of-two scales), then the BF16 reference */
    const size_t rows = (size_t)p->num_pages * (size_t)p->page_size;
    uint16_t *kv = (uint16_t *)malloc(rows * 576 * sizeof(uint16_t));
    if (!kv) return ws_fail(WS_ERR_NOMEM, "ws_mla_decode_reference: out of host memory");
    ws_mla_decode_problem b = *p;
    b.kv_fp8 = 0;
    b.kv_cache = kv;
    st = ws_mla_kv_dequantize_fp8_host((const uint8_t *)p->kv_cache, rows, kv);
    if (st == WS_OK) st = ws_mla_decode_reference(&b, o, lse);
    free(kv);
    return st;
  }
  const int S = p->s_q;
  const double scale = ref_scale(p->softmax_scale, p->dim_qk);
  int longest = 1;
  for (int b = 0; b < p->batch; b++) {
    const int n = p->seqlens[b];
    WS_REQUIRE(n >= 0 && n <= (int64_t)p->max_pages * p->page_size, "ws_mla_decode: sequence %d has %d tokens; its block_table "
               "row holds %d pages of %d", b, n, p->max_pages, p->page_size);
    WS_REQUIRE(p->max_seqlen == 0 || n <= p->max_seqlen, "ws_mla_decode: sequence %d has %d tokens, more than max_seqlen "
               "%d", b, n, p->max_seqlen);
    if (n > longest) longest = n;
  }
  for (int b = 0; b < p->batch; b++) /* every page the keys use, before the items run */
    for (int j = 0; j < p->seqlens[b]; j++) {
      const int page = p->block_table[(size_t)b * p->max_pages + j / p->page_size];
      if (page < 0 || page >= p->num_pages)
        return ws_fail(WS_ERR_INVALID, "ws_mla_decode: sequence %d, page %d of its block_table is %d (pages 0..%d)", b,
                       j / p->page_size, page, p->num_pages - 1);
    }
  ref_job j;
  const int workers = ws_host_workers();
  st = ref_job_init(&j, p, o, lse, scale, (size_t)longest, workers, "ws_mla_decode_reference");
  if (st == WS_OK) ws_parallel_for(p->batch * S, workers, dec_ref_item, &j);
  ref_job_free(&j);
  return st;
}

/* Sparse MLA decode: the sparse prefill's reference over the batch x s_q query tokens and
 * the cache's flat rows (FP8 rows dequantised first, exact), after every index is checked
 * (-1 or a row of the cache: the prefill's reference would mask any other value
 * silently, and here it is a caller's error). */
ws_status ws_mla_sparse_decode_reference(const ws_mla_sparse_decode_problem *p, double *o, double *lse) {
  ws_status st = ws_mla_sparse_decode_check(p);
  if (st != WS_OK) return st;
  WS_REQUIRE(o != NULL, "ws_mla_sparse_decode_reference: o is NULL");
  const int rows = p->num_pages * p->page_size; /* int: ws_mla_sparse_decode_check */
  for (int b = 0; b < p->batch; b++)
    for (int i = 0; i < p->s_q; i++)
      for (int k = 0; k < p->topk; k++) {
        const int r = p->indices[((size_t)b * p->s_q + i) * p->topk + k];
        if (r < -1 || r >= rows)
          return ws_fail(WS_ERR_INVALID, "ws_mla_sparse_decode: indices[%d][%d][%d] = %d (sequence %d, query token %d, "
                         "position %d): outside 0 .. %d (the cache's rows) and not -1 (masked)", b, i, k, r, b, i, k,
                         rows - 1);
      }
  uint16_t *kv = NULL;
  if (p->kv_fp8) { /* dequantised to BF16 (exact: power-of-two scales), as ws_mla_decode_reference does */
    kv = (uint16_t *)malloc((size_t)rows * 576 * sizeof(uint16_t));
    if (!kv) return ws_fail(WS_ERR_NOMEM, "ws_mla_sparse_decode_reference: out of host memory");
    if ((st = ws_mla_kv_dequantize_fp8_host((const uint8_t *)p->kv_cache, (size_t)rows, kv)) != WS_OK) {
      free(kv);
      return st;
    }
  }
  ws_mla_sparse_problem sp;
  memset(&sp, 0, sizeof sp);
  sp.s_q = p->batch * p->s_q; /* <= rows of q, an int */
  sp.heads = p->heads;
  sp.s_kv = rows;
  sp.topk = p->topk;
  sp.dim_qk = p->dim_qk;
  sp.dim_v = p->dim_v;
  sp.softmax_scale = p->softmax_scale;
  sp.q = p->q;
  sp.kv = kv ? (const void *)kv : p->kv_cache;
  sp.indices = p->indices;
  sp.o = o; /* not read by the reference; only checked for NULL */
  sp.lse = NULL;
  st = ws_mla_sparse_reference(&sp, o, lse);
  free(kv);
  return st;
}

/* Query token i, all heads: each kv head's selected blocks, causal. */
static void nsa_ref_item(void *ctx, int i, int worker) {
  const ref_job *j = (const ref_job *)ctx;
  const ws_nsa_problem *p = (const ws_nsa_problem *)j->p;
  const int T = p->tokens, Hq = p->heads_q, Hk = p->heads_kv, dq = p->dim_qk, dv = p->dim_v, B = p->block, N = p->topn;
  const int group = Hq / Hk, nblocks = (T + B - 1) / B;
  const uint16_t *Q = (const uint16_t *)p->q, *K = (const uint16_t *)p->k, *V = (const uint16_t *)p->v;
  long *rows = ref_rows(j, worker);
  double *s = ref_s(j, worker);
  for (int g = 0; g < Hk; g++) {
    const int *sel = p->block_indices + ((size_t)i * Hk + g) * N;
    for (int t = 0; t < N; t++)
      for (int u = 0; u < B; u++) {
        const long key = (long)sel[t] * B + u;
        rows[(size_t)t * B + u] = sel[t] >= 0 && sel[t] < nblocks && key < T && key <= i ? key * Hk + g : -1;
      }
    for (int h = g * group; h < (g + 1) * group; h++) {
      const size_t qi = (size_t)i * Hq + h;
      softmax_row(Q + qi * dq, K, V, rows, (int)j->width, (size_t)dq, (size_t)dv, dq, dv, j->scale, s, j->o + qi * dv,
                  j->lse ? &j->lse[qi] : NULL);
    }
  }
}

ws_status ws_nsa_reference(const ws_nsa_problem *p, double *o, double *lse) {
  ws_status st = ws_nsa_check(p);
  if (st != WS_OK) return st;
  WS_REQUIRE(o != NULL, "ws_nsa_reference: o is NULL");
  ref_job j;
  const int workers = ws_host_workers();
  st = ref_job_init(&j, p, o, lse, ref_scale(p->softmax_scale, p->dim_qk), (size_t)p->topn * p->block, workers,
                    "ws_nsa_reference");
  if (st == WS_OK) ws_parallel_for(p->tokens, workers, nsa_ref_item, &j);
  ref_job_free(&j);
  return st;
}
