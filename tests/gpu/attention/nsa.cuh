/* nsa.cuh - test_attention: NSA selected-block attention (ws_nsa_forward) against
 * ws_nsa_reference: blocks of 64 tokens, GQA groups of 16 and 32, head dims 128 and
 * 192/128, selections shared by a block's tokens (as NSA's neighbours mostly are) or
 * drawn per token with -1, past-the-end, future and duplicate entries (all masked or
 * counted as the reference does). */
#ifndef WARPSPEC_TEST_ATTN_NSA_CUH
#define WARPSPEC_TEST_ATTN_NSA_CUH

#include "attn_common.cuh"

typedef struct {
  const char *name;
  int tokens, heads_q, heads_kv, dim_qk, dim_v, topn;
  int shared; /* 1: the tokens of each 64-token block share one selection (as NSA's
               * neighbours mostly do); 0: every token its own random one, with -1,
               * out-of-range and future blocks and duplicates */
} nsa_case;

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

static int run_nsa(const nsa_case *c) {
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
  cudaFree(dq); cudaFree(dk); cudaFree(dv); cudaFree(dout); cudaFree(dl); cudaFree(ds);
  free(hq); free(hk); free(hv); free(ho); free(hl); free(hs);
  return fails;
}

static const nsa_case nsa_quick[] = {
    {"nsa T 300 Hq 32 Hkv 2 d128 topn 6", 300, 32, 2, 128, 128, 6, 0},
    {"nsa T 257 Hq 16 Hkv 1 d128 topn 5", 257, 16, 1, 128, 128, 5, 0},
    {"nsa T 1000 Hq 32 Hkv 2 d192/128 topn 8 shared", 1000, 32, 2, 192, 128, 8, 1},
};
static const nsa_case nsa_full[] = {
    {"nsa T 1024 Hq 64 Hkv 4 d128 topn 16", 1024, 64, 4, 128, 128, 16, 0},
    {"nsa T 2000 Hq 16 Hkv 1 d128 topn 16 shared", 2000, 16, 1, 128, 128, 16, 1},
    {"nsa T 700 Hq 64 Hkv 2 d128 topn 12 (group 32)", 700, 64, 2, 128, 128, 12, 0},
};

#endif
