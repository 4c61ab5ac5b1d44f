/* mla_sparse_decode.cuh - test_attention: sparse MLA decode (ws_mla_sparse_decode_forward)
 * against ws_mla_sparse_decode_reference: the BF16 and the FP8 cache (rows quantised on
 * the host, of several magnitudes), batch 1 and 2 (each list split over CTAs, workspace
 * poisoned too) and batch 64 (one CTA per list, or a 2-way split at 64 heads), s_q 1 and
 * 2, topk 2048 and ragged ones (64, 100), heads 64 and 128, -1 entries and duplicates,
 * and a last token whose every entry is -1 (o = 0, lse = -inf); and the argument checks,
 * the validation mode's scan and the reference's rejection of an index past the cache.
 * Run under every MLA schedule. */
#ifndef WARPSPEC_TEST_ATTN_MLA_SPARSE_DECODE_CUH
#define WARPSPEC_TEST_ATTN_MLA_SPARSE_DECODE_CUH

#include "attn_common.cuh"

typedef struct {
  const char *name;
  int batch, s_q, heads, topk;
  int pages;  /* of 64 rows                                              */
  int holes;  /* -1 entries, duplicates, a last token of only -1         */
  int fp8;    /* the FP8 cache (kv_fp8): rows quantised on the host      */
} sd_case;

static int run_sparse_decode(const sd_case *c) {
  const int DQ = 576, DV = 512, P = 64;
  const int tokens = c->batch * c->s_q, kv_rows = c->pages * P;
  const size_t rows = (size_t)tokens * c->heads, nq = rows * DQ, nkv = (size_t)kv_rows * DQ, no = rows * DV;
  const size_t nidx = (size_t)tokens * c->topk;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0), *ho = (uint16_t *)host_alloc(no, 2, 0);
  int *hi = (int *)host_alloc(nidx, sizeof(int), 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  td_mla_decode_indices(&rng_state, hi, tokens, c->topk, kv_rows, c->holes);
  const size_t kv_bytes = c->fp8 ? (size_t)kv_rows * WS_MLA_FP8_ROW_BYTES : nkv * 2;
  uint8_t *hkv8 = NULL;
  if (c->fp8) { /* rows of several magnitudes, so that the tile scales differ */
    for (size_t r = 0; r < (size_t)kv_rows; r += 5) fill_uniform(hkv + r * DQ, DQ, r % 3 ? 8.0f : 0.01f);
    hkv8 = (uint8_t *)host_alloc(kv_bytes, 1, 0);
    WS_OK_OR_DIE(ws_mla_kv_quantize_fp8_host(hkv, (size_t)kv_rows, hkv8));
  }
  void *dq, *dkv, *dout, *ws = NULL;
  int *di;
  float *dl;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dkv, kv_bytes));
  CUDA_OK(cudaMalloc(&dout, no * 2));
  CUDA_OK(cudaMalloc((void **)&dl, rows * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&di, nidx * sizeof(int)));
  CUDA_OK(cudaMemcpy(dq, hq, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dkv, c->fp8 ? (const void *)hkv8 : (const void *)hkv, kv_bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(di, hi, nidx * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_sparse_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch; p.s_q = c->s_q; p.heads = c->heads; p.dim_qk = DQ; p.dim_v = DV;
  p.page_size = P; p.num_pages = c->pages; p.topk = c->topk;
  p.q = dq; p.kv_cache = dkv; p.indices = di; p.o = dout; p.lse = dl; p.kv_fp8 = c->fp8;
  size_t wsb = 0;
  WS_OK_OR_DIE(ws_mla_sparse_decode_workspace_size(&p, &wsb));
  if (wsb) CUDA_OK(cudaMalloc(&ws, wsb));
  CUDA_OK(cudaMemset(dout, 0xFF, no * 2));
  CUDA_OK(cudaMemset(dl, 0xFF, rows * sizeof(float)));
  if (ws) CUDA_OK(cudaMemset(ws, 0xFF, wsb));
  WS_OK_OR_DIE(ws_mla_sparse_decode_forward(&p, ws, wsb, 0));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hl, dl, rows * sizeof(float), cudaMemcpyDeviceToHost));
  double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc(rows, sizeof(double), 0);
  ws_mla_sparse_decode_problem hp = p;
  hp.q = hq; hp.kv_cache = c->fp8 ? (const void *)hkv8 : (const void *)hkv; hp.indices = hi; hp.o = ho; hp.lse = NULL;
  WS_OK_OR_DIE(ws_mla_sparse_decode_reference(&hp, ro, rl));
  char extra[64];
  snprintf(extra, sizeof extra, ", workspace %zu B", wsb);
  const int fails = !compare(c->name, extra, ho, ro, no, DV, hl, rl, rows, 1, 64);
  free(ro);
  free(rl);
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(dl); cudaFree(di);
  if (ws) cudaFree(ws);
  free(hq); free(hkv); free(hkv8); free(ho); free(hi); free(hl);
  return fails;
}

/* Argument checks before any launch, the validation mode's scan (an index past the cache
 * named by sequence, token and position; -1 accepted) and the reference's rejection. */
static int check_sparse_decode_errors(void) {
  /* topk 256 over 2 query tokens: a split (4 ways on 132 SMs), so a workspace is needed */
  const int DQ = 576, P = 64, pages = 2, topk = 256, H = 64, n = 2 * topk;
  int fails = 0;
  void *dq, *dkv, *dout;
  int *di;
  CUDA_OK(cudaMalloc(&dq, (size_t)2 * H * DQ * 2));
  CUDA_OK(cudaMalloc(&dkv, (size_t)pages * P * DQ * 2));
  CUDA_OK(cudaMalloc(&dout, (size_t)2 * H * 512 * 2));
  CUDA_OK(cudaMalloc((void **)&di, (size_t)n * sizeof(int)));
  int *hi = (int *)host_alloc((size_t)n, sizeof(int), 0);
  for (int j = 0; j < n; j++) hi[j] = j % 3 == 0 ? -1 : j % (pages * P);
  hi[topk + 5] = pages * P; /* sequence 1, token 0, position 5: one past the cache */
  CUDA_OK(cudaMemcpy(di, hi, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_sparse_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 2; p.s_q = 1; p.heads = H; p.dim_qk = DQ; p.dim_v = 512; p.page_size = P; p.num_pages = pages;
  p.topk = topk; p.q = dq; p.kv_cache = dkv; p.indices = di; p.o = dout;
  fails += ws_mla_sparse_decode_forward(NULL, NULL, 0, 0) != WS_ERR_INVALID;
  p.heads = 96;
  fails += ws_mla_sparse_decode_forward(&p, NULL, 0, 0) == WS_OK; /* not a multiple of 64 */
  p.heads = H; p.topk = 0;
  fails += ws_mla_sparse_decode_check(&p) != WS_ERR_INVALID;
  p.topk = topk; p.kv_fp8 = 2;
  fails += ws_mla_sparse_decode_check(&p) != WS_ERR_INVALID;
  p.kv_fp8 = 0;
  size_t wsb = 0;
  WS_OK_OR_DIE(ws_mla_sparse_decode_workspace_size(&p, &wsb));
  if (wsb) fails += ws_mla_sparse_decode_forward(&p, NULL, 0, 0) != WS_ERR_INVALID; /* split without a workspace */
  fails += ws_mla_sparse_decode_validate(&p, 0) != WS_ERR_INVALID || !strstr(ws_last_error(), "indices[1][0][5]");
  hi[topk + 5] = -1;
  CUDA_OK(cudaMemcpy(di, hi, (size_t)n * sizeof(int), cudaMemcpyHostToDevice));
  fails += ws_mla_sparse_decode_validate(&p, 0) != WS_OK;
  /* the reference: host pointers (16-byte aligned, as the check wants), an index past the cache */
  uint16_t *q = (uint16_t *)host_alloc((size_t)2 * H * DQ, 2, 0), *kv = (uint16_t *)host_alloc((size_t)pages * P * DQ, 2, 0);
  double *o = (double *)host_alloc((size_t)2 * H * 512, sizeof(double), 0);
  ws_mla_sparse_decode_problem hp = p;
  hi[5] = pages * P;
  hp.q = q; hp.kv_cache = kv; hp.indices = hi; hp.o = o;
  fails += ws_mla_sparse_decode_reference(&hp, o, NULL) != WS_ERR_INVALID || !strstr(ws_last_error(), "indices[0][0][5]");
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(di);
  free(hi); free(q); free(kv); free(o);
  printf("sparse decode argument checks and validation (workspace %zu B): %s\n", wsb, fails ? "FAILED" : "ok");
  return fails;
}

static const sd_case sd_quick[] = {
    {"sparse decode B1 s_q1 H128 topk 2048 (split)", 1, 1, 128, 2048, 256, 1, 0},
    {"sparse decode B2 s_q2 H64 topk 100 (split)", 2, 2, 64, 100, 64, 1, 0},
    {"sparse decode fp8 B1 s_q1 H128 topk 2048 (split)", 1, 1, 128, 2048, 256, 1, 1},
    {"sparse decode fp8 B2 s_q2 H64 topk 64 (one block)", 2, 2, 64, 64, 64, 1, 1},
    {"sparse decode B3 s_q2 H16 topk 300 (split)", 3, 2, 16, 300, 128, 1, 0},
};
static const sd_case sd_full[] = {
    {"sparse decode B64 s_q1 H128 topk 2048", 64, 1, 128, 2048, 1024, 1, 0},
    {"sparse decode B64 s_q1 H64 topk 2048 (2-way split)", 64, 1, 64, 2048, 1024, 1, 0},
    {"sparse decode fp8 B64 s_q2 H64 topk 2048", 64, 2, 64, 2048, 1024, 1, 1},
    {"sparse decode fp8 B64 s_q2 H128 topk 100", 64, 2, 128, 100, 256, 1, 1},
};

#endif
