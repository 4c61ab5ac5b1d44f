/* gemm_sched.cuh - which tile a persistent GEMM CTA works on next, for dense and
 * grouped layouts. Every role of the CTA walks the same sequence (tiles blockIdx.x,
 * blockIdx.x + gridDim.x, ...), so loader and math roles agree without talking.
 *
 * A group is a span of rows of A and D (dense: one group of m rows; contiguous: rows
 * [offsets[g], offsets[g+1]), or only the first rows[g] of them where rows is given;
 * masked: rows [g m, g m + rows[g])) and a slice of B
 * (rows [g n, g n + n)). Tiles are numbered group by group; inside a group, runs of
 * GEMM_RASTER tile rows are walked column by column for L2 reuse. The cursor only moves
 * forward, so finding the group of the next tile costs O(groups) per CTA in total.
 * Split-K (dense problems with too few tiles for the GPU): every tile becomes `splits`
 * work items with consecutive numbers, each covering a slice of the K steps; the kernel
 * writes fp32 partial tiles and a second kernel sums them in a fixed order.
 * CTA pairs (PAIR = 2, gemm_fp8_wide_pair): a cluster of two CTAs takes one work item as
 * two tiles side by side along N (tn = PAIR x column + rank) that share the A tile, each
 * loading half of it into both (multicast). Where a group has an odd number of tile
 * columns the last item's second tile is a phantom: loaded and computed (its partner
 * needs its half of A), never stored. PAIR is a template parameter, 1 by default: every
 * other kernel's walk is the one it always was. */
#ifndef WARPSPEC_GEMM_SCHED_CUH
#define WARPSPEC_GEMM_SCHED_CUH

#include "gemm_args.h"
#include "warpspec/device/ptx.cuh"
#include "warpspec/gemm.h"

#define GEMM_RASTER 8

/* Host and device: the CPU tests walk the same schedule (tests/cpu/test_gemm_sched.cu). */
#define GEMM_HD static __host__ __device__ __forceinline__

typedef struct {
  int g;                /* current group */
  int base;             /* first work item of group g (items < 2^31: ws_gemm_check) */
  int tiles;            /* work items of group g */
  int row0, count;      /* the group's rows */
} gemm_cursor;

typedef struct {
  int g, row0, count;   /* group and its rows */
  int tm, tn;           /* tile row inside the group, tile column */
  int split, k0, k1;    /* K slice: steps k0 .. k1 - 1 */
} gemm_tile;

/* Pairs: the tile lies past the group's last tile column (a phantom: computed for its
 * partner's sake, never stored). Not a field: gemm_tile travels between CTAs of the MoE
 * layer 8 bytes at a time. */
GEMM_HD int gemm_tile_phantom(const gemm_shape *s, const gemm_tile *t) { return t->tn >= (s->n + s->bn - 1) / s->bn; }

GEMM_HD void gemm_group_rows(const gemm_shape *s, int g, int *row0, int *count) {
  if (s->layout == WS_GEMM_GROUPED_CONTIGUOUS) {
    *row0 = s->offsets[g];
    *count = s->offsets[g + 1] - s->offsets[g];
    if (s->rows && s->rows[g] < *count) *count = s->rows[g] > 0 ? s->rows[g] : 0; /* the rows in use; padding after */
  } else if (s->layout == WS_GEMM_GROUPED_MASKED) {
    *row0 = g * s->m;
    *count = s->rows[g] < s->m ? s->rows[g] : s->m;
  } else {
    *row0 = 0;
    *count = s->m;
  }
}

/* Work-item columns of a group: its tile columns, in pairs when PAIR = 2. */
template <int PAIR = 1>
GEMM_HD int gemm_item_columns(const gemm_shape *s) {
  return ((s->n + s->bn - 1) / s->bn + PAIR - 1) / PAIR;
}

template <int PAIR = 1>
GEMM_HD void gemm_cursor_load(const gemm_shape *s, gemm_cursor *c) {
  gemm_group_rows(s, c->g, &c->row0, &c->count);
  c->tiles = (c->count + s->bm - 1) / s->bm * gemm_item_columns<PAIR>(s) * s->splits;
}

template <int PAIR = 1>
GEMM_HD gemm_cursor gemm_cursor_start(const gemm_shape *s) {
  gemm_cursor c;
  c.g = 0;
  c.base = 0;
  gemm_cursor_load<PAIR>(s, &c);
  return c;
}

/* Moves the cursor forward over up to 32 groups per step until it holds item t, or
 * stands on the last group (the walk in gemm_tile_at then runs out as before): the
 * state it leaves is the one the one-group walk reaches. On the device a full warp takes
 * the 32 groups' counts with one load each and adds them up by shuffles: one memory
 * round trip per 32 groups. Walked one group at a time instead, a CTA of an MoE layer at
 * 1 token (256 experts, 8 of them with rows) chained up to 256 dependent loads of the
 * offsets before its first tile, in every role. The host runs the same steps lane by
 * lane (tests/cpu/test_gemm_sched.cu walks it). */
#define GEMM_SKIP_LANES 32
template <int PAIR = 1>
GEMM_HD void gemm_cursor_skip(const gemm_shape *s, gemm_cursor *c, int t) {
  const int tn = gemm_item_columns<PAIR>(s);
  while (t >= c->base + c->tiles && c->g + 1 < s->groups) {
    const int first = c->g + 1, end = c->base + c->tiles; /* group `first` starts at item `end` */
    const int valid = s->groups - first < GEMM_SKIP_LANES ? s->groups - first : GEMM_SKIP_LANES;
#ifdef __CUDA_ARCH__
    const int lane = (int)(threadIdx.x % 32);
    int row0 = 0, count = 0, tiles = 0;
    if (lane < valid) {
      gemm_group_rows(s, first + lane, &row0, &count);
      tiles = (count + s->bm - 1) / s->bm * tn * s->splits;
    }
    int incl = tiles; /* items of groups first .. first + lane */
#pragma unroll
    for (int d = 1; d < 32; d *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, incl, d);
      if (lane >= d) incl += v;
    }
    const unsigned hit = __ballot_sync(0xffffffffu, lane < valid && t < end + incl);
    const int l = hit ? __ffs(hit) - 1 : valid - 1;
    c->g = first + l;
    c->base = end + __shfl_sync(0xffffffffu, incl - tiles, l);
    c->tiles = __shfl_sync(0xffffffffu, tiles, l);
    c->row0 = __shfl_sync(0xffffffffu, row0, l);
    c->count = __shfl_sync(0xffffffffu, count, l);
#else
    int base = end;
    for (int l = 0; l < valid; l++) {
      c->g = first + l;
      c->base = base;
      gemm_cursor_load<PAIR>(s, c);
      base += c->tiles;
      if (t < base) break;
    }
#endif
  }
}

/* The tile of work item t (t never decreases between calls) for the CTA of rank `rank`
 * in its pair (PAIR = 1: rank 0, the item's only tile); 0 once past the last group. */
template <int PAIR = 1>
GEMM_HD int gemm_tile_at(const gemm_shape *s, gemm_cursor *c, int t, gemm_tile *out, int rank = 0) {
  if (t >= c->base + c->tiles) {
#ifdef __CUDA_ARCH__
    if (__activemask() == 0xffffffffu) gemm_cursor_skip<PAIR>(s, c, t); /* the warp's steps need all of its lanes */
#else
    gemm_cursor_skip<PAIR>(s, c, t);
#endif
  }
  while (t >= c->base + c->tiles) {
    c->base += c->tiles;
    if (++c->g >= s->groups) return 0;
    gemm_cursor_load<PAIR>(s, c);
  }
  const int tiles_m = (c->count + s->bm - 1) / s->bm, columns = gemm_item_columns<PAIR>(s);
  const int item = t - c->base, split = item % s->splits, local = item / s->splits;
  const int run = local / (GEMM_RASTER * columns), first = run * GEMM_RASTER;
  const int rows = tiles_m - first < GEMM_RASTER ? tiles_m - first : GEMM_RASTER;
  const int in_run = local - run * GEMM_RASTER * columns;
  out->g = c->g;
  out->row0 = c->row0;
  out->count = c->count;
  out->tm = first + in_run % rows;
  out->tn = in_run / rows * PAIR + rank;
  out->split = split;
  out->k0 = (int)((long long)split * s->ksteps / s->splits);
  out->k1 = (int)((long long)(split + 1) * s->ksteps / s->splits);
  return 1;
}

#endif
