/* bench_attn_kernels.cu - `warpspec bench attn-kernels`: the attention kernels alone, on
 * one GPU, each shape timed under every schedule it has (the tests check the same
 * kernels: tests/gpu/attention/). Parts (--only, default all three, in this order):
 *   mla    MLA decode (batch 1 .. 128, lengths 4k .. 64k, the BF16 and the FP8 cache;
 *          TFLOPS and bytes moved per second), sparse MLA decode (batch 128 and 4, s_q 1
 *          and 2, H 128, topk 2048 over a cache of 16384 pages of 64 rows, BF16 and FP8;
 *          TFLOPS as FlashMLA counts them: 2 B s_q H topk (576 + 512) / t) and sparse
 *          MLA prefill (the seed's S 4096, H 128, topk 2048, s_kv 8192 .. 131072);
 *   flash  the flash forward at batch x seq = 16k tokens, heads 16 and 32, d 64 and 128,
 *          under each of its four schedules (WARPSPEC_ATTN_SCHEDULE), then the default
 *          schedules on each grid (WARPSPEC_ATTN_GRID: persistent, one CTA per tile);
 *   nsa    NSA selected-block attention, and the dense causal flash kernel on the same
 *          q, k, v (TFLOPS on each one's own useful work).
 * Each row: median of CUDA-event timings of single calls after warm-ups, no L2 flush (the
 * PyTorch comparison with an L2 flush is `warpspec bench attention`). Data from a fixed
 * seed, so two runs time the same selections and lengths, drawn by the generators the
 * tests use (testdata/attention.h: q/k/v, NSA selections, MLA ids and page tables). The
 * printed rows ("bench NAME ... ms ... TFLOPS") are what bench/plot_attention_kernels.py
 * reads. These were the modes bench, mla-bench and flash-bench of test_attention until
 * session 19. */
#include "../testdata/attention.h"
#include "bench.h"
#include "bench_check.h"
#include "warpspec/warpspec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The data: testdata/random.h's stream from its fixed start, one for the whole run. */
static uint64_t ak_rng = TD_RNG_START;
static void ak_fill_uniform(uint16_t *x, size_t n, float amp) { td_fill_uniform(&ak_rng, x, n, amp); }

/* Zeroed host memory, or fail the enclosing benchmark. */
#define AK_ALLOC(ptr, count, size)                                              \
  do {                                                                          \
    (ptr) = (decltype(ptr))calloc((size_t)(count), (size_t)(size));             \
    if (!(ptr)) BENCH_FAIL("calloc", #ptr);                                     \
  } while (0)

/* The median in ms (mean of the two middle ones) of `runs` calls of launch(ctx), each
 * between two CUDA events, after `warm` calls not counted. runs <= 32, even. -1 on an
 * error. */
typedef ws_status (*launch_fn)(const void *ctx);
static double median_ms(launch_fn launch, const void *ctx, int warm, int runs) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float ms[32];
  for (int it = 0; it < warm + runs; it++) {
    CK(cudaEventRecord(e0, 0));
    WK(launch(ctx));
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    if (it >= warm) CK(cudaEventElapsedTime(&ms[it - warm], e0, e1));
  }
  for (int i = 1; i < runs; i++)
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) { const float t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t; }
  CK(cudaEventDestroy(e0));
  CK(cudaEventDestroy(e1));
  return 0.5 * (ms[runs / 2 - 1] + ms[runs / 2]);
}
static ws_status launch_attn(const void *p) { return ws_attn_forward((const ws_attn_problem *)p, 0); }
static ws_status launch_mla(const void *p) { return ws_mla_sparse_forward((const ws_mla_sparse_problem *)p, 0); }
typedef struct {
  const ws_mla_decode_problem *p;
  void *ws;
  size_t bytes;
} decode_call;
static ws_status launch_decode(const void *c) {
  const decode_call *d = (const decode_call *)c;
  return ws_mla_decode_forward(d->p, d->ws, d->bytes, 0);
}
static ws_status launch_nsa(const void *p) { return ws_nsa_forward((const ws_nsa_problem *)p, 0); }

/* ---- flash forward ----------------------------------------------------------------- */
typedef struct {
  const char *name;
  int batch, sq, sk, hq, hkv, dqk, dv;
  ws_attn_mask mask;
} attn_case;

static int time_flash(const attn_case *c) {
  const size_t Tq = (size_t)c->batch * c->sq, Tk = (size_t)c->batch * c->sk;
  const size_t nq = Tq * c->hq * c->dqk, nk = Tk * c->hkv * c->dqk, nv = Tk * c->hkv * c->dv, no = Tq * c->hq * c->dv;
  td_qkv t;
  CK(td_qkv_make(&t, &ak_rng, nq, nk, nv, no, Tq * c->hq));
  ws_attn_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch;
  p.seqlen_q = c->sq;
  p.seqlen_k = c->sk;
  p.total_q = (int)Tq;
  p.total_k = (int)Tk;
  p.heads_q = c->hq;
  p.heads_kv = c->hkv;
  p.dim_qk = c->dqk;
  p.dim_v = c->dv;
  p.mask = c->mask;
  p.q = t.dq; p.k = t.dk; p.v = t.dv; p.o = t.dout; p.lse = t.dl;
  /* 3 warm-ups, median of 20 */
  const double med = median_ms(launch_attn, &p, 3, 20);
  if (med < 0) return -1;
  const double lq = c->sq, lk = c->sk;
  const double pairs = c->mask == WS_ATTN_NO_MASK ? lq * lk : lq * lk - lq * (lq - 1) / 2; /* sq == sk here */
  const double flops = 2.0 * pairs * c->hq * (c->dqk + c->dv) * c->batch;
  printf("bench %-36s %8.3f ms  %6.1f TFLOPS\n", c->name, med, flops / (med * 1e-3) / 1e12);
  td_qkv_free(&t);
  return 0;
}

/* ---- sparse MLA prefill ------------------------------------------------------------ */
typedef struct {
  const char *name;
  int s_q, heads, s_kv, topk;
} mla_case;

static int time_mla(const mla_case *c) {
  const int DQ = 576, DV = 512;
  const size_t nq = (size_t)c->s_q * c->heads * DQ, nkv = (size_t)c->s_kv * DQ, no = (size_t)c->s_q * c->heads * DV;
  uint16_t *hq, *hkv;
  int *hi;
  AK_ALLOC(hq, nq, 2);
  AK_ALLOC(hkv, nkv, 2);
  AK_ALLOC(hi, (size_t)c->s_q * c->topk, sizeof(int));
  ak_fill_uniform(hq, nq, 1.0f);
  ak_fill_uniform(hkv, nkv, 1.0f);
  td_mla_indices(&ak_rng, hi, c->s_q, c->topk, c->s_kv, 0);
  void *dq, *dkv, *dout;
  int *di;
  float *dl;
  CK(cudaMalloc(&dq, nq * 2));
  CK(cudaMalloc(&dkv, nkv * 2));
  CK(cudaMalloc(&dout, no * 2));
  CK(cudaMalloc((void **)&di, (size_t)c->s_q * c->topk * sizeof(int)));
  CK(cudaMalloc((void **)&dl, (size_t)c->s_q * c->heads * sizeof(float)));
  CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dkv, hkv, nkv * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(di, hi, (size_t)c->s_q * c->topk * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_sparse_problem p;
  memset(&p, 0, sizeof p);
  p.s_q = c->s_q; p.heads = c->heads; p.s_kv = c->s_kv; p.topk = c->topk; p.dim_qk = DQ; p.dim_v = DV;
  p.q = dq; p.kv = dkv; p.indices = di; p.o = dout; p.lse = dl;
  const double med = median_ms(launch_mla, &p, 2, 10);
  if (med < 0) return -1;
  const double flops = 2.0 * c->s_q * c->heads * (double)c->topk * (DQ + DV);
  printf("bench %-36s %8.3f ms  %6.1f TFLOPS\n", c->name, med, flops / (med * 1e-3) / 1e12);
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(di); cudaFree(dl);
  free(hq); free(hkv); free(hi);
  return 0;
}

/* ---- the memory-bound decodes' reference: a device-to-device copy ------------------ */
/* A 1 GiB cudaMemcpyAsync in the same run, as read + write bytes per second: what the
 * few-head decodes (16-32 heads, a tensor-parallel shard: about 30 FLOP per cache byte)
 * are held against (issue 35: 85% of it). */
typedef struct {
  void *dst;
  const void *src;
  size_t n;
} copy_call;
static ws_status launch_copy(const void *c) {
  const copy_call *k = (const copy_call *)c;
  return cudaMemcpyAsync(k->dst, k->src, k->n, cudaMemcpyDeviceToDevice, 0) == cudaSuccess ? WS_OK : WS_ERR_CUDA;
}
static int time_copy(void) {
  const size_t n = (size_t)1 << 30;
  void *a = NULL, *b = NULL;
  int rc = -1;
  if (cudaMalloc(&a, n) == cudaSuccess && cudaMalloc(&b, n) == cudaSuccess && cudaMemset(a, 1, n) == cudaSuccess) {
    const copy_call c = {b, a, n};
    const double med = median_ms(launch_copy, &c, 3, 20);
    if (med > 0.0) {
      printf("bench %-36s %8.3f ms  %6.0f GB/s (read + write)\n", "d2d copy 1 GiB (HBM reference)", med,
             2.0 * (double)n / (med * 1e-3) / 1e9);
      rc = 0;
    }
  }
  if (rc) fprintf(stderr, "bench attn-kernels: the 1 GiB copy failed: %s\n", cudaGetErrorString(cudaGetLastError()));
  cudaFree(a);
  cudaFree(b);
  return rc;
}

/* ---- MLA decode (paged cache, split-KV) ------------------------------------------- */
typedef struct {
  const char *name;
  int batch, s_q, heads, len; /* every sequence `len` tokens */
  int fp8;                    /* the FP8 cache (kv_fp8): rows quantised on the host */
} dec_case;

static int time_decode(const dec_case *c) {
  const int DQ = 576, DV = 512, P = 64;
  const int maxp = (c->len + P - 1) / P;
  int *lens, *table;
  AK_ALLOC(lens, c->batch, sizeof(int));
  AK_ALLOC(table, (size_t)c->batch * maxp, sizeof(int));
  /* every sequence c->len long, its pages shuffled among 3 more as a cache's are after a while */
  const int pages = td_mla_pages(&ak_rng, c->batch, c->len, 1, P, lens, table);
  if (pages < 0) BENCH_FAIL("td_mla_pages", "out of memory");
  const size_t rows = (size_t)c->batch * c->s_q * c->heads, nq = rows * DQ, nkv = (size_t)pages * P * DQ, no = rows * DV;
  uint16_t *hq, *hkv;
  AK_ALLOC(hq, nq, 2);
  AK_ALLOC(hkv, nkv, 2);
  ak_fill_uniform(hq, nq, 1.0f);
  ak_fill_uniform(hkv, nkv, 1.0f);
  const size_t kv_rows = (size_t)pages * P, kv_bytes = c->fp8 ? kv_rows * WS_MLA_FP8_ROW_BYTES : nkv * 2;
  uint8_t *hkv8 = NULL;
  if (c->fp8) { /* rows of several magnitudes, so that the tile scales differ */
    for (size_t r = 0; r < kv_rows; r += 5) ak_fill_uniform(hkv + r * DQ, DQ, r % 3 ? 8.0f : 0.01f);
    AK_ALLOC(hkv8, kv_bytes, 1);
    WK(ws_mla_kv_quantize_fp8_host(hkv, kv_rows, hkv8));
  }
  void *dq, *dkv, *dout, *ws = NULL;
  int *dt, *dlen;
  float *dl;
  CK(cudaMalloc(&dq, nq * 2));
  CK(cudaMalloc(&dkv, kv_bytes));
  CK(cudaMalloc(&dout, no * 2));
  CK(cudaMalloc((void **)&dl, rows * sizeof(float)));
  CK(cudaMalloc((void **)&dt, (size_t)c->batch * maxp * sizeof(int)));
  CK(cudaMalloc((void **)&dlen, (size_t)c->batch * sizeof(int)));
  CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dkv, c->fp8 ? (const void *)hkv8 : (const void *)hkv, kv_bytes, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dt, table, (size_t)c->batch * maxp * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dlen, lens, (size_t)c->batch * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch; p.s_q = c->s_q; p.heads = c->heads; p.dim_qk = DQ; p.dim_v = DV; p.page_size = P;
  p.num_pages = pages; p.max_pages = maxp; p.max_seqlen = c->len;
  p.q = dq; p.kv_cache = dkv; p.block_table = dt; p.seqlens = dlen; p.o = dout; p.lse = dl;
  p.kv_fp8 = c->fp8;
  size_t wsb = 0;
  WK(ws_mla_decode_workspace_size(&p, &wsb));
  if (wsb) CK(cudaMalloc(&ws, wsb));
  const decode_call call = {&p, ws, wsb};
  const double med = median_ms(launch_decode, &call, 3, 20);
  if (med < 0) return -1;
  double keys = 0, bytes = 0;
  for (int b = 0; b < c->batch; b++) keys += lens[b];
  bytes += keys * (c->fp8 ? WS_MLA_FP8_ROW_BYTES : DQ * 2);
  bytes += (double)nq * 2 + (double)no * 2;
  const double flops = 2.0 * keys * c->s_q * c->heads * (DQ + DV);
  printf("bench %-36s %8.3f ms  %6.1f TFLOPS  %6.0f GB/s (kv cache + q + o)\n", c->name, med, flops / (med * 1e-3) / 1e12,
         bytes / (med * 1e-3) / 1e9);
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(dl); cudaFree(dt); cudaFree(dlen);
  if (ws) cudaFree(ws);
  free(lens); free(table); free(hq); free(hkv); free(hkv8);
  return 0;
}

/* ---- sparse MLA decode (top-k rows of a paged cache, split lists) ------------------- */
typedef struct {
  const char *name;
  int batch, s_q, heads, topk;
  int fp8; /* the FP8 cache (kv_fp8) */
} sdec_case;

typedef struct {
  const ws_mla_sparse_decode_problem *p;
  void *ws;
  size_t bytes;
} sdec_call;
static ws_status launch_sdec(const void *c) {
  const sdec_call *d = (const sdec_call *)c;
  return ws_mla_sparse_decode_forward(d->p, d->ws, d->bytes, 0);
}

/* One cache of 16384 pages of 64 rows (1M rows: 1.2 GB in BF16, 0.7 GB as FP8 rows) for
 * every case, made once: drawing a million rows on the host for each case would take
 * longer than the timings. The FP8 rows are quantised from the BF16 ones on the GPU. */
#define SD_PAGES 16384
#define SD_PAGE 64
static void *sd_cache[2];
static int sd_cache_make(void) {
  if (sd_cache[0]) return 0;
  const size_t rows = (size_t)SD_PAGES * SD_PAGE, n = rows * 576;
  uint16_t *h;
  AK_ALLOC(h, n, 2);
  for (size_t r = 0; r < rows; r += 4096) /* rows of several magnitudes, so that the tile scales differ */
    ak_fill_uniform(h + r * 576, 4096 * 576, (r / 4096) % 3 ? 1.0f : 8.0f);
  CK(cudaMalloc(&sd_cache[0], n * 2));
  CK(cudaMalloc(&sd_cache[1], rows * WS_MLA_FP8_ROW_BYTES));
  CK(cudaMemcpy(sd_cache[0], h, n * 2, cudaMemcpyHostToDevice));
  WK(ws_mla_kv_quantize_fp8(sd_cache[0], rows, sd_cache[1], 0));
  CK(cudaDeviceSynchronize());
  free(h);
  return 0;
}
static void sd_cache_free(void) {
  for (int i = 0; i < 2; i++) { cudaFree(sd_cache[i]); sd_cache[i] = NULL; }
}

static int time_sparse_decode(const sdec_case *c) {
  const int DQ = 576, DV = 512, tokens = c->batch * c->s_q, kv_rows = SD_PAGES * SD_PAGE;
  if (sd_cache_make() != 0) return -1;
  const size_t rows = (size_t)tokens * c->heads, nq = rows * DQ, no = rows * DV, nidx = (size_t)tokens * c->topk;
  uint16_t *hq;
  int *hi;
  AK_ALLOC(hq, nq, 2);
  AK_ALLOC(hi, nidx, sizeof(int));
  ak_fill_uniform(hq, nq, 1.0f);
  td_mla_decode_indices(&ak_rng, hi, tokens, c->topk, kv_rows, 0); /* uniform over the cache, no holes */
  void *dq, *dout, *ws = NULL;
  int *di;
  float *dl;
  CK(cudaMalloc(&dq, nq * 2));
  CK(cudaMalloc(&dout, no * 2));
  CK(cudaMalloc((void **)&dl, rows * sizeof(float)));
  CK(cudaMalloc((void **)&di, nidx * sizeof(int)));
  CK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(di, hi, nidx * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_sparse_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch; p.s_q = c->s_q; p.heads = c->heads; p.dim_qk = DQ; p.dim_v = DV;
  p.page_size = SD_PAGE; p.num_pages = SD_PAGES; p.topk = c->topk;
  p.q = dq; p.kv_cache = sd_cache[c->fp8 ? 1 : 0]; p.indices = di; p.o = dout; p.lse = dl; p.kv_fp8 = c->fp8;
  size_t wsb = 0;
  WK(ws_mla_sparse_decode_workspace_size(&p, &wsb));
  if (wsb) CK(cudaMalloc(&ws, wsb));
  const sdec_call call = {&p, ws, wsb};
  const double med = median_ms(launch_sdec, &call, 3, 20);
  if (med < 0) return -1;
  /* FlashMLA's count for sparse decode: every listed row, QK^T and PV */
  const double flops = 2.0 * c->batch * c->s_q * c->heads * (double)c->topk * (DQ + DV);
  const double bytes = (double)nidx * (c->fp8 ? WS_MLA_FP8_ROW_BYTES : DQ * 2) + (double)nq * 2 + (double)no * 2;
  printf("bench %-36s %8.3f ms  %6.1f TFLOPS  %6.0f GB/s (rows gathered + q + o)\n", c->name, med,
         flops / (med * 1e-3) / 1e12, bytes / (med * 1e-3) / 1e9);
  cudaFree(dq); cudaFree(dout); cudaFree(dl); cudaFree(di);
  if (ws) cudaFree(ws);
  free(hq); free(hi);
  return 0;
}

/* ---- NSA selected-block attention ------------------------------------------------- */
/* The case (nsa_case) and its selections (td_nsa_select): testdata/attention.h, the same
 * draws as the test's (tests/gpu/attention/nsa.cuh). */
static int time_nsa(const nsa_case *c) {
  const size_t nq = (size_t)c->tokens * c->heads_q * c->dim_qk, nk = (size_t)c->tokens * c->heads_kv * c->dim_qk,
               nv = (size_t)c->tokens * c->heads_kv * c->dim_v, no = (size_t)c->tokens * c->heads_q * c->dim_v,
               rows = (size_t)c->tokens * c->heads_q, nsel = (size_t)c->tokens * c->heads_kv * c->topn;
  int *hs;
  AK_ALLOC(hs, nsel, sizeof(int));
  td_qkv t;
  CK(td_qkv_make(&t, &ak_rng, nq, nk, nv, no, rows));
  td_nsa_select(&ak_rng, c, hs);
  int *ds;
  CK(cudaMalloc((void **)&ds, nsel * sizeof(int)));
  CK(cudaMemcpy(ds, hs, nsel * sizeof(int), cudaMemcpyHostToDevice));
  ws_nsa_problem p;
  memset(&p, 0, sizeof p);
  p.tokens = c->tokens; p.heads_q = c->heads_q; p.heads_kv = c->heads_kv; p.dim_qk = c->dim_qk; p.dim_v = c->dim_v;
  p.block = 64; p.topn = c->topn;
  p.q = t.dq; p.k = t.dk; p.v = t.dv; p.block_indices = ds; p.o = t.dout; p.lse = t.dl;
  /* the work: every query row times the valid keys it selected (a block listed twice counts twice) */
  double keys = 0;
  const int nb = (c->tokens + 63) / 64;
  for (int i = 0; i < c->tokens; i++)
    for (int g = 0; g < c->heads_kv; g++)
      for (int n = 0; n < c->topn; n++) {
        const int b = hs[((size_t)i * c->heads_kv + g) * c->topn + n];
        if (b >= 0 && b < nb && b * 64 <= i) keys += (double)(c->heads_q / c->heads_kv) * (i - b * 64 + 1 < 64 ? i - b * 64 + 1 : 64);
      }
  const double flops = 2.0 * keys * (c->dim_qk + c->dim_v);
  const double med = median_ms(launch_nsa, &p, 3, 20);
  if (med < 0) return -1;
  /* the dense flash kernel, causal, on the same q, k, v: its TFLOPS on its own work */
  ws_attn_problem d;
  memset(&d, 0, sizeof d);
  d.batch = 1; d.seqlen_q = c->tokens; d.seqlen_k = c->tokens; d.heads_q = c->heads_q; d.heads_kv = c->heads_kv;
  d.dim_qk = c->dim_qk; d.dim_v = c->dim_v; d.mask = WS_ATTN_CAUSAL_TOP_LEFT; d.q = t.dq; d.k = t.dk; d.v = t.dv; d.o = t.dout;
  const double dmed = median_ms(launch_attn, &d, 3, 20);
  if (dmed < 0) return -1;
  const double dflops = 2.0 * c->heads_q * ((double)c->tokens * (c->tokens + 1) / 2) * (c->dim_qk + c->dim_v);
  const double tf = flops / (med * 1e-3) / 1e12, dtf = dflops / (dmed * 1e-3) / 1e12;
  printf("bench %-44s %8.3f ms %6.1f TFLOPS | dense causal flash %8.3f ms %6.1f TFLOPS | %.0f%% of dense\n", c->name, med,
         tf, dmed, dtf, 100.0 * tf / dtf);
  td_qkv_free(&t);
  cudaFree(ds);
  free(hs);
  return 0;
}

/* ---- the shapes -------------------------------------------------------------------- */
static const attn_case flash_bench[] = {
    {"B4 S4096 H16 d128", 4, 4096, 4096, 16, 16, 128, 128, WS_ATTN_NO_MASK},
    {"B4 S4096 H16 d128 causal", 4, 4096, 4096, 16, 16, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT},
    {"B2 S8192 H16 d128", 2, 8192, 8192, 16, 16, 128, 128, WS_ATTN_NO_MASK},
    {"B2 S8192 H16 d128 causal", 2, 8192, 8192, 16, 16, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT},
    {"B4 S8192 H16 d128", 4, 8192, 8192, 16, 16, 128, 128, WS_ATTN_NO_MASK},
    {"B4 S8192 H16 d128 causal", 4, 8192, 8192, 16, 16, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT},
    {"B8 S2048 H32 d64", 8, 2048, 2048, 32, 32, 64, 64, WS_ATTN_NO_MASK},
    {"B8 S2048 H32 d64 causal", 8, 2048, 2048, 32, 32, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT},
};
static const mla_case mla_bench[] = {
    {"mla S4096 H128 topk2048 s_kv 8192", 4096, 128, 8192, 2048},
    {"mla S4096 H128 topk2048 s_kv 32768", 4096, 128, 32768, 2048},
    {"mla S4096 H128 topk2048 s_kv 65536", 4096, 128, 65536, 2048},
    {"mla S4096 H128 topk2048 s_kv 98304", 4096, 128, 98304, 2048},
    {"mla S4096 H128 topk2048 s_kv 131072", 4096, 128, 131072, 2048},
};
static const dec_case dec_bench[] = {
    {"decode B64 s_q1 H128 len 4096", 64, 1, 128, 4096, 0},
    {"decode B128 s_q1 H128 len 4096", 128, 1, 128, 4096, 0},
    {"decode B128 s_q2 H128 len 8192", 128, 2, 128, 8192, 0},
    {"decode B8 s_q1 H128 len 32768", 8, 1, 128, 32768, 0},
    {"decode B1 s_q1 H128 len 65536", 1, 1, 128, 65536, 0},
    {"decode fp8 B64 s_q1 H128 len 4096", 64, 1, 128, 4096, 1},
    {"decode fp8 B128 s_q1 H128 len 4096", 128, 1, 128, 4096, 1},
    {"decode fp8 B128 s_q2 H128 len 8192", 128, 2, 128, 8192, 1},
    {"decode fp8 B8 s_q1 H128 len 32768", 8, 1, 128, 32768, 1},
    {"decode fp8 B1 s_q1 H128 len 65536", 1, 1, 128, 65536, 1},
    /* a tensor-parallel shard's heads: memory-bound (beside the copy's GB/s) */
    {"decode B64 s_q1 H16 len 8192", 64, 1, 16, 8192, 0},
    {"decode B128 s_q1 H32 len 4096", 128, 1, 32, 4096, 0},
    {"decode fp8 B128 s_q1 H32 len 4096", 128, 1, 32, 4096, 1},
    {"decode fp8 B64 s_q1 H16 len 8192", 64, 1, 16, 8192, 1},
    {"decode B64 s_q2 H16 len 8192", 64, 2, 16, 8192, 0},
    {"decode fp8 B64 s_q2 H16 len 8192", 64, 2, 16, 8192, 1},
    {"decode B64 s_q2 H8 len 8192", 64, 2, 8, 8192, 0},
    {"decode B64 s_q4 H16 len 8192", 64, 4, 16, 8192, 0},
};
static const sdec_case sdec_bench[] = {
    {"sparse decode B128 s_q1 H128 topk2048", 128, 1, 128, 2048, 0},
    {"sparse decode B128 s_q2 H128 topk2048", 128, 2, 128, 2048, 0},
    {"sparse decode B4 s_q1 H128 topk2048", 4, 1, 128, 2048, 0},
    {"sparse decode B4 s_q2 H128 topk2048", 4, 2, 128, 2048, 0},
    {"sparse decode fp8 B128 s_q1 H128 topk2048", 128, 1, 128, 2048, 1},
    {"sparse decode fp8 B128 s_q2 H128 topk2048", 128, 2, 128, 2048, 1},
    {"sparse decode fp8 B4 s_q1 H128 topk2048", 4, 1, 128, 2048, 1},
    {"sparse decode fp8 B4 s_q2 H128 topk2048", 4, 2, 128, 2048, 1},
};
static const nsa_case nsa_bench[] = {
    {"nsa T 16384 Hq 64 Hkv 4 d128 topn 16 shared", 16384, 64, 4, 128, 128, 16, 1},
    {"nsa T 16384 Hq 64 Hkv 4 d128 topn 16 random", 16384, 64, 4, 128, 128, 16, 0},
    {"nsa T 65536 Hq 64 Hkv 4 d128 topn 16 shared", 65536, 64, 4, 128, 128, 16, 1},
    {"nsa T 16384 Hq 64 Hkv 4 d192/128 topn 16 shared", 16384, 64, 4, 192, 128, 16, 1},
};
/* WARPSPEC_ATTN_SCHEDULE's values and the flash grids (WARPSPEC_ATTN_GRID) */
static const char *const flash_scheds[4] = {"plain", "pingpong", "overlap", "overlap-pingpong"};
static const char *const flash_grids[2] = {"persistent", "tiles"};

#define AK_COUNT(a) (sizeof(a) / sizeof((a)[0]))
/* shape c of a table is timed: no --match, or its name contains the text */
#define AK_WANT(c) (match == NULL || strstr((c).name, match) != NULL)

extern "C" int bench_attn_kernels(int parts, const char *match) {
  setvbuf(stdout, NULL, _IOLBF, 0); /* a line at a time: a log cut by a timeout shows where */
  cudaDeviceProp prop;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  printf("bench attn-kernels: %s: the attention kernels alone, medians of CUDA-event timings, no L2 flush\n", prop.name);
  int rc = 0;
  if (parts & BENCH_ATTN_MLA) {
    rc = time_copy();
    for (size_t i = 0; i < AK_COUNT(dec_bench) && rc == 0; i++) if (AK_WANT(dec_bench[i])) rc = time_decode(&dec_bench[i]);
    for (size_t i = 0; i < AK_COUNT(sdec_bench) && rc == 0; i++) if (AK_WANT(sdec_bench[i])) rc = time_sparse_decode(&sdec_bench[i]);
    for (size_t i = 0; i < AK_COUNT(mla_bench) && rc == 0; i++) if (AK_WANT(mla_bench[i])) rc = time_mla(&mla_bench[i]);
    sd_cache_free();
  }
  if (parts & BENCH_ATTN_FLASH) {
    for (int sc = 0; sc < 4 && rc == 0; sc++) { /* the four schedules of the flash kernel */
      rc = bench_set_knob(WS_ATTN_SCHEDULE_ENV, flash_scheds[sc]);
      printf("flash schedule: %s\n", flash_scheds[sc]);
      for (size_t i = 0; i < AK_COUNT(flash_bench) && rc == 0; i++) if (AK_WANT(flash_bench[i])) rc = time_flash(&flash_bench[i]);
    }
    if (bench_set_knob(WS_ATTN_SCHEDULE_ENV, NULL) != 0) rc = -1;
    for (int g = 0; g < 2 && rc == 0; g++) { /* the default schedules on each grid (WARPSPEC_ATTN_GRID) */
      rc = bench_set_knob(WS_ATTN_GRID_ENV, flash_grids[g]);
      printf("flash grid: %s\n", flash_grids[g]);
      for (size_t i = 0; i < AK_COUNT(flash_bench) && rc == 0; i++) if (AK_WANT(flash_bench[i])) rc = time_flash(&flash_bench[i]);
    }
    if (bench_set_knob(WS_ATTN_GRID_ENV, NULL) != 0) rc = -1;
  }
  if (parts & BENCH_ATTN_NSA)
    for (size_t i = 0; i < AK_COUNT(nsa_bench) && rc == 0; i++) if (AK_WANT(nsa_bench[i])) rc = time_nsa(&nsa_bench[i]);
  return rc;
}
