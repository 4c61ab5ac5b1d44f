/* attention.h - the attention data the GPU tests (tests/gpu/attention/) and the kernel
 * benchmarks (bench/bench_attn_kernels.cu) both make, written once so that a benchmark
 * row times the same kind of case the test checks, drawn the same way. Each generator
 * takes the caller's stream (random.h): the same state gives the same data. Errors are
 * returned, never exit: the tests exit on them (CUDA_OK), the benchmarks return -1 (CK).
 *   td_qkv_make     q, k, v drawn and uploaded, room for o and the lse (flash, NSA)
 *   td_nsa_select   NSA block selections (nsa_case, the case type of both tables)
 *   td_mla_indices  sparse MLA prefill's top-k key ids
 *   td_mla_decode_indices  sparse MLA decode's top-k cache rows
 *   td_mla_pages    MLA decode's sequence lengths and shuffled page table */
#ifndef WARPSPEC_TESTDATA_ATTENTION_H
#define WARPSPEC_TESTDATA_ATTENTION_H

#include <stdlib.h>

#include <cuda_runtime_api.h>

#include "random.h"

/* q, k and v: nq, nk, nv BF16 values uniform in [-1, 1], drawn in that order, kept on the
 * host (a reference reads them) and uploaded; o (no BF16 values) and the lse (nl floats)
 * allocated on the device, not written. cudaSuccess or the first error; td_qkv_free
 * frees whatever was made, either way. */
typedef struct {
  uint16_t *hq, *hk, *hv;
  void *dq, *dk, *dv, *dout;
  float *dl;
} td_qkv;

static inline cudaError_t td_qkv_make(td_qkv *t, uint64_t *state, size_t nq, size_t nk, size_t nv, size_t no, size_t nl) {
  memset(t, 0, sizeof *t);
  t->hq = (uint16_t *)calloc(nq, 2);
  t->hk = (uint16_t *)calloc(nk, 2);
  t->hv = (uint16_t *)calloc(nv, 2);
  if (!t->hq || !t->hk || !t->hv) return cudaErrorMemoryAllocation;
  td_fill_uniform(state, t->hq, nq, 1.0f);
  td_fill_uniform(state, t->hk, nk, 1.0f);
  td_fill_uniform(state, t->hv, nv, 1.0f);
  cudaError_t e;
  if ((e = cudaMalloc(&t->dq, nq * 2)) != cudaSuccess || (e = cudaMalloc(&t->dk, nk * 2)) != cudaSuccess ||
      (e = cudaMalloc(&t->dv, nv * 2)) != cudaSuccess || (e = cudaMalloc(&t->dout, no * 2)) != cudaSuccess ||
      (e = cudaMalloc((void **)&t->dl, nl * sizeof(float))) != cudaSuccess)
    return e;
  if ((e = cudaMemcpy(t->dq, t->hq, nq * 2, cudaMemcpyHostToDevice)) != cudaSuccess ||
      (e = cudaMemcpy(t->dk, t->hk, nk * 2, cudaMemcpyHostToDevice)) != cudaSuccess)
    return e;
  return cudaMemcpy(t->dv, t->hv, nv * 2, cudaMemcpyHostToDevice);
}

static inline void td_qkv_free(td_qkv *t) {
  cudaFree(t->dq); cudaFree(t->dk); cudaFree(t->dv); cudaFree(t->dout); cudaFree(t->dl);
  free(t->hq); free(t->hk); free(t->hv);
  memset(t, 0, sizeof *t);
}

typedef struct {
  const char *name;
  int tokens, heads_q, heads_kv, dim_qk, dim_v, topn;
  int shared; /* 1: the tokens of each 64-token block share one selection (as NSA's
               * neighbours mostly do); 0: every token its own random one, with -1,
               * out-of-range and future blocks and duplicates */
} nsa_case;

/* sel [tokens][heads_kv][topn], blocks of 64 tokens: always the first block and the
 * token's own (last) one, then random earlier ones; unshared ones also get -1,
 * past-the-end and future entries. */
static inline void td_nsa_select(uint64_t *state, const nsa_case *c, int *sel) {
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
        const uint32_t r = td_rng_u32(state);
        if (n == 0) e[n] = 0;
        else if (n == 1) e[n] = own;
        else if (c->shared || r % 8 < 5) e[n] = (int)(td_rng_u32(state) % (uint32_t)(own + 1)); /* earlier (duplicates happen) */
        else if (r % 8 == 5) e[n] = -1;
        else if (r % 8 == 6) e[n] = nb + (int)(td_rng_u32(state) % 3u); /* past the end */
        else e[n] = (int)(td_rng_u32(state) % (uint32_t)nb);             /* any, possibly in the future */
      }
    }
}

/* idx [s_q][topk]: key ids uniform in 0 .. s_kv-1. With `holes`, also -1, ids past s_kv
 * and repeats of the previous id (all masked or counted as the reference does), and a
 * last query (s_q > 1) whose every id is masked (o = 0, lse = -inf). */
static inline void td_mla_indices(uint64_t *state, int *idx, int s_q, int topk, int s_kv, int holes) {
  for (int i = 0; i < s_q; i++)
    for (int j = 0; j < topk; j++) {
      int r = (int)(td_rng_u32(state) % (uint32_t)s_kv);
      if (holes) {
        const uint32_t u = td_rng_u32(state) % 16;
        if (u == 0) r = -1;
        else if (u == 1) r = s_kv + (int)(td_rng_u32(state) % 1000); /* out of range: masked */
        else if (u == 2 && j > 0) r = idx[(size_t)i * topk + j - 1];  /* a duplicate */
      }
      idx[(size_t)i * topk + j] = r;
    }
  if (holes && s_q > 1)
    for (int j = 0; j < topk; j++) idx[(size_t)(s_q - 1) * topk + j] = j % 2 ? -1 : s_kv;
}

/* idx [tokens][topk] for sparse MLA decode: flat cache rows uniform in 0 .. rows - 1.
 * With `holes`, also -1 (masked) and repeats of the previous entry (counted twice), never
 * a value out of range (a caller's error there: attention.h), and a last token (tokens >
 * 1) whose every entry is -1 (o = 0, lse = -inf). */
static inline void td_mla_decode_indices(uint64_t *state, int *idx, int tokens, int topk, int rows, int holes) {
  for (int i = 0; i < tokens; i++)
    for (int j = 0; j < topk; j++) {
      int r = (int)(td_rng_u32(state) % (uint32_t)rows);
      if (holes) {
        const uint32_t u = td_rng_u32(state) % 16;
        if (u == 0) r = -1;
        else if (u <= 2 && j > 0) r = idx[(size_t)i * topk + j - 1]; /* a duplicate */
      }
      idx[(size_t)i * topk + j] = r;
    }
  if (holes && tokens > 1)
    for (int j = 0; j < topk; j++) idx[(size_t)(tokens - 1) * topk + j] = -1;
}

/* MLA decode's paged cache: lens [batch], every one max_len if `fixed`, else the first
 * max_len and the others drawn in 0 .. max_len; the pages they fill plus 3 that none
 * does, shuffled as a cache's are after a while; table [batch][ceil(max_len / page)]:
 * each sequence's pages in order, -1 past its last. The page count, or -1 out of memory. */
static inline int td_mla_pages(uint64_t *state, int batch, int max_len, int fixed, int page, int *lens, int *table) {
  const int maxp = (max_len + page - 1) / page;
  for (int b = 0; b < batch; b++) lens[b] = fixed || b == 0 ? max_len : (int)(td_rng_u32(state) % (uint32_t)(max_len + 1));
  int pages = 3;
  for (int b = 0; b < batch; b++) pages += (lens[b] + page - 1) / page;
  int *perm = (int *)malloc((size_t)pages * sizeof(int));
  if (!perm) return -1;
  for (int i = 0; i < pages; i++) perm[i] = i;
  for (int i = pages - 1; i > 0; i--) {
    const int j = (int)(td_rng_u32(state) % (uint32_t)(i + 1)), t = perm[i];
    perm[i] = perm[j];
    perm[j] = t;
  }
  int next = 0;
  for (int b = 0; b < batch; b++)
    for (int g = 0; g < maxp; g++) table[(size_t)b * maxp + g] = g < (lens[b] + page - 1) / page ? perm[next++] : -1;
  free(perm);
  return pages;
}

#endif
