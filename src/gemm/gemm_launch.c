/* gemm_launch.c - the host half of every GEMM kernel: tensor maps with the 128-byte
 * swizzle, the schedule's shape, the grid, the plan check and the launch. */
#include "gemm_args.h"

#include "../core/internal.h"
#include "../core/knobs.h"
#include "../core/size_check.h"

#include <string.h>

ws_status gemm_plan_of(const gemm_kernel *k, ws_plan *plan) {
  WS_REQUIRE(k != NULL && plan != NULL, "ws_gemm_plan: plan is NULL");
  ws_status s = ws_plan_init(plan, k->name, k->roles, k->nroles, 0);
  return s != WS_OK ? s : ws_plan_set_smem(plan, k->smem);
}

/* Split-K for dense problems whose tiles leave most SMs idle: enough K slices to give
 * every SM a work item, each slice at least WS_GEMM_SPLITK_MIN_STEPS K steps long, at
 * most WS_GEMM_SPLITK_MAX slices. WARPSPEC_GEMM_SPLITS=N forces N (tests, benchmarks; 1
 * turns it off), at most one slice per K step. */
static int gemm_splits(const gemm_kernel *k, const ws_gemm_problem *p, int sms) {
  const int ksteps = p->k / k->bk;
  int splits = ws_knobs_get()->gemm_splits; /* 0: not forced */
  if (splits == 0 && p->layout == WS_GEMM_DENSE) {
    splits = 1;
    const long long tiles = (long long)((p->m + k->bm - 1) / k->bm) * ((p->n + k->bn - 1) / k->bn);
    if (2 * tiles <= sms) splits = (int)(sms / tiles);
    if (splits > ksteps / WS_GEMM_SPLITK_MIN_STEPS) splits = ksteps / WS_GEMM_SPLITK_MIN_STEPS;
    if (splits > WS_GEMM_SPLITK_MAX) splits = WS_GEMM_SPLITK_MAX;
    /* the BF16 128 x 256 tile from 16 tiles on (64 CTAs or more): 4 slices through the
     * workspace beat 8 at 96 and 128 rows of (4096, 7168) on an H200 (0.92-0.95x and 0.86x
     * cuBLASLt against 0.86-0.87x and 0.77-0.85x, session 38): half the partials' round
     * trip, twice the K steps a tile. Fewer tiles keep their slices (not measured). */
    if (k->id == WS_PLAN_SLOT_GEMM_BF16 && tiles >= 16 && splits > WS_GEMM_SPLITK_BF16_WIDE)
      splits = WS_GEMM_SPLITK_BF16_WIDE;
  }
  if (p->layout != WS_GEMM_DENSE || splits < 1) splits = 1;
  return splits > ksteps ? ksteps : splits;
}

static ws_status make_plan(const void *k, ws_plan *plan) { return gemm_plan_of((const gemm_kernel *)k, plan); }

/* Rows of A and D. Defined here, with the launcher, so that the calls go one way: the host
 * API (gemm_host.c) calls down into this file, never back. */
size_t ws_gemm_rows(const ws_gemm_problem *p) {
  if (!p) return 0;
  return p->layout == WS_GEMM_GROUPED_MASKED ? (size_t)p->groups * (size_t)p->m : (size_t)p->m;
}

/* SIZE_MAX when the partials do not fit size_t (WARPSPEC_GEMM_SPLITS forcing many slices): no
 * workspace is that large, so the launch falls back to one slice instead of a wrapped size. */
static size_t gemm_workspace_need(const ws_gemm_problem *p, int splits) {
  size_t cells = 0, bytes = 0;
  if (splits <= 1) return 0;
  if (!ws_size_mul3((size_t)splits, ws_gemm_rows(p), (size_t)p->n, &cells) || !ws_size_mul3(cells, sizeof(float), 1, &bytes))
    return SIZE_MAX;
  return bytes;
}

/* The K slices of a dense BF16 problem on the 128 x 256 tile as clusters: the slices of a
 * tile sum their fp32 partials through distributed shared memory in slice order, the same
 * bits as the summing kernel, when there are at most WARPSPEC_GEMM_CLUSTER_K of them
 * (WS_GEMM_CLUSTER_K_DEFAULT, 2). More slices keep the workspace. H200, session 38, against
 * the workspace: 2 slices 3-14% faster (512 x (4096, 7168), 256 x (7168, 2048)); 4 slices
 * level at 128 x (7168, 2048) and 1.6x slower at 256 x (4096, 7168) (32 clusters of 4 do
 * not fit at once: two waves); 8 slices 1.5x slower. 0: the workspace's way. */
static int gemm_cluster_splits(const gemm_kernel *k, const ws_gemm_problem *p, int splits) {
  const int most = ws_knobs_get()->gemm_cluster_k;
  if (k->id != WS_PLAN_SLOT_GEMM_BF16 || p->layout != WS_GEMM_DENSE || splits < 2 || splits > most) return 0;
  return splits;
}

ws_status gemm_workspace_of(const gemm_kernel *k, const ws_gemm_problem *p, int sms, size_t *bytes) {
  /* cluster_k kernels and split-K in clusters sum their slices in shared memory: no workspace */
  const int splits = gemm_splits(k, p, sms);
  *bytes = ws_gemm_rows(p) && !k->cluster_k && !gemm_cluster_splits(k, p, splits) ? gemm_workspace_need(p, splits) : 0;
  return WS_OK;
}

/* The skinny kernels' tiles: a tile column of bn weight rows, per group of a masked problem
 * (at most 4096 groups x 2^30 / 64 columns: ws_gemm_check bounds the product below 2^31) */
static int gemm_skinny_tiles(const gemm_kernel *k, const ws_gemm_problem *p) {
  const int cols = (p->n + k->bn - 1) / k->bn;
  return p->layout == WS_GEMM_GROUPED_MASKED ? cols * p->groups : cols;
}

/* The skinny kernel's K slices (cluster_k): the fewest of 1, 2, 4, 8 that give the GPU
 * three quarters of a CTA per SM (each slice at least WS_GEMM_SPLITK_MIN_STEPS K steps),
 * or WARPSPEC_GEMM_SPLITS (at most 8, the portable cluster, and one per K step). */
int gemm_skinny_splits(const gemm_kernel *k, const ws_gemm_problem *p, int sms) {
  const int ksteps = p->k / k->bk, tiles = gemm_skinny_tiles(k, p);
  const int per_stage = GEMM_SKINNY_KBOXES(k->bm); /* K steps a stage */
  int splits = ws_knobs_get()->gemm_splits;
  if (splits == 0) {
    splits = 1;
    while (splits < 8 && (long long)tiles * splits * 4 < (long long)sms * 3 &&
           ksteps / (per_stage * splits) >= WS_GEMM_SPLITK_MIN_STEPS)
      splits *= 2;
  }
  if (splits > 8) splits = 8;
  return splits > ksteps ? ksteps : splits;
}

/* How many clusters of `width` CTAs of a cluster_k kernel fit at once. ws_plan_max_clusters
 * keeps the answer for one width per plan, and the skinny kernels ask for 2, 4 or 8 as the
 * shapes come: a decode step's projections of different widths in turn would query the
 * occupancy API at every call. So the answers are kept here, per plan (one per thread,
 * device and kernel) and width. */
static ws_status cluster_k_fit(ws_plan *plan, const void *func, int width, int *clusters) {
  enum { KEPT = 32 };
  static _Thread_local struct {
    const ws_plan *plan;
    int width, clusters;
  } kept[KEPT];
  static _Thread_local int next;
  for (int i = 0; i < KEPT; i++)
    if (kept[i].plan == plan && kept[i].width == width) {
      *clusters = kept[i].clusters;
      return WS_OK;
    }
  const ws_status s = ws_plan_max_clusters(plan, func, width, clusters);
  if (s != WS_OK) return s;
  kept[next].plan = plan;
  kept[next].width = width;
  kept[next].clusters = *clusters;
  next = (next + 1) % KEPT;
  return WS_OK;
}

/* The launch every GEMM ends with: `ctas` CTAs, chained, in clusters of `width` when it
 * is above 1. */
static ws_status gemm_launch_ctas(ws_plan *plan, const gemm_kernel *k, long long ctas, int width, ws_tmap *ma,
                                  ws_tmap *mb, ws_tmap *md, gemm_args *a, cudaStream_t stream) {
  ws_diag diag;
  const ws_status s = ws_diag_get(&diag);
  if (s != WS_OK) return s;
  void *args[] = {ma, mb, md, a, &diag};
  const dim3 g = {(unsigned)ctas, 1, 1};
  return width > 1 ? ws_plan_launch_cluster_chained(plan, k->kernel, g, width, stream, args)
                   : ws_plan_launch_chained(plan, k->kernel, g, stream, args);
}

/* cluster_k kernels: one CTA per (tile column, K slice), a tile's slices one cluster.
 * Where fewer clusters of that width fit at once than there are tile columns, the
 * slices halve (unless forced), so the columns run in one wave of narrower clusters. */
static ws_status gemm_launch_cluster_k(const gemm_kernel *k, const ws_gemm_problem *p, int sms, ws_plan *plan,
                                       ws_tmap *ma, ws_tmap *mb, ws_tmap *md, gemm_args *a, cudaStream_t stream) {
  const int tiles = gemm_skinny_tiles(k, p), forced = ws_knobs_get()->gemm_splits != 0;
  int splits = gemm_skinny_splits(k, p, sms);
  ws_status s;
  /* one slice is a plain launch (each CTA its own cluster of one): the plan check at the
   * launch says whether a CTA fits; the occupancy query wants a cluster attribute */
  while (splits > 1) {
    int clusters = 0;
    if ((s = cluster_k_fit(plan, k->kernel, splits, &clusters)) != WS_OK) return s;
    if (clusters >= tiles || (forced && clusters >= 1)) break;
    if (forced) return ws_fail(WS_ERR_BUDGET, "kernel '%s': no cluster of %d CTAs fits on this device", k->name, splits);
    splits /= 2;
  }
  a->shape.splits = splits;
  return gemm_launch_ctas(plan, k, (long long)tiles * splits, splits, ma, mb, md, a, stream);
}

/* Rows of A's TMA box: the tile's (each CTA of a pair half of them); a dense problem on a
 * skinny kernel with fewer rows than its box, only its own rows. With the tile's box the
 * TMA unit zero-fills the rows past the matrix in every stage, and that was the cost: at 80
 * BF16 rows on the 128-row skinny kernel 22-24 us against 17-18 with A's own rows, as fast
 * as 128 rows; 96 and 100 rows the same, FP8 40 rows 19 -> 16-17 us (H200, session 41,
 * (N, K) = (7168, 2048)). The stage's rows past A's keep stale bytes: they feed only D's
 * columns past A's rows, which the store skips (sk_reduce_store_rows) -- a NaN there reaches
 * nothing. The box's bytes, and so each stage's expected transaction count, follow the map
 * (ws_tmap.box_bytes). Masked groups keep the tile's box: a group's rows vary per tile. */
static uint32_t a_box_rows(const gemm_kernel *k, const ws_gemm_problem *p, size_t rows, int pair) {
  if (k->cluster_k && p->layout == WS_GEMM_DENSE && rows < (size_t)k->bm)
    return (uint32_t)rows;
  return (uint32_t)(k->bm / pair);
}

ws_status gemm_launch(const gemm_kernel *k, const ws_gemm_problem *p, int sms, cudaStream_t stream) {
  const size_t rows = ws_gemm_rows(p); /* > 0: ws_gemm returns before the GPU otherwise */
  ws_plan *plan = NULL;
  ws_status s = ws_plan_cached(k->id, make_plan, k, &plan);
  if (s != WS_OK) return s;
  const int pair = k->pair > 1 ? k->pair : 1; /* CTA pairs sharing A (gemm_load_tiles_pair): TMA A only */
  WS_REQUIRE(pair == 1 || !p->a_rows, "kernel '%s' takes A by TMA, not gathered rows", k->name);
  ws_tmap ma, mb;
  const uint64_t stride = (uint64_t)p->k * k->elem;
  /* A gathered row by row (gemm_loader.cuh): a box of one row, each at its own index */
  if (p->a_rows) s = ws_tmap_2d_swizzled(&ma, p->a, k->dtype, (uint64_t)p->a_rows_total, (uint64_t)p->k,
                                         p->a_row_bytes ? (uint64_t)p->a_row_bytes : stride, 1, (uint32_t)k->bk,
                                         WS_SWIZZLE_128B);
  else s = ws_tmap_2d_swizzled(&ma, p->a, k->dtype, rows, (uint64_t)p->k, stride, a_box_rows(k, p, rows, pair),
                               (uint32_t)k->bk, WS_SWIZZLE_128B); /* pairs: each CTA loads half of the A tile's rows */
  if (s != WS_OK) return s;
  if ((s = ws_tmap_2d_swizzled(&mb, p->b, k->dtype, (uint64_t)p->n * (uint64_t)p->groups, (uint64_t)p->k, stride,
                               (uint32_t)k->bn, (uint32_t)k->bk, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  ws_tmap md; /* D: 64 x 64 boxes, 128B swizzle (gemm_epilogue.cuh); cluster_k kernels store from registers */
  memset(&md, 0, sizeof md);
  if (!k->cluster_k && (s = ws_tmap_2d_swizzled(&md, p->d, WS_DTYPE_BF16, rows, (uint64_t)p->n, (uint64_t)p->n * 2, 64,
                                                64, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  gemm_args a;
  memset(&a, 0, sizeof a);
  const uint64_t kblocks = (uint64_t)p->k / 128;
  a.a_rs = p->a_scale_ld ? 1u : p->a_scale_stride ? (uint32_t)p->a_scale_stride : (uint32_t)kblocks;
  a.a_ks = p->a_scale_ld ? (uint32_t)p->a_scale_ld : 1u;
  a.a_rows = p->a_rows;
  a.a_gather = (const uint8_t *)p->a;
  a.a_row_bytes = (uint32_t)(p->a_row_bytes ? (uint64_t)p->a_row_bytes : stride);
  /* Scales into the stages by TMA: K-block-major activation scales (one contiguous run of
   * the tile's rows per K block) and 16-byte rows of weight scales (k a multiple of 512). */
  if (k->smem_scales && p->a_scale_ld > 0 && kblocks % 4 == 0) {
    a.scale_tma = 1;
    if ((s = ws_tmap_2d(&a.map_sa, p->a_scale, WS_DTYPE_F32, kblocks, rows, (uint64_t)p->a_scale_ld * 4, 1,
                        (uint32_t)k->bm + 4)) != WS_OK) /* + 4: the box starts at the tile's first row & ~3 */
      return s;
    if ((s = ws_tmap_2d(&a.map_sb, p->b_scale, WS_DTYPE_F32, (uint64_t)p->groups * (uint64_t)(p->n / 128), kblocks,
                        kblocks * 4, 1, 4)) != WS_OK)
      return s;
  }
  a.d = (uint16_t *)p->d;
  a.a_scale = p->a_scale;
  a.b_scale = p->b_scale;
  a.k = p->k;
  a.rows = (long long)rows;
  a.shape.layout = p->layout;
  a.shape.groups = p->groups;
  a.shape.m = p->m;
  a.shape.n = p->n;
  a.shape.bm = k->bm;
  a.shape.bn = k->bn;
  a.shape.offsets = p->group_offsets;
  a.shape.rows = p->group_rows;
  a.shape.ksteps = p->k / k->bk;
  if (k->cluster_k) return gemm_launch_cluster_k(k, p, sms, plan, &ma, &mb, &md, &a, stream);
  a.shape.splits = gemm_splits(k, p, sms);
  a.partial = NULL;
  const int csplits = gemm_cluster_splits(k, p, a.shape.splits);
  if (csplits) { /* one CTA per work item, a tile's slices one cluster (gemm_bf16.cu) */
    a.shape.splits = csplits;
    a.cluster_split = 1;
    const long long items = (long long)((p->m + k->bm - 1) / k->bm) * ((p->n + k->bn - 1) / k->bn) * csplits;
    int clusters = 0;
    if ((s = cluster_k_fit(plan, k->kernel, csplits, &clusters)) != WS_OK) return s;
    if (clusters < 1) return ws_fail(WS_ERR_BUDGET, "kernel '%s': no cluster of %d CTAs fits on this device", k->name, csplits);
    WS_REQUIRE(items < (1ll << 31), "kernel '%s': %lld work items", k->name, items);
    return gemm_launch_ctas(plan, k, items, csplits, &ma, &mb, &md, &a, stream);
  }
  const size_t need = gemm_workspace_need(p, a.shape.splits);
  if (a.shape.splits > 1 && (!p->workspace || p->workspace_bytes < need || need == SIZE_MAX))
    a.shape.splits = 1; /* no room for the partials: one CTA per tile */
  if (a.shape.splits > 1) a.partial = (float *)p->workspace;
  /* dense: exactly the work items (pairs: two CTAs each, columns counted in pairs);
   * grouped: the counts live on the device, one CTA per SM (pairs: whole clusters that fit) */
  const long long columns = ((p->n + k->bn - 1) / k->bn + pair - 1) / pair;
  const long long dense_ctas = (long long)((p->m + k->bm - 1) / k->bm) * columns * a.shape.splits * pair;
  long long ctas = p->layout == WS_GEMM_DENSE && dense_ctas < sms ? dense_ctas : sms;
  if (pair > 1) {
    int clusters = 0;
    if ((s = ws_plan_max_clusters(plan, k->kernel, pair, &clusters)) != WS_OK) return s;
    if (clusters < 1) return ws_fail(WS_ERR_BUDGET, "kernel '%s': no cluster of %d CTAs fits on this device", k->name, pair);
    if (ctas > (long long)clusters * pair) ctas = (long long)clusters * pair;
    ctas -= ctas % pair;
  }
  s = gemm_launch_ctas(plan, k, ctas, pair, &ma, &mb, &md, &a, stream);
  if (s == WS_OK && a.partial) s = gemm_splitk_reduce(a.partial, a.shape.splits, rows * (size_t)p->n, a.d, stream);
  return s;
}
