/* gemm_host.c - GEMM problem checks, layout arithmetic and the float64 reference. */
#include "../core/internal.h"
#include "../core/knobs.h"
#include "warpspec/check.h"
#include "../core/size_check.h"
#include "warpspec/fp8.h"
#include "warpspec/gemm.h"
#include "gemm_args.h"

#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <limits.h>
#include <string.h>

static int aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

ws_status ws_gemm_check(const ws_gemm_problem *p) {
  WS_REQUIRE(p != NULL, "ws_gemm: problem is NULL");
  WS_REQUIRE(p->type == WS_GEMM_BF16 || p->type == WS_GEMM_FP8, "ws_gemm: type %d unknown", (int)p->type);
  WS_REQUIRE(p->layout >= WS_GEMM_DENSE && p->layout <= WS_GEMM_GROUPED_MASKED, "ws_gemm: layout %d unknown", (int)p->layout);
  const int fp8 = p->type == WS_GEMM_FP8;
  WS_REQUIRE(p->m >= 0 && p->n > 0 && p->k > 0, "ws_gemm: shape m %d n %d k %d: m >= 0, n and k > 0", p->m, p->n, p->k);
  WS_REQUIRE(p->k % (fp8 ? 128 : 64) == 0, "ws_gemm: k %d is not a multiple of %d (%s)", p->k, fp8 ? 128 : 64,
             fp8 ? "the FP8 scale block" : "the BF16 TMA box");
  WS_REQUIRE(p->n % (fp8 ? 128 : 8) == 0, "ws_gemm: n %d is not a multiple of %d (%s)", p->n, fp8 ? 128 : 8,
             fp8 ? "the weights' 128 x 128 scale block" : "16-byte rows of D");
  if (p->layout == WS_GEMM_DENSE) WS_REQUIRE(p->groups == 1, "ws_gemm: dense layout with groups %d (must be 1)", p->groups);
  else WS_REQUIRE(p->groups >= 1 && p->groups <= 4096, "ws_gemm: groups %d, must be 1..4096", p->groups);
  WS_REQUIRE(p->rows_hint >= 0, "ws_gemm: rows_hint %d is negative (0: none)", p->rows_hint);
  /* The kernels' rows (g x m + tile rows) and weight rows (g x n + tile columns) are ints,
   * and a group's rows or columns rounded up to the tile must stay one. */
  WS_REQUIRE(ws_gemm_rows(p) <= (size_t)WS_EXTENT_MAX, "ws_gemm: m %d in %d groups is %zu rows, at most 2^30", p->m,
             p->groups, ws_gemm_rows(p));
  WS_REQUIRE(p->n <= WS_EXTENT_MAX, "ws_gemm: n %d, at most 2^30", p->n);
  WS_REQUIRE(ws_mul_sat(p->groups, p->n) <= WS_INDEX_MAX, "ws_gemm: groups %d x n %d = %lld weight rows, at most 2^31 - 1",
             p->groups, p->n, (long long)ws_mul_sat(p->groups, p->n));
  if (ws_gemm_rows(p) > 0) WS_REQUIRE(p->a != NULL && p->d != NULL, "ws_gemm: a or d is NULL");
  WS_REQUIRE(p->b != NULL, "ws_gemm: b is NULL");
  WS_REQUIRE(aligned16(p->a) && aligned16(p->b) && aligned16(p->d), "ws_gemm: a %p, b %p and d %p must be 16-byte aligned",
             p->a, p->b, p->d);
  if (fp8) {
    WS_REQUIRE(p->a_scale != NULL && p->b_scale != NULL, "ws_gemm: FP8 needs a_scale (1 x 128 blocks) and b_scale "
               "(128 x 128 blocks)");
    WS_REQUIRE((p->a_rows || aligned16(p->a_scale)) && aligned16(p->b_scale), "ws_gemm: scales must be 16-byte aligned");
    WS_REQUIRE(p->a_scale_ld == 0 || (p->a_scale_ld > 0 && (size_t)p->a_scale_ld >= ws_gemm_rows(p) && p->a_scale_ld % 4 == 0),
               "ws_gemm: a_scale_ld %d must be 0 (row-major scales) or >= the %zu rows and a multiple of 4",
               p->a_scale_ld, ws_gemm_rows(p));
    /* the kernel indexes the scales with 32-bit offsets */
    const uint64_t kb = (uint64_t)p->k / 128,
                   sa = (p->a_scale_ld ? (uint64_t)p->a_scale_ld : (uint64_t)ws_gemm_rows(p)) * kb,
                   sb = (uint64_t)p->groups * ((uint64_t)p->n / 128) * kb;
    WS_REQUIRE(sa < ((uint64_t)1 << 32) && sb < ((uint64_t)1 << 32),
               "ws_gemm: %llu activation and %llu weight scales; at most 2^32 - 1 each", (unsigned long long)sa,
               (unsigned long long)sb);
  }
  if (p->a_rows) { /* gathered A */
    const size_t row_min = (size_t)p->k * (fp8 ? 1u : 2u);
    /* BF16 gathered gave wrong rows now and then on an H100 (1 case in 6, never the same
     * one; FP8's every case bit-equal): refused until that is understood (docs/design.md) */
    if (!fp8) return ws_fail(WS_ERR_UNSUPPORTED, "ws_gemm: a gathered A (a_rows) is FP8 only for now");
    WS_REQUIRE(((uintptr_t)p->a_rows & 3u) == 0, "ws_gemm: a_rows %p is not 4-byte aligned", (const void *)p->a_rows);
    WS_REQUIRE(p->a_rows_total >= 1, "ws_gemm: a_rows is set but a_rows_total is %d (the rows of the gathered A, >= 1)",
               p->a_rows_total);
    WS_REQUIRE(p->a_row_bytes == 0 || (p->a_row_bytes >= row_min && p->a_row_bytes % 16 == 0 &&
                                       p->a_row_bytes < ((size_t)1 << 32)),
               "ws_gemm: a_row_bytes %zu must be 0 (k x element = %zu) or at least %zu, a multiple of 16 and below "
               "2^32", p->a_row_bytes, row_min, row_min);
    if (fp8) {
      WS_REQUIRE(p->a_scale_ld == 0, "ws_gemm: a gathered A takes row-major scales (a_scale_stride), a_scale_ld must be 0");
      WS_REQUIRE(p->a_scale_stride == 0 || p->a_scale_stride >= p->k / 128,
                 "ws_gemm: a_scale_stride %d must be 0 or at least the %d K blocks", p->a_scale_stride, p->k / 128);
      const uint64_t sa = (uint64_t)p->a_rows_total * (uint64_t)(p->a_scale_stride ? p->a_scale_stride : p->k / 128);
      WS_REQUIRE(sa < ((uint64_t)1 << 32), "ws_gemm: %d gathered rows x %d scales a row: at most 2^32 - 1",
                 p->a_rows_total, p->a_scale_stride ? p->a_scale_stride : p->k / 128);
      WS_REQUIRE(((uintptr_t)p->a_scale & 3u) == 0, "ws_gemm: a_scale must be 4-byte aligned");
    }
  } else {
    WS_REQUIRE(p->a_rows_total == 0 && p->a_row_bytes == 0 && p->a_scale_stride == 0,
               "ws_gemm: a_rows_total, a_row_bytes and a_scale_stride are for a gathered A (a_rows is NULL)");
  }
  /* the tile schedule counts work items (tiles of at least 128 x 128, up to 16 K slices)
   * in 32 bits */
  const uint64_t tiles = (ws_gemm_rows(p) / 128 + (uint64_t)p->groups + 1) * ((uint64_t)p->n / 128 + 1) * 16;
  WS_REQUIRE(tiles < ((uint64_t)1 << 31), "ws_gemm: m %d x n %d in %d groups is more tiles than this scheduler counts",
             p->m, p->n, p->groups);
  WS_REQUIRE(p->workspace == NULL || aligned16(p->workspace), "ws_gemm: workspace %p must be 16-byte aligned",
             p->workspace);
  if (p->layout == WS_GEMM_GROUPED_CONTIGUOUS)
    WS_REQUIRE(p->group_offsets != NULL, "ws_gemm: grouped contiguous layout needs group_offsets (groups + 1 ints)");
  if (p->layout == WS_GEMM_GROUPED_MASKED)
    WS_REQUIRE(p->group_rows != NULL, "ws_gemm: grouped masked layout needs group_rows (groups ints)");
  return WS_OK;
}

int ws_gemm_group_of_row(const int *off, int groups, int row) {
  if (!off || row < off[0]) return -1;
  int lo = 0, hi = groups; /* last g with off[g] <= row, skipping empty groups */
  while (hi - lo > 1) {
    const int mid = (lo + hi) / 2;
    if (off[mid] <= row) lo = mid;
    else hi = mid;
  }
  return row < off[lo + 1] ? lo : -1;
}

static double element(const ws_gemm_problem *p, const void *base, size_t i) {
  if (p->type == WS_GEMM_FP8) return ws_fp8_e4m3_decode(((const uint8_t *)base)[i]);
  return (double)ws_bf16_to_float(((const uint16_t *)base)[i]);
}

/* One row of D per item, on all cores (core/parallel.c): the same sums in the same order
 * on any thread. */
typedef struct {
  const ws_gemm_problem *p;
  double *d;
} gemm_ref_job;

static void gemm_ref_row(void *ctx, int item, int worker) {
  (void)worker;
  const gemm_ref_job *j = (const gemm_ref_job *)ctx;
  const ws_gemm_problem *p = j->p;
  const size_t n = (size_t)p->n, k = (size_t)p->k, kb = k / 128, r = (size_t)item;
  const int fp8 = p->type == WS_GEMM_FP8;
  double *d = j->d;
  int g = 0;
  if (p->layout == WS_GEMM_GROUPED_CONTIGUOUS) {
    g = ws_gemm_group_of_row(p->group_offsets, p->groups, (int)r);
    if (g >= 0 && p->group_rows && (int)r - p->group_offsets[g] >= p->group_rows[g]) { /* padding */
      memset(d + r * n, 0, n * sizeof(double));
      return;
    }
  }
  if (p->layout == WS_GEMM_GROUPED_MASKED) {
    g = (int)(r / (size_t)p->m);
    if ((int)(r % (size_t)p->m) >= p->group_rows[g]) {
      memset(d + r * n, 0, n * sizeof(double));
      return;
    }
  }
  const size_t boff = (size_t)g * n * k;
  /* A's row: r, or gathered (a_rows, -1: row 0) at its own stride, the scales with it */
  const size_t es = fp8 ? 1 : 2, ar = p->a_rows ? (size_t)(p->a_rows[r] < 0 ? 0 : p->a_rows[r]) : r;
  const size_t a_stride = p->a_rows && p->a_row_bytes ? p->a_row_bytes / es : k;
  const size_t s_stride = p->a_rows && p->a_scale_stride ? (size_t)p->a_scale_stride : kb;
  for (size_t c = 0; c < n; c++) {
    double acc = 0.0;
    for (size_t kk = 0; kk < k; kk++) {
      double x = element(p, p->a, ar * a_stride + kk) * element(p, p->b, boff + c * k + kk);
      if (fp8) x *= (double)p->a_scale[p->a_scale_ld ? (kk / 128) * (size_t)p->a_scale_ld + r : ar * s_stride + kk / 128] *
                    (double)p->b_scale[((size_t)g * (n / 128) + c / 128) * kb + kk / 128];
      acc += x;
    }
    d[r * n + c] = acc;
  }
}

ws_status ws_gemm_reference(const ws_gemm_problem *p, double *d) {
  ws_status s = ws_gemm_check(p);
  if (s != WS_OK) return s;
  WS_REQUIRE(d != NULL, "ws_gemm_reference: d is NULL");
  if (p->layout == WS_GEMM_GROUPED_CONTIGUOUS) {
    WS_REQUIRE(p->group_offsets[0] == 0 && p->group_offsets[p->groups] == p->m,
               "ws_gemm_reference: group_offsets must run from 0 to m = %d (got %d .. %d)", p->m, p->group_offsets[0],
               p->group_offsets[p->groups]);
    for (int g = 0; g < p->groups; g++)
      WS_REQUIRE(p->group_offsets[g] <= p->group_offsets[g + 1], "ws_gemm_reference: group_offsets decrease at group %d", g);
  }
  const size_t rows = ws_gemm_rows(p);
  WS_REQUIRE(rows <= (size_t)INT_MAX, "ws_gemm_reference: %zu rows", rows);
  for (size_t r = 0; p->a_rows && r < rows; r++)
    WS_REQUIRE(p->a_rows[r] >= -1 && p->a_rows[r] < p->a_rows_total, "ws_gemm_reference: a_rows[%zu] = %d, must be -1 .. %d",
               r, p->a_rows[r], p->a_rows_total - 1);
  gemm_ref_job j = {p, d};
  ws_parallel_for((int)rows, ws_host_workers(), gemm_ref_row, &j);
  return WS_OK;
}

/* Routed groups (MoE experts): a contiguous layout whose caller gave rows_hint, m being
 * only the rows' room; the counts are the router's, only their mean is known here. */
static int routed_groups(const ws_gemm_problem *p) {
  return p->layout == WS_GEMM_GROUPED_CONTIGUOUS && p->rows_hint > 0;
}

/* Rows per group the tile choice assumes: the mean (routed groups: of rows_hint), or the
 * bound m (dense, masked). */
static size_t fp8_rows_per_group(const ws_gemm_problem *p) {
  const size_t groups = p->layout == WS_GEMM_DENSE ? 1 : (size_t)p->groups;
  size_t rows = ws_gemm_rows(p);
  if (routed_groups(p) && (size_t)p->rows_hint < rows)
    rows = (size_t)p->rows_hint;
  return (rows + groups - 1) / groups;
}

/* P(X > t) for a routed group's row count X of the given mean (Poisson, normal tail;
 * X an integer: P(X >= t + 1)). */
static double routed_tail(double mean, double t) {
  return mean > 0 ? 0.5 * erfc((t + 0.5 - mean) / (sqrt(mean) * sqrt(2.0))) : 0.0;
}

/* Tile rows of bm a group takes on average. Routed groups spread about the mean as
 * Poisson counts do, sd = sqrt(mean): E[ceil(X / bm)] = sum over j >= 0 of P(X > j bm).
 * At 192 routed rows a group on average, about half the groups need a second 192-row
 * tile row. Otherwise every group holds the mean. */
static double fp8_tile_rows(const ws_gemm_problem *p, int bm) {
  const size_t per = fp8_rows_per_group(p);
  if (!routed_groups(p) || per == 0)
    return (double)((per + (size_t)bm - 1) / (size_t)bm);
  const double mean = (double)per, sd = sqrt(mean);
  double e = 0.0;
  for (int j = 0; (double)j * bm <= mean + 8.0 * sd; j++) e += routed_tail(mean, (double)j * bm);
  return e;
}

/* Time of an FP8 problem on tiles of bm rows, in units of a 128-row tile's time: whole
 * waves of tiles over the SMs (the persistent grid's last wave is as long as a full one),
 * each tile bm / 128 as long, divided by the tile's speed-up. Grouped problems count
 * each group's tile rows as fp8_tile_rows says. */
static double fp8_cost(const ws_gemm_problem *p, int bm, int sms, double gain) {
  const size_t groups = p->layout == WS_GEMM_DENSE ? 1 : (size_t)p->groups;
  const double tiles = fp8_tile_rows(p, bm) * (double)groups * (double)(((size_t)p->n + 127) / 128);
  const double waves = ceil(tiles / (double)sms - 1e-9);
  return waves * (double)bm / 128.0 / gain;
}

/* The 192-row tile in CTA pairs sharing A (WARPSPEC_GEMM_PAIR, on: 5-18% faster, session 25),
 * and only with an even number of tile columns: an odd one leaves a phantom tile per tile
 * row that costs a whole CTA (at n = 384 a quarter of the pairs' work). */
static const gemm_kernel *fp8_wide_or_pair(const ws_gemm_problem *p) {
  const gemm_kernel *pair = gemm_fp8_wide_pair_kernel_desc();
  const int columns = (p->n + pair->bn - 1) / pair->bn;
  return ws_knobs_get()->gemm_pair && columns % 2 == 0 ? pair : gemm_fp8_wide_kernel_desc();
}

/* The skinny kernel whose A box holds `tok` rows (16, 32, 64; BF16 also 128), NULL for
 * another count. */
static const gemm_kernel *skinny_kernel(ws_gemm_type type, int tok) {
  if (type == WS_GEMM_FP8)
    return tok == 16 ? gemm_fp8_skinny16_kernel_desc()
           : tok == 32 ? gemm_fp8_skinny32_kernel_desc()
           : tok == 64 ? gemm_fp8_skinny64_kernel_desc() : NULL;
  return tok == 16    ? gemm_bf16_skinny16_kernel_desc()
         : tok == 32  ? gemm_bf16_skinny32_kernel_desc()
         : tok == 64  ? gemm_bf16_skinny64_kernel_desc()
         : tok == 128 ? gemm_bf16_skinny128_kernel_desc() : NULL;
}

/* A's rows rounded up to a skinny kernel's box: 16, 32, 64 or 128 */
static int skinny_rows(int m) { return m <= 16 ? 16 : m <= 32 ? 32 : m <= 64 ? 64 : 128; }

/* The kernel for a checked problem on a GPU of `sms` SMs, and whether it computes whole
 * spans of a contiguous problem with group_rows (the counts dropped, the padding computed);
 * the FP8 tile is the one of least time (fp8_cost) unless WARPSPEC_GEMM_FP8_TILE=128|192
 * forces it (the counts then always kept). */
typedef struct {
  const gemm_kernel *k;
  int whole_spans;
} gemm_choice;

static gemm_choice gemm_choose(const ws_gemm_problem *p, int sms) {
  gemm_choice c = {NULL, 0};
  if (p->type != WS_GEMM_FP8) {
    /* a few rows: the weights on wgmma's M side, A's rows rounded up to 16, 32, 64 or 128 */
    if (p->layout == WS_GEMM_DENSE && p->m <= ws_knobs_get()->gemm_skinny_rows && !p->a_rows && ws_knobs_get()->gemm_skinny)
      c.k = skinny_kernel(WS_GEMM_BF16, skinny_rows(p->m));
    else
      c.k = gemm_bf16_kernel_desc();
    return c;
  }
  const int forced = ws_knobs_get()->gemm_fp8_tile; /* 0: not forced */
  /* a gathered A: the 128-row kernel with four loader warps, or the 192-row one if forced;
   * routed groups over whole padded spans (tiles of equal work, below) */
  if (p->a_rows) {
    c.k = forced == 192 ? gemm_fp8_wide_kernel_desc() : gemm_fp8_gather_kernel_desc();
    c.whole_spans = !forced && routed_groups(p) && p->group_rows;
    return c;
  }
  if (forced) {
    c.k = forced == 192 ? fp8_wide_or_pair(p) : gemm_fp8_kernel_desc();
    return c;
  }
  /* a few rows (dense, or a masked group's room): the weights on wgmma's M side
   * (WARPSPEC_GEMM_FP8_SKINNY; 1.09-1.45x cuBLASLt at 1-64 rows, design_gemm.md 5.2) */
  if (p->layout != WS_GEMM_GROUPED_CONTIGUOUS && p->m <= WS_GEMM_SKINNY_MAX_ROWS && ws_knobs_get()->gemm_fp8_skinny) {
    c.k = skinny_kernel(WS_GEMM_FP8, skinny_rows(p->m));
    return c;
  }
  if (sms < 1) sms = 1;
  /* K-block-major activation scales reach the 192-row kernel's stages by TMA (gemm_launch.c) */
  const double gain = p->a_scale_ld > 0 && (p->k / 128) % 4 == 0 ? WS_GEMM_FP8_WIDE_GAIN_TMA : WS_GEMM_FP8_WIDE_GAIN;
  if (routed_groups(p)) {
    /* Routed groups (MoE experts) are bound by reading each expert's weights, which the
     * tiles of a group read once only while they run side by side: tiles of equal work.
     * Measured (session 47, H200, the layer's L1 and L2): a group's rows in one 192-row
     * tile row (the counts kept) ran 9-28% faster than 128-row tiles over the padded
     * spans at 128-160 rows a group; where about half the groups end in a partial second
     * tile row (192 rows a group) or all do (288), the weights were read up to twice
     * (DRAM bytes 1.8x the weights) and the padded spans' whole tiles won by 3-10%. */
    const double mean = (double)fp8_rows_per_group(p);
    if (p->group_rows && routed_tail(mean, 192.0) <= WS_GEMM_FP8_ONE_ROW_TAIL &&
        fp8_tile_rows(p, 128) * gain >= 1.5) {
      c.k = fp8_wide_or_pair(p);
      return c;
    }
    c.whole_spans = p->group_rows != NULL;
    /* over padded spans, up to 192 rows a group: two 128-row tile rows ran 14-23% faster
     * than the 192-row tile (session 46) */
    if (mean <= WS_GEMM_FP8_WIDE_GROUP_MIN_ROWS) {
      c.k = gemm_fp8_kernel_desc();
      return c;
    }
  }
  c.k = fp8_cost(p, 192, sms, gain) >= fp8_cost(p, 128, sms, 1.0) ? gemm_fp8_kernel_desc() : fp8_wide_or_pair(p);
  return c;
}

ws_status ws_gemm_tile(const ws_gemm_problem *p, int sms, int *tile_rows, int *tile_cols) {
  WS_REQUIRE(tile_rows != NULL && tile_cols != NULL, "ws_gemm_tile: tile_rows / tile_cols is NULL");
  WS_REQUIRE(sms >= 0, "ws_gemm_tile: sms %d is negative", sms);
  ws_status s = ws_gemm_check(p);
  if (s != WS_OK) return s;
  if (sms == 0 && (s = ws_device_sms(&sms)) != WS_OK) return s;
  const gemm_kernel *k = gemm_choose(p, sms).k;
  *tile_rows = k->bm;
  *tile_cols = k->bn;
  return WS_OK;
}

const char *gemm_kernel_name_for(const ws_gemm_problem *p, int sms) {
  if (sms < 1 || ws_gemm_check(p) != WS_OK) return NULL;
  return gemm_choose(p, sms).k->name;
}

ws_status ws_gemm(const ws_gemm_problem *p, cudaStream_t stream) {
  ws_status s = ws_check_mode() ? ws_gemm_validate(p, stream) : ws_gemm_check(p);
  if (s != WS_OK) return s;
  if (ws_gemm_rows(p) == 0) return WS_OK; /* nothing to compute: no GPU call at all */
  int sms = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  const gemm_choice c = gemm_choose(p, sms);
  if (!c.whole_spans) return gemm_launch(c.k, p, sms, stream);
  ws_gemm_problem spans = *p; /* the padding computed with the rows: whole tiles only */
  spans.group_rows = NULL;
  return gemm_launch(c.k, &spans, sms, stream);
}

ws_status ws_gemm_workspace_size(const ws_gemm_problem *p, size_t *bytes) {
  WS_REQUIRE(bytes != NULL, "ws_gemm_workspace_size: bytes is NULL");
  *bytes = 0;
  ws_status s = ws_gemm_check(p);
  if (s != WS_OK) return s;
  int sms = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  return gemm_workspace_of(gemm_choose(p, sms).k, p, sms, bytes);
}

ws_status ws_gemm_plan(ws_gemm_type type, ws_plan *plan) {
  WS_REQUIRE(type == WS_GEMM_BF16 || type == WS_GEMM_FP8, "ws_gemm_plan: type %d unknown", (int)type);
  return gemm_plan_of(type == WS_GEMM_FP8 ? gemm_fp8_kernel_desc() : gemm_bf16_kernel_desc(), plan);
}

ws_status ws_gemm_plan_tile(ws_gemm_type type, int tile_rows, ws_plan *plan) {
  WS_REQUIRE(type == WS_GEMM_BF16 || type == WS_GEMM_FP8, "ws_gemm_plan_tile: type %d unknown", (int)type);
  /* 128 BF16 rows: the 128 x 256 tile (its skinny instance only through ws_gemm's choice) */
  const gemm_kernel *wide = gemm_fp8_wide_kernel_desc(), *skinny = tile_rows < 128 ? skinny_kernel(type, tile_rows) : NULL;
  const gemm_kernel *k = skinny                      ? skinny
                         : type == WS_GEMM_BF16      ? gemm_bf16_kernel_desc()
                         : tile_rows == wide->bm     ? wide
                                                     : gemm_fp8_kernel_desc();
  WS_REQUIRE(tile_rows == k->bm, "ws_gemm_plan_tile: no %s kernel has %d-row tiles (%s)",
             type == WS_GEMM_BF16 ? "BF16" : "FP8", tile_rows, type == WS_GEMM_BF16 ? "16, 32, 64 or 128" : "16, 32, 64, 128 or 192");
  return gemm_plan_of(k, plan);
}
