/* bench_gemm.cu - `warpspec bench gemm`: ws_gemm against cuBLASLt, same run, same data.
 *
 * BF16 and FP8 (block scales: cuBLASLt's VEC128 / BLK128x128 modes) D = A x B^T (A m x k,
 * B n x k, both K contiguous, D m x n, fp32 accumulation),
 * at dense 8192^3 and the DeepSeek-V3 expert shapes (N, K) = (4096, 7168), (7168, 2048)
 * with M from 64 to 8192. cuBLASLt gets the same operands as column-major
 * D^T = B x A^T (transa = T). Both outputs are compared (relative error) before timing;
 * medians of 20 CUDA-event timings after warm-up; TFLOPS = 2 m n k / t. */
#include "bench.h"
#include "bench_check.h"
#include "bench_fill.cuh"
#include "warpspec/fp8.h"
#include "warpspec/gemm.h"
#include "warpspec/warpspec.h"

#include <cublasLt.h>
#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define LK(call)                                                                    \
  do {                                                                              \
    cublasStatus_t s_ = (call);                                                     \
    if (s_ != CUBLAS_STATUS_SUCCESS) BENCH_FAIL(#call, cublasGetStatusString(s_));  \
  } while (0)

__global__ void fill_bf16(uint16_t *p, size_t n, uint64_t seed) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    const float v = ((float)((x >> 40) & 0xFFFF) / 65536.0f - 0.5f);
    const __nv_bfloat16 b = __float2bfloat16(v);
    p[i] = *(const uint16_t *)&b;
  }
}

__global__ void diff_bf16(const uint16_t *x, const uint16_t *y, size_t n, double *out) {
  double num = 0, den = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const double a = __bfloat162float(*(const __nv_bfloat16 *)&x[i]), b = __bfloat162float(*(const __nv_bfloat16 *)&y[i]);
    num += (a - b) * (a - b);
    den += b * b;
  }
  atomicAdd(&out[0], num);
  atomicAdd(&out[1], den);
}

typedef struct {
  cublasLtHandle_t lt;
  cublasLtMatmulDesc_t op;
  cublasLtMatrixLayout_t la, lb, lc;
  cublasLtMatmulAlgo_t algo;
  void *ws;
  size_t ws_bytes;
} lt_gemm;

/* fp8: E4M3 operands with cuBLASLt's block scales, the finest this toolkit offers:
 * VEC128_32F for the activations (one per 128 along K) and BLK128x128_32F for the weights
 * (DeepSeek's format). a_scale_t must be the activations' scales laid out K-block-major
 * ([k/128][m], m contiguous), b_scale as ws_gemm takes it ([n/128][k/128]). UNVERIFIED:
 * the scale layouts follow our reading of the cuBLASLt docs; the benchmark compares the
 * result with ws_gemm and prints WRONG if they disagree. */
static int lt_setup(lt_gemm *g, int m, int n, int k, int fp8, const float *a_scale_t, const float *b_scale) {
  LK(cublasLtCreate(&g->lt));
  LK(cublasLtMatmulDescCreate(&g->op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  const cublasOperation_t t = CUBLAS_OP_T, nn = CUBLAS_OP_N;
  LK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof t));
  LK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_TRANSB, &nn, sizeof nn));
  const cudaDataType_t in = fp8 ? CUDA_R_8F_E4M3 : CUDA_R_16BF;
  if (fp8) {
    /* cuBLASLt's "A" is our B (weights), its "B" our A (activations) */
    const cublasLtMatmulMatrixScale_t blk = CUBLASLT_MATMUL_MATRIX_SCALE_BLK128x128_32F, vec = CUBLASLT_MATMUL_MATRIX_SCALE_VEC128_32F;
    LK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_MODE, &blk, sizeof blk));
    LK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_MODE, &vec, sizeof vec));
    LK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &b_scale, sizeof b_scale));
    LK(cublasLtMatmulDescSetAttribute(g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &a_scale_t, sizeof a_scale_t));
  }
  LK(cublasLtMatrixLayoutCreate(&g->la, in, k, n, k)); /* B as k x n column-major, transposed */
  LK(cublasLtMatrixLayoutCreate(&g->lb, in, k, m, k)); /* A as k x m column-major */
  LK(cublasLtMatrixLayoutCreate(&g->lc, CUDA_R_16BF, n, m, n)); /* D^T n x m = D row-major */
  g->ws_bytes = 64u << 20;
  CK(cudaMalloc(&g->ws, g->ws_bytes));
  cublasLtMatmulPreference_t pref;
  LK(cublasLtMatmulPreferenceCreate(&pref));
  LK(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &g->ws_bytes, sizeof g->ws_bytes));
  cublasLtMatmulHeuristicResult_t r;
  int found = 0;
  LK(cublasLtMatmulAlgoGetHeuristic(g->lt, g->op, g->la, g->lb, g->lc, g->lc, pref, 1, &r, &found));
  cublasLtMatmulPreferenceDestroy(pref);
  if (!found) BENCH_FAIL("cublasLtMatmulAlgoGetHeuristic", "no algorithm");
  g->algo = r.algo;
  return 0;
}

static void lt_free(lt_gemm *g) {
  cudaFree(g->ws);
  cublasLtMatrixLayoutDestroy(g->la);
  cublasLtMatrixLayoutDestroy(g->lb);
  cublasLtMatrixLayoutDestroy(g->lc);
  cublasLtMatmulDescDestroy(g->op);
  cublasLtDestroy(g->lt);
}

static int lt_run(lt_gemm *g, const void *a, const void *b, void *d) {
  const float one = 1.0f, zero = 0.0f;
  LK(cublasLtMatmul(g->lt, g->op, &one, b, g->la, a, g->lb, &zero, d, g->lc, d, g->lc, &g->algo, g->ws, g->ws_bytes, 0));
  return 0;
}

/* median ms of 20 runs of variant v (0 ours, 1 cuBLASLt) */
/* What one timed run does: ours (ws_gemm) or the baseline (cuBLASLt, once per group). */
typedef struct {
  ws_gemm_problem *p;
  lt_gemm *g;
  int groups, rows_per_group; /* grouped baseline: a loop of cuBLASLt calls */
  size_t elem;
  const float *a_scale_t;     /* FP8 grouped: per-group scale pointers are set per call */
  const float *b_scale;
} run_ctx;

static int run_baseline(const run_ctx *r) {
  if (r->groups <= 1) return lt_run(r->g, r->p->a, r->p->b, r->p->d);
  const size_t m = (size_t)r->rows_per_group, n = (size_t)r->p->n, k = (size_t)r->p->k;
  for (int e = 0; e < r->groups; e++) {
    if (r->a_scale_t) {
      const float *sat = r->a_scale_t + (size_t)e * m * (k / 128), *sb = r->b_scale + (size_t)e * (n / 128) * (k / 128);
      LK(cublasLtMatmulDescSetAttribute(r->g->op, CUBLASLT_MATMUL_DESC_A_SCALE_POINTER, &sb, sizeof sb));
      LK(cublasLtMatmulDescSetAttribute(r->g->op, CUBLASLT_MATMUL_DESC_B_SCALE_POINTER, &sat, sizeof sat));
    }
    if (lt_run(r->g, (const uint8_t *)r->p->a + e * m * k * r->elem, (const uint8_t *)r->p->b + e * n * k * r->elem,
               (uint16_t *)r->p->d + e * m * n))
      return -1;
  }
  return 0;
}

/* --soak S: after a case, each side alone for S seconds (clock and power logging). */
static double g_soak;

static void stamp(const char *what) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  char buf[32];
  strftime(buf, sizeof buf, "%Y/%m/%d %H:%M:%S", localtime(&ts.tv_sec));
  fprintf(stderr, "%s.%03ld %s\n", buf, ts.tv_nsec / 1000000, what);
}

static int soak(const run_ctx *r) {
  for (int v = 0; v < 2; v++) {
    stamp(v == 0 ? "soak ws_gemm start" : "soak cuBLASLt start");
    struct timespec t0, t;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    do {
      for (int i = 0; i < 10; i++) {
        if (v == 0) WK(ws_gemm(r->p, 0));
        else if (run_baseline(r)) return -1;
      }
      WK(ws_sync(0));
      clock_gettime(CLOCK_MONOTONIC, &t);
    } while ((double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec) < g_soak);
    stamp(v == 0 ? "soak ws_gemm end" : "soak cuBLASLt end");
  }
  return 0;
}

/* WARPSPEC_BENCH_FLUSH_L2=1: 256 MiB written before each timed call, so the call reads
 * its operands from HBM, as a decode step's projection does (the layer before it read
 * other weights). Without it the calls run back to back and a problem whose weights are
 * about the L2's size (64 x (4096, 7168): 59 MB against 50 MB) finds part of them there.
 * A benchmark's own switch, not a library knob (docs/knobs.md). */
#define BENCH_FLUSH_BYTES (256u << 20)
static void *bench_flush_buffer(void) {
  static void *buf = NULL;
  static int asked = 0;
  if (!asked) {
    asked = 1;
    const char *e = getenv("WARPSPEC_BENCH_FLUSH_L2");
    if (e && strcmp(e, "1") == 0 && cudaMalloc(&buf, BENCH_FLUSH_BYTES) != cudaSuccess) buf = NULL;
  }
  return buf;
}

static int time_it(int v, const run_ctx *r, float *ms) {
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float t[20];
  void *flush = bench_flush_buffer();
  for (int i = -3; i < 20; i++) {
    if (flush) CK(cudaMemsetAsync(flush, i & 0xFF, BENCH_FLUSH_BYTES, 0));
    CK(cudaEventRecord(e0, 0));
    if (v == 0) WK(ws_gemm(r->p, 0));
    else if (run_baseline(r)) return -1;
    CK(cudaEventRecord(e1, 0));
    WK(ws_sync(0));
    if (i >= 0) CK(cudaEventElapsedTime(&t[i], e0, e1));
  }
  *ms = bench_median(t, 20);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  return 0;
}

/* [m][kb] -> [kb][ld] */
__global__ void transpose_scale(const float *in, float *out, int m, int kb, int ld) {
  for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < m * kb; i += gridDim.x * blockDim.x)
    out[(size_t)(i % kb) * ld + i / kb] = in[i];
}

/* ws_gemm's FP8 activation scales: K-block-major (what cuBLASLt gets too) unless
 * WARPSPEC_BENCH_SCALES=row (the row-major layout, a global load per K block in the
 * kernel). A benchmark's own switch, not a library knob (docs/knobs.md); the old
 * spelling WS_BENCH_SCALES is still read, so the commands of docs/benchmarks.md work. */
static int bench_kmajor_scales(void) {
  const char *e = getenv("WARPSPEC_BENCH_SCALES");
  if (!e || !*e) e = getenv("WS_BENCH_SCALES");
  return !(e && strcmp(e, "row") == 0);
}

/* One shape and type: fresh data, both GEMMs, their agreement, then the timings.
 * groups > 1: grouped-contiguous with m rows per group against a loop of cuBLASLt calls. */
/* ws / cuBLASLt time ratios of the run so far, per type and kind (one GEMM, grouped), for
 * the closing summary: [fp8][grouped] = {min, max}, count. */
static double g_ratio[2][2][2];
static int g_ratio_n[2][2];

static int run_case(int fp8, int groups, int m_per, int n, int k, uint64_t seed, FILE *csv) {
  const int m = m_per * groups;
  const size_t na = (size_t)m * k, nb = (size_t)groups * n * k, nd = (size_t)m * n, kb = k / 128, es = fp8 ? 1 : 2;
  void *a, *b;
  uint16_t *d, *dref;
  float *sa = NULL, *sat = NULL, *sb = NULL, *sak = NULL;
  const int ld = fp8 && bench_kmajor_scales() ? (m + 3) / 4 * 4 : 0; /* ws_gemm's a_scale_ld */
  /* cuBLASLt has no block-scaled FP8 algorithm for a row count that is not a multiple of
   * 16 (1 x (4096, 7168): "not supported"): its side then runs on the rows padded to 16,
   * as a caller of it would, and the table says so. A and its scales are allocated for
   * the padded rows; the padding rows are zero and only the first m rows are compared. */
  const int m_lt = fp8 && groups == 1 ? (m + 15) / 16 * 16 : m;
  const size_t na_lt = (size_t)m_lt * k;
  double *err;
  CK(cudaMalloc(&a, na_lt * es));
  if (m_lt > m) CK(cudaMemset((uint8_t *)a + na * es, 0, (na_lt - na) * es));
  CK(cudaMalloc(&b, nb * es));
  CK(cudaMalloc(&d, (size_t)m_lt * n * 2)); /* cuBLASLt writes all m_lt rows */
  CK(cudaMalloc(&dref, (size_t)m_lt * n * 2));
  CK(cudaMalloc(&err, 2 * sizeof(double)));
  if (fp8) {
    CK(cudaMalloc(&sa, (size_t)m * kb * 4));
    CK(cudaMalloc(&sat, (size_t)m_lt * kb * 4));
    CK(cudaMemset(sat, 0, (size_t)m_lt * kb * 4));
    CK(cudaMalloc(&sb, (size_t)groups * (n / 128) * kb * 4));
    fill_fp8<<<1024, 256>>>((uint8_t *)a, na, seed);
    fill_fp8<<<1024, 256>>>((uint8_t *)b, nb, seed + 1000);
    fill_scale<<<256, 256>>>(sa, (size_t)m * kb, seed);
    fill_scale<<<256, 256>>>(sb, (size_t)groups * (n / 128) * kb, seed + 1000);
    for (int e = 0; e < groups; e++) /* per group: [kb][m_per] */
      transpose_scale<<<256, 256>>>(sa + (size_t)e * m_per * kb, sat + (size_t)e * m_per * kb, m_per, (int)kb,
                                    groups > 1 ? m_per : m_lt);
    if (ld) { /* all rows: [kb][ld] */
      CK(cudaMalloc(&sak, (size_t)ld * kb * 4));
      transpose_scale<<<256, 256>>>(sa, sak, m, (int)kb, ld);
    }
  } else {
    fill_bf16<<<1024, 256>>>((uint16_t *)a, na, seed);
    fill_bf16<<<1024, 256>>>((uint16_t *)b, nb, seed + 1000);
  }
  CK(cudaMemset(d, 0xFF, nd * 2)); /* poison: bf16 NaN */
  int *offsets = NULL;
  if (groups > 1) {
    int h_off[257];
    for (int e = 0; e <= groups; e++) h_off[e] = e * m_per;
    CK(cudaMalloc(&offsets, (size_t)(groups + 1) * sizeof(int)));
    CK(cudaMemcpy(offsets, h_off, (size_t)(groups + 1) * sizeof(int), cudaMemcpyHostToDevice));
  }
  lt_gemm g;
  if (lt_setup(&g, groups > 1 ? m_per : m_lt, n, k, fp8, sat, sb)) return -1;
  ws_gemm_problem p = {fp8 ? WS_GEMM_FP8 : WS_GEMM_BF16, groups > 1 ? WS_GEMM_GROUPED_CONTIGUOUS : WS_GEMM_DENSE,
                       m, n, k, groups, a, b, d, ld ? sak : sa, sb, offsets, NULL, NULL, 0, ld, NULL, 0, 0, 0, 0};
  size_t ws_bytes = 0; /* split-K workspace, for dense problems with few rows */
  WK(ws_gemm_workspace_size(&p, &ws_bytes));
  if (ws_bytes) CK(cudaMalloc(&p.workspace, ws_bytes));
  p.workspace_bytes = ws_bytes;
  run_ctx r = {&p, &g, groups, m_per, es, groups > 1 && fp8 ? sat : NULL, sb};
  WK(ws_gemm(&p, 0));
  ws_gemm_problem pref = p;
  pref.d = dref;
  run_ctx rref = r;
  rref.p = &pref;
  if (run_baseline(&rref)) return -1;
  CK(cudaMemset(err, 0, 2 * sizeof(double)));
  diff_bf16<<<1024, 256>>>(d, dref, nd, err);
  double h_err[2];
  WK(ws_sync(0));
  CK(cudaMemcpy(h_err, err, sizeof h_err, cudaMemcpyDeviceToHost));
  const double rel = sqrt(h_err[0] / (h_err[1] > 0 ? h_err[1] : 1));
  float t_ws, t_lt;
  if (time_it(0, &r, &t_ws) || time_it(1, &r, &t_lt)) return -1;
  const double flop = 2.0 * m * n * k;
  const char *type = fp8 ? "fp8" : "bf16";
  int tile_m = 0, tile_n = 0; /* the tile ws_gemm picked for this problem */
  WK(ws_gemm_tile(&p, 0, &tile_m, &tile_n));
  char padded[48] = "";
  if (m_lt > m) snprintf(padded, sizeof padded, "  (cuBLASLt on %d rows)", m_lt);
  printf("  %-4s %3d x %5d %6d %6d %10.3f %10.3f %10.1f %10.1f %7.3fx %9.2e %3dx%-3d%s%s\n", type, groups, m_per, n, k, t_ws,
         t_lt, flop / t_ws / 1e9, flop / t_lt / 1e9, t_lt / t_ws, rel, tile_m, tile_n,
         rel < (fp8 ? 2e-2 : 1e-2) ? "" : "  WRONG (one of the two)", padded);
  if (csv)
    fprintf(csv, "%s,%d,%d,%d,%d,%.4f,%.4f,%.1f,%.1f,%.4f,%.3e,%dx%d\n", type, groups, m_per, n, k, t_ws, t_lt,
            flop / t_ws / 1e9, flop / t_lt / 1e9, t_lt / t_ws, rel, tile_m, tile_n);
  {
    double *rr = g_ratio[fp8][groups > 1];
    const double x = t_lt / t_ws;
    if (g_ratio_n[fp8][groups > 1]++ == 0) rr[0] = rr[1] = x;
    rr[0] = x < rr[0] ? x : rr[0];
    rr[1] = x > rr[1] ? x : rr[1];
  }
  if (g_soak > 0 && soak(&r)) return -1;
  lt_free(&g);
  cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(dref); cudaFree(err); cudaFree(sa); cudaFree(sat); cudaFree(sb); cudaFree(sak);
  cudaFree(offsets);
  cudaFree(p.workspace);
  return 0;
}

/* only: NULL for the whole table, or "TYPE,G,M,N,K" (TYPE bf16 or fp8) for one case,
 * e.g. under a profiler. */
extern "C" int bench_gemm(const char *csv_path, const char *only, double soak_seconds) {
  g_soak = soak_seconds;
  /* the last two: a decode step's projections (1 and 16 tokens), the skinny kernel's shapes */
  const int shapes[][3] = {{8192, 8192, 8192}, {64, 4096, 7168}, {512, 4096, 7168}, {2048, 4096, 7168}, {8192, 4096, 7168},
                           {64, 7168, 2048},   {512, 7168, 2048}, {2048, 7168, 2048}, {8192, 7168, 2048},
                           {1, 4096, 7168},    {16, 7168, 2048}};
  FILE *csv = csv_path ? fopen(csv_path, "w") : NULL;
  if (csv) fprintf(csv, "type,groups,m_per_group,n,k,ws_ms,cublaslt_ms,ws_tflops,cublaslt_tflops,ratio,rel_err,tile\n");
  printf("bench gemm (D = A x B^T, bf16 out), median of 20, TFLOPS = 2mnk/t; cuBLASLt in the same run%s\n"
         "(grouped: G experts x M rows each, ours in one call, cuBLASLt as a loop over experts;\n"
         " FP8 activation scales given to ws_gemm %s, to cuBLASLt K-block-major)\n",
         bench_flush_buffer() ? "; L2 flushed before each call" : "", bench_kmajor_scales() ? "K-block-major (a_scale_ld)" : "row-major (WARPSPEC_BENCH_SCALES=row)");
  printf("  %-4s %11s %6s %6s %10s %10s %10s %10s %8s %9s %s\n", "type", "G x M", "n", "k", "ws ms", "lt ms", "ws TF",
         "lt TF", "ws/lt", "rel err", "tile");
  if (only) {
    char type[8] = "";
    int g = 0, m = 0, n = 0, k = 0;
    if (sscanf(only, "%7[a-z0-9],%d,%d,%d,%d", type, &g, &m, &n, &k) != 5 || g < 1 || m < 1 || n < 1 || k < 1 ||
        (strcmp(type, "fp8") != 0 && strcmp(type, "bf16") != 0)) {
      fprintf(stderr, "bench gemm: --only wants TYPE,G,M,N,K (TYPE bf16 or fp8), got '%s'\n", only);
      return -1;
    }
    const int rc = run_case(strcmp(type, "fp8") == 0, g, m, n, k, 7, csv);
    if (csv) fclose(csv);
    return rc;
  }
  for (int fp8 = 0; fp8 < 2; fp8++) {
    for (unsigned s = 0; s < sizeof shapes / sizeof shapes[0]; s++)
      if (run_case(fp8, 1, shapes[s][0], shapes[s][1], shapes[s][2], 1 + 10 * s + fp8, csv)) return -1;
    const int experts = 8, per[] = {64, 512, 2048, 8192}, nk[][2] = {{4096, 7168}, {7168, 2048}};
    for (int i = 0; i < 2; i++)
      for (int j = 0; j < 4; j++)
        if (run_case(fp8, experts, per[j], nk[i][0], nk[i][1], 100 + 10 * j + i + fp8, csv)) return -1;
  }
  if (csv) fclose(csv);
  for (int fp8 = 0; fp8 < 2; fp8++)
    for (int grouped = 0; grouped < 2; grouped++)
      if (g_ratio_n[fp8][grouped])
        bench_headline("%s GEMM, %s: %.2fx to %.2fx cuBLASLt's speed over %d shapes", fp8 ? "FP8" : "BF16",
                       grouped ? "8 experts in one call" : "one matrix", g_ratio[fp8][grouped][0], g_ratio[fp8][grouped][1],
                       g_ratio_n[fp8][grouped]);
  return 0;
}
