/* bench_gemm_gather.cu - `warpspec bench gemm-gather`: the gathered-A FP8 GEMM against the
 * same GEMM on copied rows, one problem, the same rows placed several ways.
 *
 * The question (docs/benchmarks.md, sessions 24-25): the MoE layer's L1 over the received
 * rows in place (ws_gemm with a_rows, gemm_fp8_gather) reads each A row from DRAM about 18
 * times, the same GEMM on a contiguous copy about 2.5 times. The problem is that L1 at EP1,
 * DeepSeek-V3: T tokens (4096) routed top-8 over 256 experts, each token's experts distinct
 * and uniform (fixed seed), so 8T rows in 256 uneven groups (grouped contiguous; group g's
 * rows are the tokens routed to g, in token order); N 4096 a group, K 7168; FP8 with
 * row-major 1 x 128 activation scales and 128 x 128 weight scales. Each variant gives
 * ws_gemm the same logical rows:
 *   copied                a contiguous copy, row r = its token's row (TMA tiles, gemm_fp8)
 *   gather-identity       that copy through a_rows[r] = r: the gathered loader on the same bytes
 *   gather-tokens         the T token rows in place, a_rows[r] = r's token, rows 7552 bytes
 *                         apart (the EP inbox row on 128-byte lines; --pitch), scales in their
 *                         own array
 *   gather-tokens-7168    the same, rows 7168 bytes apart (no padding)
 *   gather-shuffled       the copy's rows scattered by a random permutation of 0..8T-1, a_rows
 *                         the permutation: every row read by one group, from anywhere
 *   gather-tokens-inline  gather-tokens with each row's scales after its data, the way ws_ep's
 *                         index receive leaves them (a_scale_stride = the pitch / 4)
 * identity against copied is the loader alone; tokens against identity a row shared by its
 * 8 experts; shuffled against identity where the rows lie. Every variant's D is compared
 * bit for bit with copied's (the same tile and promotion order: the same bits). Each run:
 * 256 MiB written first (L2 flushed), then one ws_gemm call between CUDA events; median of
 * the timed runs after 3 warm-ups; TFLOPS = 2 x 8T x N x K / t. With --variant, the GPU's
 * gemm_fp8* launches are that variant's 3 warm-ups, its timed runs, then (a gather variant)
 * copied once, untimed, for the bit check: under ncu, --launch-skip 3 --launch-count 1 is
 * the first timed run. */
#include "../testdata/random.h"
#include "bench.h"
#include "bench_check.h"
#include "bench_fill.cuh"
#include "warpspec/gemm.h"
#include "warpspec/warpspec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define GG_EXPERTS 256
#define GG_TOPK 8
#define GG_N 4096
#define GG_K 7168
#define GG_KB (GG_K / 128)
/* The padded rows' pitch: the EP inbox row, data, scales and meta on 128-byte lines (the
 * s25-ep-row-align branch; main's inbox rows are 7536 bytes, 16-byte aligned: --pitch 7536) */
#define GG_PITCH 7552
#define GG_WARMUP 3
#define GG_FLUSH_BYTES ((size_t)256 << 20) /* several times any Hopper's L2 (50 MB) */

enum { GG_COPIED, GG_IDENTITY, GG_TOKENS, GG_TOKENS_7168, GG_SHUFFLED, GG_TOKENS_INLINE, GG_VARIANTS };
static const char *const gg_names[GG_VARIANTS] = {"copied", "gather-identity", "gather-tokens", "gather-tokens-7168",
                                                  "gather-shuffled", "gather-tokens-inline"};

extern "C" int bench_gemm_gather_variant(const char *name) {
  for (int v = 0; v < GG_VARIANTS; v++)
    if (strcmp(name, gg_names[v]) == 0) return v;
  fprintf(stderr, "bench gemm-gather: --variant %s: one of", name);
  for (int v = 0; v < GG_VARIANTS; v++) fprintf(stderr, "%s %s", v ? "," : "", gg_names[v]);
  fprintf(stderr, "\n");
  return -1;
}

/* Everything one run holds; NULL until allocated, freed by gg_free_all whatever happened. */
typedef struct {
  int tokens, rows, pitch; /* pitch: of the padded rows (xp)                          */
  uint8_t *x;             /* the T token rows, K bytes apart                             */
  float *xs;              /* their scales, T x K/128                                     */
  uint8_t *xp;            /* the same rows `pitch` apart, each one's scales after its data */
  uint8_t *ac;            /* the copy: row r = x[tok[r]]                                 */
  float *sc;              /* its scales                                                  */
  uint8_t *as;            /* the copy's rows scattered: as[perm[r]] = ac[r]              */
  float *ss;              /* their scales, scattered the same way                        */
  int *tok, *ident, *perm; /* the gather variants' a_rows (device)                      */
  int *offsets;           /* the groups' first rows, GG_EXPERTS + 1 (device)             */
  uint8_t *b;             /* weights, GG_EXPERTS x N x K                                 */
  float *sb;
  uint16_t *d;
  void *flush;
  cudaEvent_t e0, e1;
  int *h_tok, *h_perm, h_off[GG_EXPERTS + 1];
  uint16_t *h_ref, *h_d;  /* D of copied and of the variant, on the host                 */
  float *h_t;             /* timings                                                      */
} gg_data;

/* Routing on the host: each token's GG_TOPK distinct experts, uniform (td_draw_distinct, as bench moe draws them), so
 * the groups are uneven as in the layer; then the rows grouped by expert, each group in
 * token order (a counting sort over the entries in token order), and the shuffle's
 * permutation (Fisher-Yates). */
static int gg_route(gg_data *g) {
  const int T = g->tokens, R = g->rows;
  int *e = (int *)malloc((size_t)R * sizeof(int)), count[GG_EXPERTS] = {0}, fill[GG_EXPERTS];
  if (!e) BENCH_FAIL("malloc", "routing");
  uint64_t st = TD_RNG_START;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < GG_TOPK; k++) {
      const int x = td_draw_distinct(&st, e + t * GG_TOPK, k, GG_EXPERTS);
      e[t * GG_TOPK + k] = x;
      count[x]++;
    }
  g->h_off[0] = 0;
  for (int x = 0; x < GG_EXPERTS; x++) {
    g->h_off[x + 1] = g->h_off[x] + count[x];
    fill[x] = g->h_off[x];
  }
  for (int i = 0; i < R; i++) g->h_tok[fill[e[i]]++] = i / GG_TOPK;
  free(e);
  for (int i = 0; i < R; i++) g->h_perm[i] = i;
  for (int i = R - 1; i > 0; i--) {
    const int j = (int)(td_rng_next(&st) % (uint64_t)(i + 1)), s = g->h_perm[i];
    g->h_perm[i] = g->h_perm[j];
    g->h_perm[j] = s;
  }
  return 0;
}

/* dst row (dst_idx ? dst_idx[r] : r) = src row (src_idx ? src_idx[r] : r), `bytes` of each
 * (a multiple of 16, both rows 16-byte aligned). */
static __global__ void gg_copy_rows(uint8_t *dst, size_t dst_pitch, const int *dst_idx, const uint8_t *src,
                                    size_t src_pitch, const int *src_idx, int rows, int bytes) {
  const size_t w = (size_t)bytes / 16;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < (size_t)rows * w; i += (size_t)gridDim.x * blockDim.x) {
    const size_t r = i / w, c = i % w;
    const size_t dr = dst_idx ? (size_t)dst_idx[r] : r, sr = src_idx ? (size_t)src_idx[r] : r;
    ((uint4 *)(dst + dr * dst_pitch))[c] = ((const uint4 *)(src + sr * src_pitch))[c];
  }
}

static int gg_copy(void *dst, size_t dst_pitch, const int *dst_idx, const void *src, size_t src_pitch, const int *src_idx,
                   int rows, int bytes) {
  gg_copy_rows<<<1024, 256>>>((uint8_t *)dst, dst_pitch, dst_idx, (const uint8_t *)src, src_pitch, src_idx, rows, bytes);
  CK(cudaGetLastError());
  return 0;
}

/* The data: random token rows and scales, the copy, the scattered copy, the padded rows. */
static int gg_setup(gg_data *g) {
  const size_t T = (size_t)g->tokens, R = (size_t)g->rows, nb = (size_t)GG_EXPERTS * GG_N * GG_K,
               nsb = (size_t)GG_EXPERTS * (GG_N / 128) * GG_KB, srow = GG_KB * sizeof(float);
  g->h_tok = (int *)malloc(R * sizeof(int));
  g->h_perm = (int *)malloc(R * sizeof(int));
  g->h_ref = (uint16_t *)malloc(R * GG_N * 2);
  g->h_d = (uint16_t *)malloc(R * GG_N * 2);
  if (!g->h_tok || !g->h_perm || !g->h_ref || !g->h_d) BENCH_FAIL("malloc", "host buffers");
  if (gg_route(g)) return -1;
  CK(cudaMalloc(&g->x, T * GG_K));
  CK(cudaMalloc(&g->xs, T * srow));
  CK(cudaMalloc(&g->xp, T * g->pitch));
  CK(cudaMalloc(&g->ac, R * GG_K));
  CK(cudaMalloc(&g->sc, R * srow));
  CK(cudaMalloc(&g->as, R * GG_K));
  CK(cudaMalloc(&g->ss, R * srow));
  CK(cudaMalloc(&g->tok, R * sizeof(int)));
  CK(cudaMalloc(&g->ident, R * sizeof(int)));
  CK(cudaMalloc(&g->perm, R * sizeof(int)));
  CK(cudaMalloc(&g->offsets, sizeof g->h_off));
  CK(cudaMalloc(&g->b, nb));
  CK(cudaMalloc(&g->sb, nsb * sizeof(float)));
  CK(cudaMalloc(&g->d, R * GG_N * 2));
  CK(cudaMalloc(&g->flush, GG_FLUSH_BYTES));
  CK(cudaEventCreate(&g->e0));
  CK(cudaEventCreate(&g->e1));
  CK(cudaMemcpy(g->tok, g->h_tok, R * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(g->perm, g->h_perm, R * sizeof(int), cudaMemcpyHostToDevice));
  for (size_t r = 0; r < R; r++) g->h_perm[r] = (int)r; /* the identity, through the same buffer */
  CK(cudaMemcpy(g->ident, g->h_perm, R * sizeof(int), cudaMemcpyHostToDevice));
  CK(cudaMemcpy(g->offsets, g->h_off, sizeof g->h_off, cudaMemcpyHostToDevice));
  fill_fp8<<<1024, 256>>>(g->x, T * GG_K, 7);
  CK(cudaGetLastError());
  fill_scale<<<256, 256>>>(g->xs, T * GG_KB, 7);
  CK(cudaGetLastError());
  fill_fp8<<<1024, 256>>>(g->b, nb, 1007);
  CK(cudaGetLastError());
  fill_scale<<<256, 256>>>(g->sb, nsb, 1007);
  CK(cudaGetLastError());
  /* the padded rows: data, scales at byte K, the rest (meta and padding in the inbox) zero */
  CK(cudaMemset(g->xp, 0, T * g->pitch));
  if (gg_copy(g->xp, g->pitch, NULL, g->x, GG_K, NULL, g->tokens, GG_K) ||
      gg_copy(g->xp + GG_K, g->pitch, NULL, g->xs, srow, NULL, g->tokens, (int)srow) ||
      gg_copy(g->ac, GG_K, NULL, g->x, GG_K, g->tok, g->rows, GG_K) ||
      gg_copy(g->sc, srow, NULL, g->xs, srow, g->tok, g->rows, (int)srow) ||
      gg_copy(g->as, GG_K, g->perm, g->x, GG_K, g->tok, g->rows, GG_K) ||
      gg_copy(g->ss, srow, g->perm, g->xs, srow, g->tok, g->rows, (int)srow))
    return -1;
  WK(ws_sync(0));
  return 0;
}

/* Variant v's problem; *src_rows / *pitch: the A it reads (for the printout). */
static void gg_problem(const gg_data *g, int v, ws_gemm_problem *p, int *src_rows, size_t *pitch) {
  memset(p, 0, sizeof *p);
  p->type = WS_GEMM_FP8;
  p->layout = WS_GEMM_GROUPED_CONTIGUOUS;
  p->m = g->rows;
  p->n = GG_N;
  p->k = GG_K;
  p->groups = GG_EXPERTS;
  p->b = g->b;
  p->d = g->d;
  p->b_scale = g->sb;
  p->group_offsets = g->offsets;
  *src_rows = g->rows;
  *pitch = GG_K;
  switch (v) {
  case GG_COPIED:
    p->a = g->ac;
    p->a_scale = g->sc;
    return;
  case GG_IDENTITY:
  case GG_SHUFFLED:
    p->a = v == GG_IDENTITY ? g->ac : g->as;
    p->a_scale = v == GG_IDENTITY ? g->sc : g->ss;
    p->a_rows = v == GG_IDENTITY ? g->ident : g->perm;
    p->a_rows_total = g->rows;
    p->a_row_bytes = GG_K;
    p->a_scale_stride = GG_KB;
    return;
  default: /* the token rows */
    *src_rows = g->tokens;
    *pitch = v == GG_TOKENS_7168 ? GG_K : (size_t)g->pitch;
    p->a = v == GG_TOKENS_7168 ? g->x : g->xp;
    p->a_scale = v == GG_TOKENS_INLINE ? (const float *)(g->xp + GG_K) : g->xs;
    p->a_rows = g->tok;
    p->a_rows_total = g->tokens;
    p->a_row_bytes = *pitch;
    p->a_scale_stride = v == GG_TOKENS_INLINE ? g->pitch / 4 : GG_KB;
    return;
  }
}

/* GG_WARMUP + reps calls, each after the L2 flush; the median time of the last reps. */
static int gg_time(gg_data *g, const ws_gemm_problem *p, int reps, float *ms) {
  for (int i = -GG_WARMUP; i < reps; i++) {
    /* 256 MiB written: what the last run left in L2 (A rows, weights, D) is gone */
    CK(cudaMemsetAsync(g->flush, i & 0xFF, GG_FLUSH_BYTES, 0));
    CK(cudaEventRecord(g->e0, 0));
    WK(ws_gemm(p, 0));
    CK(cudaEventRecord(g->e1, 0));
    WK(ws_sync(0));
    if (i >= 0) CK(cudaEventElapsedTime(&g->h_t[i], g->e0, g->e1));
  }
  *ms = bench_median(g->h_t, reps);
  return 0;
}

/* copied's D, once, untimed (the reference of a gather variant run alone); its values
 * checked for NaN (an unwritten row keeps the poison) and for all zeros (the bit check
 * would then prove nothing). */
static int gg_reference(gg_data *g, int run) {
  const size_t n = (size_t)g->rows * GG_N;
  if (run) {
    ws_gemm_problem p;
    int src_rows;
    size_t pitch;
    gg_problem(g, GG_COPIED, &p, &src_rows, &pitch);
    CK(cudaMemset(g->d, 0xFF, n * 2));
    WK(ws_gemm(&p, 0));
    WK(ws_sync(0));
  }
  CK(cudaMemcpy(g->h_ref, g->d, n * 2, cudaMemcpyDeviceToHost));
  size_t nan = 0, zero = 0;
  for (size_t i = 0; i < n; i++) {
    nan += (g->h_ref[i] & 0x7F80) == 0x7F80;
    zero += (g->h_ref[i] & 0x7FFF) == 0;
  }
  if (nan || zero == n)
    printf("  WARNING: copied's D has %zu NaN / Inf and %zu zero values of %zu: the bit check below proves little\n", nan,
           zero, n);
  return 0;
}

static int gg_main(gg_data *g, const bench_gemm_gather_opts *o) {
  struct cudaDeviceProp prop;
  int dev = 0;
  CK(cudaGetDevice(&dev));
  CK(cudaGetDeviceProperties(&prop, dev));
  if (gg_setup(g)) return -1;
  int lo = g->rows, hi = 0;
  for (int x = 0; x < GG_EXPERTS; x++) {
    const int c = g->h_off[x + 1] - g->h_off[x];
    lo = c < lo ? c : lo;
    hi = c > hi ? c : hi;
  }
  const double flop = 2.0 * g->rows * GG_N * GG_K;
  printf("bench gemm-gather on %s: the MoE L1 at EP1 (DeepSeek-V3), %d tokens x top-%d of %d experts = %d rows\n"
         "  (%d .. %d a group), N %d, K %d, FP8; median of %d runs after %d warm-ups, each after %zu MiB written\n"
         "  (L2 flushed); TFLOPS = 2 x rows x N x K / t; D compared bit for bit with copied's\n",
         prop.name, g->tokens, GG_TOPK, GG_EXPERTS, g->rows, lo, hi, GG_N, GG_K, o->reps, GG_WARMUP, GG_FLUSH_BYTES >> 20);
  printf("  %-21s %15s %8s %7s %10s %8s  %s\n", "variant", "A rows x pitch", "A MB", "tile", "us", "TFLOPS", "D");
  int have_ref = 0, rc = 0;
  for (int v = 0; v < GG_VARIANTS; v++) {
    if (o->variant >= 0 && v != o->variant) continue;
    ws_gemm_problem p;
    int src_rows, tile_m = 0, tile_n = 0;
    size_t pitch;
    gg_problem(g, v, &p, &src_rows, &pitch);
    WK(ws_gemm_tile(&p, 0, &tile_m, &tile_n));
    /* poison, a different byte each variant: a row two variants leave unwritten still differs */
    CK(cudaMemset(g->d, 0xF0 + v, (size_t)g->rows * GG_N * 2));
    float ms = 0;
    if (gg_time(g, &p, o->reps, &ms)) return -1;
    char bits[64] = "(the reference)";
    if (v == GG_COPIED) {
      if (gg_reference(g, 0)) return -1;
      have_ref = 1;
    } else {
      CK(cudaMemcpy(g->h_d, g->d, (size_t)g->rows * GG_N * 2, cudaMemcpyDeviceToHost));
      if (!have_ref && gg_reference(g, 1)) return -1; /* after the timed runs: ncu's launch order */
      have_ref = 1;
      int diff = 0;
      for (size_t r = 0; r < (size_t)g->rows; r++) diff += memcmp(g->h_ref + r * GG_N, g->h_d + r * GG_N, GG_N * 2) != 0;
      if (diff) snprintf(bits, sizeof bits, "DIFFERENT (%d of %d rows)", diff, g->rows);
      else snprintf(bits, sizeof bits, "same bits");
      rc |= diff != 0;
    }
    printf("  %-21s %6d x %6zu %8.1f %3dx%-3d %10.1f %8.1f  %s\n", gg_names[v], src_rows, pitch,
           (double)src_rows * (double)pitch / 1e6, tile_m, tile_n, 1e3 * ms, flop / ms / 1e9, bits);
    fflush(stdout);
  }
  return rc ? -1 : 0;
}

/* Frees what gg_main allocated; 0, or -1 if the device reported an error doing so. */
static int gg_free_all(gg_data *g) {
  void *dev[] = {g->x, g->xs, g->xp, g->ac, g->sc, g->as, g->ss, g->tok, g->ident, g->perm, g->offsets, g->b, g->sb, g->d,
                 g->flush};
  int rc = 0;
  for (unsigned i = 0; i < sizeof dev / sizeof dev[0]; i++) rc |= cudaFree(dev[i]) != cudaSuccess;
  if (g->e0) rc |= cudaEventDestroy(g->e0) != cudaSuccess;
  if (g->e1) rc |= cudaEventDestroy(g->e1) != cudaSuccess;
  free(g->h_tok);
  free(g->h_perm);
  free(g->h_ref);
  free(g->h_d);
  free(g->h_t);
  if (rc) fprintf(stderr, "bench gemm-gather: freeing device memory failed: %s\n", cudaGetErrorString(cudaGetLastError()));
  return rc ? -1 : 0;
}

extern "C" int bench_gemm_gather(const bench_gemm_gather_opts *o) {
  gg_data g;
  memset(&g, 0, sizeof g);
  g.tokens = o->tokens;
  g.rows = o->tokens * GG_TOPK;
  g.pitch = o->pitch ? o->pitch : GG_PITCH;
  /* the padded rows hold a row's data and scales (gather-tokens-inline), 16-byte aligned (TMA, ws_gemm_check) */
  if (o->tokens < 1 || o->reps < 1 || o->tokens > (1 << 24) || g.pitch < GG_K + GG_KB * 4 || g.pitch % 16 || g.pitch > (1 << 20)) {
    fprintf(stderr, "bench gemm-gather: tokens %d (1 .. 2^24), reps %d (>= 1) or pitch %d (%d .. 2^20, a multiple of 16)\n",
            o->tokens, o->reps, g.pitch, GG_K + GG_KB * 4);
    return -1;
  }
  g.h_t = (float *)malloc((size_t)o->reps * sizeof(float));
  int rc = g.h_t ? gg_main(&g, o) : (fprintf(stderr, "bench gemm-gather: malloc of %d timings failed\n", o->reps), -1);
  if (rc) fprintf(stderr, "bench gemm-gather: FAILED\n");
  return gg_free_all(&g) || rc ? -1 : 0;
}
