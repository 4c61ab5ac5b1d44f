/* test_attention.cu - ws_attn_forward against the float64 host reference
 * (ws_attn_reference), fresh random data every run, outputs poisoned (NaN) before
 * each launch so an unwritten element fails:
 *   dense batches: sequence lengths 1, 17, 128, 333 x 1000, 1000, 4096, 8192; head dims
 *   64/64, 128/128, 192/128; GQA (4 query heads per kv head) and MQA; no mask, causal
 *   top-left and bottom-right (including rows that see no key: o = 0, lse = -inf);
 *   variable-length batches (ragged, a sequence of 1 token, causal bottom-right).
 * Each case: ||o - ref|| / ||ref|| and the same for lse, against 1e-2 (BF16 operands,
 * P rounded to BF16 before P V, as every flash kernel does); every element finite
 * except the -inf lse of rows without keys, which must match exactly.
 *   test_attention          all cases
 *   test_attention ctest    make test: every schedule on the quick cases, the long cases
 *                           under the default schedules, no batch-128 decode
 *   test_attention quick    the small ones
 *   test_attention bench    time the issue's shapes (B x S = 16k tokens), TFLOPS
 *   test_attention fp8      the FP8 MLA cache only (quantiser, decode): for compute-sanitizer
 *   test_attention nsa      NSA selected-block attention only: tests, then its bench
 *   test_attention nsa-quick the small NSA tests (for compute-sanitizer)
 *   test_attention mla-bench the MLA rows of the bench only, both schedules
 *   test_attention flash-bench the flash rows (every schedule, then both grids) and NSA
 *                           against the dense kernel
 * The MLA cases run under both schedules (WARPSPEC_MLA_SCHEDULE unset, then overlap).
 * Sparse MLA prefill (ws_mla_sparse_forward) the same way against
 * ws_mla_sparse_reference: heads 64 and 128, topk 128 / 512 / 2048 (and one not a
 * multiple of 64), s_kv from topk to 131072, indices with -1, duplicates and values out
 * of range; bench: the seed's S 4096, H 128, topk 2048, s_kv 8192 .. 131072.
 * MLA decode (ws_mla_decode_forward) against ws_mla_decode_reference: shuffled page
 * tables, mixed lengths with empty sequences, s_q 1 and 2 (causal), single- and
 * split-KV launches (workspace poisoned too), a page id past the cache (masked, as -1 is);
 * bench: batch 1 .. 128, lengths 4k .. 64k, TFLOPS and bytes moved per second. */
#include <math.h>
#include <string.h>
#include <time.h>

#include "gpu_test.h"
#include "warpspec/warpspec.h"

typedef struct {
  const char *name;
  int batch, sq, sk, hq, hkv, dqk, dv;
  ws_attn_mask mask;
  const int *lens_q, *lens_k; /* varlen: batch lengths, else NULL */
} attn_case;

static uint16_t bf16_of(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}
static float float_of(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void fill_uniform(uint16_t *x, size_t n, float amp) {
  for (size_t i = 0; i < n; i++) x[i] = bf16_of(amp * ((float)(rng_u32() % 2000001u) / 1000000.0f - 1.0f));
}

/* When a case fails: where the error sits, to tell a layout bug from a numeric one in
 * one GPU run. Relative error per block of 8 output columns (a wrong MN-major / swizzle
 * offset shows in some column blocks only) and per 16-row slice of the CTA's tile (rows
 * (r / div) % tile_rows: a wrong warp / warpgroup row mapping shows in some slices). */
static void explain_errors(const uint16_t *got, const double *ref, size_t rows, int cols, size_t div, int tile_rows) {
  double ce[64] = {0}, cr[64] = {0}, re[16] = {0}, rr[16] = {0};
  const int cb = cols / 8 < 64 ? cols / 8 : 64;
  for (size_t r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      const double g = float_of(got[r * cols + c]), x = ref[r * cols + c];
      const double d = isfinite(g) ? (g - x) * (g - x) : 1e30;
      if (c / 8 < 64) { ce[c / 8] += d; cr[c / 8] += x * x; }
      const int sl = (int)(((r / div) % (size_t)tile_rows) / 16) % 16;
      re[sl] += d; rr[sl] += x * x;
    }
  printf("    rel err per 8-column block:");
  for (int b = 0; b < cb; b++) printf(" %.0e", cr[b] > 0 ? sqrt(ce[b] / cr[b]) : sqrt(ce[b]));
  printf("\n    rel err per 16-row slice of the tile:");
  for (int b = 0; b < tile_rows / 16 && b < 16; b++) printf(" %.0e", rr[b] > 0 ? sqrt(re[b] / rr[b]) : sqrt(re[b]));
  printf("\n");
}

/* The case's verdict: ||o - ref|| / ||ref|| and the same over the finite lse entries,
 * both <= 1e-2; an unwritten (NaN) element, or an lse of -inf where the reference has
 * none (or the reverse), is bad. Prints one line; on a failure, where the error sits
 * (explain_errors with rows (r / div) % tile_rows of `cols` columns). */
static int compare(const char *name, const char *extra, const uint16_t *ho, const double *ro, size_t no, int cols,
                   const float *hl, const double *rl, size_t nl, size_t div, int tile_rows) {
  double e2 = 0, r2 = 0, le2 = 0, lr2 = 0;
  size_t bad = 0;
  for (size_t i = 0; i < no; i++) {
    const double g = float_of(ho[i]);
    if (!isfinite(g)) { if (bad++ < 3) printf("  o[%zu] = %g (unwritten or NaN)\n", i, g); continue; }
    e2 += (g - ro[i]) * (g - ro[i]);
    r2 += ro[i] * ro[i];
  }
  for (size_t i = 0; i < nl; i++) {
    const double g = hl[i], r = rl[i];
    if (isinf(r) || isinf(g)) {
      if (!(isinf(r) && isinf(g) && r < 0 && g < 0)) { if (bad++ < 3) printf("  lse[%zu] = %g, want %g\n", i, g, r); }
      continue;
    }
    if (!isfinite(g)) { if (bad++ < 3) printf("  lse[%zu] = %g\n", i, g); continue; }
    le2 += (g - r) * (g - r);
    lr2 += r * r;
  }
  const double eo = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2), el = lr2 > 0 ? sqrt(le2 / lr2) : sqrt(le2);
  const int ok = bad == 0 && eo <= 1e-2 && el <= 1e-2;
  printf("%-40s o rel err %.2e, lse rel err %.2e, %zu bad%s: %s\n", name, eo, el, bad, extra, ok ? "ok" : "FAILED");
  if (!ok) explain_errors(ho, ro, no / (size_t)cols, cols, div, tile_rows);
  return ok;
}

/* The median in ms (mean of the two middle ones) of `runs` calls of launch(ctx), each
 * between two CUDA events, after `warm` calls not counted. runs <= 32, even. */
typedef ws_status (*launch_fn)(const void *ctx);
static double median_ms(launch_fn launch, const void *ctx, int warm, int runs) {
  cudaEvent_t e0, e1;
  CUDA_OK(cudaEventCreate(&e0));
  CUDA_OK(cudaEventCreate(&e1));
  float ms[32];
  for (int it = 0; it < warm + runs; it++) {
    CUDA_OK(cudaEventRecord(e0, 0));
    WS_OK_OR_DIE(launch(ctx));
    CUDA_OK(cudaEventRecord(e1, 0));
    CUDA_OK(cudaEventSynchronize(e1));
    if (it >= warm) CUDA_OK(cudaEventElapsedTime(&ms[it - warm], e0, e1));
  }
  for (int i = 1; i < runs; i++)
    for (int j = i; j > 0 && ms[j] < ms[j - 1]; j--) { const float t = ms[j]; ms[j] = ms[j - 1]; ms[j - 1] = t; }
  CUDA_OK(cudaEventDestroy(e0));
  CUDA_OK(cudaEventDestroy(e1));
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

static int run_case(const attn_case *c, int check) {
  const int varlen = c->lens_q != NULL;
  int *cq = (int *)host_alloc((size_t)c->batch + 1, sizeof(int), 0), *ck = (int *)host_alloc((size_t)c->batch + 1, sizeof(int), 0);
  int max_q = 0, max_k = 0;
  for (int b = 0; b < c->batch; b++) {
    const int lq = varlen ? c->lens_q[b] : c->sq, lk = varlen ? c->lens_k[b] : c->sk;
    cq[b + 1] = cq[b] + lq;
    ck[b + 1] = ck[b] + lk;
    if (lq > max_q) max_q = lq;
    if (lk > max_k) max_k = lk;
  }
  const size_t Tq = (size_t)cq[c->batch], Tk = (size_t)ck[c->batch];
  const size_t nq = Tq * c->hq * c->dqk, nk = Tk * c->hkv * c->dqk, nv = Tk * c->hkv * c->dv, no = Tq * c->hq * c->dv;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hk = (uint16_t *)host_alloc(nk, 2, 0), *hv = (uint16_t *)host_alloc(nv, 2, 0);
  uint16_t *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(Tq * c->hq, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hk, nk, 1.0f);
  fill_uniform(hv, nv, 1.0f);
  void *dq, *dk, *dv, *dout;
  float *dl;
  int *dcq = NULL, *dck = NULL;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dk, nk * 2));
  CUDA_OK(cudaMalloc(&dv, nv * 2));
  CUDA_OK(cudaMalloc(&dout, no * 2));
  CUDA_OK(cudaMalloc((void **)&dl, Tq * c->hq * sizeof(float)));
  CUDA_OK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv, hv, nv * 2, cudaMemcpyHostToDevice));
  if (varlen) {
    CUDA_OK(cudaMalloc((void **)&dcq, (c->batch + 1) * sizeof(int)));
    CUDA_OK(cudaMalloc((void **)&dck, (c->batch + 1) * sizeof(int)));
    CUDA_OK(cudaMemcpy(dcq, cq, (c->batch + 1) * sizeof(int), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(dck, ck, (c->batch + 1) * sizeof(int), cudaMemcpyHostToDevice));
  }
  ws_attn_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch;
  p.seqlen_q = varlen ? max_q : c->sq;
  p.seqlen_k = varlen ? max_k : c->sk;
  p.cu_seqlens_q = dcq;
  p.cu_seqlens_k = dck;
  p.total_q = (int)Tq;
  p.total_k = (int)Tk;
  p.heads_q = c->hq;
  p.heads_kv = c->hkv;
  p.dim_qk = c->dqk;
  p.dim_v = c->dv;
  p.mask = c->mask;
  p.q = dq; p.k = dk; p.v = dv; p.o = dout; p.lse = dl;
  int fails = 0;
  if (check) {
    CUDA_OK(cudaMemset(dout, 0xFF, no * 2)); /* NaN */
    CUDA_OK(cudaMemset(dl, 0xFF, Tq * c->hq * sizeof(float)));
    WS_OK_OR_DIE(ws_attn_forward(&p, 0));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hl, dl, Tq * c->hq * sizeof(float), cudaMemcpyDeviceToHost));
    double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc(Tq * c->hq, sizeof(double), 0);
    ws_attn_problem hp = p;
    hp.q = hq; hp.k = hk; hp.v = hv; hp.o = NULL; hp.lse = NULL;
    hp.o = ho; /* the reference writes doubles to ro; o is only checked non-NULL */
    hp.cu_seqlens_q = varlen ? cq : NULL;
    hp.cu_seqlens_k = varlen ? ck : NULL;
    WS_OK_OR_DIE(ws_attn_reference(&hp, ro, rl));
    fails += !compare(c->name, "", ho, ro, no, c->dv, hl, rl, Tq * c->hq, (size_t)c->hq, 128);
    free(ro);
    free(rl);
  } else {
    /* time: 3 warm-ups, median of 20 */
    const double med = median_ms(launch_attn, &p, 3, 20);
    double flops = 0;
    for (int b = 0; b < c->batch; b++) {
      const double lq = cq[b + 1] - cq[b], lk = ck[b + 1] - ck[b];
      const double pairs = c->mask == WS_ATTN_NO_MASK ? lq * lk : lq * lk - lq * (lq - 1) / 2; /* sq == sk here */
      flops += 2.0 * pairs * c->hq * (c->dqk + c->dv);
    }
    printf("bench %-36s %8.3f ms  %6.1f TFLOPS\n", c->name, med, flops / (med * 1e-3) / 1e12);
  }
  cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dl);
  if (dcq) cudaFree(dcq);
  if (dck) cudaFree(dck);
  free(hq); free(hk); free(hv); free(ho); free(hl); free(cq); free(ck);
  return fails;
}

/* ---- sparse MLA prefill ------------------------------------------------------------ */
typedef struct {
  const char *name;
  int s_q, heads, s_kv, topk, holes; /* holes: put -1, duplicates and out-of-range ids in */
} mla_case;

static int run_mla(const mla_case *c, int check) {
  const int DQ = 576, DV = 512;
  const size_t nq = (size_t)c->s_q * c->heads * DQ, nkv = (size_t)c->s_kv * DQ, no = (size_t)c->s_q * c->heads * DV;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0), *ho = (uint16_t *)host_alloc(no, 2, 0);
  int *hi = (int *)host_alloc((size_t)c->s_q * c->topk, sizeof(int), 0);
  float *hl = (float *)host_alloc((size_t)c->s_q * c->heads, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  for (int i = 0; i < c->s_q; i++)
    for (int j = 0; j < c->topk; j++) {
      int r = (int)(rng_u32() % (uint32_t)c->s_kv);
      if (c->holes) {
        const uint32_t u = rng_u32() % 16;
        if (u == 0) r = -1;
        else if (u == 1) r = c->s_kv + (int)(rng_u32() % 1000); /* out of range: masked */
        else if (u == 2 && j > 0) r = hi[(size_t)i * c->topk + j - 1]; /* a duplicate */
      }
      hi[(size_t)i * c->topk + j] = r;
    }
  if (c->holes && c->s_q > 1) /* a query whose every index is masked: o = 0, lse = -inf */
    for (int j = 0; j < c->topk; j++) hi[(size_t)(c->s_q - 1) * c->topk + j] = j % 2 ? -1 : c->s_kv;
  void *dq, *dkv, *dout;
  int *di;
  float *dl;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dkv, nkv * 2));
  CUDA_OK(cudaMalloc(&dout, no * 2));
  CUDA_OK(cudaMalloc((void **)&di, (size_t)c->s_q * c->topk * sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&dl, (size_t)c->s_q * c->heads * sizeof(float)));
  CUDA_OK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dkv, hkv, nkv * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(di, hi, (size_t)c->s_q * c->topk * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_sparse_problem p;
  memset(&p, 0, sizeof p);
  p.s_q = c->s_q; p.heads = c->heads; p.s_kv = c->s_kv; p.topk = c->topk; p.dim_qk = DQ; p.dim_v = DV;
  p.q = dq; p.kv = dkv; p.indices = di; p.o = dout; p.lse = dl;
  int fails = 0;
  if (check) {
    CUDA_OK(cudaMemset(dout, 0xFF, no * 2));
    CUDA_OK(cudaMemset(dl, 0xFF, (size_t)c->s_q * c->heads * sizeof(float)));
    WS_OK_OR_DIE(ws_mla_sparse_forward(&p, 0));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hl, dl, (size_t)c->s_q * c->heads * sizeof(float), cudaMemcpyDeviceToHost));
    double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc((size_t)c->s_q * c->heads, sizeof(double), 0);
    ws_mla_sparse_problem hp = p;
    hp.q = hq; hp.kv = hkv; hp.indices = hi; hp.o = ho; hp.lse = NULL;
    WS_OK_OR_DIE(ws_mla_sparse_reference(&hp, ro, rl));
    fails += !compare(c->name, "", ho, ro, no, DV, hl, rl, (size_t)c->s_q * c->heads, 1, 64);
    free(ro);
    free(rl);
  } else {
    const double med = median_ms(launch_mla, &p, 2, 10);
    const double flops = 2.0 * c->s_q * c->heads * (double)c->topk * (DQ + DV);
    printf("bench %-36s %8.3f ms  %6.1f TFLOPS\n", c->name, med, flops / (med * 1e-3) / 1e12);
  }
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(di); cudaFree(dl);
  free(hq); free(hkv); free(ho); free(hi); free(hl);
  return fails;
}

/* ---- MLA decode (paged cache, split-KV) ------------------------------------------- */
typedef struct {
  const char *name;
  int batch, s_q, heads, max_len; /* lens: random 0 .. max_len (the first = max_len) unless `fixed` */
  int fixed;
  int fp8;                        /* the FP8 cache (kv_fp8): rows quantised on the host */
} dec_case;

static int run_decode(const dec_case *c, int check) {
  const int DQ = 576, DV = 512, P = 64;
  int *lens = (int *)host_alloc((size_t)c->batch, sizeof(int), 0);
  for (int b = 0; b < c->batch; b++) lens[b] = c->fixed || b == 0 ? c->max_len : (int)(rng_u32() % (uint32_t)(c->max_len + 1));
  const int maxp = (c->max_len + P - 1) / P;
  int pages = 0;
  for (int b = 0; b < c->batch; b++) pages += (lens[b] + P - 1) / P;
  pages += 3; /* pages no sequence uses */
  int *table = (int *)host_alloc((size_t)c->batch * maxp, sizeof(int), 0), *perm = (int *)host_alloc((size_t)pages, sizeof(int), 0);
  for (int i = 0; i < pages; i++) perm[i] = i;
  for (int i = pages - 1; i > 0; i--) { const int j = (int)(rng_u32() % (uint32_t)(i + 1)), t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
  int next = 0;
  for (int b = 0; b < c->batch; b++)
    for (int g = 0; g < maxp; g++) table[(size_t)b * maxp + g] = g < (lens[b] + P - 1) / P ? perm[next++] : -1;
  const size_t rows = (size_t)c->batch * c->s_q * c->heads, nq = rows * DQ, nkv = (size_t)pages * P * DQ, no = rows * DV;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0), *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  const size_t kv_rows = (size_t)pages * P, kv_bytes = c->fp8 ? kv_rows * WS_MLA_FP8_ROW_BYTES : nkv * 2;
  uint8_t *hkv8 = NULL;
  if (c->fp8) { /* rows of several magnitudes, so that the tile scales differ */
    for (size_t r = 0; r < kv_rows; r += 5) fill_uniform(hkv + r * DQ, DQ, r % 3 ? 8.0f : 0.01f);
    hkv8 = (uint8_t *)host_alloc(kv_bytes, 1, 0);
    WS_OK_OR_DIE(ws_mla_kv_quantize_fp8_host(hkv, kv_rows, hkv8));
  }
  void *dq, *dkv, *dout, *ws = NULL;
  int *dt, *dlen;
  float *dl;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dkv, kv_bytes));
  CUDA_OK(cudaMalloc(&dout, no * 2));
  CUDA_OK(cudaMalloc((void **)&dl, rows * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dt, (size_t)c->batch * maxp * sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&dlen, (size_t)c->batch * sizeof(int)));
  CUDA_OK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dkv, c->fp8 ? (const void *)hkv8 : (const void *)hkv, kv_bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dt, table, (size_t)c->batch * maxp * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dlen, lens, (size_t)c->batch * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch; p.s_q = c->s_q; p.heads = c->heads; p.dim_qk = DQ; p.dim_v = DV; p.page_size = P;
  p.num_pages = pages; p.max_pages = maxp; p.max_seqlen = c->max_len;
  p.q = dq; p.kv_cache = dkv; p.block_table = dt; p.seqlens = dlen; p.o = dout; p.lse = dl;
  p.kv_fp8 = c->fp8;
  size_t wsb = 0;
  WS_OK_OR_DIE(ws_mla_decode_workspace_size(&p, &wsb));
  if (wsb) CUDA_OK(cudaMalloc(&ws, wsb));
  int fails = 0;
  if (check) {
    CUDA_OK(cudaMemset(dout, 0xFF, no * 2));
    CUDA_OK(cudaMemset(dl, 0xFF, rows * sizeof(float)));
    if (ws) CUDA_OK(cudaMemset(ws, 0xFF, wsb));
    WS_OK_OR_DIE(ws_mla_decode_forward(&p, ws, wsb, 0));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hl, dl, rows * sizeof(float), cudaMemcpyDeviceToHost));
    /* a large batch: the float64 reference on 4 of its sequences (the first, the longest;
     * the middle one, the last, one at random) and 16 of their heads (one in 8, at a
     * different offset in each group of 8), the kernel's rows of those gathered */
    const int big = c->batch > 32, sub_h = big ? 16 : c->heads;
    int pick[4], np = 0;
    if (big) {
      pick[np++] = 0; pick[np++] = c->batch / 2; pick[np++] = c->batch - 1;
      pick[np++] = 1 + (int)(rng_u32() % (uint32_t)(c->batch - 2));
    }
    const int nb = big ? np : c->batch;
    const size_t srows = (size_t)nb * c->s_q * sub_h;
    uint16_t *sq = hq, *so = ho;
    float *sl = hl;
    int *stab = table, *slen = lens;
    if (big) { /* the picked rows' q, table, lengths and kernel output */
      sq = (uint16_t *)host_alloc(srows * DQ, 2, 0);
      so = (uint16_t *)host_alloc(srows * DV, 2, 0);
      sl = (float *)host_alloc(srows, sizeof(float), 0);
      stab = (int *)host_alloc((size_t)nb * maxp, sizeof(int), 0);
      slen = (int *)host_alloc((size_t)nb, sizeof(int), 0);
      for (int i = 0; i < nb; i++) {
        const int b = pick[i];
        for (int t = 0; t < c->s_q; t++)
          for (int j = 0; j < sub_h; j++) {
            const size_t from = ((size_t)b * c->s_q + t) * c->heads + 8 * j + j % 8, to = ((size_t)i * c->s_q + t) * sub_h + j;
            memcpy(sq + to * DQ, hq + from * DQ, DQ * 2);
            memcpy(so + to * DV, ho + from * DV, DV * 2);
            sl[to] = hl[from];
          }
        memcpy(stab + (size_t)i * maxp, table + (size_t)b * maxp, (size_t)maxp * sizeof(int));
        slen[i] = lens[b];
      }
    }
    double *ro = (double *)host_alloc(srows * DV, sizeof(double), 0), *rl = (double *)host_alloc(srows, sizeof(double), 0);
    ws_mla_decode_problem hp = p;
    hp.batch = nb;
    hp.heads = sub_h;
    hp.q = sq; hp.kv_cache = c->fp8 ? (const void *)hkv8 : (const void *)hkv; hp.block_table = stab; hp.seqlens = slen;
    hp.o = so; hp.lse = NULL;
    WS_OK_OR_DIE(ws_mla_decode_reference(&hp, ro, rl));
    char extra[96];
    snprintf(extra, sizeof extra, ", workspace %zu B%s", wsb, big ? ", 4 sequences x 16 heads checked" : "");
    fails += !compare(c->name, extra, so, ro, srows * DV, DV, sl, rl, srows, 1, 64);
    if (big) { free(sq); free(so); free(sl); free(stab); free(slen); }
    free(ro);
    free(rl);
  } else {
    const decode_call call = {&p, ws, wsb};
    const double med = median_ms(launch_decode, &call, 3, 20);
    double keys = 0, bytes = 0;
    for (int b = 0; b < c->batch; b++) keys += lens[b];
    bytes += keys * (c->fp8 ? WS_MLA_FP8_ROW_BYTES : DQ * 2);
    bytes += (double)nq * 2 + (double)no * 2;
    const double flops = 2.0 * keys * c->s_q * c->heads * (DQ + DV);
    printf("bench %-36s %8.3f ms  %6.1f TFLOPS  %6.0f GB/s (kv cache + q + o)\n", c->name, med, flops / (med * 1e-3) / 1e12,
           bytes / (med * 1e-3) / 1e9);
  }
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(dl); cudaFree(dt); cudaFree(dlen);
  if (ws) cudaFree(ws);
  free(lens); free(table); free(perm); free(hq); free(hkv); free(hkv8); free(ho); free(hl);
  return fails;
}

/* ---- NSA selected-block attention ------------------------------------------------- */
typedef struct {
  const char *name;
  int tokens, heads_q, heads_kv, dim_qk, dim_v, topn;
  int shared; /* 1: the tokens of each 64-token block share one selection (as NSA's
               * neighbours mostly do); 0: every token its own random one, with -1,
               * out-of-range and future blocks and duplicates */
} nsa_case;
static ws_status launch_nsa(const void *p) { return ws_nsa_forward((const ws_nsa_problem *)p, 0); }

/* Selections: always the first block and the token's own (last) block, then random
 * earlier ones; unshared ones also get -1, past-the-end and future entries. */
static void nsa_select(const nsa_case *c, int *sel) {
  const int nb = (c->tokens + 63) / 64;
  for (int i = 0; i < c->tokens; i++)
    for (int g = 0; g < c->heads_kv; g++) {
      int *e = sel + ((size_t)i * c->heads_kv + g) * c->topn;
      const int own = i / 64;
      if (c->shared && i % 64 != 0) { /* as the block's first token (its own block is the same) */
        memcpy(e, sel + ((size_t)(i - i % 64) * c->heads_kv + g) * c->topn, (size_t)c->topn * sizeof(int));
        continue;
      }
      for (int n = 0; n < c->topn; n++) {
        const uint32_t r = rng_u32();
        if (n == 0) e[n] = 0;
        else if (n == 1) e[n] = own;
        else if (c->shared || r % 8 < 5) e[n] = (int)(rng_u32() % (uint32_t)(own + 1)); /* earlier (duplicates happen) */
        else if (r % 8 == 5) e[n] = -1;
        else if (r % 8 == 6) e[n] = nb + (int)(rng_u32() % 3u); /* past the end */
        else e[n] = (int)(rng_u32() % (uint32_t)nb);             /* any, possibly in the future */
      }
    }
}

static int run_nsa(const nsa_case *c, int check) {
  const size_t nq = (size_t)c->tokens * c->heads_q * c->dim_qk, nk = (size_t)c->tokens * c->heads_kv * c->dim_qk,
               nv = (size_t)c->tokens * c->heads_kv * c->dim_v, no = (size_t)c->tokens * c->heads_q * c->dim_v,
               rows = (size_t)c->tokens * c->heads_q, nsel = (size_t)c->tokens * c->heads_kv * c->topn;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hk = (uint16_t *)host_alloc(nk, 2, 0), *hv = (uint16_t *)host_alloc(nv, 2, 0),
           *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  int *hs = (int *)host_alloc(nsel, sizeof(int), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hk, nk, 1.0f);
  fill_uniform(hv, nv, 1.0f);
  nsa_select(c, hs);
  void *dq, *dk, *dv, *dout;
  int *ds;
  float *dl;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dk, nk * 2));
  CUDA_OK(cudaMalloc(&dv, nv * 2));
  CUDA_OK(cudaMalloc(&dout, no * 2));
  CUDA_OK(cudaMalloc((void **)&dl, rows * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&ds, nsel * sizeof(int)));
  CUDA_OK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dk, hk, nk * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dv, hv, nv * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(ds, hs, nsel * sizeof(int), cudaMemcpyHostToDevice));
  ws_nsa_problem p;
  memset(&p, 0, sizeof p);
  p.tokens = c->tokens; p.heads_q = c->heads_q; p.heads_kv = c->heads_kv; p.dim_qk = c->dim_qk; p.dim_v = c->dim_v;
  p.block = 64; p.topn = c->topn;
  p.q = dq; p.k = dk; p.v = dv; p.block_indices = ds; p.o = dout; p.lse = dl;
  int fails = 0;
  if (check) {
    CUDA_OK(cudaMemset(dout, 0xFF, no * 2));
    CUDA_OK(cudaMemset(dl, 0xFF, rows * sizeof(float)));
    WS_OK_OR_DIE(ws_nsa_forward(&p, 0));
    CUDA_OK(cudaGetLastError());
    CUDA_OK(cudaDeviceSynchronize());
    CUDA_OK(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hl, dl, rows * sizeof(float), cudaMemcpyDeviceToHost));
    double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc(rows, sizeof(double), 0);
    ws_nsa_problem hp = p;
    hp.q = hq; hp.k = hk; hp.v = hv; hp.block_indices = hs; hp.o = ho; hp.lse = NULL;
    WS_OK_OR_DIE(ws_nsa_reference(&hp, ro, rl));
    fails += !compare(c->name, "", ho, ro, no, c->dim_v, hl, rl, rows, 1, 16);
    free(ro);
    free(rl);
  } else {
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
    /* the dense flash kernel, causal, on the same q, k, v: its TFLOPS on its own work */
    ws_attn_problem d;
    memset(&d, 0, sizeof d);
    d.batch = 1; d.seqlen_q = c->tokens; d.seqlen_k = c->tokens; d.heads_q = c->heads_q; d.heads_kv = c->heads_kv;
    d.dim_qk = c->dim_qk; d.dim_v = c->dim_v; d.mask = WS_ATTN_CAUSAL_TOP_LEFT; d.q = dq; d.k = dk; d.v = dv; d.o = dout;
    const double dmed = median_ms(launch_attn, &d, 3, 20);
    const double dflops = 2.0 * c->heads_q * ((double)c->tokens * (c->tokens + 1) / 2) * (c->dim_qk + c->dim_v);
    const double tf = flops / (med * 1e-3) / 1e12, dtf = dflops / (dmed * 1e-3) / 1e12;
    printf("bench %-44s %8.3f ms %6.1f TFLOPS | dense causal flash %8.3f ms %6.1f TFLOPS | %.0f%% of dense\n", c->name, med,
           tf, dmed, dtf, 100.0 * tf / dtf);
  }
  cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dl); cudaFree(ds);
  free(hq); free(hk); free(hv); free(ho); free(hl); free(hs);
  return fails;
}

/* Argument checks before any launch. */
static int check_errors(void) {
  int fails = 0;
  ws_attn_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.seqlen_q = 4; p.seqlen_k = 4; p.heads_q = 3; p.heads_kv = 2; p.dim_qk = 64; p.dim_v = 64;
  static uint4 buf[64];
  p.q = p.k = p.v = p.o = buf;
  fails += ws_attn_forward(&p, 0) != WS_ERR_INVALID; /* 3 heads over 2 kv heads */
  p.heads_q = 2; p.dim_qk = 96; p.dim_v = 96;
  fails += ws_attn_forward(&p, 0) == WS_OK;          /* dims */
  p.dim_qk = 64; p.dim_v = 64;
  static int cu[2] = {0, 4};
  p.cu_seqlens_q = cu; p.cu_seqlens_k = cu;           /* varlen without totals */
  fails += ws_attn_forward(&p, 0) != WS_ERR_INVALID;
  printf("argument checks: %s\n", fails ? "FAILED" : "ok");
  return fails;
}

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

/* A page id past the cache must be masked like -1, not wrap onto a cached row: page
 * 2^26 + 1 of 64 rows is row 2^32 + 64, row 64 in 32 bits. The same sequence with that
 * id and with -1 in its second slot gives the same bits. */
static int check_page_wrap(void) {
  const int DQ = 576, DV = 512, P = 64, H = 64;
  const size_t nq = (size_t)H * DQ, nkv = (size_t)2 * P * DQ, no = (size_t)H * DV;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  const int tables[2][2] = {{0, (1 << 26) + 1}, {0, -1}}, len = 2 * P;
  void *dq, *dkv, *dout[2], *ws = NULL;
  int *dt, *dlen;
  float *dl[2];
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dkv, nkv * 2));
  CUDA_OK(cudaMalloc((void **)&dt, sizeof tables));
  CUDA_OK(cudaMalloc((void **)&dlen, sizeof len));
  CUDA_OK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dkv, hkv, nkv * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dt, tables, sizeof tables, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dlen, &len, sizeof len, cudaMemcpyHostToDevice));
  ws_mla_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.s_q = 1; p.heads = H; p.dim_qk = DQ; p.dim_v = DV; p.page_size = P;
  p.num_pages = 2; p.max_pages = 2; p.max_seqlen = len;
  p.q = dq; p.kv_cache = dkv; p.seqlens = dlen;
  p.block_table = dt; p.o = dq; /* placeholders for the size query; each call below sets its own */
  size_t wsb = 0;
  WS_OK_OR_DIE(ws_mla_decode_workspace_size(&p, &wsb));
  if (wsb) CUDA_OK(cudaMalloc(&ws, wsb));
  uint16_t *ho[2];
  float *hl[2];
  for (int t = 0; t < 2; t++) {
    CUDA_OK(cudaMalloc(&dout[t], no * 2));
    CUDA_OK(cudaMalloc((void **)&dl[t], H * sizeof(float)));
    CUDA_OK(cudaMemset(dout[t], 0xFF, no * 2));
    p.block_table = dt + 2 * t; p.o = dout[t]; p.lse = dl[t];
    WS_OK_OR_DIE(ws_mla_decode_forward(&p, ws, wsb, 0));
    CUDA_OK(cudaDeviceSynchronize());
    ho[t] = (uint16_t *)host_alloc(no, 2, 0);
    hl[t] = (float *)host_alloc(H, sizeof(float), 0);
    CUDA_OK(cudaMemcpy(ho[t], dout[t], no * 2, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(hl[t], dl[t], H * sizeof(float), cudaMemcpyDeviceToHost));
  }
  const int same = memcmp(ho[0], ho[1], no * 2) == 0 && memcmp(hl[0], hl[1], H * sizeof(float)) == 0;
  printf("decode, a page id past the cache: %s\n", same ? "masked, ok" : "read a cached row: FAILED");
  for (int t = 0; t < 2; t++) { cudaFree(dout[t]); cudaFree(dl[t]); free(ho[t]); free(hl[t]); }
  cudaFree(dq); cudaFree(dkv); cudaFree(dt); cudaFree(dlen);
  if (ws) cudaFree(ws);
  free(hq); free(hkv);
  return !same;
}

/* WARPSPEC_ATTN_SCHEDULE's values: the tests and the bench run each */
static const char *const flash_scheds[4] = {"plain", "pingpong", "overlap", "overlap-pingpong"};
/* the flash grids (WARPSPEC_ATTN_GRID): one CTA per SM walking the tiles, one CTA per tile */
static const char *const flash_grids[2] = {"persistent", "tiles"};

/* wall seconds since the first call: the log says where the time goes */
static double elapsed_s(void) {
  static struct timespec t0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (t0.tv_sec == 0 && t0.tv_nsec == 0) t0 = t;
  return (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  setvbuf(stdout, NULL, _IOLBF, 0); /* a line at a time: a log cut by a timeout shows where */
  elapsed_s();
  require_hopper();
  rng_seed_from_time();
  static const int vq[] = {1, 200, 77, 130}, vk[] = {5, 300, 77, 129};
  static const int wq[] = {256, 1, 513}, wk[] = {256, 64, 513};
  /* 40 sequences of 1 .. 383 queries (keys: 7 to 40 more, or fewer): with 8 heads, 960
   * tiles of which about half lie past their sequence's end and are skipped, so every CTA
   * of the persistent grid runs several tiles and the loader's and math's tile walks must
   * stay in step over skipped ones */
  static int xq[40], xk[40];
  for (int i = 0; i < 40; i++) {
    xq[i] = 1 + (i * 97 + 31) % 383;
    xk[i] = i % 5 == 0 ? (xq[i] + 1) / 2 : xq[i] + 7 * (i % 6);
  }
  const attn_case quick[] = {
      {"1 x 1, d64", 1, 1, 1, 1, 1, 64, 64, WS_ATTN_NO_MASK, NULL, NULL},
      {"17 x 17, d128, causal", 1, 17, 17, 2, 1, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"2 x 128, GQA 4/2, d128", 2, 128, 128, 4, 2, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"333 x 1000, MQA 4/1, d128, causal BR", 1, 333, 1000, 4, 1, 128, 128, WS_ATTN_CAUSAL_BOTTOM_RIGHT, NULL, NULL},
      {"1000 x 333, d64, causal BR (empty rows)", 1, 1000, 333, 2, 2, 64, 64, WS_ATTN_CAUSAL_BOTTOM_RIGHT, NULL, NULL},
      {"300 x 500, d192/128", 1, 300, 500, 2, 1, 192, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"varlen 4 seqs, GQA 4/2, d128", 4, 0, 0, 4, 2, 128, 128, WS_ATTN_NO_MASK, vq, vk},
      {"varlen 4 seqs, d64, causal BR", 4, 0, 0, 2, 1, 64, 64, WS_ATTN_CAUSAL_BOTTOM_RIGHT, vq, vk},
      {"varlen 3 seqs, d128, causal TL", 3, 0, 0, 2, 2, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, wq, wk},
      {"varlen 40 seqs, GQA 8/2, d128, causal BR (960 tiles)", 40, 0, 0, 8, 2, 128, 128, WS_ATTN_CAUSAL_BOTTOM_RIGHT, xq, xk},
      {"4 x 512, H 32, d64, causal (512 tiles)", 4, 512, 512, 32, 32, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
  };
  const attn_case full[] = {
      {"1000 x 1000, d64, causal", 1, 1000, 1000, 2, 2, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"4096 x 4096, d128", 1, 4096, 4096, 1, 1, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"4096 x 4096, d128, causal", 1, 4096, 4096, 2, 1, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"8192 x 8192, d64, causal", 1, 8192, 8192, 1, 1, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"2048 x 2048, d192/128, causal", 1, 2048, 2048, 2, 2, 192, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"2 x 640, H 40, d128 (400 tiles)", 2, 640, 640, 40, 40, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"3 x 600, H 16/4, d192/128, causal (240 tiles)", 3, 600, 600, 16, 4, 192, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
  };
  const attn_case bench[] = {
      {"B4 S4096 H16 d128", 4, 4096, 4096, 16, 16, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"B4 S4096 H16 d128 causal", 4, 4096, 4096, 16, 16, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"B2 S8192 H16 d128", 2, 8192, 8192, 16, 16, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"B2 S8192 H16 d128 causal", 2, 8192, 8192, 16, 16, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"B4 S8192 H16 d128", 4, 8192, 8192, 16, 16, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
      {"B4 S8192 H16 d128 causal", 4, 8192, 8192, 16, 16, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
      {"B8 S2048 H32 d64", 8, 2048, 2048, 32, 32, 64, 64, WS_ATTN_NO_MASK, NULL, NULL},
      {"B8 S2048 H32 d64 causal", 8, 2048, 2048, 32, 32, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
  };
  const mla_case mla_quick[] = {
      {"mla 1 token, H64, topk 128", 1, 64, 128, 128, 0},
      {"mla 5 tokens, H128, topk 512, holes", 5, 128, 4096, 512, 1},
      {"mla 3 tokens, H64, topk 100, holes", 3, 64, 300, 100, 1},
  };
  const mla_case mla_full[] = {
      {"mla 17 tokens, H64, topk 512, s_kv 131072", 17, 64, 131072, 512, 1},
      {"mla 4 tokens, H128, topk 2048, s_kv 2048", 4, 128, 2048, 2048, 0},
      {"mla 64 tokens, H128, topk 128, holes", 64, 128, 8192, 128, 1},
  };
  const mla_case mla_bench[] = {
      {"mla S4096 H128 topk2048 s_kv 8192", 4096, 128, 8192, 2048, 0},
      {"mla S4096 H128 topk2048 s_kv 32768", 4096, 128, 32768, 2048, 0},
      {"mla S4096 H128 topk2048 s_kv 65536", 4096, 128, 65536, 2048, 0},
      {"mla S4096 H128 topk2048 s_kv 98304", 4096, 128, 98304, 2048, 0},
      {"mla S4096 H128 topk2048 s_kv 131072", 4096, 128, 131072, 2048, 0},
  };
  const dec_case dec_quick[] = {
      {"decode B1 s_q1 H128 len 4000 (split)", 1, 1, 128, 4000, 1, 0},
      {"decode B6 s_q2 H64 lens 0..2000", 6, 2, 64, 2000, 0, 0},
      {"decode fp8 B1 s_q1 H128 len 4000 (split)", 1, 1, 128, 4000, 1, 1},
      {"decode fp8 B6 s_q2 H64 lens 0..2000", 6, 2, 64, 2000, 0, 1},
  };
  const dec_case dec_full[] = {
      {"decode B32 s_q1 H128 lens 0..1024", 32, 1, 128, 1024, 0, 0},
      {"decode B2 s_q2 H64 len 16384 (split)", 2, 2, 64, 16384, 1, 0},
      {"decode fp8 B32 s_q1 H128 lens 0..1024", 32, 1, 128, 1024, 0, 1},
      {"decode fp8 B2 s_q2 H64 len 16384 (split)", 2, 2, 64, 16384, 1, 1},
      {"decode B128 s_q1 H128 lens 0..32768", 128, 1, 128, 32768, 0, 0},
      {"decode fp8 B128 s_q2 H128 lens 0..32768", 128, 2, 128, 32768, 0, 1},
  };
  const dec_case dec_bench[] = {
      {"decode B64 s_q1 H128 len 4096", 64, 1, 128, 4096, 1, 0},
      {"decode B128 s_q1 H128 len 4096", 128, 1, 128, 4096, 1, 0},
      {"decode B128 s_q2 H128 len 8192", 128, 2, 128, 8192, 1, 0},
      {"decode B8 s_q1 H128 len 32768", 8, 1, 128, 32768, 1, 0},
      {"decode B1 s_q1 H128 len 65536", 1, 1, 128, 65536, 1, 0},
      {"decode fp8 B64 s_q1 H128 len 4096", 64, 1, 128, 4096, 1, 1},
      {"decode fp8 B128 s_q1 H128 len 4096", 128, 1, 128, 4096, 1, 1},
      {"decode fp8 B128 s_q2 H128 len 8192", 128, 2, 128, 8192, 1, 1},
      {"decode fp8 B8 s_q1 H128 len 32768", 8, 1, 128, 32768, 1, 1},
      {"decode fp8 B1 s_q1 H128 len 65536", 1, 1, 128, 65536, 1, 1},
  };
  const nsa_case nsa_quick[] = {
      {"nsa T 300 Hq 32 Hkv 2 d128 topn 6", 300, 32, 2, 128, 128, 6, 0},
      {"nsa T 257 Hq 16 Hkv 1 d128 topn 5", 257, 16, 1, 128, 128, 5, 0},
      {"nsa T 1000 Hq 32 Hkv 2 d192/128 topn 8 shared", 1000, 32, 2, 192, 128, 8, 1},
  };
  const nsa_case nsa_full[] = {
      {"nsa T 1024 Hq 64 Hkv 4 d128 topn 16", 1024, 64, 4, 128, 128, 16, 0},
      {"nsa T 2000 Hq 16 Hkv 1 d128 topn 16 shared", 2000, 16, 1, 128, 128, 16, 1},
      {"nsa T 700 Hq 64 Hkv 2 d128 topn 12 (group 32)", 700, 64, 2, 128, 128, 12, 0},
  };
  const nsa_case nsa_bench[] = {
      {"nsa T 16384 Hq 64 Hkv 4 d128 topn 16 shared", 16384, 64, 4, 128, 128, 16, 1},
      {"nsa T 16384 Hq 64 Hkv 4 d128 topn 16 random", 16384, 64, 4, 128, 128, 16, 0},
      {"nsa T 65536 Hq 64 Hkv 4 d128 topn 16 shared", 65536, 64, 4, 128, 128, 16, 1},
      {"nsa T 16384 Hq 64 Hkv 4 d192/128 topn 16 shared", 16384, 64, 4, 192, 128, 16, 1},
  };
  int fails = 0;
  if (!strcmp(mode, "nsa") || !strcmp(mode, "nsa-quick")) { /* NSA alone: its tests, then its bench */
    for (size_t i = 0; i < sizeof nsa_quick / sizeof nsa_quick[0]; i++) fails += run_nsa(&nsa_quick[i], 1);
    if (!strcmp(mode, "nsa"))
      for (size_t i = 0; i < sizeof nsa_full / sizeof nsa_full[0]; i++) fails += run_nsa(&nsa_full[i], 1);
    if (!fails && !strcmp(mode, "nsa"))
      for (size_t i = 0; i < sizeof nsa_bench / sizeof nsa_bench[0]; i++) run_nsa(&nsa_bench[i], 0);
    printf(fails ? "test_attention nsa: %d FAILED\n" : "test_attention nsa: all checks passed\n", fails);
    return fails ? 1 : 0;
  }
  if (!strcmp(mode, "bench") || !strcmp(mode, "mla-bench")) {
    for (int sw = 0; sw < 2; sw++) { /* both MLA schedules: the default, then the overlapped one */
      if (sw) setenv("WARPSPEC_MLA_SCHEDULE", "overlap", 1);
      printf("mla schedule: %s\n", sw ? "overlap" : "default");
      for (size_t i = 0; i < sizeof dec_bench / sizeof dec_bench[0]; i++) run_decode(&dec_bench[i], 0);
      for (size_t i = 0; i < sizeof mla_bench / sizeof mla_bench[0]; i++) run_mla(&mla_bench[i], 0);
    }
    unsetenv("WARPSPEC_MLA_SCHEDULE");
    if (!strcmp(mode, "mla-bench")) return 0;
  }
  if (!strcmp(mode, "bench") || !strcmp(mode, "flash-bench")) {
    for (int sc = 0; sc < 4; sc++) { /* the four schedules of the flash kernel */
      setenv("WARPSPEC_ATTN_SCHEDULE", flash_scheds[sc], 1);
      printf("flash schedule: %s\n", flash_scheds[sc]);
      for (size_t i = 0; i < sizeof bench / sizeof bench[0]; i++) run_case(&bench[i], 0);
    }
    unsetenv("WARPSPEC_ATTN_SCHEDULE");
    for (int g = 0; g < 2; g++) { /* the default schedules on each grid (WARPSPEC_ATTN_GRID) */
      setenv("WARPSPEC_ATTN_GRID", flash_grids[g], 1);
      printf("flash grid: %s\n", flash_grids[g]);
      for (size_t i = 0; i < sizeof bench / sizeof bench[0]; i++) run_case(&bench[i], 0);
    }
    unsetenv("WARPSPEC_ATTN_GRID");
    for (size_t i = 0; i < sizeof nsa_bench / sizeof nsa_bench[0]; i++) run_nsa(&nsa_bench[i], 0);
    return 0;
  }
  if (!strcmp(mode, "fp8")) { /* the FP8 cache alone: small enough for compute-sanitizer */
    fails += check_fp8_cache();
    for (int sw = 0; sw < 2; sw++) { /* both MLA schedules */
      if (sw) setenv("WARPSPEC_MLA_SCHEDULE", "overlap", 1);
      for (size_t i = 0; i < sizeof dec_quick / sizeof dec_quick[0]; i++)
        if (dec_quick[i].fp8) fails += run_decode(&dec_quick[i], 1);
    }
    unsetenv("WARPSPEC_MLA_SCHEDULE");
    printf(fails ? "test_attention fp8: %d FAILED\n" : "test_attention fp8: all checks passed\n", fails);
    return fails ? 1 : 0;
  }
  fails += check_errors();
  fails += check_fp8_cache();
  fails += check_page_wrap();
  /* ctest: what a user's `make test` runs in under 5 minutes: every schedule on the quick
   * cases, the long cases under the default schedules only, no batch-128 decode */
  const int lean = !strcmp(mode, "ctest"), longer = strcmp(mode, "quick") != 0;
  printf("flash schedule: default (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++) fails += run_case(&quick[i], 1);
  for (int sc = 0; sc < 4; sc++) { /* each schedule forced, on the same cases (the default is one of them per dim) */
    setenv("WARPSPEC_ATTN_SCHEDULE", flash_scheds[sc], 1);
    printf("flash schedule: %s (%.0f s)\n", flash_scheds[sc], elapsed_s());
    for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++) fails += run_case(&quick[i], 1);
    if (longer && !lean) fails += run_case(&full[2], 1);
  }
  unsetenv("WARPSPEC_ATTN_SCHEDULE");
  for (int g = 0; g < 2; g++) { /* the default schedules on each grid: persistent, one CTA per tile */
    setenv("WARPSPEC_ATTN_GRID", flash_grids[g], 1);
    printf("flash grid: %s (%.0f s)\n", flash_grids[g], elapsed_s());
    for (size_t i = 0; i < sizeof quick / sizeof quick[0]; i++) fails += run_case(&quick[i], 1);
  }
  unsetenv("WARPSPEC_ATTN_GRID");
  for (int sw = 0; sw < 2; sw++) { /* both MLA schedules (WARPSPEC_MLA_SCHEDULE, read at each call) */
    if (sw) setenv("WARPSPEC_MLA_SCHEDULE", "overlap", 1);
    printf("mla schedule: %s (%.0f s)\n", sw ? "overlap" : "default", elapsed_s());
    for (size_t i = 0; i < sizeof mla_quick / sizeof mla_quick[0]; i++) fails += run_mla(&mla_quick[i], 1);
    for (size_t i = 0; i < sizeof dec_quick / sizeof dec_quick[0]; i++) fails += run_decode(&dec_quick[i], 1);
    if (longer && !(lean && sw)) {
      for (size_t i = 0; i < sizeof mla_full / sizeof mla_full[0]; i++) fails += run_mla(&mla_full[i], 1);
      for (size_t i = 0; i < sizeof dec_full / sizeof dec_full[0]; i++)
        if (dec_full[i].batch <= 32 || (!sw && !lean)) /* batch 128: once, not under ctest */
          fails += run_decode(&dec_full[i], 1);
    }
  }
  unsetenv("WARPSPEC_MLA_SCHEDULE");
  printf("nsa (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof nsa_quick / sizeof nsa_quick[0]; i++) fails += run_nsa(&nsa_quick[i], 1);
  if (longer) {
    for (size_t i = 0; i < sizeof nsa_full / sizeof nsa_full[0]; i++) fails += run_nsa(&nsa_full[i], 1);
    printf("long flash cases (%.0f s)\n", elapsed_s());
    for (size_t i = 0; i < sizeof full / sizeof full[0]; i++) fails += run_case(&full[i], 1);
  }
  printf("(%.0f s) ", elapsed_s());
  printf(fails ? "test_attention: %d FAILED\n" : "test_attention: all checks passed\n", fails);
  return fails ? 1 : 0;
}
