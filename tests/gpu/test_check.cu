/* test_check.cu - the validation mode (warpspec/check.h) on the GPU: each bad index
 * tensor an outside probe found (flash varlen offsets past the rows or decreasing, an
 * MLA decode page id out of range, a length beyond the block table) and the grouped
 * GEMM's offsets and counts are refused with WS_ERR_INVALID naming the first bad entry,
 * before the kernel runs (the CUDA context survives every case: the next valid call
 * runs); valid tensors pass and the op runs; graph capture with the mode on is refused;
 * ws_set_check_mode and WARPSPEC_CHECK turn it on and off. No bad call runs with the mode
 * off: those read out of bounds. */
#include "gpu_test.h"
#include "warpspec/attention.h"
#include "warpspec/check.h"
#include "warpspec/gemm.h"

#include <string.h>

static void *dev_ints(const int *h, size_t n) {
  void *d;
  CUDA_OK(cudaMalloc(&d, n * sizeof(int) + 16));
  CUDA_OK(cudaMemcpy(d, h, n * sizeof(int), cudaMemcpyHostToDevice));
  return d;
}

static void *dev_bytes(size_t n) {
  void *d;
  CUDA_OK(cudaMalloc(&d, n + 256));
  uint8_t *h = (uint8_t *)host_alloc(n, 1, 0);
  for (size_t i = 0; i < n; i++) h[i] = (uint8_t)(0x30 + rng_u32() % 8); /* small finite bf16 / e4m3 */
  CUDA_OK(cudaMemcpy(d, h, n, cudaMemcpyHostToDevice));
  free(h);
  return d;
}

/* A call that must be refused naming `want`, then the context must still work. */
static void expect_refused(ws_status s, const char *what, const char *want) {
  printf("%-44s -> %s: %s\n", what, ws_strerror(s), s == WS_OK ? "" : ws_last_error());
  CHECK(s == WS_ERR_INVALID);
  CHECK(strstr(ws_last_error(), want) != NULL);
  CUDA_OK(cudaDeviceSynchronize()); /* nothing was launched that could fault */
}

static void flash_varlen(void) {
  const int B = 2, H = 2, D = 64, total = 96;
  ws_attn_problem p;
  memset(&p, 0, sizeof p);
  p.batch = B; p.heads_q = H; p.heads_kv = H; p.dim_qk = D; p.dim_v = D;
  p.seqlen_q = p.seqlen_k = 64; p.total_q = p.total_k = total;
  p.q = dev_bytes((size_t)total * H * D * 2); p.k = dev_bytes((size_t)total * H * D * 2);
  p.v = dev_bytes((size_t)total * H * D * 2);
  CUDA_OK(cudaMalloc(&p.o, (size_t)total * H * D * 2));
  const int good[3] = {0, 40, 96}, past[3] = {0, 40, 130}, down[3] = {0, 60, 50}, longer[3] = {0, 10, 96};
  void *dg = dev_ints(good, 3), *dp = dev_ints(past, 3), *dd = dev_ints(down, 3), *dl = dev_ints(longer, 3);
  p.cu_seqlens_q = p.cu_seqlens_k = (const int *)dg;
  CHECK(ws_attn_forward(&p, 0) == WS_OK);
  CHECK(ws_sync(0) == WS_OK);
  p.cu_seqlens_q = (const int *)dp;
  expect_refused(ws_attn_forward(&p, 0), "flash varlen, cu_seqlens_q past total_q", "cu_seqlens_q[2] = 130");
  p.cu_seqlens_q = (const int *)dg; p.cu_seqlens_k = (const int *)dd;
  expect_refused(ws_attn_forward(&p, 0), "flash varlen, cu_seqlens_k decreasing", "cu_seqlens_k[2] = 50 is less");
  p.cu_seqlens_k = (const int *)dl; /* a sequence of 86 keys with seqlen_k 64 */
  expect_refused(ws_attn_forward(&p, 0), "flash varlen, a sequence over seqlen_k", "cu_seqlens_k[2] - cu_seqlens_k[1]");
  p.cu_seqlens_k = (const int *)dg;
  CHECK(ws_attn_forward(&p, 0) == WS_OK); /* the context is fine, the valid call runs */
  CHECK(ws_sync(0) == WS_OK);
  /* graph capture with the mode on: refused, not a stream error */
  cudaStream_t st;
  CUDA_OK(cudaStreamCreateWithFlags(&st, cudaStreamNonBlocking));
  cudaGraph_t g;
  CUDA_OK(cudaStreamBeginCapture(st, cudaStreamCaptureModeThreadLocal));
  const ws_status s = ws_attn_forward(&p, st);
  CUDA_OK(cudaStreamEndCapture(st, &g));
  cudaGraphDestroy(g);
  cudaStreamDestroy(st);
  expect_refused(s, "flash varlen inside graph capture", "graph capture");
  void *bufs[] = {(void *)p.q, (void *)p.k, (void *)p.v, p.o, dg, dp, dd, dl};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

static void mla_decode(void) {
  ws_mla_decode_problem p;
  memset(&p, 0, sizeof p);
  p.batch = 2; p.s_q = 1; p.heads = 64; p.dim_qk = 576; p.dim_v = 512; p.page_size = 64; p.num_pages = 8; p.max_pages = 4;
  p.q = dev_bytes((size_t)p.batch * p.heads * p.dim_qk * 2);
  p.kv_cache = dev_bytes((size_t)p.num_pages * p.page_size * p.dim_qk * 2);
  CUDA_OK(cudaMalloc(&p.o, (size_t)p.batch * p.heads * p.dim_v * 2));
  size_t ws_bytes = 0;
  const int table[8] = {3, 1, 99, -5, 0, 7, 2, 6}; /* sequence 0 uses 2 pages: 99 and -5 are never read */
  const int good_len[2] = {100, 256}, bad_page_table[8] = {3, 1, 99, -5, 0, 8, 2, 6}, long_len[2] = {100, 257};
  void *dt = dev_ints(table, 8), *dbt = dev_ints(bad_page_table, 8), *dgl = dev_ints(good_len, 2),
       *dll = dev_ints(long_len, 2);
  p.block_table = (const int *)dt; p.seqlens = (const int *)dgl;
  WS_OK_OR_DIE(ws_mla_decode_workspace_size(&p, &ws_bytes));
  void *work = NULL;
  CUDA_OK(cudaMalloc(&work, ws_bytes + 16));
  CHECK(ws_mla_decode_forward(&p, work, ws_bytes, 0) == WS_OK);
  CHECK(ws_sync(0) == WS_OK);
  p.block_table = (const int *)dbt;
  expect_refused(ws_mla_decode_forward(&p, work, ws_bytes, 0), "MLA decode, page id past num_pages",
                 "block_table[1][1] = 8");
  p.block_table = (const int *)dt; p.seqlens = (const int *)dll;
  expect_refused(ws_mla_decode_forward(&p, work, ws_bytes, 0), "MLA decode, seqlens beyond the block table",
                 "seqlens[1] = 257");
  p.seqlens = (const int *)dgl;
  CHECK(ws_mla_decode_forward(&p, work, ws_bytes, 0) == WS_OK);
  CHECK(ws_sync(0) == WS_OK);
  void *bufs[] = {(void *)p.q, (void *)p.kv_cache, p.o, dt, dbt, dgl, dll, work};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

static void grouped_gemm(void) {
  const int M = 256, N = 128, K = 128, G = 3;
  ws_gemm_problem p;
  memset(&p, 0, sizeof p);
  p.type = WS_GEMM_BF16; p.layout = WS_GEMM_GROUPED_CONTIGUOUS; p.m = M; p.n = N; p.k = K; p.groups = G;
  p.a = dev_bytes((size_t)M * K * 2); p.b = dev_bytes((size_t)G * N * K * 2);
  CUDA_OK(cudaMalloc(&p.d, (size_t)M * N * 2));
  const int offs[4] = {0, 100, 180, 256}, down[4] = {0, 100, 90, 256}, past[4] = {0, 100, 180, 300};
  const int rows[3] = {10, 0, 256}, rows_bad[3] = {10, 257, 3};
  void *d0 = dev_ints(offs, 4), *d1 = dev_ints(down, 4), *d2 = dev_ints(past, 4), *r0 = dev_ints(rows, 3),
       *r1 = dev_ints(rows_bad, 3);
  p.group_offsets = (const int *)d0;
  CHECK(ws_gemm(&p, 0) == WS_OK);
  CHECK(ws_sync(0) == WS_OK);
  p.group_offsets = (const int *)d1;
  expect_refused(ws_gemm(&p, 0), "grouped GEMM, decreasing group_offsets", "group_offsets[2] = 90");
  p.group_offsets = (const int *)d2;
  expect_refused(ws_gemm(&p, 0), "grouped GEMM, group_offsets past m", "group_offsets[3] = 300");
  /* masked: A is groups x m x k */
  cudaFree((void *)p.a); cudaFree(p.d);
  p.a = dev_bytes((size_t)G * M * K * 2);
  CUDA_OK(cudaMalloc(&p.d, (size_t)G * M * N * 2));
  p.layout = WS_GEMM_GROUPED_MASKED; p.group_offsets = NULL; p.group_rows = (const int *)r0;
  CHECK(ws_gemm(&p, 0) == WS_OK);
  CHECK(ws_sync(0) == WS_OK);
  p.group_rows = (const int *)r1;
  expect_refused(ws_gemm(&p, 0), "masked GEMM, group_rows over m", "group_rows (flat position 1) = 257");
  void *bufs[] = {(void *)p.a, (void *)p.b, p.d, d0, d1, d2, r0, r1};
  for (size_t i = 0; i < sizeof bufs / sizeof bufs[0]; i++) cudaFree(bufs[i]);
}

int main(void) {
  setvbuf(stdout, NULL, _IONBF, 0);
  require_hopper();
  rng_seed_from_time();
  /* the switch: the environment decides until the program does */
  unsetenv(WS_CHECK_ENV);
  CHECK(ws_set_check_mode(-1) == WS_OK && ws_check_mode() == 0);
  setenv(WS_CHECK_ENV, "1", 1);
  CHECK(ws_check_mode() == 0); /* the environment is read once ... */
  CHECK(ws_set_check_mode(-1) == WS_OK && ws_check_mode() == 1); /* ... and again on -1 */
  CHECK(ws_set_check_mode(0) == WS_OK && ws_check_mode() == 0);
  CHECK(ws_set_check_mode(2) == WS_ERR_INVALID);
  CHECK(ws_set_check_mode(1) == WS_OK && ws_check_mode() == 1);
  { /* heads the MLA kernel has no CTA shape for (48: neither a multiple nor a divisor of
     * its 64 rows) are refused, not a division by zero; 16 (a tensor-parallel shard) fits */
    ws_mla_decode_problem p;
    memset(&p, 0, sizeof p);
    p.batch = 1; p.s_q = 1; p.heads = 48; p.dim_qk = 576; p.dim_v = 512; p.page_size = 64; p.num_pages = 1; p.max_pages = 1;
    p.q = p.kv_cache = p.o = (void *)(uintptr_t)256;
    p.block_table = p.seqlens = (const int *)(uintptr_t)256;
    size_t bytes = 0;
    ws_status s = ws_mla_decode_workspace_size(&p, &bytes);
    printf("MLA decode workspace, 48 heads -> %s: %s\n", ws_strerror(s), ws_last_error());
    CHECK(s == WS_ERR_INVALID);
    p.heads = 16;
    s = ws_mla_decode_workspace_size(&p, &bytes);
    printf("MLA decode workspace, 16 heads -> %s (%zu bytes)\n", ws_strerror(s), bytes);
    CHECK(s == WS_OK);
  }
  flash_varlen();
  mla_decode();
  grouped_gemm();
  return test_finish("test_check");
}
