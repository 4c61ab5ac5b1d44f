/* nsa.cuh - test_attention: NSA selected-block attention (ws_nsa_forward) against
 * ws_nsa_reference: blocks of 64 tokens, GQA groups of 16 and 32, head dims 128 and
 * 192/128, selections shared by a block's tokens (as NSA's neighbours mostly are) or
 * drawn per token with -1, past-the-end, future and duplicate entries (all masked or
 * counted as the reference does). */
#ifndef WARPSPEC_TEST_ATTN_NSA_CUH
#define WARPSPEC_TEST_ATTN_NSA_CUH

#include "attn_common.cuh"

/* The case (nsa_case) and its selections (td_nsa_select) are testdata/attention.h's:
 * `warpspec bench attn-kernels --only nsa` draws its selections the same way. */
static int run_nsa(const nsa_case *c) {
  const size_t nq = (size_t)c->tokens * c->heads_q * c->dim_qk, nk = (size_t)c->tokens * c->heads_kv * c->dim_qk,
               nv = (size_t)c->tokens * c->heads_kv * c->dim_v, no = (size_t)c->tokens * c->heads_q * c->dim_v,
               rows = (size_t)c->tokens * c->heads_q, nsel = (size_t)c->tokens * c->heads_kv * c->topn;
  uint16_t *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  int *hs = (int *)host_alloc(nsel, sizeof(int), 0);
  td_qkv t;
  CUDA_OK(td_qkv_make(&t, &rng_state, nq, nk, nv, no, rows));
  td_nsa_select(&rng_state, c, hs);
  int *ds;
  CUDA_OK(cudaMalloc((void **)&ds, nsel * sizeof(int)));
  CUDA_OK(cudaMemcpy(ds, hs, nsel * sizeof(int), cudaMemcpyHostToDevice));
  ws_nsa_problem p;
  memset(&p, 0, sizeof p);
  p.tokens = c->tokens; p.heads_q = c->heads_q; p.heads_kv = c->heads_kv; p.dim_qk = c->dim_qk; p.dim_v = c->dim_v;
  p.block = 64; p.topn = c->topn;
  p.q = t.dq; p.k = t.dk; p.v = t.dv; p.block_indices = ds; p.o = t.dout; p.lse = t.dl;
  int fails = 0;
  CUDA_OK(cudaMemset(t.dout, 0xFF, no * 2));
  CUDA_OK(cudaMemset(t.dl, 0xFF, rows * sizeof(float)));
  WS_OK_OR_DIE(ws_nsa_forward(&p, 0));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(ho, t.dout, no * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hl, t.dl, rows * sizeof(float), cudaMemcpyDeviceToHost));
  double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc(rows, sizeof(double), 0);
  ws_nsa_problem hp = p;
  hp.q = t.hq; hp.k = t.hk; hp.v = t.hv; hp.block_indices = hs; hp.o = ho; hp.lse = NULL;
  WS_OK_OR_DIE(ws_nsa_reference(&hp, ro, rl));
  fails += !compare(c->name, "", ho, ro, no, c->dim_v, hl, rl, rows, 1, 16);
  free(ro);
  free(rl);
  td_qkv_free(&t);
  cudaFree(ds);
  free(ho); free(hl); free(hs);
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
