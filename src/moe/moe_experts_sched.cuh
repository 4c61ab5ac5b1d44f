/* moe_experts_sched.cuh - which work item the fused experts kernel's item t is (host and
 * device: tests/cpu/test_moe_experts_sched.cu walks it on the CPU). Items are numbered
 * as ws_gemm's grouped tiles (gemm_sched.cuh): first every L1 tile (expert, row block,
 * 128 act columns: K = H), then every L2 tile (expert, row block, output columns: K = I).
 * Two tile shapes (moe_experts.cu): 64-row blocks with 256 output columns per L2 item,
 * or 128-row blocks with 128. Expert rows are padded to 64 either way, so a 128-row
 * block may end in its expert's last 64 rows: the kernel's hand-off counters stay per
 * 64-row block. Each 64-row block of an expert gets I / 128 L1 releases (from the L1
 * items of its tile) and moe_experts_l2_items(bm, H) readers (the L2 items of its tile,
 * which clean its counters). */
#ifndef WARPSPEC_MOE_EXPERTS_SCHED_CUH
#define WARPSPEC_MOE_EXPERTS_SCHED_CUH

#include "../gemm/gemm_sched.cuh"
#include "moe_experts.h"

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
