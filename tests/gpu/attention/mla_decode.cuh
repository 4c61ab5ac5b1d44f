/* mla_decode.cuh - test_attention: MLA decode (ws_mla_decode_forward) against
 * ws_mla_decode_reference: shuffled page tables, mixed lengths with empty sequences, s_q
 * 1 and 2 (causal), single- and split-KV launches (workspace poisoned too), the BF16 and
 * the FP8 cache (rows quantised on the host), batch 128 checked on a sample of sequences
 * and heads; and a page id past the cache, which must be masked as -1 is, not wrap onto
 * a cached row; and magnitudes far apart (q of 1e-6 .. 1e5 by head, cache blocks jumping by
 * 2^12: the FP8 few-head kernel's f16 operands and their powers of two). Run under every MLA
 * schedule. */
#ifndef WARPSPEC_TEST_ATTN_MLA_DECODE_CUH
#define WARPSPEC_TEST_ATTN_MLA_DECODE_CUH

#include "attn_common.cuh"

typedef struct {
  const char *name;
  int batch, s_q, heads, max_len; /* lens: random 0 .. max_len (the first = max_len) unless `fixed` */
  int fixed;
  int fp8;                        /* the FP8 cache (kv_fp8): rows quantised on the host */
  int page;                       /* rows per page; 0: 64 (FlashMLA's) */
  int wild;                       /* magnitudes far apart: heads of |q| 1e-6 .. 1e5, cache
                                   * blocks whose largest values move by 2^12 (page = 64) */
} dec_case;

/* Run a decode problem whose q, cache, page table and lengths are in host memory (its o
 * and lse are not used): upload them, fill o, lse and the workspace with byte `fill` (0xFF:
 * NaN, so that anything left unwritten shows; 0: not NaN), run ws_mla_decode_forward and
 * copy o and lse back into ho and hl. Returns the workspace bytes. */
static size_t decode_on_gpu(const ws_mla_decode_problem *hp, int fill, uint16_t *ho, float *hl) {
  const size_t rows = (size_t)hp->batch * hp->s_q * hp->heads, nq = rows * hp->dim_qk, no = rows * hp->dim_v;
  const size_t kv_rows = (size_t)hp->num_pages * hp->page_size;
  const size_t kv_bytes = hp->kv_fp8 ? kv_rows * WS_MLA_FP8_ROW_BYTES : kv_rows * hp->dim_qk * 2;
  const size_t ntab = (size_t)hp->batch * hp->max_pages;
  void *dq, *dkv, *dout, *ws = NULL;
  int *dt, *dlen;
  float *dl;
  CUDA_OK(cudaMalloc(&dq, nq * 2));
  CUDA_OK(cudaMalloc(&dkv, kv_bytes));
  CUDA_OK(cudaMalloc(&dout, no * 2));
  CUDA_OK(cudaMalloc((void **)&dl, rows * sizeof(float)));
  CUDA_OK(cudaMalloc((void **)&dt, ntab * sizeof(int)));
  CUDA_OK(cudaMalloc((void **)&dlen, (size_t)hp->batch * sizeof(int)));
  CUDA_OK(cudaMemcpy(dq, hp->q, nq * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dkv, hp->kv_cache, kv_bytes, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dt, hp->block_table, ntab * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dlen, hp->seqlens, (size_t)hp->batch * sizeof(int), cudaMemcpyHostToDevice));
  ws_mla_decode_problem p = *hp;
  p.q = dq; p.kv_cache = dkv; p.block_table = dt; p.seqlens = dlen; p.o = dout; p.lse = dl;
  size_t wsb = 0;
  WS_OK_OR_DIE(ws_mla_decode_workspace_size(&p, &wsb));
  if (wsb) CUDA_OK(cudaMalloc(&ws, wsb));
  CUDA_OK(cudaMemset(dout, fill, no * 2));
  CUDA_OK(cudaMemset(dl, fill, rows * sizeof(float)));
  if (ws) CUDA_OK(cudaMemset(ws, fill, wsb));
  WS_OK_OR_DIE(ws_mla_decode_forward(&p, ws, wsb, 0));
  CUDA_OK(cudaGetLastError());
  CUDA_OK(cudaDeviceSynchronize());
  CUDA_OK(cudaMemcpy(ho, dout, no * 2, cudaMemcpyDeviceToHost));
  CUDA_OK(cudaMemcpy(hl, dl, rows * sizeof(float), cudaMemcpyDeviceToHost));
  cudaFree(dq); cudaFree(dkv); cudaFree(dout); cudaFree(dl); cudaFree(dt); cudaFree(dlen);
  if (ws) cudaFree(ws);
  return wsb;
}

static int run_decode(const dec_case *c) {
  const int DQ = 576, DV = 512, P = c->page ? c->page : 64;
  const int maxp = (c->max_len + P - 1) / P;
  int *lens = (int *)host_alloc((size_t)c->batch, sizeof(int), 0);
  int *table = (int *)host_alloc((size_t)c->batch * maxp, sizeof(int), 0);
  /* lengths and shuffled pages (testdata/attention.h): the benchmark's layout when fixed */
  const int pages = td_mla_pages(&rng_state, c->batch, c->max_len, c->fixed, P, lens, table);
  REQUIRE(pages > 0);
  const size_t rows = (size_t)c->batch * c->s_q * c->heads, nq = rows * DQ, nkv = (size_t)pages * P * DQ, no = rows * DV;
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0), *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  const size_t kv_rows = (size_t)pages * P, kv_bytes = c->fp8 ? kv_rows * WS_MLA_FP8_ROW_BYTES : nkv * 2;
  if (c->wild) {
    /* q past f16's range and far under its normal one (the FP8 few-head kernel's f16 Q
     * takes a power of two per head), and 64-key blocks (pages) whose values jump by 2^12
     * (its P^T's power of two, kept lazily, must move with them) */
    static const float qamp[5] = {1e-6f, 1e-2f, 1.0f, 300.0f, 1e5f};
    for (size_t r = 0; r < rows; r++) fill_uniform(hq + r * DQ, DQ, qamp[(r % (size_t)c->heads) % 5]);
    for (size_t r = 0; r < kv_rows; r++) fill_uniform(hkv + r * DQ, DQ, (r / 64) % 3 == 0 ? 8.0f : (r / 64) % 3 == 1 ? 8.0f / 4096 : 512.0f);
  }
  uint8_t *hkv8 = NULL;
  if (c->fp8) { /* rows of several magnitudes, so that the tile scales differ */
    for (size_t r = 0; r < kv_rows && !c->wild; r += 5) fill_uniform(hkv + r * DQ, DQ, r % 3 ? 8.0f : 0.01f);
    hkv8 = (uint8_t *)host_alloc(kv_bytes, 1, 0);
    WS_OK_OR_DIE(ws_mla_kv_quantize_fp8_host(hkv, kv_rows, hkv8));
  }
  ws_mla_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = c->batch; p.s_q = c->s_q; p.heads = c->heads; p.dim_qk = DQ; p.dim_v = DV; p.page_size = P;
  p.num_pages = pages; p.max_pages = maxp; p.max_seqlen = c->max_len;
  p.q = hq; p.kv_cache = c->fp8 ? (const void *)hkv8 : (const void *)hkv; p.block_table = table; p.seqlens = lens;
  p.kv_fp8 = c->fp8;
  const size_t wsb = decode_on_gpu(&p, 0xFF, ho, hl);
  int fails = 0;
  /* a large batch: the float64 reference on 4 of its sequences (the first, the longest;
   * the middle one, the last, one at random) and 16 of their heads (one in heads / 16,
   * at a different offset in each group), the kernel's rows of those gathered */
  const int big = c->batch > 32, sub_h = big && c->heads > 16 ? 16 : c->heads, stride = c->heads / sub_h;
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
          const size_t from = ((size_t)b * c->s_q + t) * c->heads + stride * j + j % stride, to = ((size_t)i * c->s_q + t) * sub_h + j;
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
  free(lens); free(table); free(hq); free(hkv); free(hkv8); free(ho); free(hl);
  return fails;
}

/* A NaN in the cache reaches the output, as users find NaNs by seeing them: one latent
 * value of one cached row is NaN (for the FP8 cache set before quantising: the quantiser
 * writes 0x7F, and the gather's conversion must give NaN, not +-480 x scale). Empty rows
 * are told by a row sum of exactly 0, so a NaN sum is not mistaken for one (attn_store_row,
 * the split merge).
 * Sequence 0 attends to that row: every value of its output rows (all heads) must be NaN,
 * as the reference's are; sequence 1 does not: its rows are checked as usual. */
static int check_decode_nan(int fp8) {
  const int DQ = 576, DV = 512, P = 64, H = 64, B = 2, len = 1000, maxp = (len + P - 1) / P, pages = B * maxp;
  const size_t rows = (size_t)B * H, nq = rows * DQ, kv_rows = (size_t)pages * P, nkv = kv_rows * DQ, no = rows * DV;
  const size_t kv_bytes = fp8 ? kv_rows * WS_MLA_FP8_ROW_BYTES : nkv * 2;
  int lens[2] = {len, len}, *table = (int *)host_alloc((size_t)pages, sizeof(int), 0);
  for (int i = 0; i < pages; i++) table[i] = pages - 1 - i; /* sequence b: pages of the other end */
  uint16_t *hq = (uint16_t *)host_alloc(nq, 2, 0), *hkv = (uint16_t *)host_alloc(nkv, 2, 0), *ho = (uint16_t *)host_alloc(no, 2, 0);
  float *hl = (float *)host_alloc(rows, sizeof(float), 0);
  fill_uniform(hq, nq, 1.0f);
  fill_uniform(hkv, nkv, 1.0f);
  const size_t nan_row = (size_t)table[5] * P + 17; /* key 337 of sequence 0 */
  hkv[nan_row * DQ + 300] = 0x7FC0u;                /* latent dim 300: tile 2, K and V */
  uint8_t *hkv8 = NULL;
  int fails = 0;
  if (fp8) {
    hkv8 = (uint8_t *)host_alloc(kv_bytes, 1, 0);
    WS_OK_OR_DIE(ws_mla_kv_quantize_fp8_host(hkv, kv_rows, hkv8));
    fails += hkv8[nan_row * WS_MLA_FP8_ROW_BYTES + 300] != 0x7F;
  }
  ws_mla_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B; p.s_q = 1; p.heads = H; p.dim_qk = DQ; p.dim_v = DV; p.page_size = P;
  p.num_pages = pages; p.max_pages = maxp; p.max_seqlen = len;
  p.q = hq; p.kv_cache = fp8 ? (const void *)hkv8 : (const void *)hkv; p.block_table = table; p.seqlens = lens;
  p.kv_fp8 = fp8;
  decode_on_gpu(&p, 0, ho, hl); /* zeros: an output left unwritten is not NaN */
  double *ro = (double *)host_alloc(no, sizeof(double), 0), *rl = (double *)host_alloc(rows, sizeof(double), 0);
  p.o = ho; /* the reference writes ro and rl; o is only checked non-NULL */
  WS_OK_OR_DIE(ws_mla_decode_reference(&p, ro, rl));
  size_t got_finite = 0, ref_finite = 0; /* sequence 0: rows 0 .. H - 1 */
  for (size_t i = 0; i < (size_t)H * DV; i++) {
    got_finite += !isnan(float_of(ho[i]));
    ref_finite += !isnan(ro[i]);
  }
  fails += got_finite != 0 || ref_finite != 0;
  printf("decode %s, a NaN in an attended row: %zu of %d output values not NaN (reference: %zu): %s\n",
         fp8 ? "fp8" : "bf16", got_finite, H * DV, ref_finite, got_finite || ref_finite ? "FAILED" : "ok");
  /* sequence 1 never sees that row */
  fails += !compare(fp8 ? "decode fp8, the sequence without the NaN" : "decode bf16, the sequence without the NaN",
                    "", ho + (size_t)H * DV, ro + (size_t)H * DV, (size_t)H * DV, DV, hl + H, rl + H, H, 1, 64);
  free(table); free(hq); free(hkv); free(hkv8); free(ho); free(hl); free(ro); free(rl);
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

static const dec_case dec_quick[] = {
    {"decode B1 s_q1 H128 len 4000 (split)", 1, 1, 128, 4000, 1, 0, 0, 0},
    {"decode B6 s_q2 H64 lens 0..2000", 6, 2, 64, 2000, 0, 0, 0, 0},
    {"decode fp8 B1 s_q1 H128 len 4000 (split)", 1, 1, 128, 4000, 1, 1, 0, 0},
    {"decode fp8 B6 s_q2 H64 lens 0..2000", 6, 2, 64, 2000, 0, 1, 0, 0},
    /* fewer heads than a CTA's 64 rows (tensor-parallel shards): padding rows never stored */
    {"decode B5 s_q1 H16 lens 0..3000", 5, 1, 16, 3000, 0, 0, 0, 0},
    {"decode B1 s_q2 H32 len 5000 (split)", 1, 2, 32, 5000, 1, 0, 0, 0},
    {"decode fp8 B3 s_q2 H16 lens 0..2000", 3, 2, 16, 2000, 0, 1, 0, 0},
    /* a sequence's s_q tokens sharing a tile, each row at its own causal limit */
    {"decode B4 s_q4 H16 lens 0..3000", 4, 4, 16, 3000, 0, 0, 0, 0},
    {"decode B2 s_q3 H32 len 6000 (split, 2 tiles)", 2, 3, 32, 6000, 1, 0, 0, 0},
    {"decode fp8 B3 s_q4 H8 lens 0..1500", 3, 4, 8, 1500, 0, 1, 0, 0},
    /* other page sizes: a 64-key block at offsets 0, 64, .. of a page, and pages smaller
     * than a block (rows of several pages) */
    {"decode B3 s_q1 H64 lens 0..3000, pages of 128", 3, 1, 64, 3000, 0, 0, 128, 0},
    {"decode B2 s_q2 H16 len 4000 (split), pages of 256", 2, 2, 16, 4000, 1, 0, 256, 0},
    {"decode B2 s_q1 H128 lens 0..1000, pages of 16", 2, 1, 128, 1000, 0, 0, 16, 0},
    {"decode fp8 B2 s_q1 H64 lens 0..2000, pages of 128", 2, 1, 64, 2000, 0, 1, 128, 0},
    /* 16 heads without a split (more CTAs than SMs: O written as BF16 by the kernel) and
     * with pages smaller than a block */
    {"decode B140 s_q1 H16 lens 0..600", 140, 1, 16, 600, 0, 0, 0, 0},
    {"decode B4 s_q1 H16 lens 0..2500, pages of 16", 4, 1, 16, 2500, 0, 0, 16, 0},
    {"decode fp8 B5 s_q1 H16 lens 0..3000", 5, 1, 16, 3000, 0, 1, 0, 0},
    /* the FP8 16-column form's four raw stages: many CTAs without a split, pages smaller
     * than a block, and a long split sequence whose blocks wrap the ring many times */
    {"decode fp8 B140 s_q1 H16 lens 0..600", 140, 1, 16, 600, 0, 1, 0, 0},
    {"decode fp8 B4 s_q2 H8 lens 0..2500, pages of 16", 4, 2, 8, 2500, 0, 1, 16, 0},
    {"decode fp8 B1 s_q1 H16 len 9000 (split)", 1, 1, 16, 9000, 1, 1, 0, 0},
    /* 32 heads (tensor parallelism over 4 GPUs): the keys-on-M kernel at N = 32 */
    {"decode B5 s_q1 H32 lens 0..3000", 5, 1, 32, 3000, 0, 0, 0, 0},
    {"decode B1 s_q1 H32 len 5000 (split)", 1, 1, 32, 5000, 1, 0, 0, 0},
    {"decode B100 s_q1 H32 lens 0..700", 100, 1, 32, 700, 0, 0, 0, 0},
    {"decode fp8 B4 s_q1 H32 lens 0..2500, pages of 16", 4, 1, 32, 2500, 0, 1, 16, 0},
    {"decode fp8 B2 s_q1 H32 len 6000 (split)", 2, 1, 32, 6000, 1, 1, 0, 0},
    /* s_q x heads = 16 or 32 on the keys-on-M kernel: a sequence's tokens as N columns,
     * each at its own causal limit (very short sequences: columns with no key at all) */
    {"decode B5 s_q2 H16 lens 0..3000", 5, 2, 16, 3000, 0, 0, 0, 0},
    {"decode B4 s_q2 H8 lens 0..2000", 4, 2, 8, 2000, 0, 0, 0, 0},
    {"decode B6 s_q4 H4 lens 0..70", 6, 4, 4, 70, 0, 0, 0, 0},
    {"decode B70 s_q2 H16 lens 0..600", 70, 2, 16, 600, 0, 0, 0, 0},
    {"decode fp8 B3 s_q4 H8 len 3000 (split)", 3, 4, 8, 3000, 1, 1, 0, 0},
    /* magnitudes far apart (see `wild`): the FP8 few-head kernel's powers of two */
    {"decode fp8 B3 s_q1 H16 lens 0..3000, magnitudes apart", 3, 1, 16, 3000, 0, 1, 0, 1},
    {"decode fp8 B2 s_q2 H8 len 4000 (split), magnitudes apart", 2, 2, 8, 4000, 1, 1, 0, 1},
    {"decode fp8 B2 s_q1 H32 lens 0..3000, magnitudes apart", 2, 1, 32, 3000, 0, 1, 0, 1},
    {"decode B2 s_q1 H16 lens 0..3000, magnitudes apart", 2, 1, 16, 3000, 0, 0, 0, 1},
};
static const dec_case dec_full[] = {
    {"decode B32 s_q1 H128 lens 0..1024", 32, 1, 128, 1024, 0, 0, 0, 0},
    {"decode B2 s_q2 H64 len 16384 (split)", 2, 2, 64, 16384, 1, 0, 0, 0},
    {"decode fp8 B32 s_q1 H128 lens 0..1024", 32, 1, 128, 1024, 0, 1, 0, 0},
    {"decode fp8 B2 s_q2 H64 len 16384 (split)", 2, 2, 64, 16384, 1, 1, 0, 0},
    {"decode B32 s_q1 H16 lens 0..4096", 32, 1, 16, 4096, 0, 0, 0, 0},
    {"decode B32 s_q1 H32 lens 0..4096", 32, 1, 32, 4096, 0, 0, 0, 0},
    {"decode fp8 B2 s_q1 H8 len 16384 (split)", 2, 1, 8, 16384, 1, 1, 0, 0},
    {"decode B128 s_q1 H128 lens 0..32768", 128, 1, 128, 32768, 0, 0, 0, 0},
    {"decode fp8 B128 s_q2 H128 lens 0..32768", 128, 2, 128, 32768, 0, 1, 0, 0},
};

#endif
