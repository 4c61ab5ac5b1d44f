/* flash.cuh - test_attention: ws_attn_forward against ws_attn_reference. Dense batches:
 * sequence lengths 1, 17, 128, 333 x 1000, 1000, 4096, 8192; head dims 64/64, 128/128,
 * 192/128; GQA (4 query heads per kv head) and MQA; no mask, causal top-left and
 * bottom-right (including rows that see no key: o = 0, lse = -inf); variable-length
 * batches (ragged, a sequence of 1 token, causal bottom-right, 40 sequences whose tiles
 * mostly lie past their ends). The quick cases run under every schedule
 * (WARPSPEC_ATTN_SCHEDULE) and on both grids (WARPSPEC_ATTN_GRID), because each is a
 * different kernel; the argument checks come first, before any launch. */
#ifndef WARPSPEC_TEST_ATTN_FLASH_CUH
#define WARPSPEC_TEST_ATTN_FLASH_CUH

#include "attn_common.cuh"

typedef struct {
  const char *name;
  int batch, sq, sk, hq, hkv, dqk, dv;
  ws_attn_mask mask;
  const int *lens_q, *lens_k; /* varlen: batch lengths, else NULL */
} attn_case;

/* Run flash problem p (device pointers, t's buffers): o and lse filled with byte `fill`
 * first (0xFF: NaN, so an unwritten value shows; 0 where NaN is the expected result),
 * then read back into ho (no values) and hl (rows). */
static void flash_on_gpu(const ws_attn_problem *p, const td_qkv *t, int fill, size_t no, size_t rows, uint16_t *ho,
                         float *hl) {
  CUDA_OK(cudaMemset(t->dout, fill, no * 2));
  CUDA_OK(cudaMemset(t->dl, fill, rows * sizeof(float)));
  WS_OK_OR_DIE(ws_attn_forward(p, 0));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(ho, t->dout, no * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hl, t->dl, rows * sizeof(float), cudaMemcpyDeviceToHost));
}

static int run_case(const attn_case *c) {
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
  uint16_t *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(Tq * c->hq, sizeof(float), 0);
  td_qkv t; /* q, k, v as bench/bench_attn_kernels.cu makes them (testdata/attention.h) */
  CUDA_OK(td_qkv_make(&t, &rng_state, nq, nk, nv, no, Tq * c->hq));
  int *dcq = NULL, *dck = NULL;
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
  p.q = t.dq; p.k = t.dk; p.v = t.dv; p.o = t.dout; p.lse = t.dl;
  int fails = 0;
  flash_on_gpu(&p, &t, 0xFF, no, Tq * c->hq, ho, hl);
  double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc(Tq * c->hq, sizeof(double), 0);
  ws_attn_problem hp = p;
  hp.q = t.hq; hp.k = t.hk; hp.v = t.hv; hp.o = NULL; hp.lse = NULL;
  hp.o = ho; /* the reference writes doubles to ro; o is only checked non-NULL */
  hp.cu_seqlens_q = varlen ? cq : NULL;
  hp.cu_seqlens_k = varlen ? ck : NULL;
  WS_OK_OR_DIE(ws_attn_reference(&hp, ro, rl));
  fails += !compare(c->name, "", ho, ro, no, c->dv, hl, rl, Tq * c->hq, (size_t)c->hq, 128);
  free(ro);
  free(rl);
  td_qkv_free(&t);
  if (dcq) cudaFree(dcq);
  if (dck) cudaFree(dck);
  free(ho); free(hl); free(cq); free(ck);
  return fails;
}

/* A NaN in a key reaches the output of the queries that attend to it, as in the float64
 * reference (the epilogue told an empty row by l > 0, so a NaN row sum gave o = NaN x 0
 * and lse = -inf until session 22). One value of key `key` of head 0 is NaN, no mask: every
 * output of head 0 must be NaN; head 1 matches the reference as usual. */
static int check_flash_nan_at(int D, int key) {
  const int S = 192, H = 2; /* two key tiles: the NaN row sum is rescaled once */
  const size_t n = (size_t)S * H * D, rows = (size_t)S * H, bad = ((size_t)key * H + 0) * D + 3; /* head 0, dim 3 */
  uint16_t *ho = (uint16_t *)host_alloc(n, 2, 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  td_qkv t; /* random q, k, v, uploaded (testdata/attention.h), then the one NaN in both copies of k */
  CUDA_OK(td_qkv_make(&t, &rng_state, n, n, n, n, rows));
  const uint16_t nan_bf16 = 0x7FC0u;
  t.hk[bad] = nan_bf16;
  CUDA_OK(cudaMemcpy((uint16_t *)t.dk + bad, &nan_bf16, 2, cudaMemcpyHostToDevice));
  ws_attn_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 1; p.seqlen_q = S; p.seqlen_k = S; p.total_q = S; p.total_k = S;
  p.heads_q = H; p.heads_kv = H; p.dim_qk = D; p.dim_v = D; p.mask = WS_ATTN_NO_MASK;
  p.q = t.dq; p.k = t.dk; p.v = t.dv; p.o = t.dout; p.lse = t.dl;
  flash_on_gpu(&p, &t, 0, n, rows, ho, hl); /* zeros: an output left unwritten is not NaN */
  double *ro = (double *)host_alloc(n, sizeof(double), 0), *rl = (double *)host_alloc(rows, sizeof(double), 0);
  ws_attn_problem hp = p;
  hp.q = t.hq; hp.k = t.hk; hp.v = t.hv; hp.o = ho; hp.lse = NULL;
  WS_OK_OR_DIE(ws_attn_reference(&hp, ro, rl));
  size_t got_finite = 0, ref_finite = 0, bad1 = 0;
  double err1 = 0.0, ref1 = 0.0;
  for (size_t r = 0; r < (size_t)S; r++)
    for (size_t d = 0; d < (size_t)D; d++) {
      const size_t i0 = (r * H + 0) * D + d, i1 = (r * H + 1) * D + d;
      got_finite += !isnan(float_of(ho[i0]));
      ref_finite += !isnan(ro[i0]);
      const double g = float_of(ho[i1]);
      bad1 += !isfinite(g);
      err1 = fmax(err1, fabs(g - ro[i1]));
      ref1 = fmax(ref1, fabs(ro[i1]));
    }
  size_t lse_finite = 0;
  for (size_t r = 0; r < (size_t)S; r++) lse_finite += !isnan(hl[r]); /* flash lse is [heads_q][tokens_q]: head 0 first */
  const int fails = got_finite != 0 || ref_finite != 0 || lse_finite != 0 || bad1 != 0 || err1 > 2e-2 * ref1;
  printf("flash d%d, a NaN in key %d: head 0 %zu of %d outputs and %zu lse not NaN (reference: %zu); head 1: %zu not "
         "finite, max abs error %.2e of %.2e: %s\n", D, key, got_finite, S * D, lse_finite, ref_finite, bad1, err1, ref1,
         fails ? "FAILED" : "ok");
  td_qkv_free(&t);
  free(ho); free(hl); free(ro); free(rl);
  return fails;
}
static int check_flash_nan(void) { return check_flash_nan_at(128, 5); }

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

/* WARPSPEC_ATTN_SCHEDULE's values: the tests run each */
static const char *const flash_scheds[4] = {"plain", "pingpong", "overlap", "overlap-pingpong"};
/* the flash grids (WARPSPEC_ATTN_GRID): one CTA per SM walking the tiles, one CTA per tile */
static const char *const flash_grids[2] = {"persistent", "tiles"};

/* The case tables. Ragged batches: */
static const int flash_vq[] = {1, 200, 77, 130}, flash_vk[] = {5, 300, 77, 129};
static const int flash_wq[] = {256, 1, 513}, flash_wk[] = {256, 64, 513};
/* 40 sequences of 1 .. 383 queries (keys: 7 to 40 more, or fewer): with 8 heads, 960
 * tiles of which about half lie past their sequence's end and are skipped, so every CTA
 * of the persistent grid runs several tiles and the loader's and math's tile walks must
 * stay in step over skipped ones */
static int flash_xq[40], flash_xk[40];
static void flash_ragged_lengths(void) {
  for (int i = 0; i < 40; i++) {
    flash_xq[i] = 1 + (i * 97 + 31) % 383;
    flash_xk[i] = i % 5 == 0 ? (flash_xq[i] + 1) / 2 : flash_xq[i] + 7 * (i % 6);
  }
}
static const attn_case flash_quick[] = {
    {"1 x 1, d64", 1, 1, 1, 1, 1, 64, 64, WS_ATTN_NO_MASK, NULL, NULL},
    {"17 x 17, d128, causal", 1, 17, 17, 2, 1, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
    {"2 x 128, GQA 4/2, d128", 2, 128, 128, 4, 2, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
    {"333 x 1000, MQA 4/1, d128, causal BR", 1, 333, 1000, 4, 1, 128, 128, WS_ATTN_CAUSAL_BOTTOM_RIGHT, NULL, NULL},
    {"1000 x 333, d64, causal BR (empty rows)", 1, 1000, 333, 2, 2, 64, 64, WS_ATTN_CAUSAL_BOTTOM_RIGHT, NULL, NULL},
    {"300 x 500, d192/128", 1, 300, 500, 2, 1, 192, 128, WS_ATTN_NO_MASK, NULL, NULL},
    {"varlen 4 seqs, GQA 4/2, d128", 4, 0, 0, 4, 2, 128, 128, WS_ATTN_NO_MASK, flash_vq, flash_vk},
    {"varlen 4 seqs, d64, causal BR", 4, 0, 0, 2, 1, 64, 64, WS_ATTN_CAUSAL_BOTTOM_RIGHT, flash_vq, flash_vk},
    {"varlen 3 seqs, d128, causal TL", 3, 0, 0, 2, 2, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, flash_wq, flash_wk},
    {"varlen 40 seqs, GQA 8/2, d128, causal BR (960 tiles)", 40, 0, 0, 8, 2, 128, 128, WS_ATTN_CAUSAL_BOTTOM_RIGHT, flash_xq, flash_xk},
    {"4 x 512, H 32, d64, causal (512 tiles)", 4, 512, 512, 32, 32, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
};
static const attn_case flash_full[] = {
    {"1000 x 1000, d64, causal", 1, 1000, 1000, 2, 2, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
    {"4096 x 4096, d128", 1, 4096, 4096, 1, 1, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
    {"4096 x 4096, d128, causal", 1, 4096, 4096, 2, 1, 128, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
    {"8192 x 8192, d64, causal", 1, 8192, 8192, 1, 1, 64, 64, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
    {"2048 x 2048, d192/128, causal", 1, 2048, 2048, 2, 2, 192, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
    {"2 x 640, H 40, d128 (400 tiles)", 2, 640, 640, 40, 40, 128, 128, WS_ATTN_NO_MASK, NULL, NULL},
    {"3 x 600, H 16/4, d192/128, causal (240 tiles)", 3, 600, 600, 16, 4, 192, 128, WS_ATTN_CAUSAL_TOP_LEFT, NULL, NULL},
};

#endif
