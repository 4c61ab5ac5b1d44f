/* layer_items.cuh - the whole MoE layer in the experts kernel (layer_kernel.cu) on one
 * GPU: the work items that are not GEMM tiles. The kernel's math warpgroups (256
 * threads) run them between tiles, handed over by the loader like the tiles:
 *
 *   route    (item 0)  count each expert's entries in shared memory, pad to 64 rows,
 *                      write the offsets and each entry's row, then release `routed`
 *                      (the loaders wait for it before they decode any other item: the
 *                      tile numbering follows from the offsets).
 *   expand   (items 1 .. X, tokens_per_item tokens each, a warp per 1024 columns)  copy the
 *                      token's row into each of its rows of the grouped layout (a BF16
 *                      row is quantised 1 x 128 on the way, the same bits as
 *                      ws_fp8_quantize_1x128) with its scales K-block-major, then one
 *                      release-add on `expanded`. A CTA's loader waits once, before its
 *                      first L1 tile, until every expand item is in (at 1-2 tokens and
 *                      few entries there is none: the route item expands, mx_route_few,
 *                      and counts once): a 64-row block
 *                      gathers rows from tokens all over the batch, so per-block
 *                      counters bought no earlier start, and their wait (two round
 *                      trips per L1 tile) slowed the tiles 3.5% at 128 tokens.
 *   combine  (after every L2 tile, tokens_per_item tokens each)  wait until every L2
 *                      tile has stored its rows (a counter the L2 epilogues add to), then
 *                      per token sum weight x row over its top-k slots in fp32 in slot
 *                      order, BF16 out: the unfused path's combine, the same bits.
 *                      At most MX_SLICE_COMBINE_TOKENS tokens: no combine items; the L2
 *                      tiles' epilogues sum each column slice once its last tile is in
 *                      (mx_count_stored, mx_combine_slice).
 *
 * Every wait is bounded and every counter comes back to zero within the call (the last
 * reader resets it): repeated calls and graph replay need no host work. */
#ifndef WARPSPEC_MOE_LAYER_ITEMS_CUH
#define WARPSPEC_MOE_LAYER_ITEMS_CUH

#include "warpspec/device/fp8.cuh"
#include "../ep_internal.h"
#include "layer_kernel.h"
#include "../moe_sum.cuh"
#include "warpspec/moe.h"

#include <cuda_bf16.h>

#define MX_LAYER_THREADS 256 /* the two math warpgroups                                    */
#define MX_LAYER_COLS (MOE_SUM_CHUNK * 8) /* columns of a warp's unit of expand and combine */
/* One GPU, at most this many tokens: the combine in the L2 epilogues (slice_combine). */
#define MX_SLICE_COMBINE_TOKENS 8

typedef struct {
  int on;                      /* 0: the experts only                                     */
  int drop;                    /* tests: MOE_DROP_* (layer_kernel.h), also without a layer */
  int tokens, topk, experts, x_bf16, scale_ld;
  int tokens_per_item;         /* of an expand, combine, send or gather item                */
  int token_items;             /* items of tokens_per_item tokens: tokens / tokens_per_item   */
  /* the items between route and the tiles, and after the tiles: one GPU: expand
   * (token_items), combine (token_items); several ranks (layer_items_ep.cuh): send, expand,
   * reduce, gather */
  int send_items, expand_items, reduce_items, gather_items;
  int nranks;                  /* > 1: the items of layer_items_ep.cuh on `ep`             */
  int self_route;              /* one GPU, few entries: the loaders count the offsets too  */
  int few_decode;              /* ... at most a warp's lanes of them: moe_few_item          */
  int route_expands;           /* ... and at most 2 tokens: the route item expands them too
                                * (mx_route_few; no expand items)                          */
  int route_at_once;           /* item 0 (the route) runs on block 0's math at the kernel's
                                * start, unclaimed; the claims number items from 1         */
  const int *topk_idx;
  const float *topk_weights;
  const uint8_t *x;            /* the caller's rows (e4m3, or bf16 when x_bf16)          */
  const float *x_scale;        /* [T][H / 128] (e4m3 rows)                                */
  uint16_t *out;
  int *offsets, *entry_row, *bad_id;
  uint8_t *xg;                 /* the grouped rows [max_rows][H] and their scales          */
  float *xg_scale;             /* [H / 128][scale_ld]                                      */
  uint32_t *routed;            /* 1 once the route item is done (the last loader resets)   */
  uint32_t *expanded;          /* expand items done, or 1 from the route item when it expands
                                * (route_expands; the last loader resets)                 */
  uint32_t *l2_done;           /* L2 tile halves stored (2 per tile)                       */
  uint32_t *comb_seen;         /* combine items past their wait (the last one resets)      */
  uint32_t *sent, *reduced, *gathered; /* several ranks: items done (the last one resets)  */
  int slice_combine;           /* one GPU, few tokens: combine by the L2 epilogues, no items */
  uint32_t *slice_done;        /* [L2 column tiles]: tile halves counted (the last resets)   */
  ep_args ep;                  /* several ranks: the dispatch handle's buffers              */
} mx_layer_args;

/* The count of `expanded` that means every row is in: the expand items', or the route
 * item's one when it expands (few entries, mx_route_few). */
WS_DEV uint32_t mx_expand_target(const mx_layer_args *L) { return L->route_expands ? 1u : (uint32_t)L->expand_items; }

WS_DEV int mx_pad_rows(int n) { return (n + MOE_EXPERTS_BM - 1) / MOE_EXPERTS_BM * MOE_EXPERTS_BM; }

/* Entry j's expert e is outside 0 .. E - 1 and not -1: skipped like -1, the first such
 * entry reported (token, slot, id). */
WS_DEV void mx_report_bad_id(const mx_layer_args *L, int j, int e) {
  if (e != -1 && atomicAdd(&L->bad_id[0], 1) == 0) {
    L->bad_id[1] = j / L->topk; L->bad_id[2] = j % L->topk; L->bad_id[3] = e;
  }
}

/* The few-entry layout (at most a warp's lanes of (token, slot) entries, few_decode), one
 * entry a lane, as the scheduler warps decode (mx_few_route) and the route item places
 * rows (mx_route_few): each distinct expert's rows at 64 `rank`, its rank among the
 * distinct experts in increasing order (moe_few_item). `same`: the lanes naming this
 * lane's expert (an invalid lane alone), `firsts`: the lowest lane of each expert.
 * Entries outside 0 .. E - 1 are skipped, as the route item skips them. */
typedef struct {
  int e, valid, rank;
  uint32_t same, firsts;
} mx_few_entry;

/* The same from this lane's entry already loaded (e: topk_idx[lane], -1 past the n). */
WS_DEV mx_few_entry mx_few_distinct_of(int e, int E, int lane) {
  mx_few_entry f;
  f.e = e;
  f.valid = f.e >= 0 && f.e < E;
  f.same = __match_any_sync(0xffffffffu, f.valid ? f.e : -1 - lane);
  f.firsts = __ballot_sync(0xffffffffu, f.valid && __ffs(f.same) - 1 == lane);
  f.rank = 0;
#pragma unroll 1 /* short code: it runs once, cold (and within the loader role's registers) */
  for (int j = 0; j < 32; j++) {
    const int ej = __shfl_sync(0xffffffffu, f.e, j);
    if ((f.firsts >> j & 1u) && ej < f.e) f.rank++;
  }
  return f;
}
WS_DEV mx_few_entry mx_few_distinct(const int *topk_idx, int n, int E, int lane) {
  return mx_few_distinct_of(lane < n ? __ldg(topk_idx + lane) : -1, E, lane);
}

/* No slot names an expert and the L2 epilogues combine: no tile will sum the rows, which
 * are zero (a combine item writes the same). */
WS_DEV void mx_zero_out(const mx_layer_args *L, int i, int H) {
  for (size_t v = (size_t)i; v < (size_t)L->tokens * H / 8; v += MX_LAYER_THREADS)
    ((uint4 *)L->out)[v] = make_uint4(0u, 0u, 0u, 0u);
}

/* A full warp's inclusive prefix sum of v (lane: this thread's lane). */
WS_DEV int mx_warp_scan_incl(int v, int lane) {
#pragma unroll
  for (int d = 1; d < 32; d *= 2) {
    const int u = __shfl_up_sync(0xffffffffu, v, d);
    if (lane >= d) v += u;
  }
  return v;
}

/* Exclusive prefix sum of v over the 256 threads (i: 0..255): shuffles in each warp, then
 * the warps' sums (warp_sum: 8 ints of shared memory, free again after the caller's
 * next barrier). */
WS_DEV int mx_scan_excl(int v, int i, int *warp_sum, uint32_t bar) {
  const int lane = i % 32, warp = i / 32, incl = mx_warp_scan_incl(v, lane);
  if (lane == 31) warp_sum[warp] = incl;
  ws_named_sync(bar, MX_LAYER_THREADS);
  int run = incl - v;
  for (int w = 0; w < warp; w++) run += warp_sum[w];
  return run;
}

/* This thread's run of n experts, e0 .. e1 - 1, when `threads` threads take a run each
 * (i: this one's index). */
WS_DEV void mx_run_of(int n, int i, int threads, int *e0, int *e1) {
  const int per = (n + threads - 1) / threads;
  *e0 = min(n, i * per);
  *e1 = min(n, *e0 + per);
}

/* The start of the first padded group (64 rows) of this thread's run e0 .. e1 - 1
 * (mx_run_of) of experts with rows[e] rows each: an exclusive scan over the threads.
 * threads 32: one warp, no barrier; else the 256 math threads through mx_scan_excl
 * (warp_sum, bar). The caller walks its run adding mx_pad_rows(rows[e]); after it the
 * last thread holds the total. The three routes use it: the one-GPU layer's (mx_route),
 * the several ranks' (mxe_route) and the loaders' own at decode (mx_self_route). */
WS_DEV int mx_padded_start(const int *rows, int e0, int e1, int i, int threads, int *warp_sum, uint32_t bar) {
  int sum = 0;
  for (int e = e0; e < e1; e++) sum += mx_pad_rows(rows[e]);
  return threads == 32 ? mx_warp_scan_incl(sum, i % 32) - sum : mx_scan_excl(sum, i, warp_sum, bar);
}

/* ---- route ------------------------------------------------------------------------- */
/* i: 0..255 over both math warpgroups; scratch: 2 E + 9 ints of shared memory. The
 * positions inside an expert come from shared-memory atomics (any order: rows of a tile
 * are independent, and combine finds each entry's row through entry_row). */
WS_DEV void mx_route(const mx_layer_args *L, int *scratch, int i, uint32_t bar, int H) {
  const int E = L->experts, K = L->topk, n = L->tokens * K;
  int *cnt = scratch, *off = scratch + E, *warp_sum = scratch + 2 * E + 1;
  for (int e = i; e < E; e += MX_LAYER_THREADS) cnt[e] = 0;
  ws_named_sync(bar, MX_LAYER_THREADS);
  for (int j = i; j < n; j += MX_LAYER_THREADS) {
    const int e = __ldg(L->topk_idx + j);
    int pos = -1;
    if (e >= 0 && e < E) pos = atomicAdd(&cnt[e], 1);
    else mx_report_bad_id(L, j, e);
    L->entry_row[j] = pos;
  }
  ws_named_sync(bar, MX_LAYER_THREADS);
  int e0, e1;
  mx_run_of(E, i, MX_LAYER_THREADS, &e0, &e1);
  int run = mx_padded_start(cnt, e0, e1, i, MX_LAYER_THREADS, warp_sum, bar);
  for (int e = e0; e < e1; e++) {
    off[e] = run;
    L->offsets[e] = run;
    run += mx_pad_rows(cnt[e]);
  }
  if (i == MX_LAYER_THREADS - 1) L->offsets[E] = off[E] = run;
  ws_named_sync(bar, MX_LAYER_THREADS);
  for (int j = i; j < n; j += MX_LAYER_THREADS) {
    const int pos = L->entry_row[j]; /* this thread's own store above */
    if (pos >= 0) L->entry_row[j] = off[__ldg(L->topk_idx + j)] + pos;
  }
  if (L->slice_combine && off[E] == 0) mx_zero_out(L, i, H);
  /* every thread's stores ordered before thread 0 by the barrier; its release is cumulative */
  ws_named_sync(bar, MX_LAYER_THREADS);
  if (i == 0 && L->drop != MOE_DROP_ROUTED) ws_red_release_gpu_add_u32(L->routed, 1u);
}

/* ---- expand ------------------------------------------------------------------------ */
/* A warp's unit: columns c0 .. c0 + MX_LAYER_COLS - 1 of token t, into each of its rows.
 * Units (token, column chunk) spread an item's tokens over all 8 warps: at decode a
 * token's row is copied by 7 warps at once, not by one. The chunk is read (and, from
 * BF16, quantised) once into registers, then stored into the rows of the token's live
 * slots in a rolled loop: unrolled over all WS_EP_MAX_TOPK slots the unit was 2274 SASS
 * instructions, run once per CTA at decode and fetched cold from L2 (design.md). The
 * token's rows come from entry_row, or from shared memory where this CTA routed
 * (`routed_rows`: mx_route_few). */
WS_DEV void mx_expand_unit(const mx_layer_args *L, const int *routed_rows, int t, int c0, int lane, int H) {
  /* the token's rows, slot by slot (-1: none), lane j holding slot j */
  const size_t j = (size_t)t * L->topk + lane;
  const int r = lane >= L->topk ? -1 : routed_rows ? routed_rows[j] : __ldcg(L->entry_row + j);
  const uint32_t live = __ballot_sync(0xffffffffu, r >= 0);
  if (!live) return;
  const int c1 = min(H, c0 + MX_LAYER_COLS);
  if (!L->x_bf16) { /* 16 bytes a lane, the chunk's 1 KB in two steps; then its scales */
    uint4 v[MX_LAYER_COLS / 512];
#pragma unroll
    for (int u = 0; u < MX_LAYER_COLS / 512; u++) {
      const int c = c0 + (u * 32 + lane) * 16;
      if (c < c1) v[u] = ws_ld_global_nc_v4(L->x + (size_t)t * H + c);
    }
    const int b = c0 / 128 + lane, has_scale = lane < MX_LAYER_COLS / 128 && b * 128 < c1;
    const float sc = has_scale ? __ldg(L->x_scale + (size_t)t * (H / 128) + b) : 0.0f;
    for (uint32_t m = live; m; m &= m - 1) {
      const int row = __shfl_sync(0xffffffffu, r, __ffs(m) - 1);
#pragma unroll
      for (int u = 0; u < MX_LAYER_COLS / 512; u++) {
        const int c = c0 + (u * 32 + lane) * 16;
        if (c < c1) ws_st_global_v4(L->xg + (size_t)row * H + c, v[u]);
      }
      if (has_scale) L->xg_scale[(size_t)b * L->scale_ld + row] = sc;
    }
    return;
  }
  /* BF16: quantised 1 x 128 (a half-warp per 128-block), 256 columns a step */
  const uint16_t *xrow = (const uint16_t *)L->x + (size_t)t * H;
  uint2 q[MX_LAYER_COLS / 256];
  float s[MX_LAYER_COLS / 256];
#pragma unroll
  for (int u = 0; u < MX_LAYER_COLS / 256; u++) {
    const int c = c0 + u * 256 + lane * 8;
    q[u] = ws_quantize_bf16x8_1x128(c < c1 ? ws_ld_global_nc_v4(xrow + c) : make_uint4(0u, 0u, 0u, 0u), &s[u]);
  }
  for (uint32_t m = live; m; m &= m - 1) {
    const int row = __shfl_sync(0xffffffffu, r, __ffs(m) - 1);
#pragma unroll
    for (int u = 0; u < MX_LAYER_COLS / 256; u++) {
      const int c = c0 + u * 256 + lane * 8;
      if (c >= c1) continue;
      *(uint2 *)(L->xg + (size_t)row * H + c) = q[u];
      if (lane % 16 == 0) L->xg_scale[(size_t)(c / 128) * L->scale_ld + row] = s[u];
    }
  }
}

/* Tokens t0 .. t0 + nt - 1 (an expand item's, or every token after mx_route_few, whose
 * rows are then in shared memory: routed_rows), their units over the 8 warps (gw: the
 * warp, 0..7). One call site in the kernel: inlined twice, the math warpgroups spilled. */
WS_DEV void mx_expand(const mx_layer_args *L, const int *routed_rows, int t0, int nt, int gw, int lane, int H) {
  const int nchunk = (H + MX_LAYER_COLS - 1) / MX_LAYER_COLS;
  for (int u = gw; u < nt * nchunk; u += MX_LAYER_THREADS / 32)
    mx_expand_unit(L, routed_rows, t0 + u / nchunk, (u % nchunk) * MX_LAYER_COLS, lane, H);
}

/* Every thread of the 256 after its warp's token: the item's rows, read next by TMA.
 * After mx_route_few the route's release too (its one hand-off: a dropped route drops
 * the rows' release as well). */
WS_DEV void mx_expand_done(const mx_layer_args *L, int i, uint32_t bar, int routed_here) {
  ws_fence_proxy_async_global();
  ws_named_sync(bar, MX_LAYER_THREADS); /* every thread's stores before thread 0's release */
  if (i != 0 || (routed_here && L->drop == MOE_DROP_ROUTED)) return;
  if (routed_here) ws_red_release_gpu_add_u32(L->routed, 1u);
  if (L->drop != MOE_DROP_EXPANDED) ws_red_release_gpu_add_u32(L->expanded, 1u);
}

/* ---- route and expand at few entries ---------------------------------------------- */
/* One GPU, at most a warp's lanes of (token, slot) entries and 2 tokens (L->route_expands):
 * the route item also expands, and no expand item exists. Warp 0 routes in registers, a lane per entry,
 * as the scheduler warps decode (mx_few_route): an entry's row is 64 u + its place among
 * the earlier entries naming its expert, u the expert's rank among the distinct experts
 * named, which is where the loaders' tiles look for it (moe_few_item); the other warps
 * prefetch the token rows into L2 meanwhile. Then the caller expands every token from
 * those rows in shared memory (mx_expand, no round trip through entry_row) and releases
 * both counts (mx_expand_done). At 1 token the route item and the expand item claimed
 * after it brought the rows in at 17-18 us (H200, session 43), their global round trips
 * slowed by the weight streams already running. The offsets are written for the slice
 * combine's total and the combine items. */
WS_DEV void mx_route_few(const mx_layer_args *L, int *scratch, int i, uint32_t bar, int H) {
  const int E = L->experts, n = L->tokens * L->topk, lane = i % 32;
  int *rows = scratch, *sorted = scratch + 32, *distinct = scratch + 64;
  if (i < 32) {
    const mx_few_entry f = mx_few_distinct(L->topk_idx, n, E, lane);
    if (lane < n && !f.valid) mx_report_bad_id(L, lane, f.e);
    const int row = f.valid ? f.rank * MOE_EXPERTS_BM + __popc(f.same & ((1u << lane) - 1u)) : -1;
    rows[lane] = row;
    if (lane < n) L->entry_row[lane] = row;
    if (f.firsts >> lane & 1u) sorted[f.rank] = f.e;
    if (lane == 0) *distinct = __popc(f.firsts);
  } else { /* the token rows into L2 meanwhile: the expand below reads them next */
    const size_t bytes = (size_t)L->tokens * H * (L->x_bf16 ? 2 : 1);
    for (size_t o = (size_t)(i - 32) * 128; o < bytes; o += (size_t)(MX_LAYER_THREADS - 32) * 128)
      asm volatile("prefetch.global.L2 [%0];" ::"l"(L->x + o));
  }
  ws_named_sync(bar, MX_LAYER_THREADS);
  const int U = *distinct;
  for (int e = i; e <= E; e += MX_LAYER_THREADS) { /* 64 rows per distinct expert below e */
    int below = 0;
    for (int u = 0; u < U; u++) below += sorted[u] < e;
    L->offsets[e] = below * MOE_EXPERTS_BM;
  }
  if (L->slice_combine && U == 0) mx_zero_out(L, i, H);
}

/* ---- combine ----------------------------------------------------------------------- */
/* Thread 0 of the math warpgroups: wait until `target` L2 tile halves are stored; the
 * last of the `items` waiting items past the wait resets the counters for the next call. */
WS_DEV void mx_combine_wait(const mx_layer_args *L, const ws_ctx *c, uint32_t target, int items) {
  const ws_site site = ws_site_pipe("moe layer L2 rows", WS_EDGE_FULL, 0, 0);
  ws_wait_count_geq(L->l2_done, target, c, &site);
  if (atomicAdd(L->comb_seen, 1u) == (uint32_t)items - 1u) {
    *L->l2_done = 0u;
    *L->comb_seen = 0u;
  }
}

/* slice_combine: the sums of L2 column tile tn (256 columns, a lane's 16-byte vector
 * each) for every token, a warp per token (warp of `warps`); mx_combine's arithmetic, the
 * same bits. y was written by this kernel's L2 tiles. */
WS_DEV void mx_combine_slice(const mx_layer_args *L, const uint16_t *y, int tn, int warp, int warps, int lane, int H) {
  const int K = L->topk, v0 = tn * 32, end = min(v0 + 32, H / 8);
  for (int t = warp; t < L->tokens; t += warps)
    moe_sum_rows<8, 1>(L->entry_row + (size_t)t * K, L->topk_weights + (size_t)t * K, K, y, H, v0 + lane, end,
                       (uint4 *)(L->out + (size_t)t * H), 1); /* a vector a lane, 8 slots at once */
}

/* A warp per (token, 1024-column chunk of the row), the item's tokens over the 8 warps;
 * y was written by this kernel's L2 tiles. */
WS_DEV void mx_combine(const mx_layer_args *L, const uint16_t *y, int item, int gw, int lane, int H) {
  const int t0 = item * L->tokens_per_item, nt = min(L->tokens_per_item, L->tokens - t0);
  const int nv = H / 8, nchunk = (nv + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK, K = L->topk;
  for (int u = gw; u < nt * nchunk; u += MX_LAYER_THREADS / 32) {
    const int t = t0 + u / nchunk;
    moe_sum_rows<4>(L->entry_row + (size_t)t * K, L->topk_weights + (size_t)t * K, K, y, H,
                 (u % nchunk) * MOE_SUM_CHUNK + lane, nv, (uint4 *)(L->out + (size_t)t * H), 1);
  }
}

#endif
