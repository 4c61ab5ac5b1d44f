/* test_moe_experts_sched.cu - the fused experts kernel's work items, walked on the host in
 * the order the CTAs claim them (layer_sched.cuh): for random experts (empty ones
 * included) with rows padded to 64, several H and I, every L1 tile and every L2 tile is
 * an item exactly once, all L1 items come before any L2 item (what keeps the kernel free
 * of deadlock: an L2 item only waits on items claimed before it), and every 64-row block
 * gets exactly I / 128 L1 items and moe_experts_l2_items L2 items (ceil(H / 256) with
 * 64-row tiles, H / 128 with 128-row ones), the kernel's release target and its number
 * of readers. With 128-row tiles a tile's second 64 rows count only when they are still
 * its expert's. CTA pairs (layer_kernel.cu, mx_load_pair) number 128-row blocks with the
 * 64-row tile's L2 columns (256): each 64-row block must still get I / 128 L1 items and
 * ceil(H / 256) L2 items, the kernel's release target and reader count per block. Host
 * code only. The whole layer's items around the tiles (route, send, expand, reduce or
 * combine, gather) come in the order its deadlock freedom rests on (layer_items). */
#include "../test.h"
#include "../../src/moe/layer/layer_sched.cuh"

#include <stdlib.h>
#include <string.h>

static uint64_t rng = 0x9E3779B97F4A7C15ull;
static unsigned next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng >> 32); }

/* bm: the rows an item numbers; cta_bm: the tile whose L2 columns an item has (bm, or 64
 * for CTA pairs on 128-row blocks) */
static void check(int groups, int H, int I, int bm, int cta_bm, const char *what) {
  int *offsets = (int *)calloc((size_t)groups + 1, sizeof(int));
  for (int g = 0; g < groups; g++) {
    const unsigned r = next() % 8;
    const int rows = r < 2 ? 0 : (int)(next() % 300); /* a quarter of the experts empty */
    offsets[g + 1] = offsets[g] + (rows + MOE_EXPERTS_BM - 1) / MOE_EXPERTS_BM * MOE_EXPERTS_BM;
  }
  const int max_rows = offsets[groups] + 64 * (int)(next() % 3), blocks = (max_rows + 63) / 64 + 1;
  const gemm_shape l1 = moe_experts_shape(groups, max_rows, offsets, I, bm, MOE_EXPERTS_L1_BN, H);
  const gemm_shape s2 = moe_experts_shape(groups, max_rows, offsets, H, bm, moe_experts_l2_bn(cta_bm), I);
  const int n1 = I / MOE_EXPERTS_L1_BN, n2 = moe_experts_l2_items(cta_bm, H);
  /* seen[phase][block][tile column] */
  int *seen = (int *)calloc((size_t)2 * blocks * (n1 > n2 ? n1 : n2), sizeof(int));
  int *per_block[2] = {(int *)calloc((size_t)blocks, sizeof(int)), (int *)calloc((size_t)blocks, sizeof(int))};
  gemm_cursor c1 = gemm_cursor_start(&l1), c2 = gemm_cursor_start(&s2);
  int l1_done = 0, l2 = 0, in_l2 = 0, bad = 0, t = 0;
  gemm_tile tile;
  memset(&tile, 0, sizeof tile); /* GCC 12 cannot see that moe_experts_item sets it before use */
  const int ncol = n1 > n2 ? n1 : n2;
  for (; moe_experts_item(&l1, &s2, &c1, &c2, &l1_done, t, &tile, &l2); t++) {
    if (in_l2 && !l2) bad |= 1; /* an L1 item after an L2 one */
    in_l2 |= l2;
    const int row = tile.row0 + tile.tm * bm, blk = row / MOE_EXPERTS_BM;
    const int halves = bm == MOE_EXPERTS_BM || tile.tm * bm + MOE_EXPERTS_BM >= tile.count ? 1 : 2; /* the kernel's `both` */
    if (row % MOE_EXPERTS_BM || row + MOE_EXPERTS_BM > tile.row0 + tile.count || tile.tn >= (l2 ? n2 : n1) ||
        tile.k0 != 0 || tile.k1 != (l2 ? I : H) / 128 || blk + halves > blocks) {
      bad |= 2;
      break;
    }
    for (int h = 0; h < halves; h++) {
      seen[((size_t)l2 * blocks + blk + h) * ncol + tile.tn]++;
      per_block[l2][blk + h]++;
    }
  }
  int items = 0;
  for (int g = 0; g < groups; g++) items += (offsets[g + 1] - offsets[g] + bm - 1) / bm * (n1 + n2);
  if (t != items) bad |= 4;
  for (int b = 0; b < blocks; b++) {
    const int used = b * 64 < offsets[groups];
    if (per_block[0][b] != (used ? n1 : 0) || per_block[1][b] != (used ? n2 : 0)) bad |= 8;
    for (int p = 0; p < 2; p++)
      for (int c = 0; c < (p ? n2 : n1); c++)
        if (seen[((size_t)p * blocks + b) * ncol + c] != used) bad |= 16;
  }
  if (bad) {
    printf("FAIL %s: %d experts, H %d, I %d, %d-row items of %d-row tiles: %d items of %d, error bits %d\n", what,
           groups, H, I, bm, cta_bm, t, items, bad);
    test_failures++;
  }
  free(offsets); free(seen); free(per_block[0]); free(per_block[1]);
}

/* The whole layer's items (moe_layer_item) in claim order: the route, the sends, the
 * expands, the tiles, the reduces (one GPU: combines), the gathers, each kind's indices
 * 0 .. count - 1 in turn, then -1. That order is the deadlock-freedom argument: every wait
 * of an item is on items of earlier kinds (every rank numbers them alike), which running
 * CTAs claimed before it. */
static void layer_items(int nranks, int sends, int expands, int tile_items, int reduces, int gathers) {
  const int pre = moe_layer_pre(1, sends, expands);
  const int want_kind[6] = {MX_ROUTE, MX_SEND, MX_EXPAND, MX_L1, nranks > 1 ? MX_REDUCE : MX_COMBINE, MX_GATHER};
  const int count[6] = {1, sends, expands, tile_items, reduces, gathers};
  int t = 0, bad = 0;
  for (int k = 0; k < 6; k++)
    for (int i = 0; i < count[k]; i++, t++) {
      int index = -2;
      const int kind = moe_layer_item(1, nranks, sends, reduces, gathers, pre, tile_items, t, &index);
      /* tiles carry their position relative to the first reduce (negative), as the loader
       * hands them on to moe_experts_item */
      const int want_index = k == 3 ? i - tile_items : k == 0 ? -1 : i;
      if (kind != want_kind[k] || index != want_index) {
        if (bad++ < 3)
          printf("  layer items (ranks %d, %d sends, %d expands, %d tiles, %d reduces, %d gathers): item %d is kind %d "
                 "index %d, want kind %d index %d\n", nranks, sends, expands, tile_items, reduces, gathers, t, kind, index,
                 want_kind[k], want_index);
      }
    }
  int index;
  CHECK(bad == 0 && moe_layer_item(1, nranks, sends, reduces, gathers, pre, tile_items, t, &index) == -1);
  /* the experts alone (no layer): every item a tile, none before them */
  CHECK(moe_layer_pre(0, sends, expands) == 0 &&
        moe_layer_item(0, nranks, sends, reduces, gathers, 0, tile_items, 0, &index) == MX_L1);
}

/* The few-entry decode (moe_few_item, the scheduler at decode) against the walk: n <= 32
 * random (token, slot) entries over E experts, repeats and out-of-range ids among them,
 * counted and padded as the route does; every tile item, L1 then L2, must come out as
 * moe_experts_item finds it from the offsets, for 64- and 128-row items. */
static void few(int E, int n, int H, int I, int bm, int cta_bm) {
  int ids[32], *offsets = (int *)calloc((size_t)E + 1, sizeof(int)), *cnt = (int *)calloc((size_t)E, sizeof(int));
  for (int j = 0; j < n; j++) {
    const unsigned r = next() % 16;
    ids[j] = r == 0 ? -1 : r == 1 ? E + (int)(next() % 4) : r < 5 && j > 0 ? ids[next() % j] : (int)(next() % E);
    if (ids[j] >= 0 && ids[j] < E) cnt[ids[j]]++;
  }
  int sorted[32], U = 0; /* the distinct experts in increasing order: what lane u holds */
  for (int e = 0; e < E; e++) {
    offsets[e + 1] = offsets[e] + (cnt[e] + MOE_EXPERTS_BM - 1) / MOE_EXPERTS_BM * MOE_EXPERTS_BM;
    if (cnt[e]) sorted[U++] = e;
  }
  const gemm_shape l1 = moe_experts_shape(E, offsets[E], offsets, I, bm, MOE_EXPERTS_L1_BN, H);
  const gemm_shape s2 = moe_experts_shape(E, offsets[E], offsets, H, bm, moe_experts_l2_bn(cta_bm), I);
  const int cols1 = I / MOE_EXPERTS_L1_BN, cols2 = (H + s2.bn - 1) / s2.bn;
  gemm_cursor c1 = gemm_cursor_start(&l1), c2 = gemm_cursor_start(&s2);
  int l1_done = 0, l2 = 0, bad = 0, t = 0;
  gemm_tile want;
  memset(&want, 0, sizeof want);
  for (;; t++) {
    const int more = moe_experts_item(&l1, &s2, &c1, &c2, &l1_done, t, &want, &l2);
    int u = -1, tn = -1, fl2 = -1;
    const int fmore = moe_few_item(U, cols1, cols2, t, &u, &tn, &fl2);
    if (more != fmore) { bad |= 1; break; }
    if (!more) break;
    const gemm_tile got = moe_few_tile(sorted[u], u, tn, fl2 ? I / 128 : H / 128);
    if (fl2 != l2 || memcmp(&got, &want, sizeof got) != 0) { bad |= 2; break; }
  }
  if (bad || t != U * (cols1 + cols2)) {
    printf("FAIL few-entry decode: %d experts, %d entries (%d distinct), H %d, I %d, %d-row items of %d-row tiles: "
           "item %d, bits %d\n", E, n, U, H, I, bm, cta_bm, t, bad);
    test_failures++;
  }
  free(offsets); free(cnt);
}

int main(void) {
  for (int rep = 0; rep < 300; rep++) {
    const int shapes[][2] = {{128, 128}, {1152, 384}, {4096, 2048}, {7168, 2048}, {16384, 2048}};
    /* 64-row tiles, 128-row tiles, CTA pairs (128-row items of 64-row tiles) */
    const int s = (int)(next() % 5), kind = (int)(next() % 3);
    const int bm = kind ? MOE_EXPERTS_BM_WIDE : MOE_EXPERTS_BM, cta_bm = kind == 1 ? MOE_EXPERTS_BM_WIDE : MOE_EXPERTS_BM;
    few(1 + (int)(next() % 300), (int)(next() % 33), shapes[s][0], shapes[s][1], bm, cta_bm);
  }
  few(256, 8, 7168, 2048, MOE_EXPERTS_BM, MOE_EXPERTS_BM); /* DeepSeek-V3, 1 token */
  few(256, 32, 7168, 2048, MOE_EXPERTS_BM, MOE_EXPERTS_BM); /* 4 tokens */
  few(256, 0, 7168, 2048, MOE_EXPERTS_BM, MOE_EXPERTS_BM);  /* no entries */
  for (int rep = 0; rep < 200; rep++) {
    const int nranks = 1 << (int)(next() % 3);
    layer_items(nranks, nranks > 1 ? 1 + (int)(next() % 40) : 0, 1 + (int)(next() % 40), (int)(next() % 500),
                1 + (int)(next() % 40), nranks > 1 ? 1 + (int)(next() % 40) : 0);
  }
  layer_items(1, 0, 1, 0, 1, 0); /* an idle rank: no tiles */
  layer_items(1, 0, 0, 24, 0, 0); /* few entries: the route item expands (no expand item), slice combine */
  layer_items(1, 0, 0, 24, 3, 0);
  const int shapes[][2] = {{128, 128}, {256, 128}, {1152, 384}, {4096, 2048}, {7168, 2048}};
  for (int s = 0; s < 5; s++)
    for (int bm = MOE_EXPERTS_BM; bm <= MOE_EXPERTS_BM_WIDE; bm *= 2)
      for (int rep = 0; rep < 20; rep++) check(1 + (int)(next() % 40), shapes[s][0], shapes[s][1], bm, bm, "random experts");
  for (int s = 0; s < 5; s++)
    for (int rep = 0; rep < 20; rep++)
      check(1 + (int)(next() % 40), shapes[s][0], shapes[s][1], 2 * MOE_EXPERTS_BM, MOE_EXPERTS_BM, "random experts, CTA pairs");
  check(256, 7168, 2048, MOE_EXPERTS_BM, MOE_EXPERTS_BM, "DeepSeek-V3 local experts, 64-row tiles");
  check(256, 7168, 2048, MOE_EXPERTS_BM_WIDE, MOE_EXPERTS_BM_WIDE, "DeepSeek-V3 local experts, 128-row tiles");
  check(256, 7168, 2048, 2 * MOE_EXPERTS_BM, MOE_EXPERTS_BM, "DeepSeek-V3 local experts, CTA pairs");
  /* 2 per block, next_item[2], routed, expanded, l2_done, comb_seen, sent, reduced, gathered, one per L2 column tile */
  CHECK(moe_experts_counter_words(1, 256) == 2 + 9 + 1);
  CHECK(moe_experts_counter_words(1, 7168) == 2 + 9 + 28);
  CHECK(moe_experts_counter_words(1, 384) == 2 + 9 + 2);
  return test_finish("test_moe_experts_sched");
}
