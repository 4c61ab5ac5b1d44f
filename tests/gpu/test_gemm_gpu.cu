/* test_gemm_gpu.cu - ws_gemm and the FP8 quantisers on the GPU, random data, outputs
 * poisoned before each run:
 *   - GPU quantisation (1x128, 128x128) equals the host definition bit for bit;
 *   - BF16 and FP8 GEMMs against the float64 reference (ws_gemm_reference semantics):
 *     dense at aligned, ragged, M = 1 and DeepSeek-V3 expert shapes; grouped contiguous
 *     with ragged and empty experts; grouped contiguous over spans padded to 128 rows with
 *     the counts as group_rows, and grouped masked with partly filled groups (rows past a
 *     group's count must stay poisoned in both); dense problems with few rows, which split K over
 *     several CTAs (fp32 partials, then a summing pass). Every element for small
 *     problems, 20000 random ones for large. Relative error ||D - ref|| / ||ref||: BF16 < 1e-2, FP8 < 2e-2 against
 *     the reference on the same quantised inputs (bf16 rounding of D dominates).
 * Modes: (none) everything; quick (no large shapes); bf16 (the dense BF16 cases, the
 * skinny kernel and split-K in clusters: for compute-sanitizer); clusterk; gather;
 * fp8skinny (dense FP8 of at most 64 rows and masked groups of at most 64 rows' room on the
 * skinny kernel, WARPSPEC_GEMM_FP8_SKINNY) and skinny128 (BF16 of 65-128 rows on the skinny
 * kernel, WARPSPEC_GEMM_SKINNY_ROWS=128): both the defaults since session 39, the modes set
 * their knobs anyway so that they test those kernels whatever the defaults become;
 * skinnybox (both skinny kernels, dense problems of 1-128 rows: A's TMA box of the problem's
 * own rows, the default since session 41; a masked problem keeping the tile's box). */
#include "gpu_test.h"
#include "warpspec/fp8.h"
#include "warpspec/gemm.h"
#include "../../src/gemm/gemm_args.h" /* gemm_kernel_name_for: which kernel a case ran */

#include <math.h>
#include <string.h>

/* Give p the split-K workspace it asks for (none for most problems). */
static void attach_workspace(ws_gemm_problem *p) {
  size_t bytes = 0;
  WS_OK_OR_DIE(ws_gemm_workspace_size(p, &bytes));
  if (bytes) CUDA_OK(cudaMalloc(&p->workspace, bytes));
  p->workspace_bytes = bytes;
}

/* a random value in [-1, 1], in steps of 1 / 1000 */
static float frand(void) { return (float)((int)(rng_u32() % 2001) - 1000) / 1000.0f; }

static int g_skinny = 1; /* WARPSPEC_GEMM_SKINNY as the cases set it */
static int g_skinny_rows = WS_GEMM_SKINNY_ROWS_DEFAULT; /* WARPSPEC_GEMM_SKINNY_ROWS as the cases set it */

/* run_bf16 runs a problem this many times on a poisoned D and requires the first run's bits
 * each time: 1 (twice in all) unless a case asks for more (races that show one run in 20) */
static int g_bf16_again = 1;

static void run_bf16(int m, int n, int k) {
  const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  uint16_t *ha = (uint16_t *)host_alloc(na, 2, 0), *hb = (uint16_t *)host_alloc(nb, 2, 0),
           *hd = (uint16_t *)host_alloc(nd, 2, 0);
  for (size_t i = 0; i < na; i++) ha[i] = ws_float_to_bf16(frand());
  for (size_t i = 0; i < nb; i++) hb[i] = ws_float_to_bf16(frand());
  void *a, *b, *d;
  CUDA_OK(cudaMalloc(&a, na * 2));
  CUDA_OK(cudaMalloc(&b, nb * 2));
  CUDA_OK(cudaMalloc(&d, nd * 2 + 256));
  CUDA_OK(cudaMemcpy(a, ha, na * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, hb, nb * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256)); /* poison: bf16 NaN */
  ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_DENSE, m, n, k, 1, a, b, d, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  attach_workspace(&p);
  WS_OK_OR_DIE(ws_gemm(&p, 0));
  WS_OK_OR_DIE(ws_sync(0));
  CUDA_OK(cudaMemcpy(hd, d, nd * 2, cudaMemcpyDeviceToHost));
  /* again on a poisoned D: the K slices are summed in a fixed order, so the same bits */
  uint16_t *again = (uint16_t *)host_alloc(nd, 2, 0);
  int same = 1;
  for (int rep = 0; rep < g_bf16_again; rep++) {
    CUDA_OK(cudaMemset(d, 0xFF, nd * 2));
    WS_OK_OR_DIE(ws_gemm(&p, 0));
    WS_OK_OR_DIE(ws_sync(0));
    CUDA_OK(cudaMemcpy(again, d, nd * 2, cudaMemcpyDeviceToHost));
    same &= memcmp(again, hd, nd * 2) == 0;
  }
  free(again);
  int sms = 0;
  CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const char *kernel = gemm_kernel_name_for(&p, sms);
  uint16_t guard[128];
  CUDA_OK(cudaMemcpy(guard, (uint8_t *)d + nd * 2, sizeof guard, cudaMemcpyDeviceToHost));
  const int full = nd <= (1u << 18);
  const size_t samples = full ? nd : 20000;
  double num = 0, den = 0;
  long nan_count = 0;
  for (size_t s = 0; s < samples; s++) {
    const size_t idx = full ? s : ((size_t)rng_u32() * 65536u + rng_u32()) % nd;
    const size_t r = idx / n, j = idx % n;
    double ref = 0;
    for (int kk = 0; kk < k; kk++) ref += (double)ws_bf16_to_float(ha[r * k + kk]) * ws_bf16_to_float(hb[j * k + kk]);
    const double got = ws_bf16_to_float(hd[idx]);
    if (isnan(got)) nan_count++;
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  int guard_ok = 1;
  for (int i = 0; i < 128; i++) guard_ok &= guard[i] == 0xFFFF;
  const double rel = sqrt(num / (den > 0 ? den : 1));
  printf("bf16 %5d x %5d x %5d (%s): rel err %.2e over %zu elements, %ld unwritten%s%s\n", m, n, k, kernel ? kernel : "?",
         rel, samples, nan_count, guard_ok ? "" : ", WROTE PAST D", same ? "" : ", NOT THE SAME BITS TWICE");
  CHECK(nan_count == 0 && rel < 1e-2 && guard_ok && same);
  /* the kernel meant for the case ran: few rows on the skinny kernel unless switched off */
  CHECK(kernel && (strncmp(kernel, "gemm_bf16_skinny", 16) == 0) == (m <= g_skinny_rows && g_skinny));
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  cudaFree(p.workspace);
  free(ha);
  free(hb);
  free(hd);
}


/* FP8 activation scales handed over K-block-major (a_scale_ld = rows rounded up to 4,
 * plus 4) instead of row-major. */
static int g_kmajor;
/* A gathered (ws_gemm_problem.a_rows): the rows of A sit shuffled among GATHER_EXTRA more
 * in a source of wider rows (GATHER_PAD bytes between them) with row-major scales of
 * GATHER_SPAD more floats a row; every 7th row of D is padding (-1) and not checked. */
static int g_gather;

/* FP8 on the 192-row tile: run every problem on single CTAs (WARPSPEC_GEMM_PAIR=0), then in
 * CTA pairs (the default), and require the same bits (the pairs change who loads A, not the
 * arithmetic; an odd tile-column count stays unpaired by the host's rule). */
static int g_pair;
/* WARPSPEC_GEMM_FP8_SKINNY on (the fp8skinny mode): a dense FP8 problem of at most 64 rows must
 * run the skinny kernel */
static int g_fp8_skinny;
/* contiguous: each group's span padded to a multiple of this (0: none) and the counts passed
 * as group_rows (ws_ep's receive layout): the padding rows of D must stay poisoned */
static int g_pad;
#define GATHER_EXTRA 37
#define GATHER_PAD 48
#define GATHER_SPAD 3

/* A grouped / dense problem in both host and device memory, FP8 or BF16, checked. */
static void run_problem(ws_gemm_type type, ws_gemm_layout layout, int m, int n, int k, int groups, const int *counts) {
  const int fp8 = type == WS_GEMM_FP8;
  REQUIRE(groups >= 1 && m >= 0 && n > 0 && k > 0);
  const size_t ngroups = (size_t)groups;
  int *offsets = (int *)host_alloc(ngroups + 1, sizeof(int), 0);
  memset(offsets, 0, (ngroups + 1) * sizeof(int));
  if (layout == WS_GEMM_GROUPED_CONTIGUOUS) {
    for (int g = 0; g < groups; g++) offsets[g + 1] = offsets[g] + (g_pad ? (counts[g] + g_pad - 1) / g_pad * g_pad : counts[g]);
    m = offsets[groups];
  }
  REQUIRE(m >= 0);
  const size_t rows = layout == WS_GEMM_GROUPED_MASKED ? ngroups * (size_t)m : (size_t)m;
  const size_t na = rows * (size_t)k, nb = ngroups * (size_t)n * (size_t)k, nd = rows * (size_t)n, es = fp8 ? 1 : 2;
  const size_t nsa = rows * (size_t)(k / 128), nsb = ngroups * (size_t)(n / 128) * (size_t)(k / 128);
  uint8_t *ha = (uint8_t *)host_alloc(na, es, 1), *hb = (uint8_t *)host_alloc(nb, es, 1);
  float *hsa = (float *)host_alloc(nsa, sizeof(float), 4), *hsb = (float *)host_alloc(nsb, sizeof(float), 4);
  uint16_t *hd = (uint16_t *)host_alloc(nd, 2, 2);
  if (fp8) {
    /* quantise random floats with the host definition: realistic values and scales */
    float *tmp = (float *)host_alloc((na > nb ? na : nb) + 1, sizeof(float), 0);
    for (size_t i = 0; i < na; i++) tmp[i] = frand() * (float)(1 + (i / k) % 7);
    ws_fp8_quantize_1x128_host(tmp, rows, k, k, ha, hsa);
    for (size_t i = 0; i < nb; i++) tmp[i] = frand();
    for (int g = 0; g < groups; g++)
      ws_fp8_quantize_128x128_host(tmp + (size_t)g * n * k, n, k, k, hb + (size_t)g * n * k,
                                   hsb + (size_t)g * (n / 128) * (k / 128));
    free(tmp);
  } else {
    for (size_t i = 0; i < na; i++) ((uint16_t *)ha)[i] = ws_float_to_bf16(frand());
    for (size_t i = 0; i < nb; i++) ((uint16_t *)hb)[i] = ws_float_to_bf16(frand());
  }
  void *a, *b, *d, *sa = NULL, *sb = NULL, *doff = NULL, *dcnt = NULL;
  CUDA_OK(cudaMalloc(&b, nb * es + 16));
  CUDA_OK(cudaMalloc(&d, nd * 2 + 256));
  /* gathered: A row r is source row perm[r]; the source's other rows hold random values */
  int *ga_rows = NULL, *dga_rows = NULL;
  const size_t g_total = rows + GATHER_EXTRA, g_row = (size_t)k * es + GATHER_PAD, g_kb = (size_t)k / 128 + GATHER_SPAD;
  float *gsa = NULL;
  if (g_gather) {
    ga_rows = (int *)host_alloc(rows + 1, sizeof(int), 0);
    int *perm = (int *)host_alloc(g_total, sizeof(int), 0);
    for (size_t i = 0; i < g_total; i++) perm[i] = (int)i;
    for (size_t i = g_total - 1; i > 0; i--) { const size_t j = rng_u32() % (i + 1); const int t = perm[i]; perm[i] = perm[j]; perm[j] = t; }
    uint8_t *src = (uint8_t *)host_alloc(g_total * g_row, 1, 1);
    gsa = (float *)host_alloc(g_total * g_kb, sizeof(float), 0);
    for (size_t i = 0; i < g_total * g_kb; i++) gsa[i] = 0.5f + (float)(rng_u32() % 100) / 100.0f;
    for (size_t r = 0; r < rows; r++) {
      ga_rows[r] = r % 7 == 3 ? -1 : perm[r];
      memcpy(src + (size_t)perm[r] * g_row, ha + r * k * es, (size_t)k * es);
      for (size_t c = 0; fp8 && c < (size_t)k / 128; c++) gsa[(size_t)perm[r] * g_kb + c] = hsa[r * (k / 128) + c];
    }
    CUDA_OK(cudaMalloc(&a, g_total * g_row + 16));
    CUDA_OK(cudaMemcpy(a, src, g_total * g_row, cudaMemcpyHostToDevice));
    CUDA_OK(cudaMalloc((void **)&dga_rows, (rows + 1) * sizeof(int)));
    CUDA_OK(cudaMemcpy(dga_rows, ga_rows, rows * sizeof(int), cudaMemcpyHostToDevice));
    free(perm); free(src);
  } else {
    CUDA_OK(cudaMalloc(&a, na * es + 16));
    CUDA_OK(cudaMemcpy(a, ha, na * es, cudaMemcpyHostToDevice));
  }
  CUDA_OK(cudaMemcpy(b, hb, nb * es, cudaMemcpyHostToDevice));
  /* K-block-major scales: the leading dimension in size_t (it sizes a buffer), checked to
   * fit the int field of ws_gemm_problem */
  const size_t scale_ld = fp8 && g_kmajor ? (rows + 3) / 4 * 4 + 4 : 0;
  REQUIRE(scale_ld <= (size_t)INT32_MAX);
  const int a_scale_ld = (int)scale_ld;
  if (fp8 && g_gather) {
    CUDA_OK(cudaMalloc(&sa, g_total * g_kb * sizeof(float) + 16));
    CUDA_OK(cudaMalloc(&sb, nsb * sizeof(float) + 16));
    CUDA_OK(cudaMemcpy(sa, gsa, g_total * g_kb * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(sb, hsb, nsb * sizeof(float), cudaMemcpyHostToDevice));
  } else if (fp8) {
    const size_t kb = (size_t)k / 128, nsa_dev = scale_ld ? kb * scale_ld : nsa;
    float *tsa = (float *)host_alloc(nsa_dev, sizeof(float), 4);
    for (size_t i = 0; i < nsa_dev; i++) tsa[i] = NAN; /* padding columns: never read */
    for (size_t r = 0; r < rows; r++)
      for (size_t c = 0; c < kb; c++) tsa[scale_ld ? c * scale_ld + r : r * kb + c] = hsa[r * kb + c];
    CUDA_OK(cudaMalloc(&sa, nsa_dev * sizeof(float) + 16));
    CUDA_OK(cudaMalloc(&sb, nsb * sizeof(float) + 16));
    CUDA_OK(cudaMemcpy(sa, tsa, nsa_dev * sizeof(float), cudaMemcpyHostToDevice));
    CUDA_OK(cudaMemcpy(sb, hsb, nsb * sizeof(float), cudaMemcpyHostToDevice));
    free(tsa);
  }
  CUDA_OK(cudaMalloc(&doff, (ngroups + 1) * sizeof(int)));
  CUDA_OK(cudaMalloc(&dcnt, ngroups * sizeof(int)));
  CUDA_OK(cudaMemcpy(doff, offsets, (ngroups + 1) * sizeof(int), cudaMemcpyHostToDevice));
  if (counts) CUDA_OK(cudaMemcpy(dcnt, counts, ngroups * sizeof(int), cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256));
  ws_gemm_problem p = {type, layout, m, n, k, groups, a, b, d, (const float *)sa, (const float *)sb,
                       layout == WS_GEMM_GROUPED_CONTIGUOUS ? (const int *)doff : NULL,
                       layout == WS_GEMM_GROUPED_MASKED || (g_pad && layout == WS_GEMM_GROUPED_CONTIGUOUS) ? (const int *)dcnt : NULL,
                       NULL, 0, a_scale_ld, NULL, 0, 0, 0, 0};
  if (g_gather) {
    p.a_rows = dga_rows;
    p.a_rows_total = (int)g_total;
    p.a_row_bytes = g_row;
    p.a_scale_stride = fp8 ? (int)g_kb : 0;
  }
  attach_workspace(&p);
  if (g_pair) test_set_knob(WS_GEMM_PAIR_ENV, "0"); /* the single-CTA kernel first, the pairs (default) after */
  WS_OK_OR_DIE(ws_gemm(&p, 0));
  WS_OK_OR_DIE(ws_sync(0));
  CUDA_OK(cudaMemcpy(hd, d, nd * 2, cudaMemcpyDeviceToHost));
  if (g_fp8_skinny && fp8) {
    int sms = 0;
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const char *kname = gemm_kernel_name_for(&p, sms);
    const int skinny = kname && strncmp(kname, "gemm_fp8_skinny", 15) == 0;
    CHECK(skinny == (layout != WS_GEMM_GROUPED_CONTIGUOUS && m <= 64 && !g_gather));
    /* again on a poisoned D: the slices sum in a fixed order, so the same bits */
    uint16_t *again = (uint16_t *)host_alloc(nd, 2, 0);
    CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256));
    WS_OK_OR_DIE(ws_gemm(&p, 0));
    WS_OK_OR_DIE(ws_sync(0));
    CUDA_OK(cudaMemcpy(again, d, nd * 2, cudaMemcpyDeviceToHost));
    const int same = memcmp(again, hd, nd * 2) == 0;
    printf("  %s: %s\n", kname ? kname : "?", same ? "same bits twice" : "DIFFERENT BITS TWICE");
    CHECK(same);
    if (skinny && layout == WS_GEMM_DENSE) {
      /* Measured, not required: the skinny kernel (weights on wgmma's M side, rows on N)
       * against the tile kernel (rows on M), both unsplit, so that the only difference is
       * the wgmma's orientation (the same per-K-block promotion in both). The MoE layer's
       * decode would put its weights on M too (design.md), and its paths must give the
       * same bits as the unfused GEMMs, which keep the rows on M. */
      const char *splits = getenv(WS_GEMM_SPLITS_ENV);
      char *saved = splits ? strdup(splits) : NULL;
      test_set_knob(WS_GEMM_SPLITS_ENV, "1");
      uint16_t *w_on_m = (uint16_t *)host_alloc(nd, 2, 0), *rows_on_m = (uint16_t *)host_alloc(nd, 2, 0);
      CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256));
      WS_OK_OR_DIE(ws_gemm(&p, 0));
      WS_OK_OR_DIE(ws_sync(0));
      CUDA_OK(cudaMemcpy(w_on_m, d, nd * 2, cudaMemcpyDeviceToHost));
      test_set_knob(WS_GEMM_FP8_SKINNY_ENV, "0");
      const char *other = gemm_kernel_name_for(&p, sms);
      CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256));
      WS_OK_OR_DIE(ws_gemm(&p, 0));
      WS_OK_OR_DIE(ws_sync(0));
      CUDA_OK(cudaMemcpy(rows_on_m, d, nd * 2, cudaMemcpyDeviceToHost));
      test_set_knob(WS_GEMM_FP8_SKINNY_ENV, "1");
      test_set_knob(WS_GEMM_SPLITS_ENV, saved);
      free(saved);
      size_t differ = 0;
      for (size_t i = 0; i < nd; i++) differ += w_on_m[i] != rows_on_m[i];
      printf("  weights on M (%s) against rows on M (%s), one split each: %zu of %zu values differ (measured, not "
             "required)\n", kname ? kname : "?", other ? other : "?", differ, nd);
      free(w_on_m);
      free(rows_on_m);
    }
    free(again);
  }
  if (g_pair && fp8 && !g_gather) {
    uint16_t *hp = (uint16_t *)host_alloc(nd, 2, 0);
    CUDA_OK(cudaMemset(d, 0xFF, nd * 2 + 256));
    test_set_knob(WS_GEMM_PAIR_ENV, "1");
    int tr = 0, tc = 0, sms = 0;
    WS_OK_OR_DIE(ws_gemm_tile(&p, 0, &tr, &tc));
    CUDA_OK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const char *kname = gemm_kernel_name_for(&p, sms);
    /* pairs exactly where the host rule says: the 192-row tile with an even number of tile columns */
    const int paired = kname && strstr(kname, "_pair") != NULL, even = (n + tc - 1) / tc % 2 == 0;
    CHECK(paired == (tr == 192 && even));
    WS_OK_OR_DIE(ws_gemm(&p, 0));
    WS_OK_OR_DIE(ws_sync(0));
    test_set_knob(WS_GEMM_PAIR_ENV, NULL);
    CUDA_OK(cudaMemcpy(hp, d, nd * 2, cudaMemcpyDeviceToHost));
    const int same = memcmp(hp, hd, nd * 2) == 0;
    printf("  CTA pairs (%d-row tile, %s): %s\n", tr, kname ? kname : "?", same ? "same bits" : "DIFFERENT BITS");
    CHECK(same);
    free(hp);
  }
  /* the reference, row by row for the sampled rows (host pointers, one group's view); the
   * E4M3 values from a table of all 256 (the same doubles ws_fp8_e4m3_decode returns: its
   * ldexp per operand made this loop most of the test's host time) */
  double e4m3[256];
  for (int v = 0; v < 256; v++) e4m3[v] = ws_fp8_e4m3_decode((uint8_t)v);
  const int full = nd <= (1u << 17);
  const size_t samples = full ? nd : 20000;
  double num = 0, den = 0;
  long unwritten = 0, overwritten = 0;
  for (size_t sidx = 0; sidx < samples; sidx++) {
    const size_t idx = full ? sidx : ((size_t)rng_u32() * 65536u + rng_u32()) % nd;
    const size_t r = idx / n, j = idx % n;
    int g = 0, valid = 1;
    if (layout == WS_GEMM_GROUPED_CONTIGUOUS) {
      g = ws_gemm_group_of_row(offsets, groups, (int)r);
      valid = !g_pad || (int)r - offsets[g] < counts[g];
    }
    if (layout == WS_GEMM_GROUPED_MASKED) { g = (int)(r / m); valid = (int)(r % m) < counts[g]; }
    const uint16_t got_bits = hd[idx];
    if (!valid) { overwritten += got_bits != 0xFFFF; continue; }
    if (g_gather && ga_rows[r] < 0) continue; /* padding: whatever A row 0 gives */
    double ref = 0;
    for (int kk = 0; kk < k; kk++) {
      const size_t ia = r * k + kk, ib = ((size_t)g * n + j) * k + kk;
      if (fp8)
        ref += e4m3[ha[ia]] * hsa[r * (k / 128) + kk / 128] * e4m3[hb[ib]] *
               hsb[((size_t)g * (n / 128) + j / 128) * (k / 128) + kk / 128];
      else
        ref += (double)ws_bf16_to_float(((uint16_t *)ha)[ia]) * ws_bf16_to_float(((uint16_t *)hb)[ib]);
    }
    const double got = ws_bf16_to_float(got_bits);
    if (isnan(got)) { unwritten++; continue; }
    num += (got - ref) * (got - ref);
    den += ref * ref;
  }
  const double rel = sqrt(num / (den > 0 ? den : 1)), bound = fp8 ? 2e-2 : 1e-2;
  printf("%s%s%s %-10s %5d x %5d x %5d, %d groups: rel err %.2e, %ld unwritten, %ld written outside groups\n",
         g_pad && layout == WS_GEMM_GROUPED_CONTIGUOUS ? "padded " : "", g_gather ? "gathered " : "", fp8 ? (a_scale_ld ? "fp8k" : "fp8 ") : "bf16", layout == WS_GEMM_DENSE ? "dense" : layout == WS_GEMM_GROUPED_CONTIGUOUS ? "contiguous" : "masked",
         m, n, k, groups, rel, unwritten, overwritten);
  CHECK(rel < bound && unwritten == 0 && overwritten == 0);
  cudaFree(a); cudaFree(b); cudaFree(d); cudaFree(sa); cudaFree(sb); cudaFree(doff); cudaFree(dcnt); cudaFree(p.workspace);
  cudaFree(dga_rows);
  free(ha); free(hb); free(hsa); free(hsb); free(hd); free(offsets); free(ga_rows); free(gsa);
}

static void quantize_matches_host(void) {
  const size_t rows = 300, cols = 512;
  uint16_t *hx = (uint16_t *)host_alloc(rows * cols, 2, 0);
  float *fx = (float *)host_alloc(rows * cols, sizeof(float), 0);
  for (size_t i = 0; i < rows * cols; i++) {
    hx[i] = ws_float_to_bf16(frand() * (float)(1 << (i / 128) % 5));
    fx[i] = ws_bf16_to_float(hx[i]);
  }
  for (size_t c = 0; c < 128; c++) { hx[7 * cols + c] = 0; fx[7 * cols + c] = 0; } /* an all-zero block */
  uint8_t *hq = (uint8_t *)host_alloc(rows, cols, 0), *gq = (uint8_t *)host_alloc(rows, cols, 0);
  float *hs = (float *)host_alloc(rows * 4, sizeof(float), 0), *gs = (float *)host_alloc(rows * 4, sizeof(float), 0);
  void *dx, *dq, *ds;
  CUDA_OK(cudaMalloc(&dx, rows * cols * 2));
  CUDA_OK(cudaMalloc(&dq, rows * cols));
  CUDA_OK(cudaMalloc(&ds, rows * 4 * sizeof(float)));
  CUDA_OK(cudaMemcpy(dx, hx, rows * cols * 2, cudaMemcpyHostToDevice));
  for (int kind = 0; kind < 3; kind++) { /* 1x128, 128x128, 1x128 with K-block-major scales */
    const size_t ns = kind == 1 ? ((rows + 127) / 128) * 4 : rows * 4;
    CUDA_OK(cudaMemset(dq, 0x7F, rows * cols));
    CUDA_OK(cudaMemset(ds, 0xFF, rows * 4 * sizeof(float)));
    if (kind == 0) {
      WS_OK_OR_DIE(ws_fp8_quantize_1x128(dx, rows, cols, cols, (uint8_t *)dq, (float *)ds, 0));
      ws_fp8_quantize_1x128_host(fx, rows, cols, cols, hq, hs);
    } else if (kind == 1) {
      WS_OK_OR_DIE(ws_fp8_quantize_128x128(dx, rows, cols, cols, (uint8_t *)dq, (float *)ds, 0));
      ws_fp8_quantize_128x128_host(fx, rows, cols, cols, hq, hs);
    } else { /* scale_ld = rows: hs transposed */
      WS_OK_OR_DIE(ws_fp8_quantize_1x128_kmajor(dx, rows, cols, cols, (uint8_t *)dq, (float *)ds, rows, 0));
      float *row_major = (float *)host_alloc(rows * 4, sizeof(float), 0);
      ws_fp8_quantize_1x128_host(fx, rows, cols, cols, hq, row_major);
      for (size_t r = 0; r < rows; r++)
        for (size_t c = 0; c < 4; c++) hs[c * rows + r] = row_major[r * 4 + c];
      free(row_major);
    }
    WS_OK_OR_DIE(ws_sync(0));
    CUDA_OK(cudaMemcpy(gq, dq, rows * cols, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(gs, ds, ns * sizeof(float), cudaMemcpyDeviceToHost));
    const int same = memcmp(gq, hq, rows * cols) == 0 && memcmp(gs, hs, ns * sizeof(float)) == 0;
    printf("quantise %s on the GPU: %s the host definition\n", kind == 0 ? "1x128  " : kind == 1 ? "128x128" : "1x128 K-block-major",
           same ? "equals" : "DIFFERS FROM");
    CHECK(same);
  }
  cudaFree(dx); cudaFree(dq); cudaFree(ds);
  free(hx); free(fx); free(hq); free(gq); free(hs); free(gs);
}

/* WARPSPEC_GEMM_CLUSTER_K (BF16 split-K summed inside clusters, up to the knob's count of
 * slices): the same forced slices with the workspace and in clusters must give the same
 * bits (both sum the slices in order), and the cluster form no workspace. */
static void bf16_cluster_k_case(int m, int n, int k, const char *splits) {
  const size_t na = (size_t)m * k, nb = (size_t)n * k, nd = (size_t)m * n;
  uint16_t *ha = (uint16_t *)host_alloc(na, 2, 0), *hb = (uint16_t *)host_alloc(nb, 2, 0);
  uint16_t *d0 = (uint16_t *)host_alloc(nd, 2, 0), *d1 = (uint16_t *)host_alloc(nd, 2, 0);
  for (size_t i = 0; i < na; i++) ha[i] = ws_float_to_bf16(frand());
  for (size_t i = 0; i < nb; i++) hb[i] = ws_float_to_bf16(frand());
  void *a, *b, *d;
  CUDA_OK(cudaMalloc(&a, na * 2));
  CUDA_OK(cudaMalloc(&b, nb * 2));
  CUDA_OK(cudaMalloc(&d, nd * 2));
  CUDA_OK(cudaMemcpy(a, ha, na * 2, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(b, hb, nb * 2, cudaMemcpyHostToDevice));
  test_set_knob(WS_GEMM_SPLITS_ENV, splits);
  size_t ws_bytes[2] = {0, 0};
  for (int on = 0; on < 2; on++) {
    test_set_knob(WS_GEMM_CLUSTER_K_ENV, on ? "8" : "0");
    ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_DENSE, m, n, k, 1, a, b, d, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
    attach_workspace(&p);
    ws_bytes[on] = p.workspace_bytes;
    CUDA_OK(cudaMemset(d, 0xFF, nd * 2));
    WS_OK_OR_DIE(ws_gemm(&p, 0));
    WS_OK_OR_DIE(ws_sync(0));
    CUDA_OK(cudaMemcpy(on ? d1 : d0, d, nd * 2, cudaMemcpyDeviceToHost));
    cudaFree(p.workspace);
  }
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, NULL);
  test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
  long nan_count = 0;
  for (size_t i = 0; i < nd; i++) nan_count += d1[i] == 0xFFFF;
  const int same = memcmp(d0, d1, nd * 2) == 0;
  printf("bf16 %5d x %5d x %5d, %s slices: clusters %s the workspace's bits, %ld unwritten, workspace %zu -> %zu B\n", m, n,
         k, splits, same ? "give" : "DO NOT GIVE", nan_count, ws_bytes[0], ws_bytes[1]);
  CHECK(same && nan_count == 0 && ws_bytes[0] > 0 && ws_bytes[1] == 0);
  cudaFree(a);
  cudaFree(b);
  cudaFree(d);
  free(ha);
  free(hb);
  free(d0);
  free(d1);
}

/* "quick": without the large shapes (for compute-sanitizer, which runs every access
 * through its checks). */
static int quick;

/* Split-K in clusters at forced slice counts against the workspace, then at the chosen
 * ones against the float64 reference. */
static void bf16_cluster_k_cases(void) {
  /* the 128 x 256 tile's split-K: 65-128 rows would run the skinny kernel by default */
  test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, "64");
  g_skinny_rows = 64;
  bf16_cluster_k_case(128, 512, 2048, "2");    /* 2 tiles x 2 slices */
  bf16_cluster_k_case(300, 264, 1024, "3");    /* ragged rows and columns, 3 slices */
  bf16_cluster_k_case(96, 1024, 4096, "8");    /* 4 tiles x 8 */
  if (!quick) bf16_cluster_k_case(512, 4096, 7168, "2"); /* 64 tiles x 2: the bench's 512-row shape */
  bf16_cluster_k_case(128, 768, 1344, "7");    /* 21 K steps over 7 */
  const int was_quick = quick;
  quick = 1;
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, "8");
  run_bf16(96, 1024, 4096);                    /* against the float64 reference, chosen slices (8) */
  run_bf16(200, 512, 2048);
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, NULL);
  run_bf16(256, 7168, 1024);                   /* the default on 132 SMs: 56 tiles x 2 slices in clusters */
  quick = was_quick;
  test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, NULL);
  g_skinny_rows = WS_GEMM_SKINNY_ROWS_DEFAULT;
}

/* The dense BF16 cases: the 128 x 256 tile, the skinny kernel (at most 64 rows) with its
 * K slices in clusters of every width, and split-K on the 128 x 256 tile. */
static void bf16_dense_cases(void) {
  run_bf16(128, 256, 64);     /* one tile, one K step   */
  run_bf16(256, 512, 1024);   /* several tiles and steps */
  run_bf16(1, 256, 128);      /* M = 1                   */
  run_bf16(300, 264, 192);    /* ragged M and N          */
  /* a last tile column of 1-2 of its four 64-column chunks, 40 runs each: the TMA-store
   * epilogue once staged the chunks past n into buffers still being stored (1 run in ~20) */
  g_bf16_again = 40;
  run_bf16(257, 520, 128);    /* n % 256 = 8: one chunk  */
  run_bf16(300, 328, 192);    /* n % 256 = 72: two       */
  /* more tiles than SMs: a CTA's next tile after a last column of 1 or 3 chunks (an odd
   * number of stores, the last still reading buffer 0) */
  run_bf16(16384, 520, 128);  /* 384 tiles, n % 256 = 8   */
  run_bf16(16384, 392, 128);  /* 256 tiles, n % 256 = 136 */
  g_bf16_again = 1;
  run_bf16(64, 512, 2048);    /* skinny: 8 columns of 64 weight rows x 8 slices in clusters */
  run_bf16(1, 256, 1024);     /* skinny, M = 1: 4 columns x 4 slices */
  run_bf16(5, 1000, 640);     /* skinny: a partial last column (n = 15.6 x 64), 5 K steps */
  run_bf16(17, 264, 4096);    /* skinny, 32 rows of A read */
  run_bf16(64, 7168, 2048);   /* skinny, DeepSeek-V3 L2 shape: 112 columns, no cluster */
  if (!quick) run_bf16(40, 4096, 7168); /* 64 columns x 2 */
  test_set_knob(WS_GEMM_SPLITS_ENV, "3");
  run_bf16(33, 512, 1344);    /* clusters of 3, 11 stages of 2 K steps: 3, 4, 4 */
  run_bf16(20, 256, 192);     /* clusters of 3, 2 stages: one slice has none (adds zeros) */
  test_set_knob(WS_GEMM_SPLITS_ENV, "7");
  run_bf16(64, 384, 1216);    /* clusters of 7, 10 stages, the last half past K; 8 column vectors over 7 CTAs */
  test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
  test_set_knob(WS_GEMM_SKINNY_ENV, "0");
  g_skinny = 0;
  run_bf16(64, 512, 2048);    /* the 128 x 256 tile's split-K: 2 tiles x 8, fp32 partials */
  run_bf16(1, 256, 1024);     /* split-K, M = 1          */
  test_set_knob(WS_GEMM_SKINNY_ENV, NULL);
  g_skinny = 1;
}

int main(int argc, char **argv) {
  quick = argc > 1 && strcmp(argv[1], "quick") == 0;
  require_hopper();
  rng_seed_from_time();
  if (argc > 1 && strcmp(argv[1], "bf16") == 0) { /* the dense BF16 cases alone, quick (compute-sanitizer) */
    quick = 1;
    bf16_dense_cases();
    bf16_cluster_k_cases();
    return test_finish("test_gemm_gpu bf16");
  }
  if (argc > 1 && strcmp(argv[1], "clusterk") == 0) { /* BF16 split-K in clusters (see above) */
    bf16_cluster_k_cases();
    return test_finish("test_gemm_gpu clusterk");
  }
  if (argc > 1 && strcmp(argv[1], "skinny128") == 0) { /* BF16 of 65-128 rows on the skinny kernel (WARPSPEC_GEMM_SKINNY_ROWS=128) */
    test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, "128");
    g_skinny_rows = 128;
    run_bf16(128, 512, 2048);   /* 8 columns x 8 slices, one K box a stage */
    run_bf16(65, 1000, 640);    /* a partial last column, 10 K steps */
    run_bf16(100, 7168, 2048);  /* 112 columns, no cluster */
    run_bf16(96, 4096, 1024);   /* 64 columns x 2 */
    run_bf16(129, 512, 1024);   /* 129 rows: the 128 x 256 tile */
    test_set_knob(WS_GEMM_SPLITS_ENV, "3");
    run_bf16(120, 256, 1344);   /* clusters of 3 over 21 stages */
    test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
    test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, NULL);
    g_skinny_rows = WS_GEMM_SKINNY_ROWS_DEFAULT;
    return test_finish("test_gemm_gpu skinny128");
  }
  if (argc > 1 && strcmp(argv[1], "skinnybox") == 0) { /* the skinny kernels' A box of the problem's own rows */
    test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, "128");
    g_skinny_rows = 128;
    run_bf16(1, 256, 1024);     /* a box of one row in the 16-row kernel */
    run_bf16(17, 512, 2048);    /* 17 of 32 */
    run_bf16(80, 7168, 2048);   /* 80 of 128: the case it is for */
    run_bf16(100, 1000, 640);   /* a partial last column */
    run_bf16(128, 512, 2048);   /* a whole box: the map as before */
    test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, NULL);
    g_skinny_rows = WS_GEMM_SKINNY_ROWS_DEFAULT;
    test_set_knob(WS_GEMM_FP8_SKINNY_ENV, "1");
    g_fp8_skinny = 1;
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 1024, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 5, 1024, 640, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 40, 4096, 7168, 1, NULL);
    {
      const int c4[4] = {48, 0, 17, 1}; /* masked groups keep the tile's box */
      run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 48, 512, 1024, 4, c4);
    }
    return test_finish("test_gemm_gpu skinnybox");
  }
  if (argc > 1 && strcmp(argv[1], "fp8skinny") == 0) { /* FP8 with few rows on the skinny kernel (WARPSPEC_GEMM_FP8_SKINNY) */
    test_set_knob(WS_GEMM_FP8_SKINNY_ENV, "1");
    g_fp8_skinny = 1;
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 1024, 1, NULL);   /* 4 columns, one slice */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 5, 1024, 640, 1, NULL);   /* 5 K blocks: the last stage half past K */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 17, 512, 4096, 1, NULL);  /* 32 rows of A read, clusters of 4 */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 7168, 2048, 1, NULL); /* DeepSeek-V3 L2 shape: 112 columns */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 40, 4096, 7168, 1, NULL); /* 64 columns x 2 slices */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 65, 512, 1024, 1, NULL);  /* 65 rows: not skinny */
    {
      const int c4[4] = {48, 0, 17, 1}, c8[8] = {3, 64, 0, 1, 9, 64, 33, 2};
      run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 48, 512, 1024, 4, c4);  /* room 48 (TOK 64 reads the next group's rows), an empty group */
      run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 64, 1024, 2048, 8, c8); /* decode experts: 8 groups x 16 columns */
      const int ctg[3] = {5, 0, 40};
      run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 512, 1024, 3, ctg); /* contiguous: not skinny */
    }
    g_kmajor = 1; /* K-block-major activation scales */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 1024, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 17, 512, 4096, 1, NULL);
    g_kmajor = 0;
    test_set_knob(WS_GEMM_SPLITS_ENV, "3");
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 33, 512, 1408, 1, NULL);  /* 11 K blocks, 6 stages over 3 */
    test_set_knob(WS_GEMM_SPLITS_ENV, "7");
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 384, 1280, 1, NULL);  /* 5 stages over 7: two slices add zeros */
    test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
    test_set_knob(WS_GEMM_FP8_SKINNY_ENV, NULL);
    g_fp8_skinny = 0;
    return test_finish("test_gemm_gpu fp8skinny");
  }
  if (argc > 1 && strcmp(argv[1], "gather") == 0) { /* the FP8 gathered cases alone, 10 times each, both tiles */
    const int ragged[5] = {200, 0, 1, 513, 64};
    const int masked[4] = {100, 0, 256, 17};
    g_gather = 1;
    for (int rep = 0; rep < 20; rep++) {
      test_set_knob(WS_GEMM_FP8_TILE_ENV, rep % 2 ? "192" : "128");
      run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 300, 384, 1024, 1, NULL);
      run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 640, 5, ragged);
      run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 256, 256, 512, 4, masked);
    }
    return test_finish("test_gemm_gpu gather");
  }
  quantize_matches_host();
  /* FP8 on both tiles (ws_gemm_tile picks one per problem; forced here so that each
   * shape and layout runs on the 128-row and the 192-row kernel) */
  const char *fp8_tiles[2] = {"128", "192"};
  for (int t = 0; t < 4; t++) {
    test_set_knob(WS_GEMM_FP8_TILE_ENV, fp8_tiles[t % 2]);
    g_kmajor = t / 2; /* then with K-block-major activation scales (the TMA path of the 192-row tile) */
    printf("FP8 tile %s rows, %s activation scales\n", fp8_tiles[t % 2], g_kmajor ? "K-block-major" : "row-major");
    const int ragged[5] = {200, 0, 1, 513, 64}; /* an empty expert and a 1-row one */
    const int masked[4] = {100, 0, 256, 17};
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 128, 128, 128, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 512, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 300, 384, 1024, 1, NULL);
    if (!quick) run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 4096, 4096, 7168, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 512, 2048, 1, NULL);  /* split-K: 4 tiles x 4 slices */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 4096, 1, NULL);   /* split-K: 2 tiles x 8 slices */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 600, 256, 512, 1, NULL);  /* 192-row tiles: a partial last one */
    /* K not a multiple of 512: the loader copies the scales without TMA */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 300, 256, 384, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 640, 5, ragged);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 512, 5, ragged);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 256, 256, 512, 4, masked);
    if (!quick) run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 7168, 2048, 5, ragged);
    /* spans padded to 128 rows with the counts as group_rows (ws_ep_recv_gemm's problem):
     * only the rows in use are computed and written */
    const int routed[8] = {144, 0, 200, 17, 128, 1, 300, 64};
    g_pad = 128;
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 640, 8, routed);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 512, 1024, 8, routed);
    g_pad = 0;
  }
  /* the 192-row tile again, each problem also in CTA pairs and compared bit for bit */
  g_pair = 1;
  for (int t = 0; t < 2; t++) {
    test_set_knob(WS_GEMM_FP8_TILE_ENV, "192");
    g_kmajor = t;
    printf("FP8 tile 192 rows in CTA pairs, %s activation scales\n", g_kmajor ? "K-block-major" : "row-major");
    const int ragged[5] = {200, 0, 1, 513, 64};
    const int masked[4] = {100, 0, 256, 17};
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 300, 512, 1024, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 300, 384, 1024, 1, NULL); /* 3 tile columns: not paired (host rule) */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 512, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 512, 2048, 1, NULL);  /* split-K */
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 600, 256, 512, 1, NULL);  /* a partial last tile row */
    if (!quick) run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 2048, 4096, 7168, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 512, 640, 5, ragged);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 256, 256, 512, 4, masked);
    const int routed[8] = {144, 0, 200, 17, 128, 1, 300, 64};
    g_pad = 128;
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 512, 1024, 8, routed);
    g_pad = 0;
  }
  g_pair = 0;
  /* A gathered row by row from a wider, shuffled source (ws_gemm_problem.a_rows): both FP8
   * tiles, every layout, then BF16 */
  g_kmajor = 0;
  g_gather = 1;
  for (int t = 0; t < 2; t++) {
    test_set_knob(WS_GEMM_FP8_TILE_ENV, fp8_tiles[t]);
    const int ragged[5] = {200, 0, 1, 513, 64};
    const int masked[4] = {100, 0, 256, 17};
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 300, 384, 1024, 1, NULL);
    run_problem(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 512, 2048, 1, NULL); /* split-K */
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 640, 5, ragged);
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 256, 256, 512, 4, masked);
    const int routed[8] = {144, 0, 200, 17, 128, 1, 300, 64};
    g_pad = 128;
    run_problem(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 640, 8, routed);
    g_pad = 0;
  }
  test_set_knob(WS_GEMM_FP8_TILE_ENV, NULL);
  g_gather = 0;
  {
    const int ragged[5] = {200, 0, 1, 513, 64};
    const int masked[4] = {100, 0, 256, 17};
    const int routed[8] = {144, 0, 200, 17, 128, 1, 300, 64};
    run_problem(WS_GEMM_BF16, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 512, 5, ragged);
    run_problem(WS_GEMM_BF16, WS_GEMM_GROUPED_MASKED, 256, 512, 256, 4, masked);
    g_pad = 128;
    run_problem(WS_GEMM_BF16, WS_GEMM_GROUPED_CONTIGUOUS, 0, 256, 512, 8, routed);
    g_pad = 0;
  }
  bf16_dense_cases();
  bf16_cluster_k_cases();
  if (!quick) {
    run_bf16(4096, 4096, 7168); /* DeepSeek-V3 L1 expert */
    run_bf16(2048, 7168, 2048); /* DeepSeek-V3 L2 expert */
  }
  /* argument errors before the GPU */
  ws_gemm_problem bad = {WS_GEMM_BF16, WS_GEMM_DENSE, 64, 256, 100, 1, NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm(&bad, 0), WS_ERR_INVALID);
  return test_finish("test_gemm_gpu");
}
