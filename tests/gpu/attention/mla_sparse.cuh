/* mla_sparse.cuh - test_attention: sparse MLA prefill (ws_mla_sparse_forward) against
 * ws_mla_sparse_reference: heads 64 and 128, topk 128 / 512 / 2048 (and one not a
 * multiple of 64), s_kv from topk to 131072, indices with -1, duplicates and values out
 * of range (masked), a query whose every index is masked (o = 0, lse = -inf), and
 * scores that rise along the list, so that the running maximum moves in late blocks and
 * in one warpgroup's half of a block only (the kernels' lazy rescale, mla_math.cuh; with
 * uniform data it moves in the first block only). */
#ifndef WARPSPEC_TEST_ATTN_MLA_SPARSE_CUH
#define WARPSPEC_TEST_ATTN_MLA_SPARSE_CUH

#include "attn_common.cuh"

typedef struct {
  const char *name;
  int s_q, heads, s_kv, topk, holes; /* holes: put -1, duplicates and out-of-range ids in */
  int ramp; /* > 0: kv row r scaled by 2^(ramp r / s_kv) (exact in BF16), each list sorted */
} mla_case;

/* x 2^k, exact for a normal BF16 value (zero stays zero) */
static uint16_t bf16_times_pow2(uint16_t b, int k) { return (b & 0x7F80u) ? (uint16_t)(b + (k << 7)) : b; }
static int cmp_int(const void *a, const void *b) { return (*(const int *)a > *(const int *)b) - (*(const int *)a < *(const int *)b); }

static int run_mla(const mla_case *c) {
  const int DQ = 576, DV = 512;
  const size_t nq = (size_t)c->s_q * c->heads * DQ, nkv = (size_t)c->s_kv * DQ, no = (size_t)c->s_q * c->heads * DV;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0), *ho = (uint16_t *)host_alloc(no, 2, 0);
  int *hi = (int *)host_alloc((size_t)c->s_q * c->topk, sizeof(int), 0);
  float *hl = (float *)host_alloc((size_t)c->s_q * c->heads, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  td_mla_indices(&rng_state, hi, c->s_q, c->topk, c->s_kv, c->holes); /* the benchmark draws these, without holes */
  if (c->ramp > 0) {
    for (int r = 0; r < c->s_kv; r++)
      for (int j = 0; j < DQ; j++) hkv[(size_t)r * DQ + j] = bf16_times_pow2(hkv[(size_t)r * DQ + j], (int)((long long)c->ramp * r / c->s_kv));
    for (int t = 0; t < c->s_q; t++) qsort(hi + (size_t)t * c->topk, (size_t)c->topk, sizeof(int), cmp_int);
  }
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
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(di); cudaFree(dl);
  free(hq); free(hkv); free(ho); free(hi); free(hl);
  return fails;
}

static const mla_case mla_quick[] = {
    {"mla 1 token, H64, topk 128", 1, 64, 128, 128, 0, 0},
    {"mla 5 tokens, H128, topk 512, holes", 5, 128, 4096, 512, 1, 0},
    {"mla 3 tokens, H64, topk 100, holes", 3, 64, 300, 100, 1, 0},
    {"mla 7 tokens, H32, topk 200, holes (padding rows)", 7, 32, 1000, 200, 1, 0},
    {"mla 3 tokens, H128, topk 1024, rising scores", 3, 128, 4096, 1024, 0, 6},
};
static const mla_case mla_full[] = {
    {"mla 17 tokens, H64, topk 512, s_kv 131072", 17, 64, 131072, 512, 1, 0},
    {"mla 4 tokens, H128, topk 2048, s_kv 2048", 4, 128, 2048, 2048, 0, 0},
    {"mla 64 tokens, H128, topk 128, holes", 64, 128, 8192, 128, 1, 0},
};

#endif
