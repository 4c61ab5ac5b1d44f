/* test_gemm.c - GEMM groundwork without a GPU: E4M3 against the format definition
 * (every byte), encode rounding and saturation, bf16, block quantisation, the float64
 * reference on dense and grouped layouts, layout arithmetic and argument checks, and
 * the size limits (32-bit rows and tile ends, split-K workspace bytes). */
#include "../test.h"
#include "warpspec/fp8.h"
#include "warpspec/gemm.h"
#include "../../src/gemm/gemm_args.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static double urand(void) { /* [0, 1) */
  rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17;
  return (double)(rng >> 11) * (1.0 / 9007199254740992.0);
}

/* Nearest E4M3 code by exhaustive search, ties to even, saturating: the definition. */
static uint8_t encode_slow(float x) {
  if (isnan(x)) return 0x7F;
  const uint8_t sign = signbit(x) ? 0x80 : 0;
  double a = fabs((double)x), best_err = INFINITY;
  if (a > 448.0) a = 448.0;
  uint8_t best = 0;
  for (int c = 0; c <= 0x7E; c++) {
    const double err = fabs(ws_fp8_e4m3_decode((uint8_t)c) - a);
    if (err < best_err || (err == best_err && (c & 1) == 0)) { best = (uint8_t)c; best_err = err; }
  }
  return sign | best;
}

static void e4m3(void) {
  /* the format: 1.mmm x 2^(e-7), subnormals 0.mmm x 2^-6, S.1111.111 = NaN */
  CHECK(ws_fp8_e4m3_decode(0x00) == 0.0 && signbit(ws_fp8_e4m3_decode(0x80)));
  CHECK(ws_fp8_e4m3_decode(0x38) == 1.0);
  CHECK(ws_fp8_e4m3_decode(0xB8) == -1.0);
  CHECK(ws_fp8_e4m3_decode(0x40) == 2.0);
  CHECK(ws_fp8_e4m3_decode(0x37) == 0.9375);
  CHECK(ws_fp8_e4m3_decode(0x7E) == 448.0);
  CHECK(ws_fp8_e4m3_decode(0x08) == ldexp(1.0, -6));
  CHECK(ws_fp8_e4m3_decode(0x01) == ldexp(1.0, -9));
  CHECK(ws_fp8_e4m3_decode(0x07) == 7 * ldexp(1.0, -9));
  CHECK(isnan(ws_fp8_e4m3_decode(0x7F)) && isnan(ws_fp8_e4m3_decode(0xFF)));
  int finite = 0;
  for (int b = 0; b < 256; b++) {
    const double v = ws_fp8_e4m3_decode((uint8_t)b);
    if (isnan(v)) continue;
    finite++;
    const int e = (b >> 3) & 15, m = b & 7;
    const double want = (b & 0x80 ? -1 : 1) * (e ? ldexp(1 + m / 8.0, e - 7) : ldexp(m / 8.0, -6));
    CHECK(v == want);
    CHECK(ws_fp8_e4m3_encode((float)v) == (uint8_t)b); /* exact values round-trip, -0 too */
    if (b > 0 && b <= 0x7E) CHECK(v > ws_fp8_e4m3_decode((uint8_t)(b - 1))); /* monotonic */
  }
  CHECK(finite == 254);
  /* ties go to the even mantissa; saturation; NaN */
  CHECK(ws_fp8_e4m3_encode(1.0625f) == 0x38);
  CHECK(ws_fp8_e4m3_encode(1.1875f) == 0x3A);
  CHECK(ws_fp8_e4m3_encode((float)ldexp(1.0, -10)) == 0x00); /* half the smallest subnormal: to 0 (even) */
  CHECK(ws_fp8_e4m3_encode((float)ldexp(3.0, -10)) == 0x02); /* 1.5 subnormal steps: to 2 (even) */
  CHECK(ws_fp8_e4m3_encode(460.0f) == 0x7E && ws_fp8_e4m3_encode(-1e9f) == 0xFE);
  CHECK(ws_fp8_e4m3_encode(INFINITY) == 0x7E && ws_fp8_e4m3_encode(-INFINITY) == 0xFE);
  CHECK(ws_fp8_e4m3_encode(NAN) == 0x7F);
  int bad = 0;
  for (int i = 0; i < 200000; i++) {
    const double mag = ldexp(urand(), (int)(urand() * 24) - 14); /* 2^-14 .. 2^10 */
    const float x = (float)(urand() < 0.5 ? -mag : mag);
    bad += ws_fp8_e4m3_encode(x) != encode_slow(x);
  }
  CHECK(bad == 0);
  /* bf16 */
  CHECK(ws_bf16_to_float(0x3F80) == 1.0f);
  CHECK(ws_float_to_bf16(1.0f) == 0x3F80);
  CHECK(ws_float_to_bf16(1.00390625f) == 0x3F80); /* tie at the 8th mantissa bit: to even */
  CHECK(ws_float_to_bf16(1.01171875f) == 0x3F82); /* tie: to even (up) */
  for (int i = 0; i < 10000; i++) {
    const float x = (float)((urand() - 0.5) * 1000);
    CHECK(fabsf(ws_bf16_to_float(ws_float_to_bf16(x)) - x) <= fabsf(x) * (1.0f / 256));
  }
}

static void quantize(void) {
  enum { R = 200, C = 384 };
  static float x[R * C];
  static uint8_t q[R * C];
  static float s1[R * 3], s2[2 * 3];
  for (int i = 0; i < R * C; i++) x[i] = (float)((urand() - 0.5) * ldexp(1.0, (i / 128) % 9 - 4));
  for (int c = 0; c < 128; c++) x[5 * C + c] = 0.0f; /* an all-zero block: scale 1, q 0 */
  CHECK_STATUS(ws_fp8_quantize_1x128_host(x, R, C, C, q, s1), WS_OK);
  double worst = 0;
  for (int r = 0; r < R; r++)
    for (int c = 0; c < C; c++) {
      const double back = ws_fp8_e4m3_decode(q[r * C + c]) * s1[r * 3 + c / 128];
      worst = fmax(worst, fabs(back - x[r * C + c]) / (s1[r * 3 + c / 128] * 448.0));
    }
  CHECK(worst <= 1.0 / 16 + 1e-9); /* half an E4M3 step of the block's largest binade */
  CHECK(s1[5 * 3] == 1.0f && q[5 * C] == 0);
  CHECK_STATUS(ws_fp8_quantize_128x128_host(x, R, C, C, q, s2), WS_OK);
  for (int b = 0; b < 3; b++) {
    float amax = 0;
    for (int r = 128; r < R; r++)
      for (int c = b * 128; c < b * 128 + 128; c++) amax = fmaxf(amax, fabsf(x[r * C + c]));
    CHECK(s2[3 + b] == amax / 448.0f); /* the partial block row has its own scale */
  }
  CHECK_STATUS(ws_fp8_quantize_1x128_host(x, R, 100, 100, q, s1), WS_ERR_INVALID);
  CHECK_MSG("multiple of 128");
}

static void reference(void) {
  /* contiguous grouped BF16: 3 groups, the middle one empty, a group of 1 row */
  enum { M = 5, N = 16, K = 64, G = 3 };
  static uint16_t a[M * K], b[G * N * K];
  static double d[M * N];
  for (int i = 0; i < M * K; i++) a[i] = ws_float_to_bf16((float)(urand() - 0.5));
  for (int i = 0; i < G * N * K; i++) b[i] = ws_float_to_bf16((float)(urand() - 0.5));
  const int off[G + 1] = {0, 4, 4, 5};
  ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_GROUPED_CONTIGUOUS, M, N, K, G, a, b, NULL, NULL, NULL, off, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  p.d = (void *)(uintptr_t)0x100; /* checked for alignment and presence only */
  CHECK_STATUS(ws_gemm_reference(&p, d), WS_OK);
  CHECK(ws_gemm_group_of_row(off, G, 0) == 0 && ws_gemm_group_of_row(off, G, 3) == 0);
  CHECK(ws_gemm_group_of_row(off, G, 4) == 2 && ws_gemm_group_of_row(off, G, 5) == -1);
  double err = 0;
  for (int r = 0; r < M; r++) {
    const int g = r < 4 ? 0 : 2;
    for (int j = 0; j < N; j++) {
      double acc = 0;
      for (int k = 0; k < K; k++) acc += (double)ws_bf16_to_float(a[r * K + k]) * ws_bf16_to_float(b[(g * N + j) * K + k]);
      err = fmax(err, fabs(acc - d[r * N + j]));
    }
  }
  CHECK(err < 1e-12);

  /* FP8 masked: 2 groups of up to 3 rows, 2 and 0 valid */
  enum { FM = 3, FN = 128, FK = 256, FG = 2 };
  static uint8_t qa[FG * FM * FK], qb[FG * FN * FK];
  static float sa[FG * FM * 2], sb[FG * 1 * 2];
  static double fd[FG * FM * FN];
  for (int i = 0; i < FG * FM * FK; i++) qa[i] = (uint8_t)(urand() * 0x7E) | (urand() < 0.5 ? 0x80 : 0);
  for (int i = 0; i < FG * FN * FK; i++) qb[i] = (uint8_t)(urand() * 0x7E) | (urand() < 0.5 ? 0x80 : 0);
  for (int i = 0; i < FG * FM * 2; i++) sa[i] = (float)(0.5 + urand());
  for (int i = 0; i < FG * 2; i++) sb[i] = (float)(0.5 + urand());
  const int rows[FG] = {2, 0};
  ws_gemm_problem f = {WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, FM, FN, FK, FG, qa, qb, (void *)(uintptr_t)0x100, sa, sb, NULL, rows, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK(ws_gemm_rows(&f) == FG * FM);
  CHECK_STATUS(ws_gemm_reference(&f, fd), WS_OK);
  double e2 = 0;
  for (int r = 0; r < FG * FM; r++) {
    const int g = r / FM, valid = r % FM < rows[g];
    for (int j = 0; j < FN; j++) {
      double acc = 0;
      for (int k = 0; valid && k < FK; k++)
        acc += ws_fp8_e4m3_decode(qa[r * FK + k]) * sa[r * 2 + k / 128] * ws_fp8_e4m3_decode(qb[(g * FN + j) * FK + k]) *
               sb[g * 2 + k / 128];
      e2 = fmax(e2, fabs(acc - fd[r * FN + j]));
    }
  }
  CHECK(e2 < 1e-9);

  /* the same with the activation scales K-block-major (a_scale_ld 8 >= 6 rows): same sums */
  static float sak[2 * 8];
  static double fdk[FG * FM * FN];
  for (int i = 0; i < 2 * 8; i++) sak[i] = -1.0f; /* padding: never read */
  for (int r = 0; r < FG * FM; r++)
    for (int c = 0; c < 2; c++) sak[c * 8 + r] = sa[r * 2 + c];
  f.a_scale = sak;
  f.a_scale_ld = 8;
  CHECK_STATUS(ws_gemm_reference(&f, fdk), WS_OK);
  CHECK(memcmp(fd, fdk, sizeof fd) == 0);
}

static void checks(void) {
  char *x = (char *)(uintptr_t)0x1000;
  const int off[2] = {0, 8};
  ws_gemm_problem p = {WS_GEMM_FP8, WS_GEMM_DENSE, 64, 256, 512, 1, x, x, x, (float *)x, (float *)x, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_check(&p), WS_OK);
  CHECK_STATUS(ws_gemm_check(NULL), WS_ERR_INVALID);
  p.k = 200;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("k 200 is not a multiple of 128");
  p.k = 512; p.n = 100;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("n 100");
  p.n = 256; p.a_scale = NULL;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("a_scale");
  p.a_scale = (float *)x; p.a = x + 4;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  p.a = x; p.groups = 2;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("groups 2");
  p.layout = WS_GEMM_GROUPED_CONTIGUOUS;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("group_offsets");
  p.group_offsets = off;
  CHECK_STATUS(ws_gemm_check(&p), WS_OK);
  p.layout = WS_GEMM_GROUPED_MASKED;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("group_rows");
  p.type = WS_GEMM_BF16; p.layout = WS_GEMM_DENSE; p.groups = 1; p.k = 64; p.n = 8;
  CHECK_STATUS(ws_gemm_check(&p), WS_OK); /* BF16: k multiple of 64, n of 8 */
  p.type = (ws_gemm_type)5;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  /* K-block-major activation scales: a_scale_ld at least the rows, a multiple of 4 */
  ws_gemm_problem q = {WS_GEMM_FP8, WS_GEMM_DENSE, 64, 256, 512, 1, x, x, x, (float *)x, (float *)x, NULL, NULL, NULL, 0, 64, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_check(&q), WS_OK);
  q.a_scale_ld = 60;
  CHECK_STATUS(ws_gemm_check(&q), WS_ERR_INVALID);
  CHECK_MSG("a_scale_ld 60");
  q.a_scale_ld = 66;
  CHECK_STATUS(ws_gemm_check(&q), WS_ERR_INVALID);
  q.a_scale_ld = -4;
  CHECK_STATUS(ws_gemm_check(&q), WS_ERR_INVALID);
  /* gathered A: the index, its extent, the row stride, row-major scales */
  const int *idx = (const int *)(uintptr_t)0x2000;
  ws_gemm_problem g = {WS_GEMM_FP8, WS_GEMM_DENSE, 64, 256, 512, 1, x, x, x, (float *)x, (float *)x, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  g.a_rows = idx;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  CHECK_MSG("a_rows_total is 0");
  g.a_rows_total = 100;
  CHECK_STATUS(ws_gemm_check(&g), WS_OK);
  g.a_row_bytes = 520;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  CHECK_MSG("a_row_bytes 520");
  g.a_row_bytes = 496;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  g.a_row_bytes = 7536;
  CHECK_STATUS(ws_gemm_check(&g), WS_OK);
  g.a_scale_stride = 3;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  CHECK_MSG("a_scale_stride 3");
  g.a_scale_stride = 1884;
  CHECK_STATUS(ws_gemm_check(&g), WS_OK);
  g.a_scale_ld = 64;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  CHECK_MSG("a_scale_ld must be 0");
  g.a_scale_ld = 0;
  g.a_rows = (const int *)(uintptr_t)0x2002;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  CHECK_MSG("4-byte aligned");
  g.a_rows = NULL;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_INVALID);
  CHECK_MSG("a_rows is NULL");
  g.a_rows = idx; g.a_scale_stride = 0; g.type = WS_GEMM_BF16; g.k = 256; g.a_row_bytes = 0;
  CHECK_STATUS(ws_gemm_check(&g), WS_ERR_UNSUPPORTED);
  CHECK_MSG("FP8 only");
}

/* The float64 reference of a gathered A (rows shuffled into a wider source, one row -1)
 * equals the reference of the plain A, row by row; the -1 row reads source row 0. */
static void gathered_reference(void) {
  enum { M = 5, N = 128, K = 256, TOTAL = 9, ROW = K + 32, SST = 4 };
  static uint8_t a[M * K], src[TOTAL * ROW], b[N * K];
  static float sa[M * 2], ssrc[TOTAL * SST], sb[2];
  const int perm[M] = {7, 2, 0, 5, 8}, idx[M] = {7, 2, -1, 5, 8};
  for (int i = 0; i < M * K; i++) a[i] = (uint8_t)(0x30 + (i * 37) % 0x40);
  for (int i = 0; i < N * K; i++) b[i] = (uint8_t)(0x30 + (i * 11) % 0x40);
  for (int i = 0; i < M * 2; i++) sa[i] = 0.25f * (float)(1 + i % 5);
  sb[0] = 0.5f; sb[1] = 2.0f;
  for (int i = 0; i < TOTAL * ROW; i++) src[i] = (uint8_t)(0x31 + i % 0x33);
  for (int i = 0; i < TOTAL * SST; i++) ssrc[i] = 0.125f * (float)(1 + i % 3);
  for (int r = 0; r < M; r++) {
    memcpy(src + (size_t)perm[r] * ROW, a + (size_t)r * K, K);
    ssrc[perm[r] * SST] = sa[r * 2];
    ssrc[perm[r] * SST + 1] = sa[r * 2 + 1];
  }
  static double want[M * N], got[M * N], row0[M * N];
  ws_gemm_problem p = {WS_GEMM_FP8, WS_GEMM_DENSE, M, N, K, 1, a, b, want, sa, sb, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_reference(&p, want), WS_OK);
  ws_gemm_problem g = p;
  g.a = src; g.a_scale = ssrc; g.a_rows = idx; g.a_rows_total = TOTAL; g.a_row_bytes = ROW; g.a_scale_stride = SST;
  CHECK_STATUS(ws_gemm_reference(&g, got), WS_OK);
  for (int r = 0; r < M; r++)
    if (idx[r] >= 0) CHECK(memcmp(want + r * N, got + r * N, N * sizeof(double)) == 0);
  /* the -1 row: source row 0 with its scales */
  const int zero[M] = {0, 0, 0, 0, 0};
  g.a_rows = zero;
  CHECK_STATUS(ws_gemm_reference(&g, row0), WS_OK);
  CHECK(memcmp(row0 + 2 * N, got + 2 * N, N * sizeof(double)) == 0);
  const int bad[M] = {7, 2, 9, 5, 8};
  g.a_rows = bad;
  CHECK_STATUS(ws_gemm_reference(&g, got), WS_ERR_INVALID);
  CHECK_MSG("a_rows[2] = 9");
}

/* The tile ws_gemm picks (132 SMs, an H100/H200): FP8's 192-row tile where the rows per
 * group are many, 128 rows for small experts and few rows. */
static int g_scale_ld; /* 0: row-major activation scales; else K-block-major with this ld */
static int g_rows_hint; /* the problem's rows_hint */
static int g_counts;    /* contiguous: group_rows given (the rows in use; no padding computed) */
static int tile_rows(ws_gemm_type type, ws_gemm_layout layout, int m, int n, int k, int groups) {
  char *x = (char *)(uintptr_t)0x1000;
  const int off[2] = {0, 8};
  const int *counts = layout == WS_GEMM_GROUPED_MASKED || g_counts ? off : NULL;
  ws_gemm_problem p = {type, layout, m, n, k, groups, x, x, x, (float *)x, (float *)x, off, counts, NULL, 0, 0, NULL, 0, 0, 0, 0};
  if (type == WS_GEMM_FP8 && g_scale_ld) p.a_scale_ld = ((int)ws_gemm_rows(&p) + 3) / 4 * 4;
  p.rows_hint = g_rows_hint;
  int rows = 0, cols = 0;
  CHECK_STATUS(ws_gemm_tile(&p, 132, &rows, &cols), WS_OK);
  CHECK(cols == (type == WS_GEMM_FP8 ? 128 : 256));
  return rows;
}

static void tiles(void) {
  test_set_knob(WS_GEMM_FP8_TILE_ENV, NULL);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 8192, 8192, 8192, 1) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 8192, 4096, 7168, 1) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 4096, 4096, 7168, 1) == 128); /* 8 waves of 128 against 6 of 192 */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 65, 4096, 7168, 1) == 128);   /* past the skinny kernel: split-K's */
  test_set_knob(WS_GEMM_FP8_SKINNY_ENV, "0");
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 4096, 7168, 1) == 128);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 512, 1) == 128);
  test_set_knob(WS_GEMM_FP8_SKINNY_ENV, NULL);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 64, 4096, 7168, 8) == 128);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 512, 4096, 7168, 8) == 128); /* 3 tiles of 192 pad 12% */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 2048, 4096, 7168, 8) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 2048, 7168, 2048, 8) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 2048, 4096, 7168, 8) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 256, 4096, 7168, 8) == 128);
  CHECK(tile_rows(WS_GEMM_BF16, WS_GEMM_DENSE, 8192, 8192, 8192, 1) == 128);
  /* K-block-major scales: the 192-row kernel gains more (TMA scales), measured winning at
   * 8 x 512, 8 x 1024, 1 x 2048 and dense 4096 x 4096 x 7168, losing at 8 x 256 and below */
  g_scale_ld = 1;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 512, 4096, 7168, 8) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 1024, 4096, 7168, 8) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 2048, 4096, 7168, 1) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 4096, 4096, 7168, 1) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 320, 4096, 7168, 8) == 192);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 256, 4096, 7168, 8) == 128);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 64, 4096, 7168, 8) == 128);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 512, 4096, 7168, 1) == 128);
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 4096, 4096, 640, 1) == 128); /* k / 128 = 5: no TMA scales */
  /* the MoE layer's experts (256, m the receive layout's room: + 127 rows each): without a
   * hint the room's mean picks 192; with rows_hint but no counts (each span padded to 128
   * rows, all of it computed) groups of at most 192 rows take 128 (measured 14-23% faster
   * at 144 and 192 rows, session 46) */
  const int room = 256 * 127;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 144 + room, 4096, 7168, 256) == 192);
  g_rows_hint = 256 * 144;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 144 + room, 4096, 7168, 256) == 128);
  g_rows_hint = 256 * 240; /* two 128-row tiles against two of 192 */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 240 + room, 4096, 7168, 256) == 128);
  g_rows_hint = 256 * 288; /* three of 128 against two of 192 */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 288 + room, 4096, 7168, 256) == 192);
  g_rows_hint = 256 * 100000; /* a hint past m counts as m */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 288 + room, 4096, 7168, 256) == 192);
  /* with the counts (ws_ep_recv_gemm) the routed rows spread about the mean (Poisson):
   * where nearly every group fits one 192-row tile row (128-172 rows), that, the padding
   * skipped (measured 9-28% faster than 128-row tiles over the spans, session 47); below
   * (112: 1.06 tile rows of 128 a group) and where many groups would end in a partial
   * second row (192: half of them) 128-row tiles over the padded spans; from 240 rows the
   * wave model (Poisson tile rows) as without counts */
  g_counts = 1;
  g_rows_hint = 256 * 144;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 144 + room, 4096, 7168, 256) == 192);
  g_rows_hint = 256 * 128;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 128 + room, 4096, 7168, 256) == 192);
  g_rows_hint = 256 * 112;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 112 + room, 4096, 7168, 256) == 128);
  g_rows_hint = 256 * 192;
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 192 + room, 4096, 7168, 256) == 128);
  g_rows_hint = 256 * 240; /* 2 x 192 rows against 2.14 x 128 on average: 125 waves x 1.5 / 1.15 against 134 */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 240 + room, 4096, 7168, 256) == 128);
  g_rows_hint = 256 * 288; /* 2 x 192 against 2.97 x 128 */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 256 * 288 + room, 4096, 7168, 256) == 192);
  g_counts = 0;
  g_rows_hint = 8 * 64; /* masked: m is each group's bound, the hint is not read */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 2048, 4096, 7168, 8) == 192);
  g_rows_hint = 0;
  /* equal groups (no hint): the wave model, one 192-row tile row against two of 128 */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8 * 160, 4096, 7168, 8) == 192);
  {
    char *x = (char *)(uintptr_t)0x1000;
    const int off[2] = {0, 8};
    ws_gemm_problem p = {WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8, 128, 128, 1, x, x, x, (float *)x, (float *)x, off,
                         NULL, NULL, 0, 0, NULL, 0, 0, 0, -1};
    CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
    CHECK_MSG("rows_hint -1");
  }
  g_scale_ld = 0;
  test_set_knob(WS_GEMM_FP8_TILE_ENV, "192"); /* forced, even where it pads */
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 512, 1) == 192);
  test_set_knob(WS_GEMM_FP8_TILE_ENV, "128");
  CHECK(tile_rows(WS_GEMM_FP8, WS_GEMM_DENSE, 8192, 8192, 8192, 1) == 128);
  test_set_knob(WS_GEMM_FP8_TILE_ENV, NULL);
  int r = 0, c = 0;
  CHECK_STATUS(ws_gemm_tile(NULL, 132, &r, &c), WS_ERR_INVALID);
  char *x = (char *)(uintptr_t)0x1000;
  ws_gemm_problem p = {WS_GEMM_FP8, WS_GEMM_DENSE, 64, 256, 512, 1, x, x, x, (float *)x, (float *)x, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_tile(&p, 132, NULL, &c), WS_ERR_INVALID);
  CHECK_STATUS(ws_gemm_tile(&p, -1, &r, &c), WS_ERR_INVALID);
  CHECK_MSG("negative");
}

static void gpu_entry_points(void) {
  /* argument checks of the GPU functions happen before the GPU is touched */
  uint8_t *q = (uint8_t *)(uintptr_t)0x2000;
  float *sc = (float *)(uintptr_t)0x3000;
  CHECK_STATUS(ws_fp8_quantize_1x128(NULL, 1, 128, 128, q, sc, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_fp8_quantize_1x128((void *)(uintptr_t)0x1000, 1, 100, 100, q, sc, 0), WS_ERR_INVALID);
  CHECK_MSG("multiple of 128");
  CHECK_STATUS(ws_fp8_quantize_128x128((void *)(uintptr_t)0x1000, 4, 128, 127, q, sc, 0), WS_ERR_INVALID);
  CHECK_MSG("ld 127");
  CHECK_STATUS(ws_fp8_quantize_128x128((void *)(uintptr_t)0x1000, 0, 128, 128, q, sc, 0), WS_OK); /* nothing to do */
  CHECK_STATUS(ws_fp8_quantize_1x128_kmajor((void *)(uintptr_t)0x1000, 10, 128, 128, q, sc, 8, 0), WS_ERR_INVALID);
  CHECK_MSG("scale_ld 8");
  CHECK_STATUS(ws_fp8_quantize_1x128_kmajor((void *)(uintptr_t)0x1000, 10, 128, 128, q, sc, 14, 0), WS_ERR_INVALID);
  ws_plan plan;
  CHECK_STATUS(ws_gemm_plan(WS_GEMM_FP8, &plan), WS_OK);
  /* FP8: 2 math warpgroups then 1 loader warp, entry registers (no setmaxnreg) */
  CHECK(plan.layout.threads == 288 && plan.layout.role_first_warp[1] == 8 && plan.layout.setmaxnreg == 0);
  CHECK(plan.smem_bytes > 6 * 32 * 1024 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan(WS_GEMM_BF16, &plan), WS_OK);
  CHECK(plan.layout.threads == 384 && plan.layout.role_regs[1] == 232 && plan.layout.pool_used == plan.layout.pool_regs);
  CHECK(plan.smem_bytes > 4 * 48 * 1024 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan((ws_gemm_type)9, &plan), WS_ERR_INVALID);
  CHECK_STATUS(ws_gemm_plan(WS_GEMM_FP8, NULL), WS_ERR_INVALID);
  /* by tile rows (ws_gemm_tile's answer): FP8's 192-row kernel is 3 math warpgroups and a
   * loader warpgroup, with setmaxnreg; 128 rows is ws_gemm_plan's kernel */
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_FP8, 192, &plan), WS_OK);
  CHECK(plan.layout.threads == 512 && plan.layout.setmaxnreg == 1 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_FP8, 128, &plan), WS_OK);
  CHECK(plan.layout.threads == 288);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_BF16, 128, &plan), WS_OK);
  CHECK(plan.layout.threads == 384);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_BF16, 192, &plan), WS_ERR_INVALID);
  CHECK_MSG("no BF16 kernel has 192-row tiles");
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_FP8, 64, &plan), WS_OK); /* the FP8 skinny kernel */
  CHECK(plan.layout.threads == 160 && plan.smem_bytes > 6 * 32 * 1024 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_FP8, 16, &plan), WS_OK);
  CHECK(plan.smem_bytes > 11 * 20 * 1024 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_FP8, 48, &plan), WS_ERR_INVALID);
  CHECK_MSG("16, 32, 64, 128 or 192");
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_FP8, 192, NULL), WS_ERR_INVALID);
  ws_gemm_problem none = {WS_GEMM_BF16, WS_GEMM_DENSE, 0, 8, 64, 1, NULL, (void *)(uintptr_t)0x1000, NULL, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm(&none, 0), WS_OK); /* m = 0: nothing to do, no GPU needed */
  /* FP8 scale offsets are 32-bit in the kernel: 2^25 rows x 128 K blocks is refused */
  ws_gemm_problem huge = {WS_GEMM_FP8, WS_GEMM_DENSE, 1 << 25, 128, 128 * 128, 1, (void *)(uintptr_t)0x1000,
                          (void *)(uintptr_t)0x1000, (void *)(uintptr_t)0x1000, sc, sc, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm(&huge, 0), WS_ERR_INVALID);
  CHECK_MSG("2^32");
  /* split-K workspace: validated before the GPU is asked anything */
  size_t wsb = 1;
  CHECK_STATUS(ws_gemm_workspace_size(&huge, &wsb), WS_ERR_INVALID);
  CHECK(wsb == 0);
  CHECK_STATUS(ws_gemm_workspace_size(&none, NULL), WS_ERR_INVALID);
  ws_gemm_problem odd_ws = none;
  odd_ws.workspace = (void *)(uintptr_t)0x1004;
  odd_ws.workspace_bytes = 4096;
  CHECK_STATUS(ws_gemm(&odd_ws, 0), WS_ERR_INVALID);
  CHECK_MSG("workspace");
}

/* Shapes past the kernels' 32-bit rows, columns and tile ends are refused (the checks
 * multiply in 64 bits), and split-K's workspace size saturates instead of wrapping. */
static void size_limits(void) {
  char *x = (char *)(uintptr_t)0x1000;
  const int cnt[4096] = {0};
  /* masked: 3 x 2^30 rows; the kernel's row of group g is g x m, an int */
  ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_GROUPED_MASKED, 1 << 30, 128, 64, 3, x, x, x, NULL, NULL, NULL, cnt, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("3221225472 rows");
  p.groups = 1; /* 2^30 rows: the limit itself */
  CHECK_STATUS(ws_gemm_check(&p), WS_OK);
  /* the weights' row of group g is g x n, an int: 4096 x 524800 is past 2^31 */
  p.m = 1; p.groups = 4096; p.n = 524800;
  CHECK_STATUS(ws_gemm_check(&p), WS_ERR_INVALID);
  CHECK_MSG("groups 4096 x n 524800");
  /* n + 255 in the tile count */
  ws_gemm_problem d = {WS_GEMM_BF16, WS_GEMM_DENSE, 1, 2147483640, 64, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_check(&d), WS_ERR_INVALID);
  CHECK_MSG("n 2147483640");
  d.n = 8; d.m = 0x7FFFFFFF; /* m + 191 in the tile count */
  CHECK_STATUS(ws_gemm_check(&d), WS_ERR_INVALID);
  CHECK_MSG("2147483647 rows");
  /* 2^22 forced K slices of a 2^20 x 2^20 fp32 output: 2^64 bytes, 0 when it wraps */
  ws_gemm_problem w = {WS_GEMM_BF16, WS_GEMM_DENSE, 1 << 20, 1 << 20, 1 << 28, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK_STATUS(ws_gemm_check(&w), WS_OK);
  test_set_knob(WS_GEMM_SPLITS_ENV, "4194304");
  size_t bytes = 0;
  CHECK_STATUS(gemm_workspace_of(gemm_bf16_kernel_desc(), &w, 132, &bytes), WS_OK);
  CHECK(bytes == SIZE_MAX);
  test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
  /* the quantisers' grids: rows rounded up to blocks must not wrap */
  uint8_t *q = (uint8_t *)(uintptr_t)0x2000;
  float *sc = (float *)(uintptr_t)0x3000;
  CHECK_STATUS(ws_fp8_quantize_128x128(x, SIZE_MAX - 64, 128, 128, q, sc, 0), WS_ERR_INVALID);
  CHECK_MSG("rows");
  CHECK_STATUS(ws_fp8_quantize_1x128(x, SIZE_MAX / 64, 128, 128, q, sc, 0), WS_ERR_INVALID);
  CHECK_MSG("rows");
}

/* Which kernel runs (132 SMs): CTA pairs for the FP8 192-row tile when its tile columns
 * are even (WARPSPEC_GEMM_PAIR, on by default), single CTAs otherwise; BF16 always single
 * (its pairs measured level or slower, docs/benchmarks.md session 26). */
static const char *kernel_of(ws_gemm_type type, ws_gemm_layout layout, int m, int n, int k, int groups) {
  char *x = (char *)(uintptr_t)0x1000;
  const int off[2] = {0, 8};
  ws_gemm_problem p = {type, layout, m, n, k, groups, x, x, x, (float *)x, (float *)x, off, off, NULL, 0, 0, NULL, 0, 0, 0, 0};
  const char *name = gemm_kernel_name_for(&p, 132);
  CHECK(name != NULL);
  return name ? name : "";
}

static void kernels(void) {
  test_set_knob(WS_GEMM_PAIR_ENV, NULL);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 8192, 8192, 8192, 1), "gemm_fp8_wide_pair") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 8192, 8320, 8192, 1), "gemm_fp8_wide") == 0); /* 65 columns */
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 65, 4096, 7168, 1), "gemm_fp8") == 0);      /* 128-row tile */
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 2048, 7168, 2048, 1), "gemm_bf16") == 0); /* 28 columns: no BF16 pairs */
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 300, 768, 512, 1), "gemm_bf16") == 0);        /* 3 columns */
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_GROUPED_CONTIGUOUS, 8, 512, 512, 1), "gemm_bf16") == 0);
  test_set_knob(WS_GEMM_PAIR_ENV, "0");
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 8192, 8192, 8192, 1), "gemm_fp8_wide") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 2048, 7168, 2048, 1), "gemm_bf16") == 0);
  test_set_knob(WS_GEMM_PAIR_ENV, NULL);
  /* BF16 dense with at most 128 rows: the skinny kernel, A's rows rounded up to 16, 32, 64, 128 */
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 64, 4096, 7168, 1), "gemm_bf16_skinny64") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 33, 4096, 7168, 1), "gemm_bf16_skinny64") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 32, 264, 128, 1), "gemm_bf16_skinny32") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 17, 264, 128, 1), "gemm_bf16_skinny32") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 1, 8, 64, 1), "gemm_bf16_skinny16") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_GROUPED_MASKED, 8, 512, 512, 1), "gemm_bf16") == 0); /* dense only */
  test_set_knob(WS_GEMM_SKINNY_ENV, "0");
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 64, 4096, 7168, 1), "gemm_bf16") == 0);
  test_set_knob(WS_GEMM_SKINNY_ENV, NULL);
  /* 65-128 BF16 rows (WARPSPEC_GEMM_SKINNY_ROWS, 128 by default): one K box a stage */
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 65, 4096, 7168, 1), "gemm_bf16_skinny128") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 128, 4096, 7168, 1), "gemm_bf16_skinny128") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 129, 4096, 7168, 1), "gemm_bf16") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 64, 4096, 7168, 1), "gemm_bf16_skinny64") == 0);
  {
    char *x = (char *)(uintptr_t)0x1000;
    ws_gemm_problem q = {WS_GEMM_BF16, WS_GEMM_DENSE, 128, 4096, 7168, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
    const gemm_kernel *kd = gemm_bf16_skinny128_kernel_desc();
    size_t bytes = 1;
    CHECK_STATUS(gemm_workspace_of(kd, &q, 132, &bytes), WS_OK);
    CHECK(bytes == 0);
    CHECK(gemm_skinny_splits(kd, &q, 132) == 2); /* 64 columns x 2; a stage is one K step here */
    ws_plan plan;
    CHECK_STATUS(gemm_plan_of(kd, &plan), WS_OK);
    CHECK(plan.smem_bytes > 7 * 24 * 1024 + 128 * 68 * 4 && plan.smem_bytes <= 232448);
  }
  test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, "64");
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 65, 4096, 7168, 1), "gemm_bf16") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_BF16, WS_GEMM_DENSE, 64, 4096, 7168, 1), "gemm_bf16_skinny64") == 0);
  test_set_knob(WS_GEMM_SKINNY_ROWS_ENV, NULL);
  /* FP8 with at most 64 rows (WARPSPEC_GEMM_FP8_SKINNY, on by default), a masked group's room too */
  test_set_knob(WS_GEMM_FP8_SKINNY_ENV, "0");
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 4096, 7168, 1), "gemm_fp8") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 48, 512, 512, 1), "gemm_fp8") == 0);
  test_set_knob(WS_GEMM_FP8_SKINNY_ENV, NULL);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 64, 4096, 7168, 1), "gemm_fp8_skinny64") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 1, 256, 512, 1), "gemm_fp8_skinny16") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 20, 256, 512, 1), "gemm_fp8_skinny32") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_DENSE, 65, 4096, 7168, 1), "gemm_fp8") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_GROUPED_CONTIGUOUS, 8, 512, 512, 1), "gemm_fp8") == 0);
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 48, 512, 512, 1), "gemm_fp8_skinny64") == 0); /* a group's room */
  CHECK(strcmp(kernel_of(WS_GEMM_FP8, WS_GEMM_GROUPED_MASKED, 65, 512, 512, 1), "gemm_fp8") == 0);
  {
    char *x = (char *)(uintptr_t)0x1000;
    ws_gemm_problem q = {WS_GEMM_FP8, WS_GEMM_DENSE, 1, 4096, 7168, 1, x, x, x, (float *)x, (float *)x, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
    const gemm_kernel *kd = gemm_fp8_skinny16_kernel_desc();
    size_t bytes = 1;
    CHECK_STATUS(gemm_workspace_of(kd, &q, 132, &bytes), WS_OK);
    CHECK(bytes == 0);
    CHECK(gemm_skinny_splits(kd, &q, 132) == 2); /* 64 columns x 2 over 56 K blocks */
  }
  test_set_knob(WS_GEMM_FP8_SKINNY_ENV, NULL);
  char *x = (char *)(uintptr_t)0x1000;
  ws_gemm_problem bad = {WS_GEMM_BF16, WS_GEMM_DENSE, 64, 256, 100, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  CHECK(gemm_kernel_name_for(&bad, 132) == NULL); /* K not a multiple of 64: ws_gemm_check refuses it */
  CHECK(gemm_kernel_name_for(NULL, 132) == NULL);
}

/* The skinny kernel's K slices (132 SMs): the fewest powers of two that give three
 * quarters of the SMs a CTA, slices of at least 4 K steps, at most 8 (one cluster);
 * WARPSPEC_GEMM_SPLITS forces any width up to 8 and one per K step. No workspace: the
 * slices sum in shared memory. */
static int skinny_splits(int m, int n, int k) {
  char *x = (char *)(uintptr_t)0x1000;
  ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_DENSE, m, n, k, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  const gemm_kernel *kd = gemm_bf16_skinny64_kernel_desc();
  size_t bytes = 1;
  CHECK_STATUS(gemm_workspace_of(kd, &p, 132, &bytes), WS_OK);
  CHECK(bytes == 0);
  return gemm_skinny_splits(kd, &p, 132);
}

static void skinny(void) {
  test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
  CHECK(skinny_splits(64, 4096, 7168) == 2);  /* 64 tile columns of 64 weight rows x 2 = 128 CTAs */
  CHECK(skinny_splits(64, 7168, 2048) == 1);  /* 112 columns fill 85% of the SMs alone */
  CHECK(skinny_splits(1, 256, 128) == 1);     /* 2 K steps: one slice */
  CHECK(skinny_splits(1, 256, 4096) == 8);    /* 4 columns: the widest cluster */
  CHECK(skinny_splits(16, 65536, 4096) == 1); /* 512 columns fill the GPU alone */
  test_set_knob(WS_GEMM_SPLITS_ENV, "5");
  CHECK(skinny_splits(64, 4096, 7168) == 5);
  CHECK(skinny_splits(64, 4096, 192) == 3);   /* one slice per K step at most */
  test_set_knob(WS_GEMM_SPLITS_ENV, "100");
  CHECK(skinny_splits(64, 4096, 7168) == 8);
  test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
  /* the tile ws_gemm_tile reports: A's rows as the kernel reads them, 128 weight rows */
  char *x = (char *)(uintptr_t)0x1000;
  ws_gemm_problem p = {WS_GEMM_BF16, WS_GEMM_DENSE, 9, 4096, 7168, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  int rows = 0, cols = 0;
  CHECK_STATUS(ws_gemm_tile(&p, 132, &rows, &cols), WS_OK);
  CHECK(rows == 16 && cols == 64);
  /* and its plan: a math warpgroup and a loader warp at the entry cap; 6 stages of 32 KiB
   * and the partial at 64 rows of A, 11 of 20 KiB at 16 */
  ws_plan plan;
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_BF16, 64, &plan), WS_OK);
  CHECK(plan.layout.threads == 160 && plan.layout.setmaxnreg == 0);
  CHECK(plan.smem_bytes > 6 * 32 * 1024 + 64 * 68 * 4 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_BF16, 16, &plan), WS_OK);
  CHECK(plan.smem_bytes > 11 * 20 * 1024 && plan.smem_bytes <= 232448);
  CHECK_STATUS(ws_gemm_plan_tile(WS_GEMM_BF16, 48, &plan), WS_ERR_INVALID);
  CHECK_MSG("16, 32, 64 or 128");
  /* WARPSPEC_GEMM_CLUSTER_K: the 128 x 256 tile's slices in clusters need no workspace, up
   * to the knob's count of slices (WS_GEMM_CLUSTER_K_DEFAULT); more keep the workspace, as
   * does 0 */
  ws_gemm_problem s = {WS_GEMM_BF16, WS_GEMM_DENSE, 128, 512, 2048, 1, x, x, x, NULL, NULL, NULL, NULL, NULL, 0, 0, NULL, 0, 0, 0, 0};
  size_t with = 0, without = 1;
  CHECK_STATUS(gemm_workspace_of(gemm_bf16_kernel_desc(), &s, 132, &with), WS_OK); /* 2 tiles: 8 slices */
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, "8");
  CHECK_STATUS(gemm_workspace_of(gemm_bf16_kernel_desc(), &s, 132, &without), WS_OK);
  CHECK(with > 0 && without == 0);
  test_set_knob(WS_GEMM_SPLITS_ENV, "12");
  CHECK_STATUS(gemm_workspace_of(gemm_bf16_kernel_desc(), &s, 132, &without), WS_OK);
  CHECK(without > 0);
  test_set_knob(WS_GEMM_SPLITS_ENV, NULL);
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, NULL);
  ws_gemm_problem h = s; /* 512 rows of (4096, 7168): 64 tiles, 2 slices */
  h.m = 512; h.n = 4096; h.k = 7168;
  CHECK_STATUS(gemm_workspace_of(gemm_bf16_kernel_desc(), &h, 132, &without), WS_OK);
  CHECK(without == 0);
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, "0");
  CHECK_STATUS(gemm_workspace_of(gemm_bf16_kernel_desc(), &h, 132, &with), WS_OK);
  CHECK(with == (size_t)2 * 512 * 4096 * 4);
  test_set_knob(WS_GEMM_CLUSTER_K_ENV, NULL);
}

int main(void) {
  gpu_entry_points();
  skinny();
  e4m3();
  quantize();
  reference();
  checks();
  gathered_reference();
  tiles();
  kernels();
  size_limits();
  return test_finish("test_gemm");
}
