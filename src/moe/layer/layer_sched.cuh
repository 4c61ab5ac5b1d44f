/* layer_sched.cuh - which work item the fused experts kernel's item t is (host and
 * device: tests/cpu/test_moe_experts_sched.cu walks it on the CPU). Items are numbered
 * as ws_gemm's grouped tiles (gemm_sched.cuh): first every L1 tile (expert, row block,
 * 128 act columns: K = H), then every L2 tile (expert, row block, output columns: K = I).
 * Two tile shapes (layer_kernel.cu): 64-row blocks with 256 output columns per L2 item,
 * or 128-row blocks with 128. Expert rows are padded to 64 either way, so a 128-row
 * block may end in its expert's last 64 rows: the kernel's hand-off counters stay per
 * 64-row block. Each 64-row block of an expert gets I / 128 L1 releases (from the L1
 * items of its tile) and moe_experts_l2_items(bm, H) readers (the L2 items of its tile,
 * which clean its counters). */
#ifndef WARPSPEC_MOE_LAYER_SCHED_CUH
#define WARPSPEC_MOE_LAYER_SCHED_CUH

#include "../../gemm/gemm_sched.cuh"
#include "layer_kernel.h"

#define MOE_EXPERTS_L1_BN 128 /* act columns of an L1 item */

/* Output columns of an L2 item, and L2 items per row block: 256 with 64-row tiles (each
 * math warpgroup 128 of them), 128 with 128-row tiles (each warpgroup 64 of the rows). */
GEMM_HD int moe_experts_l2_bn(int bm) { return bm == MOE_EXPERTS_BM ? 256 : 128; }
GEMM_HD int moe_experts_l2_items(int bm, int hidden) { return (hidden + moe_experts_l2_bn(bm) - 1) / moe_experts_l2_bn(bm); }

/* The two phases' schedules: experts `groups` over device-side `offsets` (multiples of 64),
 * tiles of bm rows (64 or 128). */
GEMM_HD gemm_shape moe_experts_shape(int groups, int max_rows, const int *offsets, int n, int bm, int bn, int k) {
  gemm_shape s;
  s.layout = WS_GEMM_GROUPED_CONTIGUOUS;
  s.groups = groups;
  s.m = max_rows;
  s.n = n;
  s.bm = bm;
  s.bn = bn;
  s.splits = 1;
  s.ksteps = k / 128;
  s.offsets = offsets;
  s.rows = 0;
  return s;
}

/* The kinds of work item (the whole layer's, layer_items.cuh / layer_items_ep.cuh, around
 * the tiles). */
enum { MX_L1 = 0, MX_L2, MX_ROUTE, MX_EXPAND, MX_COMBINE, MX_SEND, MX_REDUCE, MX_GATHER };

/* The kind of the whole layer's item t (on: a layer, not the experts alone) and its index
 * among the items of that kind, in the order the CTAs claim them: the route (item 0), the
 * send items (several ranks), the expand items, every tile (MX_L1 here: moe_experts_item
 * tells L1 from L2; tile_items of them, which the caller knows once it has the offsets),
 * the reduce items (one GPU: combine), the gather items; -1 past the last. An item only
 * waits on items of earlier kinds (a send on the route, an expand on every rank's sends,
 * a tile on the expands (or the route, when it expands) or its L1 rows, a reduce on every
 * tile and the route, a gather on every rank's
 * reduces; with layer.route_at_once item 0 is not claimed but run by block 0 at once),
 * and every rank numbers them alike, so each wait is on items claimed (or run) before
 * it by running CTAs: the layer's deadlock freedom (tests/cpu/test_moe_experts_sched.cu
 * walks it). pre = moe_layer_pre(...): the number of the first tile. */
GEMM_HD int moe_layer_pre(int on, int send_items, int expand_items) { return on ? 1 + send_items + expand_items : 0; }

GEMM_HD int moe_layer_item(int on, int nranks, int send_items, int reduce_items, int gather_items, int pre,
                           int tile_items, int t, int *index) {
  int kind = t == 0 ? MX_ROUTE : t <= send_items ? MX_SEND : MX_EXPAND;
  *index = kind == MX_EXPAND ? t - 1 - send_items : t - 1;
  if (t >= pre) {
    *index = t - pre - tile_items;
    kind = MX_L1;
    if (on && *index >= 0) {
      kind = *index < reduce_items ? (nranks > 1 ? MX_REDUCE : MX_COMBINE) : MX_GATHER;
      if (kind == MX_GATHER) *index -= reduce_items;
      if (kind == MX_GATHER && *index >= gather_items) kind = -1;
    }
  }
  return kind;
}

/* Few entries (one GPU, at most a warp's lanes of (token, slot) entries: the scheduler at
 * decode, layer_loader.cuh mx_few_route): every expert then has at most 32 rows, one
 * padded 64-row block at row 64 u, where u is its rank among the U distinct experts in
 * increasing order, and one row block of any tile (64 or 128 rows). The walk of
 * moe_experts_item then needs no offsets: the experts in order, each cols1 L1 items (tm 0,
 * tn 0 ..), then every expert's cols2 L2 items. Item t (counted from the first tile) into
 * the expert's rank, the tile column and the phase; 0 past the last. The caller fills the
 * tile: g = the u-th distinct expert, row0 = 64 u, count = 64, tm = split = k0 = 0, k1 the
 * phase's K steps (tests/cpu/test_moe_experts_sched.cu checks it against the walk). */
GEMM_HD int moe_few_item(int U, int cols1, int cols2, int t, int *u, int *tn, int *l2) {
  *l2 = t >= U * cols1;
  if (*l2) t -= U * cols1;
  const int cols = *l2 ? cols2 : cols1;
  if (t >= U * cols) return 0;
  *u = t / cols;
  *tn = t - *u * cols;
  return 1;
}

GEMM_HD gemm_tile moe_few_tile(int g, int u, int tn, int ksteps) {
  gemm_tile tile;
  tile.g = g;
  tile.row0 = u * MOE_EXPERTS_BM;
  tile.count = MOE_EXPERTS_BM;
  tile.tm = 0;
  tile.tn = tn;
  tile.split = 0;
  tile.k0 = 0;
  tile.k1 = ksteps;
  return tile;
}

/* Item t into *tile and *l2 (0: L1, 1: L2); 0 past the last item. `l1_done` and the
 * cursors belong to the caller and only move forward (every role sees its CTA's items in
 * increasing order). */
GEMM_HD int moe_experts_item(const gemm_shape *l1, const gemm_shape *l2s, gemm_cursor *c1, gemm_cursor *c2,
                             int *l1_done, int t, gemm_tile *tile, int *l2) {
  if (!*l1_done) {
    if (gemm_tile_at(l1, c1, t, tile)) {
      *l2 = 0;
      return 1;
    }
    *l1_done = 1; /* c1->base is now the number of L1 items */
  }
  *l2 = 1;
  return gemm_tile_at(l2s, c2, t - c1->base, tile);
}

#endif
