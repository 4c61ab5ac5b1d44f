/* moe_experts.cu - a rank's MoE experts in one persistent kernel:
 *
 *   act = requant_1x128(silu(x W1g^T) * (x W1u^T)),   y = act W2^T     (per local expert)
 *
 * on the grouped receive layout of a dispatch (rows of each expert padded to 64). It
 * replaces three launches of the unfused path (L1 GEMM, the SwiGLU pass, L2 GEMM) and the
 * bf16 round trip of h through memory, and lets L2 tiles start while L1 tiles still run.
 *
 * Work items (gemm_sched.cuh's numbering): first every L1 tile (expert, row block, 128
 * act columns), then every L2 tile (expert, row block, output columns). A CTA's
 * scheduler warp claims the next item from a global counter when its loader warp takes
 * the last one (mx_schedule), and the loader tells the math warpgroups which one through
 * the item's first stage. Claimed in order,
 * the tiles that read the same weights (an expert's row blocks, numbered next to each
 * other) run at the same time on whichever CTAs are free, and read them once from DRAM
 * between them; a static CTA-strided walk let the CTAs drift apart and read the weights
 * once per row block (ncu, DeepSeek-V3 at 4096 tokens: 29.4 GB from DRAM for 11.3 GB of
 * weights).
 *
 * Two tile shapes, one kernel template (BM, the instance's tile rows):
 *   64 rows (few rows per expert): a tile's two math warpgroups share its 64 rows of A
 *     and each takes half of its 256 B rows:
 *     L1: warpgroup r gets gate columns c + 64r .. c + 64r + 63 and the same up columns
 *         (loaded as four 64-row boxes), so each thread holds gate and up of the same act
 *         column and SwiGLU needs no exchange; a row's amax over the 128 act columns of
 *         the block (the K block L2 reads) is one exchange of 64 floats through shared
 *         memory.
 *     L2: warpgroup r gets output columns 128r .. 128r + 127 (the FP8 GEMM's own tile).
 *   128 rows (opt-in, config.h's WS_MOE_WIDE_ROWS: measured no faster): warpgroup r
 *     takes rows 64r .. 64r + 63 and both read the same 128 B rows, so a K step moves
 *     32 KiB through L2 for the same math where the 64-row tile moves 40 KiB (ncu,
 *     DeepSeek-V3 at 4096 tokens: the 64-row kernel at 89% of L2 throughput, its math
 *     warps waiting on stages half the time). An L1 item runs its 128 act columns as
 *     two K loops of 64 (gate and up of the same columns, as a 64-row warpgroup's); the
 *     first loop's SwiGLU values wait in shared memory, so the amax over 128 columns
 *     stays inside the thread's quad. L2 items are 128 x 128 (the FP8 GEMM's tile). Rows
 *     stay padded to 64: a block's last 64 rows may belong to the next expert (loaded,
 *     computed, never stored or counted).
 *   And the 64-row tile in CTA pairs (opt-in, WS_MOE_PAIR_ROWS; measured level): two
 *   CTAs of a cluster on one 128-row block, the weights multicast into both (the CTA
 *   PAIRS section below).
 *
 * The act rows go out through shared memory as 16-byte stores; every thread fences the
 * async proxy, and after the tile's barrier one thread does a red.release on each 64-row
 * block's counter (one release per warp, each after its own GPU fence, measured the
 * same). An L2 tile's loader issues the first stage's weights, then waits (bounded) until
 * all I / 128 L1 releases of its blocks are in, fences the async proxy and loads act by
 * TMA. The last of a block's L2 tiles to pass the wait zeroes its two counters, so every
 * call starts from zero with no host work (graph replay included).
 * Deadlock freedom: an L2 item is claimed after every L1 item, each of which a running
 * CTA has claimed and loads without waiting on anything; no residency assumption.
 *
 * The math is the FP8 GEMM's (fp8_mma.cuh, the same promotion order and rounding) and
 * the SwiGLU is swiglu.cuh's: the layer's output equals the unfused path's bit for bit. */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/device/fp8.cuh"
#include "../gemm/fp8_mma.cuh"
#include "../gemm/gemm_epilogue.cuh"
#include "../gemm/gemm_loader.cuh"
#include "moe_experts.h"
#include "moe_experts_sched.cuh"
#include "moe_layer_ep.cuh"
#include "moe_layer_items.cuh"
#include "swiglu.cuh"

#include <cuda_bf16.h>

#include "warpspec/moe.h"

#define MX_BK 128
#ifndef MX_STAGES
#define MX_STAGES 4 /* 64-row tile: 4 x 41 KiB; a fifth stage does not fit beside the epilogue buffers */
#endif
#ifndef MX_WIDE_STAGES
#define MX_WIDE_STAGES 4 /* 128-row tile: 4 x 33 KiB (5 fit, but the math then spilled its packed predicates) */
#endif
#define MX_B_ROWS(BM) ((BM) == MOE_EXPERTS_BM ? 256 : 128)                /* B rows of a stage */
#define MX_STAGES_OF(BM) ((BM) == MOE_EXPERTS_BM ? MX_STAGES : MX_WIDE_STAGES)
#define MX_SMEM_OFFSETS (WS_EP_MAX_EXPERTS + 1) /* local experts whose offsets the loader holds */
#define MX_ACT_LD (128 + 16) /* a row of the act tile in shared memory, padded: no bank conflicts */
#define MX_PARK 34           /* 128-row L1: per thread the first 64 act columns' 32 SwiGLU values, 2 row amaxes */

template <int BM> struct __align__(1024) mx_stage {
  uint8_t a[BM * MX_BK];            /* x (L1) or act (L2) rows: 8 or 16 KiB  */
  uint8_t b[MX_B_ROWS(BM) * MX_BK]; /* W1 or W2 rows: 32 or 16 KiB           */
  float a_scale[BM];                /* the K block's scales of the rows      */
};

/* WS_PIPE_STORAGE's layout, one per tile shape */
template <int BM> struct mx_pipe {
  uint64_t full[MX_STAGES_OF(BM)];
  uint64_t empty[MX_STAGES_OF(BM)];
  int closed[MX_STAGES_OF(BM)];
  mx_stage<BM> slot[MX_STAGES_OF(BM)];
};

/* An item as the loader decoded it, handed to the math in the item's first stage: the
 * math no longer walks the groups itself (at 1 token that walk, up to 256 mostly empty
 * experts, stood between every landed first stage and the item's first wgmma). */
enum { MX_L1 = 0, MX_L2, MX_ROUTE, MX_EXPAND, MX_COMBINE, MX_SEND, MX_REDUCE, MX_GATHER };
typedef struct {
  int t;          /* the item, -1: none left                                        */
  int kind;       /* MX_L1 .. MX_GATHER                                             */
  gemm_tile tile; /* a tile; else g: the expand / combine index, count: combine's
                   * target of stored L2 tile halves                                */
} mx_item_info;
#define MX_ITEM_WORDS ((int)(sizeof(mx_item_info) / sizeof(int)))

/* The scheduler warp's hand-off to the loader warp (mx_schedule): the next item, decoded.
 * Decoding took the loader about 2 us per item (a claim's round trip, the schedule's
 * divisions, code fetched cold once per item): the trace at 8192 tokens (DeepSeek-V3,
 * H100) showed it between the last stage of one item and the first of the next, and the
 * math waiting 3 us for the first stage of every L2 tile (whose epilogue is short). Done
 * inline one stage into the item before, it only moved the wait inside that item. */
typedef struct {
  int t, kind, index; /* kind: MX_L1 for a tile (l2: its phase), a handed item, or -1: none left */
  int l2, target;     /* target: a combine item's count of stored L2 tile halves */
  gemm_tile tile;
} mx_claimed;
WS_PIPE_STORAGE(mx_items, mx_claimed, 1);

/* A math warpgroup's epilogue memory: its L2 output chunks, or L1's act rows (and the
 * 128-row tile's parked SwiGLU half). A CTA runs every L1 item it claims before any L2
 * item (claims are in order), and the route and expand items' scratch (epi[0].out) comes
 * before both. 64-row
 * tile: both warpgroups write the one act tile of warpgroup 0's region, and leave it on a
 * barrier of both; 128-row tile: each warpgroup only ever touches its own region. */ 
template <int BM> union __align__(1024) mx_epi {
  uint8_t out[2 * GEMM_CHUNK_BYTES];    /* L2: two 64 x 64 bf16 chunks            */
  struct {
    uint8_t act[MOE_EXPERTS_BM * MX_ACT_LD]; /* L1: 64 rows x 128 act columns, e4m3 */
    float park[BM == MOE_EXPERTS_BM ? 1 : MX_PARK * 128];
  } l1;
};

template <int BM> struct mx_smem {
  mx_pipe<BM> pipe;
  mx_epi<BM> epi[2];                      /* per math warpgroup */
  float amax[2][MOE_EXPERTS_BM];          /* 64-row L1: each warpgroup's half-row amax */
  __align__(16) mx_item_info item[MX_STAGES_OF(BM)]; /* the item whose first stage this is (8-byte st.async) */
  gemm_shape shape[2];                    /* the scheduler's L1 and L2 schedules */
  mx_items items;                         /* its items, decoded, to the loader   */
  int offsets[MX_SMEM_OFFSETS];           /* and the expert offsets they read  */
  mxe_shared ep;                          /* several ranks: epochs, "last item" flag */
};

/* Two math warpgroups at 208 registers, then a loader warpgroup at 88 with two working
 * warps, the loader (warp 0: TMA) and the scheduler (warp 1: claims and decodes the
 * items): 384 threads, 2 x 128 x 208 + 128 x 88 = 64512, all the launch gives (168
 * each). The scheduler walks both phases' cursors and, for the whole layer, the route /
 * expand / combine numbering: one warp doing both spilled at 72 with its shared-memory
 * schedules, at 56 with the layer items, at 40 before them; the math (acc and total, 128
 * floats) fits 208. */
#define MX_ROLES(ROLE) ROLE(X_MATH, 4, 208, 2) ROLE(X_LOADER, 2, 88, 1)
WS_DECLARE_ROLES(moe_experts, MX_ROLES);

typedef struct {
  gemm_shape l1;          /* rows x I act columns, tiles BM x 128, K = H                   */
  gemm_args l2;           /* y: rows x H, tiles BM x L2 columns, K = I (what the store reads) */
  ws_tmap map_xs, map_as; /* x_scale, act_scale as [K / 128][rows] fp32, box BM x 1         */
  const float *w1_scale, *w2_scale;
  uint8_t *act;
  float *act_scale;
  uint32_t act_ld;
  uint32_t *ready;        /* [64-row blocks]: releases of the block's L1 tiles, one per tile */
  uint32_t *seen;         /* [64-row blocks]: L2 tiles past their wait (the last cleans up)  */
  uint32_t *next_item;    /* [2]: the next item to claim, CTAs finished (the last resets)   */
  int hidden, inter;
  int bar;                /* the plan's user barrier: a tile's two math warpgroups         */
  int static_walk;        /* CTA-strided items instead of claims (WARPSPEC_MOE_SCHED=static) */
  int pair;               /* launched in CTA pairs (moe_experts_kernel<BM, 1>): l1 / l2 number
                           * 128-row blocks, each CTA of the pair takes 64 of the rows      */
  mx_layer_args layer;    /* the whole layer (moe_layer_items.cuh), or layer.on = 0        */
} mx_args;

/* ---- LOADER ------------------------------------------------------------------------ */
/* An L2 tile's wait for the act rows of one of its 64-row blocks (lane 0; TMA is issued
 * by the same lane); `readers`: the block's L2 tiles. */
WS_DEV void mx_wait_rows(const ws_ctx *c, const mx_args *a, int blk, uint32_t readers) {
  if (c->lane == 0) {
    const uint32_t target = (uint32_t)(a->inter / 128);
    const ws_site site = ws_site_pipe("moe experts L1 rows", WS_EDGE_FULL, blk, 0);
    ws_wait_count_geq(a->ready + blk, target, c, &site);
    ws_fence_proxy_async_global(); /* the generic stores of act, read next by TMA */
    if (atomicAdd(a->seen + blk, 1u) == readers - 1u) { /* no other reader or writer of blk is left */
      a->ready[blk] = 0u;
      a->seen[blk] = 0u;
    }
  }
  __syncwarp();
}

/* The whole layer: lane 0 waits until *count >= target (the route item: the offsets and
 * entry rows; every expand item: the rows of x), then the warp reads (after the
 * __syncwarp) or TMA loads (after the proxy fence) what they wrote. */
WS_DEV void mx_wait_count(const ws_ctx *c, const uint32_t *count, uint32_t target, const char *what) {
  if (c->lane == 0) {
    const ws_site site = ws_site_pipe(what, WS_EDGE_FULL, 0, 0);
    ws_wait_count_geq(count, target, c, &site);
    ws_fence_proxy_async_global();
  }
  __syncwarp();
}

/* Hand an item with no loads to the math: its info in a committed stage. */
template <int BM>
WS_DEV ws_cursor mx_hand(const ws_pipe *pipe, const ws_ctx *c, mx_smem<BM> *sm, ws_cursor k, int t, int kind, int index,
                         int target) {
  ws_pipe_acquire_at(pipe, c, k);
  if (c->lane == 0) {
    mx_item_info *it = &sm->item[k.stage];
    it->t = t; it->kind = kind; it->tile.g = index; it->tile.count = target;
  }
  ws_pipe_commit_at(pipe, c, k);
  return ws_cursor_next(k, pipe->stages);
}

/* The loader's copy of both schedules in shared memory, with the expert offsets too when
 * they fit: one round trip for all of them, where the walk to the CTA's first item (32
 * groups a step) chained eight at 1 token (256 experts), about 5 us before the first
 * weights moved. The cursors then start. */
template <int BM>
WS_DEV void mx_start_cursors(const mx_args *a, mx_smem<BM> *sm, int writer, int own_offsets, gemm_cursor *c1,
                             gemm_cursor *c2) {
  if (writer) {
    sm->shape[0] = a->l1;
    sm->shape[1] = a->l2.shape;
    if (own_offsets) sm->shape[0].offsets = sm->shape[1].offsets = sm->offsets;
  }
  __syncwarp();
  *c1 = gemm_cursor_start(&sm->shape[0]);
  *c2 = gemm_cursor_start(&sm->shape[1]);
}

template <int BM>
WS_DEV void mx_load_offsets(const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm, gemm_cursor *c1, gemm_cursor *c2) {
  const int n = a->l1.groups + 1, fits = n <= MX_SMEM_OFFSETS;
  if (fits) { /* the source pointer read once: with it re-read from the kernel's parameters
               * after every store (they might alias), each load waited for the one before */
    const int *src = a->l1.offsets;
#pragma unroll 4
    for (int i = c->lane; i < n; i += 32) sm->offsets[i] = __ldcg(src + i);
  }
  mx_start_cursors(a, sm, c->lane == 0, fits, c1, c2);
}

/* One GPU and few entries (ly->self_route): the loader counts the experts' rows itself from
 * topk_idx and pads and sums them as the route item does (the same offsets, in shared
 * memory), so its tiles need not wait for the route item and read its offsets. At 1 token
 * the loaders waited for the route item until 8.3 us, then read its offsets until 12.7 us
 * (H100). A loader does it at its first tile, after it has handed out the route item if
 * that was its first claim: done before any claim, it delayed the route item by as long. */
template <int BM>
WS_DEV void mx_self_route(const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm, gemm_cursor *c1, gemm_cursor *c2) {
  const int E = a->l1.groups, n = a->layer.tokens * a->layer.topk, lane = c->lane;
  const int *idx = a->layer.topk_idx;
  int *cnt = sm->offsets;
  for (int e = lane; e <= E; e += 32) cnt[e] = 0;
  __syncwarp();
  for (int j = lane; j < n; j += 32) {
    const int e = __ldg(idx + j);
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
  }
  __syncwarp();
  int e0, e1;
  mx_run_of(E, lane, 32, &e0, &e1);
  int run = mx_padded_start(cnt, e0, e1, lane, 32, NULL, 0u);
  for (int e = e0; e < e1; e++) { /* in place: the counts become the groups' starts */
    const int p = mx_pad_rows(cnt[e]);
    cnt[e] = run;
    run += p;
  }
  if (lane == 31) cnt[E] = run;
  mx_start_cursors(a, sm, lane == 31, 1, c1, c2);
}

/* The whole layer: row blocks of BM over every expert (the tile numbering's unit), from
 * the offsets the loader holds (a full warp). */
WS_DEV int mx_count_tiles(const gemm_shape *s, int lane) {
  int n = 0;
  for (int g = lane; g < s->groups; g += 32) n += (s->offsets[g + 1] - s->offsets[g] + s->bm - 1) / s->bm;
  return (int)__reduce_add_sync(0xffffffffu, (unsigned)n);
}

/* The CTA's next item: claimed from the global counter (lane 0; the whole warp gets it),
 * or (a->static_walk) the i-th of the CTA-strided walk. */
WS_DEV int mx_claim(const ws_ctx *c, const mx_args *a, int *i) {
  if (a->static_walk && !a->layer.on) return (int)blockIdx.x + (*i)++ * (int)gridDim.x;
  uint32_t t = 0;
  if (c->lane == 0) t = atomicAdd(a->next_item, 1u);
  return (int)__shfl_sync(0xffffffffu, t, 0);
}

/* One K step's B rows: 64-row tile: L1 gate c + 64r .. and up (gate + I) of the same
 * columns for warpgroup r = 0, 1 (four 64-row boxes), L2 the 256 output columns' rows of
 * W2; 128-row tile: L1 loop j's gate c + 64j .. and up, L2 the 128 output columns' rows. */
template <int BM> WS_DEV int mx_w1_box_row(int q, int j, int gate, int I) {
  return BM == MOE_EXPERTS_BM ? gate + (q / 2) * 64 + (q % 2) * I : gate + j * 64 + q * I;
}

template <int BM>
WS_DEV void mx_load_b(const ws_pipe *pipe, const ws_ctx *c, ws_cursor k, mx_stage<BM> *st, const ws_tmap *map_w1,
                      const ws_tmap *map_w2, int l2, int kk, int j, int gate, int down, int I) {
#pragma unroll
  for (int q = 0; q < MX_B_ROWS(BM) / 64; q++) {
    if (l2) ws_pipe_load_tile_2d_at(pipe, c, k, st->b + q * 64 * MX_BK, map_w2, kk * MX_BK, down + q * 64);
    else ws_pipe_load_tile_2d_at(pipe, c, k, st->b + q * 64 * MX_BK, map_w1, kk * MX_BK, mx_w1_box_row<BM>(q, j, gate, I));
  }
}

/* The scheduler warp (warp 1 of the loader role): claims the CTA's items in order,
 * decodes each (the whole layer: items 0 .. pre - 1 are route, send and expand, then the
 * tiles, known once routed: `tiles` row blocks of BM, then reduce (one GPU: combine) and
 * gather; the cursors read the offsets, so they start once routed) and hands it to the
 * loader warp through `items`. One item ahead: it claims the next one when the loader
 * takes the last one, as the loader itself did when it finished that one's loads. */
template <int BM>
WS_DEV void mx_schedule(const ws_pipe *items, const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm) {
  const int I = a->inter, l2_items = moe_experts_l2_items(BM, a->hidden);
  const mx_layer_args *ly = &a->layer;
  gemm_cursor c1, c2;
  const int pre = ly->on ? 1 + ly->send_items + ly->expand_items : 0, per_tile = I / MOE_EXPERTS_L1_BN + l2_items;
  int tiles = ly->on ? -1 : 0, l1_done = 0, walk = 0, routed_seen = !ly->on;
  if (!ly->on) mx_load_offsets(c, a, sm, &c1, &c2);
  for (ws_cursor k = {0, 0};; k = ws_cursor_next(k, items->stages)) {
    mx_claimed *it = &sm->items.slot[ws_pipe_acquire_at(items, c, k)];
    const int t = mx_claim(c, a, &walk);
    /* send and expand items read the route's entries, the tiles its offsets: the offsets
     * are loaded and the tiles counted only before the first tile, not before an expand
     * item's hand-over (at 1 token the expand item now starts 4 us earlier; H100) */
    if (t > 0 && routed_seen == 0 && (t < pre || !ly->self_route)) { /* self-routing tiles need no route item */
      mx_wait_count(c, ly->routed, 1u, "moe layer route");
      routed_seen = 1;
    }
    if (tiles < 0 && t >= pre) { /* the first tile: the offsets, counted here or the route item's */
      if (ly->self_route) mx_self_route(c, a, sm, &c1, &c2);
      else mx_load_offsets(c, a, sm, &c1, &c2);
      tiles = mx_count_tiles(&sm->shape[0], c->lane);
    }
    /* route; send, expand; the tiles; reduce (one GPU: combine), gather */
    int kind = t == 0 ? MX_ROUTE : t <= ly->send_items ? MX_SEND : MX_EXPAND;
    int index = kind == MX_EXPAND ? t - 1 - ly->send_items : t - 1;
    if (t >= pre) {
      index = t - pre - tiles * per_tile;
      kind = MX_L1;
      if (ly->on && index >= 0) {
        kind = index < ly->reduce_items ? (ly->nranks > 1 ? MX_REDUCE : MX_COMBINE) : MX_GATHER;
        if (kind == MX_GATHER) index -= ly->reduce_items;
        if (kind == MX_GATHER && index >= ly->gather_items) kind = -1;
      }
    }
    gemm_tile tile;
    int l2 = 0;
    if (kind == MX_L1 && !moe_experts_item(&sm->shape[0], &sm->shape[1], &c1, &c2, &l1_done, t - pre, &tile, &l2)) kind = -1;
    if (c->lane == 0) {
      it->t = t; it->kind = kind; it->index = index; it->l2 = l2; it->target = 2 * tiles * l2_items;
      if (kind == MX_L1) it->tile = tile;
    }
    ws_pipe_commit_at(items, c, k);
    if (kind < 0) return;
  }
}

/* After a loader's last item: the last of the grid's `loaders` to get here resets the
 * claim counter (and the whole layer's route and expand counts) for the next call. */
WS_DEV void mx_reset_claims(const ws_ctx *c, const mx_args *a, uint32_t loaders) {
  if (c->lane == 0 && atomicAdd(a->next_item + 1, 1u) == loaders - 1u) {
    a->next_item[0] = 0u;
    a->next_item[1] = 0u;
    if (a->layer.on) {
      *a->layer.routed = 0u;
      *a->layer.expanded = 0u;
    }
  }
}

/* The loader's six tensor maps into the cache before its first copy (the role leader). */
WS_DEV void mx_prefetch_maps(const ws_ctx *c, const mx_args *a, const ws_tmap *map_x, const ws_tmap *map_w1,
                             const ws_tmap *map_act, const ws_tmap *map_w2) {
  if (!ws_role_leader(c)) return;
  ws_prefetch_tensormap(&map_x->map);
  ws_prefetch_tensormap(&map_w1->map);
  ws_prefetch_tensormap(&map_act->map);
  ws_prefetch_tensormap(&map_w2->map);
  ws_prefetch_tensormap(&a->map_xs.map);
  ws_prefetch_tensormap(&a->map_as.map);
}

/* The loader warp (warp 0 of the loader role): the items from the scheduler, each tile's
 * loads stage by stage. */
template <int BM>
WS_DEV void mx_load(const ws_pipe *pipe, const ws_pipe *items, const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm,
                    const ws_tmap *map_x, const ws_tmap *map_w1, const ws_tmap *map_act, const ws_tmap *map_w2) {
  mx_prefetch_maps(c, a, map_x, map_w1, map_act, map_w2);
  const int H = a->hidden, I = a->inter, hb = H / MX_BK, l2_items = moe_experts_l2_items(BM, H);
  const int l2_bn = moe_experts_l2_bn(BM);
  const mx_layer_args *ly = &a->layer;
  ws_cursor k = {0, 0};
  int expanding = ly->on; /* the whole layer: the first L1 tile waits for the expand items */
  /* probe points of a tile (WS_PROBES builds; base 0 L1, 10 L2): 0 the wait for the
   * item, 1 item in hand, 2 first slot free, 3 its rows ready (L2), 4 every stage issued */
  WS_PROBE_DECLARE(p);
  for (ws_cursor ki = {0, 0};; ki = ws_cursor_next(ki, items->stages)) {
    WS_PROBE(p, 0);
    ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_SCHEDULE);
    const mx_claimed *it = &sm->items.slot[ki.stage];
    ws_pipe_wait_at(items, c, ki);
    ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_SCHEDULE);
    WS_PROBE(p, 1);
    const int t = it->t, kind = it->kind, l2 = it->l2;
    if (kind < 0) break;
    if (kind != MX_L1) {
      const int index = it->index, target = it->target;
      ws_pipe_release_at(items, c, ki);
      k = mx_hand(pipe, c, sm, k, t, kind, index, target);
      continue;
    }
    const gemm_tile tile = it->tile;
    ws_pipe_release_at(items, c, ki);
    const int row = tile.row0 + tile.tm * BM, blk = row / MOE_EXPERTS_BM;
    /* the 128-row tile's second 64 rows: still this expert's? (else: the next one's) */
    const int both = BM == MOE_EXPERTS_BM || tile.tm * BM + MOE_EXPERTS_BM < tile.count;
    const int ksteps = l2 ? I / MX_BK : (BM == MOE_EXPERTS_BM ? hb : 2 * hb);
    const int gate = tile.g * 2 * I + tile.tn * MOE_EXPERTS_L1_BN, down = tile.g * H + tile.tn * l2_bn;
    ws_trace_mark(c, WS_TRACE_ITEM_BEGIN, t);
    for (int ks = 0; ks < ksteps; ks++, k = ws_cursor_next(k, pipe->stages)) {
      const int j = l2 || BM == MOE_EXPERTS_BM ? 0 : ks / hb, kk = ks - j * hb; /* L1 loop, its K block */
      if (ks == 0) ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_SLOT); /* the item's first free slot */
      mx_stage<BM> *st = &sm->pipe.slot[ws_pipe_acquire_at(pipe, c, k)];
      if (ks == 0) ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_SLOT);
      if (ks == 0) WS_PROBE(p, 2);
      if (ks == 0 && c->lane == 0) { /* published by the commit */
        mx_item_info *info = &sm->item[k.stage];
        info->t = t; info->kind = l2 ? MX_L2 : MX_L1; info->tile = tile;
      }
      mx_load_b(pipe, c, k, st, map_w1, map_w2, l2, kk, j, gate, down, I);
      if ((l2 || expanding) && ks == 0) { /* the weights are already on their way */
        ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_ROWS);
        if (l2) {
          mx_wait_rows(c, a, blk, (uint32_t)l2_items);
          if (BM != MOE_EXPERTS_BM && both) mx_wait_rows(c, a, blk + 1, (uint32_t)l2_items);
        } else {
          mx_wait_count(c, ly->expanded, (uint32_t)ly->expand_items, "moe layer x rows");
        }
        expanding = 0;
        ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_ROWS);
      }
      if (ks == 0) WS_PROBE(p, 3);
      ws_pipe_load_tile_2d_at(pipe, c, k, st->a, l2 ? map_act : map_x, kk * MX_BK, row);
      ws_pipe_load_tile_2d_at(pipe, c, k, st->a_scale, l2 ? &a->map_as : &a->map_xs, row, kk);
      ws_pipe_commit_at(pipe, c, k);
    }
    ws_trace_mark(c, WS_TRACE_ITEM_END, t); /* its loads issued (they land later) */
    WS_PROBE(p, 4);
    WS_PROBE_FLUSH(c, p, 5, l2 ? 10 : 0);
  }
  /* the end, as an item of its own: index -1 in a committed stage (the math stops there) */
  ws_pipe_acquire_at(pipe, c, k);
  if (c->lane == 0) sm->item[k.stage].t = -1;
  ws_pipe_commit_at(pipe, c, k);
  /* the last CTA to run out of items resets the claim counter and the route and expand
   * counts for the next call. Every expand item must have counted by then: a loader waits
   * for them before its first L1 tile, but with no tiles at all (no tokens, or every slot
   * -1) none does, and an expand item still running would count into the next call. */
  if (ly->on) mx_wait_count(c, ly->expanded, (uint32_t)ly->expand_items, "moe layer x rows");
  mx_reset_claims(c, a, gridDim.x);
}

/* ---- CTA PAIRS (prefill) ---------------------------------------------------------- */
/* From a few 64-row blocks per expert on, the 64-row tile reads each expert's weights
 * from L2 once per block: ncu at 8192 tokens (DeepSeek-V3, H100) showed the fused kernel
 * moving 76-81 GB from L2 into the SMs where the unfused GEMMs' 192-row tiles move 64 GB,
 * every kernel at the same L2 ceiling. In pairs (clusters of 2 CTAs, args.pair) the pair
 * takes a 128-row block of one expert, each CTA 64 of its rows with the 64-row tile's
 * math, and every weight box is read from L2 once and multicast into both CTAs: per K
 * step 2 x 8 KiB of rows and 32 KiB of weights instead of 2 x 40 KiB.
 *
 * The pair's one loader is rank 0's: it claims the item, writes each CTA's half of it
 * into that CTA's first stage (the peer's through st.async, counted on the peer's `full`
 * barrier like a copy), multicasts the weights, loads each CTA's rows, and arrives once on
 * the peer's `full` with the bytes that will land there. Both CTAs' math warps release
 * their stages on rank 0's `empty` barriers, so no stage is refilled in either CTA before
 * both have read it; the peer's own loader and `empty` barriers stay idle. A block whose
 * second 64 rows are past the expert's end leaves the peer's half empty: nothing is
 * loaded for it and its math only passes the stages on. */

/* Item t's weights for one K step, every box multicast to both CTAs of the pair (the
 * 64-row tile's boxes: L1 gate and up of act columns c .. c + 127, L2 256 output rows). */
template <int BM>
WS_DEV void mx_multicast_b(uint64_t *full, mx_stage<BM> *st, const ws_tmap *map_w1, const ws_tmap *map_w2, int l2,
                           int kk, int gate, int down, int I) {
#pragma unroll
  for (int q = 0; q < MX_B_ROWS(BM) / 64; q++) {
    const int row = l2 ? down + q * 64 : mx_w1_box_row<BM>(q, 0, gate, I);
    ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->b + q * 64 * MX_BK, l2 ? &map_w2->map : &map_w1->map,
                                                          kk * MX_BK, row, full, 0x3);
  }
}

/* The peer's copy of an item (lane 0 of rank 0): 8 bytes at a time into its item slot. */
WS_DEV void mx_send_item(uint32_t peer_item, uint32_t peer_full, const mx_item_info *it) {
  const uint32_t *w = (const uint32_t *)it;
#pragma unroll
  for (int i = 0; i < MX_ITEM_WORDS; i += 2) ws_st_async_v2_b32(peer_item + 4u * (uint32_t)i, w[i], w[i + 1], peer_full);
}

template <int BM>
WS_DEV void mx_load_pair(const ws_pipe *pipe, const ws_pipe *items, const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm,
                         const ws_tmap *map_x, const ws_tmap *map_w1, const ws_tmap *map_act, const ws_tmap *map_w2) {
  static_assert(MX_ITEM_WORDS % 2 == 0, "the item goes to the peer 8 bytes at a time"); /* BM: 64 (host check) */
  mx_prefetch_maps(c, a, map_x, map_w1, map_act, map_w2);
  const int H = a->hidden, I = a->inter, hb = H / MX_BK, l2_items = moe_experts_l2_items(BM, H);
  const uint32_t b_bytes = 4u * map_w1->box_bytes, a_bytes = map_x->box_bytes + a->map_xs.box_bytes;
  const uint32_t peer_full = ws_mapa_shared_cluster(&pipe->full[0], 1u);
  const uint32_t peer_item = ws_mapa_shared_cluster(&sm->item[0], 1u);
  ws_cursor k = {0, 0};
  for (ws_cursor ki = {0, 0};; ki = ws_cursor_next(ki, items->stages)) { /* rank 0's scheduler warp decodes */
    ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_SCHEDULE);
    const mx_claimed *claimed = &sm->items.slot[ki.stage];
    ws_pipe_wait_at(items, c, ki);
    ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_SCHEDULE);
    const int t = claimed->t, l2 = claimed->l2;
    if (claimed->kind < 0) break;
    const gemm_tile tile = claimed->tile; /* a 128-row block (the schedules number them: host, a->pair) */
    ws_pipe_release_at(items, c, ki);
    const int row = tile.row0 + tile.tm * 2 * BM, blk = row / MOE_EXPERTS_BM;
    const int both = tile.tm * 2 * BM + BM < tile.count; /* the peer's 64 rows are this expert's */
    const int ksteps = l2 ? I / MX_BK : hb;
    const int gate = tile.g * 2 * I + tile.tn * MOE_EXPERTS_L1_BN, down = tile.g * H + tile.tn * moe_experts_l2_bn(BM);
    ws_trace_mark(c, WS_TRACE_ITEM_BEGIN, t);
    for (int ks = 0; ks < ksteps; ks++, k = ws_cursor_next(k, pipe->stages)) {
      mx_stage<BM> *st = &sm->pipe.slot[ws_pipe_acquire_at(pipe, c, k)];
      uint64_t *full = &pipe->full[k.stage];
      if (c->lane == 0) {
        const uint32_t item_bytes = ks == 0 ? (uint32_t)sizeof(mx_item_info) : 0u;
        ws_mbarrier_expect_tx(full, b_bytes);
        ws_mbarrier_arrive_expect_tx_relaxed_cluster(peer_full + 8u * k.stage, b_bytes + (both ? a_bytes : 0u) + item_bytes);
        if (ks == 0) { /* each CTA its own 64 rows of the block; published by the commits */
          mx_item_info it;
          it.t = t; it.kind = l2 ? MX_L2 : MX_L1; it.tile = tile;
          it.tile.tm = 2 * tile.tm;
          sm->item[k.stage] = it;
          it.tile.tm++;
          mx_send_item(peer_item + (uint32_t)(k.stage * sizeof(mx_item_info)), peer_full + 8u * k.stage, &it);
        }
        mx_multicast_b(full, st, map_w1, map_w2, l2, ks, gate, down, I);
      }
      if (l2 && ks == 0) { /* the weights are already on their way */
        ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_ROWS);
        mx_wait_rows(c, a, blk, (uint32_t)l2_items);
        if (both) mx_wait_rows(c, a, blk + 1, (uint32_t)l2_items);
        ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_ROWS);
      }
      const ws_tmap *ma = l2 ? map_act : map_x, *ms = l2 ? &a->map_as : &a->map_xs;
      ws_pipe_load_tile_2d_at(pipe, c, k, st->a, ma, ks * MX_BK, row);
      ws_pipe_load_tile_2d_at(pipe, c, k, st->a_scale, ms, row, ks);
      if (both && c->lane == 0) {
        ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->a, &ma->map, ks * MX_BK, row + BM, full, 0x2);
        ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->a_scale, &ms->map, row + BM, ks, full, 0x2);
      }
      ws_pipe_commit_at(pipe, c, k);
    }
    ws_trace_mark(c, WS_TRACE_ITEM_END, t);
  }
  /* the end for both CTAs: item -1 in a committed stage */
  ws_pipe_acquire_at(pipe, c, k);
  if (c->lane == 0) {
    mx_item_info it;
    memset(&it, 0, sizeof it);
    it.t = -1;
    sm->item[k.stage] = it;
    ws_mbarrier_arrive_expect_tx_relaxed_cluster(peer_full + 8u * k.stage, (uint32_t)sizeof(mx_item_info));
    mx_send_item(peer_item + (uint32_t)(k.stage * sizeof(mx_item_info)), peer_full + 8u * k.stage, &it);
  }
  ws_pipe_commit_at(pipe, c, k);
  mx_reset_claims(c, a, gridDim.x / 2); /* one loader per pair */
}

/* ---- MATH -------------------------------------------------------------------------- */
/* total += acc x a_scale x b_scale, columns 0..63 of the warpgroup's 128 with b0 and
 * 64..127 with b1 (L1: gate and up blocks; L2: b0 = b1). Registers 4j, 4j + 1 are row
 * lr, 4j + 2, 4j + 3 row lr + 8; the products as the FP8 GEMM forms them (same bits). */
WS_DEV void mx_promote(float *total, const float *acc, float a0, float a1, float b0, float b1) {
  const float f00 = a0 * b0, f10 = a1 * b0, f01 = a0 * b1, f11 = a1 * b1;
#pragma unroll
  for (int j = 0; j < 16; j++) {
    const float f0 = j < 8 ? f00 : f01, f1 = j < 8 ? f10 : f11;
    total[4 * j + 0] += acc[4 * j + 0] * f0;
    total[4 * j + 1] += acc[4 * j + 1] * f0;
    total[4 * j + 2] += acc[4 * j + 2] * f1;
    total[4 * j + 3] += acc[4 * j + 3] * f1;
  }
}

/* A math warp is done with stage c: in pairs on rank 0's `empty` barrier (mx_load_pair). */
template <int PAIR> WS_DEV void mx_release(const ws_pipe *pipe, const ws_ctx *ctx, ws_cursor c) {
  if (PAIR) ws_pipe_release_warp_to_at(pipe, ctx, c, 0u);
  else ws_pipe_release_warp_at(pipe, ctx, c);
}

/* In pairs, the peer's half of a block past its expert's end: nothing was loaded for it;
 * the warp passes the item's K steps on. */
WS_DEV ws_cursor mx_skip(const ws_pipe *pipe, const ws_ctx *ctx, int kblocks, ws_cursor c) {
  for (int kb = 0; kb < kblocks; kb++, c = ws_cursor_next(c, pipe->stages)) {
    ws_pipe_wait_at(pipe, ctx, c);
    mx_release<1>(pipe, ctx, c);
  }
  return c;
}

/* K blocks kb0 .. kb1 - 1 of a tile for this warpgroup; lane l of (s0, s1) holds the B
 * scales of block kb0 + l. The rows' scales come from the stage: this thread's rows are
 * ar and ar + 8 of the tile. */
template <int BM, int PAIR>
WS_DEV void mx_kblocks(float *total, float *acc, const ws_pipe *pipe, const ws_ctx *ctx, mx_smem<BM> *sm, uint64_t da0,
                       uint64_t db0, int kb0, int kb1, int kblocks, float s0, float s1, int ar, ws_cursor *cp,
                       uint32_t *fullp) {
  const uint32_t stage_bytes = (uint32_t)sizeof(sm->pipe.slot[0]);
  ws_cursor c = *cp;
  uint32_t full = *fullp;
  for (int kb = kb0; kb < kb1; kb++, c = ws_cursor_next(c, pipe->stages)) {
    const float b0 = __shfl_sync(0xffffffffu, s0, kb - kb0), b1 = __shfl_sync(0xffffffffu, s1, kb - kb0);
    fp8_issue(acc, pipe, ctx, da0, db0, stage_bytes, c, full);
    const float *as = sm->pipe.slot[c.stage].a_scale;
    const float a0 = ws_ld_shared_f32(as + ar), a1 = ws_ld_shared_f32(as + ar + 8);
    full = kb + 1 < kblocks ? ws_pipe_probe_at(pipe, ws_cursor_next(c, pipe->stages)) : 0u;
    WS_WGMMA_WAIT_GROUP(0);
    mx_release<PAIR>(pipe, ctx, c);
    mx_promote(total, acc, a0, a1, b0, b1);
  }
  *cp = c;
  *fullp = full;
}

/* One tile's K loop for this warpgroup. The B scales (weights: read-only, __ldg) are held
 * by the warp's lanes 32 K blocks at a time, in two sets that take turns: while the K
 * blocks of one set run, the other set's loads (issued 32 K blocks earlier) land, and a
 * set is reloaded straight after its blocks (no register move, so nothing waits on the
 * load until its first use 32 blocks on). Loaded one K block ahead instead (the earlier
 * form), every K block waited on a DRAM round trip queued behind the weight stream: at 1
 * token the kernel streamed about 10 GB/s per SM (ncu, docs/benchmarks.md, session 7).
 * Same values, same bits. Returns the pipe cursor after the loop. */
#define MX_SCALE_CHUNK 32
template <int BM, int PAIR>
WS_DEV ws_cursor mx_tile(float *total, float *acc, const ws_pipe *pipe, const ws_ctx *ctx, mx_smem<BM> *sm, uint64_t da0,
                         uint64_t db0, int kblocks, const float *bs0, const float *bs1, int ar, ws_cursor c) {
#pragma unroll
  for (int i = 0; i < 64; i++) total[i] = 0.0f;
  const int lane = ctx->lane, last = kblocks - 1, ch = MX_SCALE_CHUNK;
  float p0 = __ldg(bs0 + min(lane, last)), p1 = __ldg(bs1 + min(lane, last));
  float q0 = __ldg(bs0 + min(ch + lane, last)), q1 = __ldg(bs1 + min(ch + lane, last));
  uint32_t full = ws_pipe_probe_at(pipe, c);
  for (int base = 0; base < kblocks; base += 2 * ch) {
    mx_kblocks<BM, PAIR>(total, acc, pipe, ctx, sm, da0, db0, base, min(base + ch, kblocks), kblocks, p0, p1, ar, &c, &full);
    if (base + 2 * ch < kblocks) {
      p0 = __ldg(bs0 + min(base + 2 * ch + lane, last));
      p1 = __ldg(bs1 + min(base + 2 * ch + lane, last));
    }
    if (base + ch < kblocks)
      mx_kblocks<BM, PAIR>(total, acc, pipe, ctx, sm, da0, db0, base + ch, min(base + 2 * ch, kblocks), kblocks, q0, q1, ar,
                           &c, &full);
    if (base + 3 * ch < kblocks) {
      q0 = __ldg(bs0 + min(base + 3 * ch + lane, last));
      q1 = __ldg(bs1 + min(base + 3 * ch + lane, last));
    }
  }
  return c;
}

WS_DEV float mx_bf16_round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/* SwiGLU of this thread's 32 act values (rows lr, lr + 8; 16 columns each) from the
 * bf16-rounded gate and up (what the unfused path reads back from h), and each row's
 * amax over them. */
WS_DEV void mx_swiglu(const float *total, float v[2][16], float amax[2]) {
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float g = mx_bf16_round(total[4 * j + 2 * h + e]), u = mx_bf16_round(total[4 * (j + 8) + 2 * h + e]);
        v[h][2 * j + e] = moe_silu_mul(g, u);
        amax[h] = fmaxf(amax[h], fabsf(v[h][2 * j + e]));
      }
}

/* A row's amax over the 4 threads of its quad (the warpgroup's 64 columns). */
WS_DEV float mx_quad_max(float m) {
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
}

/* This thread's 16 values of row r, columns col0 + 8j + 2q (+1), as e4m3 of v x f (f: the
 * block's moe_act_inv_scale) into the tile. */
WS_DEV void mx_put_e4m3(uint8_t *tile_row, int col, const float *v, float f) {
#pragma unroll
  for (int j = 0; j < 8; j++) *(uint16_t *)(tile_row + col + 8 * j) = ws_to_e4m3x2(v[2 * j] * f, v[2 * j + 1] * f);
}

/* The act tile's first n rows (128 bytes each) to global memory as 16-byte stores by
 * `threads` threads (i: this one's index). */
WS_DEV void mx_store_act(const mx_args *a, const uint8_t *act, int n, int row0, int tn, int i, int threads) {
  for (int ch = i; ch < n * 8; ch += threads) {
    const int r = ch / 8, col = (ch % 8) * 16;
    const uint4 val = *(const uint4 *)(act + r * MX_ACT_LD + col);
    ws_st_global_v4(a->act + (size_t)(row0 + r) * (size_t)a->inter + (size_t)tn * 128 + col, val);
  }
}

/* 64-row L1's epilogue: this warpgroup's 64 act columns of the tile's rows, the row's
 * amax over both warpgroups' columns, e4m3 into the shared tile, then 16-byte stores and
 * one release of the tile on the block's counter. */
template <int BM>
WS_DEV void mx_l1_epilogue(const ws_ctx *ctx, const mx_args *a, mx_smem<BM> *sm, const gemm_tile *tile, int wg, int lr,
                           const float *total) {
  const int q = ctx->lane % 4, row0 = tile->row0 + tile->tm * BM;
  float v[2][16], amax[2] = {0.0f, 0.0f};
  mx_swiglu(total, v, amax);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    amax[h] = mx_quad_max(amax[h]);
    if (q == 0) sm->amax[wg][lr + 8 * h] = amax[h];
  }
  ws_named_sync((uint32_t)a->bar, 2 * 128);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = lr + 8 * h;
    const float s = ws_fp8_scale_of(fmaxf(amax[h], sm->amax[wg ^ 1][r]));
    mx_put_e4m3(sm->epi[0].l1.act + r * MX_ACT_LD, wg * 64 + 2 * q, v[h], moe_act_inv_scale(s));
    if (wg == 0 && q == 0) a->act_scale[(size_t)tile->tn * a->act_ld + (size_t)(row0 + r)] = s;
  }
  ws_named_sync((uint32_t)a->bar, 2 * 128);
  const int i = wg * 128 + ctx->warp * 32 + ctx->lane; /* 256 threads, 512 chunks of 16 bytes */
  mx_store_act(a, sm->epi[0].l1.act, BM, row0, tile->tn, i, 256);
  ws_fence_proxy_async_global(); /* L2's loaders read these rows by TMA */
  /* the tile's stores ordered before thread 0 by the barrier; its release is cumulative */
  ws_named_sync((uint32_t)a->bar, 2 * 128);
  if (i == 0 && a->layer.drop != MOE_DROP_L1_RELEASE) ws_red_release_gpu_add_u32(a->ready + row0 / MOE_EXPERTS_BM, 1u);
}

/* 128-row L1, after its first K loop (act columns c .. c + 63): the SwiGLU values and the
 * rows' partial amax wait in this thread's slots of shared memory (the same thread takes
 * them back; in registers they spilled the math's 208 around the second loop). */
template <int BM>
WS_DEV void mx_l1_park(mx_smem<BM> *sm, int wg, int ti, const float *total) {
  float v[2][16], amax[2] = {0.0f, 0.0f};
  mx_swiglu(total, v, amax);
  float *park = sm->epi[wg].l1.park + ti;
#pragma unroll
  for (int h = 0; h < 2; h++) {
#pragma unroll
    for (int e = 0; e < 16; e++) park[(h * 16 + e) * 128] = v[h][e];
    park[(32 + h) * 128] = amax[h];
  }
}

/* 128-row L1's epilogue, after the second K loop (columns c + 64 .. c + 127): this
 * warpgroup's 64 rows over all 128 act columns, so the amax is the quad's; e4m3 into the
 * warpgroup's rows of the shared tile, 16-byte stores, then a release of its 64-row
 * block, unless those rows are the next expert's. */
template <int BM>
WS_DEV void mx_l1_epilogue_wide(const ws_ctx *ctx, const mx_args *a, mx_smem<BM> *sm, const gemm_tile *tile, int wg,
                                int lr, const float *total) {
  const int q = ctx->lane % 4, ti = ws_role_thread(ctx), row0 = tile->row0 + tile->tm * BM + wg * 64;
  const int mine = tile->tm * BM + wg * 64 < tile->count; /* else the next expert's rows */
  uint8_t *act = sm->epi[wg].l1.act;
  const float *park = sm->epi[wg].l1.park + ti;
  float v[2][16], amax[2] = {park[32 * 128], park[33 * 128]};
  mx_swiglu(total, v, amax);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = lr + 8 * h;
    const float s = ws_fp8_scale_of(mx_quad_max(amax[h]));
    float p[16];
#pragma unroll
    for (int e = 0; e < 16; e++) p[e] = park[(h * 16 + e) * 128];
    mx_put_e4m3(act + r * MX_ACT_LD, 2 * q, p, moe_act_inv_scale(s));
    mx_put_e4m3(act + r * MX_ACT_LD, 64 + 2 * q, v[h], moe_act_inv_scale(s));
    if (q == 0 && mine) a->act_scale[(size_t)tile->tn * a->act_ld + (size_t)(row0 + r)] = s;
  }
  if (!mine) return;
  ws_role_sync(ctx); /* the warpgroup's rows of the tile */
  mx_store_act(a, act, 64, row0, tile->tn, ti, 128);
  ws_fence_proxy_async_global(); /* L2's loaders read these rows by TMA */
  ws_role_sync(ctx);            /* the warpgroup's stores before its leader's release */
  if (ws_role_leader(ctx) && a->layer.drop != MOE_DROP_L1_RELEASE)
    ws_red_release_gpu_add_u32(a->ready + row0 / MOE_EXPERTS_BM, 1u);
}

/* The whole layer: combine reads y, so each warpgroup counts its half of an L2 tile once
 * its stores are complete. Done one tile late (before the next tile's stores, or before
 * combine): waiting for the stores right after issuing them stalled the warpgroup about
 * 2 us per tile, and the loader with it once every slot was full (+114 us at 128 tokens,
 * DeepSeek-V3, H100). The barrier orders the plain stores of a partial tile before the
 * leader's release. */
WS_DEV void mx_count_stored(const ws_ctx *ctx, const mx_args *a) {
  ws_role_sync(ctx);
  if (ws_role_leader(ctx)) {
    WS_CP_ASYNC_BULK_WAIT_GROUP(0);
    ws_fence_proxy_async_global();
    if (a->layer.drop != MOE_DROP_L2_STORED) ws_red_release_gpu_add_u32(a->layer.l2_done, 1u);
  }
}

/* Wait for the next item's first stage and take the item the loader decoded into it:
 * its kind + 1 (MX_L1 + 1 ..), or 0 (none left: -1). Lane 0 reads it (the lane that releases the
 * stage: racecheck does not count __syncwarp as ordering the other lanes' reads before
 * that release) and hands it to the warp. Not the pipe's close, whose flag every lane
 * reads. */
template <int BM>
WS_DEV int mx_next(const ws_pipe *pipe, const ws_ctx *ctx, const mx_smem<BM> *sm, ws_cursor c, gemm_tile *tile) {
  ws_trace_mark(ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_STAGE);
  ws_pipe_wait_at(pipe, ctx, c);
  ws_trace_mark(ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_STAGE);
  int w[MX_ITEM_WORDS];
  const int *src = (const int *)&sm->item[c.stage];
#pragma unroll
  for (int i = 0; i < MX_ITEM_WORDS; i++) w[i] = __shfl_sync(0xffffffffu, ctx->lane == 0 ? src[i] : 0, 0);
  mx_item_info it;
  memcpy(&it, w, sizeof it);
  if (it.t < 0) return 0;
  *tile = it.tile;
  ws_trace_mark(ctx, WS_TRACE_ITEM_BEGIN, it.t);
  return it.kind + 1;
}

template <int BM, int PAIR>
WS_DEV void mx_math(mx_smem<BM> *sm, const ws_pipe *pipe_in, const ws_ctx *ctx_in, const mx_args *args_in,
                    const ws_tmap *map_y) {
  const ws_pipe pipe = *pipe_in;
  const ws_ctx ctx = *ctx_in;
  const mx_args &a = *args_in;
  const int wide = BM != MOE_EXPERTS_BM;
  const int wg = __shfl_sync(0xffffffffu, ctx.replica, 0);
  /* 64-row tile: the same A rows, B rows 128 wg ..; 128-row tile: A rows 64 wg .., the same B */
  const uint64_t da0 = ws_wgmma_desc_k128b(sm->pipe.slot[0].a + (wide ? wg * 64 * MX_BK : 0));
  const uint64_t db0 = ws_wgmma_desc_k128b(sm->pipe.slot[0].b + (wide ? 0 : wg * 128 * MX_BK));
  const int lr = ctx.warp * 16 + ctx.lane / 4; /* this thread's rows: lr and lr + 8 of the warpgroup's */
  const int ar = lr + (wide ? wg * 64 : 0);    /* ... and of the tile (their scales in the stage)     */
  const int hb = a.hidden / 128, ib = a.inter / 128;
  float acc[64], total[64];
  ws_cursor c = {0, 0};
  gemm_tile tile;
  /* Two loops, L1 items then L2 items (the order they come in), each with one tile body:
   * one loop with both bodies behind a branch merged the cursor from two paths, and ptxas
   * then kept the wgmma descriptors in ordinary registers (an R2UR move before every
   * wgmma instead of uniform-datapath arithmetic). */
  const int gw = wg * 4 + ctx.warp, mi = gw * 32 + ctx.lane; /* warp and thread of the 256 */
  /* probe points of a tile (WS_PROBES builds; base 0 L1, 10 L2): 0 the wait for its first
   * stage, 1 the stage in, 2 the K loop done, 3 the epilogue done */
  WS_PROBE_DECLARE(p);
  WS_PROBE(p, 0);
  int phase = mx_next(&pipe, &ctx, sm, c, &tile);
  /* the whole layer's route, send and expand items (moe_layer_items.cuh, one GPU;
   * moe_layer_ep.cuh, several ranks): their stage carries only the item, free again at
   * once. The route's scratch is warpgroup 0's epilogue memory: no L2 store pending yet. */
  const uint32_t bar = (uint32_t)a.bar;
  const int ep = a.layer.nranks > 1;
  while (!PAIR && (phase == MX_ROUTE + 1 || phase == MX_SEND + 1 || phase == MX_EXPAND + 1)) {
    ws_pipe_release_warp_at(&pipe, &ctx, c);
    c = ws_cursor_next(c, pipe.stages);
    if (phase == MX_ROUTE + 1) {
      if (ep) mxe_route(&a.layer, (int *)sm->epi[0].out, &ctx, mi, bar, &sm->ep);
      else mx_route(&a.layer, (int *)sm->epi[0].out, mi, bar);
    } else if (phase == MX_SEND + 1) {
      mxe_send(&a.layer, tile.g, gw, ctx.lane, mi, bar, &sm->ep);
    } else if (ep) {
      mxe_expand(&a.layer, (int *)sm->epi[0].out, &ctx, tile.g, gw, ctx.lane, mi, bar, &sm->ep);
    } else {
      mx_expand(&a.layer, tile.g, gw, ctx.lane, a.hidden);
      mx_expand_done(&a.layer, mi, bar);
    }
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  while (phase == MX_L1 + 1) {
    WS_PROBE(p, 1);
    const float *bs = a.w1_scale + ((size_t)tile.g * 2 * ib + (size_t)tile.tn) * hb; /* gate block; up is ib blocks on */
    if (PAIR && tile.tm * BM >= tile.count) {
      c = mx_skip(&pipe, &ctx, hb, c);
    } else if (!wide) {
      c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, hb, bs, bs + (size_t)ib * hb, ar, c);
      WS_PROBE(p, 2);
      ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_EPILOGUE); /* the tensor cores idle from here */
      mx_l1_epilogue(&ctx, &a, sm, &tile, wg, lr, total);
      ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_EPILOGUE);
      WS_PROBE(p, 3);
      WS_PROBE_FLUSH(&ctx, p, 4, 0);
    } else { /* act columns c .. c + 63, then c + 64 .. c + 127: the same scale blocks */
      c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, hb, bs, bs + (size_t)ib * hb, ar, c);
      mx_l1_park(sm, wg, ws_role_thread(&ctx), total);
      c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, hb, bs, bs + (size_t)ib * hb, ar, c);
      mx_l1_epilogue_wide(&ctx, &a, sm, &tile, wg, lr, total);
    }
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    WS_PROBE(p, 0);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  int stored = 0; /* the whole layer: this warpgroup's last L2 tile is not counted yet */
  while (phase == MX_L2 + 1) {
    if (PAIR && tile.tm * BM >= tile.count) {
      c = mx_skip(&pipe, &ctx, ib, c);
      ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
      phase = mx_next(&pipe, &ctx, sm, c, &tile);
      continue;
    }
    /* this warpgroup's 128 columns (64-row tile: past H, H an odd multiple of 128,
     * computed, not stored) */
    WS_PROBE(p, 1);
    const int nb = wide ? tile.tn : min(2 * tile.tn + wg, hb - 1);
    const float *bs = a.w2_scale + ((size_t)tile.g * hb + (size_t)nb) * ib;
    c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, ib, bs, bs, ar, c);
    WS_PROBE(p, 2);
    gemm_tile out = tile;
    out.tn = wide ? tile.tn : 2 * tile.tn + wg;
    if (stored) mx_count_stored(&ctx, &a); /* the previous tile's stores are long done */
    /* rows past the expert's end (the 128-row tile's next-expert half) are not stored */
    ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_EPILOGUE);
    gemm_store_fragment<128, 2>(&ctx, &a.l2, &out, tile.tm * BM + (wide ? wg * 64 : 0), total, sm->epi[wg].out, map_y);
    ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_EPILOGUE);
    WS_PROBE(p, 3);
    WS_PROBE_FLUSH(&ctx, p, 4, 10);
    stored = !PAIR && a.layer.on;
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    WS_PROBE(p, 0);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  if (stored) mx_count_stored(&ctx, &a); /* before any combine item waits for the count */
  while (!PAIR && (phase == MX_COMBINE + 1 || phase == MX_REDUCE + 1 || phase == MX_GATHER + 1)) {
    ws_pipe_release_warp_at(&pipe, &ctx, c);
    c = ws_cursor_next(c, pipe.stages);
    if (phase == MX_REDUCE + 1) {
      mxe_reduce(&a.layer, &ctx, a.l2.d, tile.g, (uint32_t)tile.count, gw, ctx.lane, mi, bar, &sm->ep);
    } else if (phase == MX_GATHER + 1) {
      mxe_gather(&a.layer, &ctx, tile.g, gw, ctx.lane, mi, bar, &sm->ep);
    } else {
      ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_ROWS);
      if (mi == 0) mx_combine_wait(&a.layer, &ctx, (uint32_t)tile.count, a.layer.reduce_items);
      ws_named_sync(bar, MX_LAYER_THREADS);
      ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_ROWS);
      mx_combine(&a.layer, a.l2.d, tile.g, gw, ctx.lane, a.hidden);
    }
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  ws_store_drain(&ctx);
}

template <int BM, int PAIR>
WS_KERNEL(moe_experts) moe_experts_kernel(const __grid_constant__ ws_tmap map_x, const __grid_constant__ ws_tmap map_w1,
                                          const __grid_constant__ ws_tmap map_act,
                                          const __grid_constant__ ws_tmap map_w2,
                                          const __grid_constant__ ws_tmap map_y, const __grid_constant__ mx_args args,
                                          ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  mx_smem<BM> *sm = (mx_smem<BM> *)gemm_smem_base(smem_raw);
  ws_ctx ctx = WS_SELF(moe_experts, diag);
  /* both math warpgroups read every stage, released once per warp; in pairs rank 0's
   * `empty` counts both CTAs' math warps and rank 1's `full` the one arrival of rank 0's
   * loader (mx_load_pair) */
  const uint32_t rank = PAIR ? ws_cluster_ctarank() : 0u;
  ws_pipe pipe = WS_PIPE_VIEW(&sm->pipe, "moe experts", rank ? 1 : WS_WARP_SIZE,
                              (PAIR ? 2 : 1) * 2 * WS_ROLE_WARPS(moe_experts, X_MATH));
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC);
  /* the scheduler warp's items to the loader warp (both read and write them as plain memory) */
  ws_pipe items = WS_PIPE_VIEW(&sm->items, "moe experts items", WS_WARP_SIZE, WS_WARP_SIZE);
  ws_pipe_set_proxies(&items, WS_PROXY_GENERIC, WS_PROXY_GENERIC);
  if (threadIdx.x == 0) {
    ws_pipe_init(&pipe);
    ws_pipe_init(&items);
  }
  if (!PAIR && threadIdx.x == 0 && args.layer.nranks > 1) mxe_read_epochs(&args.layer, &sm->ep); /* before any claim */
  if (PAIR) ws_init_sync_cluster(); /* the peer arrives on our barriers and copies into our stages */
  else ws_init_sync();
  if (ctx.role == X_LOADER) {
    WS_ENTER_ROLE(moe_experts, X_LOADER);
    if (!ctx.spare && rank == 0) { /* in pairs: the pair's one loader and its scheduler */
      if (ctx.warp == 1) mx_schedule(&items, &ctx, &args, sm);
      else if (PAIR) mx_load_pair(&pipe, &items, &ctx, &args, sm, &map_x, &map_w1, &map_act, &map_w2);
      else mx_load(&pipe, &items, &ctx, &args, sm, &map_x, &map_w1, &map_act, &map_w2);
    }
    if (!PAIR) return;
  } else {
    WS_ENTER_ROLE(moe_experts, X_MATH);
    if (!ctx.spare) mx_math<BM, PAIR>(sm, &pipe, &ctx, &args, &map_y);
  }
  if (PAIR) ws_exit_sync_cluster(); /* no CTA of the pair leaves while the other may still reach it */
}

/* ---- host -------------------------------------------------------------------------- */
static int mx_blocks(int max_rows) { return (max_rows + MOE_EXPERTS_BM - 1) / MOE_EXPERTS_BM; }

/* ready[B], seen[B], next_item[2]; the whole layer's routed, expanded, l2_done, comb_seen,
 * and with several ranks sent, reduced, gathered */
extern "C" size_t moe_experts_counter_words(int max_rows) { return 2 * (size_t)mx_blocks(max_rows) + 9; }

/* ctx: the instance's shared memory bytes (a size_t) */
static ws_status mx_make_plan(const void *ctx, ws_plan *plan) {
  ws_status s = ws_plan_init(plan, "moe_experts", moe_experts_roles, moe_experts_NROLES, 0);
  if (s == WS_OK) s = ws_plan_set_smem(plan, *(const size_t *)ctx);
  int id = 0;
  if (s == WS_OK) s = ws_plan_add_barrier(plan, "moe experts tile", &id);
  return s;
}

extern "C" ws_status moe_experts_launch(const moe_experts_problem *p, cudaStream_t stream) {
  WS_REQUIRE(p != NULL, "moe experts: problem is NULL");
  const int H = p->hidden, I = p->inter;
  WS_REQUIRE(H >= 128 && H % 128 == 0 && I >= 128 && I % 128 == 0, "moe experts: hidden %d and inter %d must be "
             "positive multiples of 128", H, I);
  WS_REQUIRE(p->groups > 0 && p->max_rows > 0 && (long long)p->groups * 2 * I < (1ll << 31) &&
                 (long long)p->groups * H < (1ll << 31),
             "moe experts: %d experts, %d rows", p->groups, p->max_rows);
  /* its 64-row blocks and tile ends count in int, and so does the item number: every L1
   * item (a row block's 128 act columns) and L2 item (at least 128 output columns) */
  WS_REQUIRE(p->max_rows <= WS_EXTENT_MAX, "moe experts: max_rows %d, at most 2^30", p->max_rows);
  const int64_t row_blocks = p->max_rows / MOE_EXPERTS_BM + p->groups,
                items = ws_mul_sat(row_blocks, I / 128) + ws_mul_sat(row_blocks, (H + 127) / 128);
  WS_REQUIRE(items <= WS_INDEX_MAX, "moe experts: %d rows in %d experts, hidden %d, inter %d are %lld work items, at most "
             "2^31 - 1", p->max_rows, p->groups, H, I, (long long)items);
  WS_REQUIRE(p->offsets && p->x && p->x_scale && p->w1 && p->w1_scale && p->w2 && p->w2_scale && p->act &&
                 p->act_scale && p->y && p->counters,
             "moe experts: a pointer is NULL");
  WS_REQUIRE(p->x_scale_ld >= p->max_rows && p->x_scale_ld % 4 == 0 && p->act_ld >= p->max_rows && p->act_ld % 4 == 0,
             "moe experts: scale strides %d / %d must be >= rows %d and multiples of 4", p->x_scale_ld, p->act_ld,
             p->max_rows);
  const void *ptrs[] = {p->x, p->x_scale, p->w1, p->w2, p->act, p->act_scale, p->y};
  for (size_t i = 0; i < sizeof ptrs / sizeof ptrs[0]; i++)
    WS_REQUIRE(((uintptr_t)ptrs[i] & 15u) == 0, "moe experts: operand %zu (%p) is not 16-byte aligned", i, ptrs[i]);
  if (p->layer) {
    const moe_layer_io *io = p->layer;
    WS_REQUIRE(io->tokens >= 0 && io->topk >= 1 && io->topk <= WS_EP_MAX_TOPK && p->groups <= WS_EP_MAX_EXPERTS,
               "moe layer: %d tokens, top-%d, %d experts (top-k 1..%d, experts up to %d)", io->tokens, io->topk,
               p->groups, WS_EP_MAX_TOPK, WS_EP_MAX_EXPERTS);
    WS_REQUIRE(io->tokens == 0 || (io->topk_idx && io->topk_weights && io->x && io->out),
               "moe layer: topk_idx, topk_weights, x or out is NULL");
    WS_REQUIRE(io->ep || (io->entry_row && io->bad_id), "moe layer: entry_row or bad_id is NULL");
    if (io->ep) {
      const ep_args *e = io->ep;
      WS_REQUIRE(e->topk == io->topk && e->L == p->groups && e->fp8 && !e->ll && e->max_tokens >= io->tokens &&
                     e->scale_ld == p->x_scale_ld && e->max_rows <= p->max_rows && (const void *)e->x == p->x,
                 "moe layer: the dispatch handle (top-%d, %d local experts, max %d tokens) does not match the layer "
                 "(top-%d, %d experts, %d tokens) or its receive layout", e->topk, e->L, e->max_tokens, io->topk,
                 p->groups, io->tokens);
    }
    WS_REQUIRE(((uintptr_t)io->x & 15u) == 0 && ((uintptr_t)io->out & 15u) == 0,
               "moe layer: x %p and out %p must be 16-byte aligned", io->x, io->out);
    WS_REQUIRE(((uintptr_t)io->topk_idx & 3u) == 0 && ((uintptr_t)io->topk_weights & 3u) == 0 &&
                   ((uintptr_t)io->x_scale & 3u) == 0,
               "moe layer: topk_idx, topk_weights and x_scale must be 4-byte aligned");
  }
  WS_REQUIRE(p->tile_rows == 0 || p->tile_rows == MOE_EXPERTS_BM || p->tile_rows == MOE_EXPERTS_BM_WIDE,
             "moe experts: tile rows %d (0, %d or %d)", p->tile_rows, MOE_EXPERTS_BM, MOE_EXPERTS_BM_WIDE);
  const int BM = p->tile_rows == MOE_EXPERTS_BM_WIDE ? MOE_EXPERTS_BM_WIDE : MOE_EXPERTS_BM;
  WS_REQUIRE(!p->pair || (BM == MOE_EXPERTS_BM && !p->layer && !p->drop),
             "moe experts: CTA pairs run the 64-row tile without the layer items");
  static const size_t smem_small = sizeof(mx_smem<MOE_EXPERTS_BM>) + 1024;
  static const size_t smem_wide = sizeof(mx_smem<MOE_EXPERTS_BM_WIDE>) + 1024;
  const void *kernel = p->pair ? (const void *)moe_experts_kernel<MOE_EXPERTS_BM, 1>
                       : BM == MOE_EXPERTS_BM ? (const void *)moe_experts_kernel<MOE_EXPERTS_BM, 0>
                                              : (const void *)moe_experts_kernel<MOE_EXPERTS_BM_WIDE, 0>;
  const int slot = p->pair ? WS_PLAN_SLOT_MOE_EXPERTS_PAIR
                   : BM == MOE_EXPERTS_BM ? WS_PLAN_SLOT_MOE_EXPERTS : WS_PLAN_SLOT_MOE_EXPERTS_WIDE;
  ws_plan *plan = NULL;
  ws_status s;
  if ((s = ws_plan_cached(slot, mx_make_plan, BM == MOE_EXPERTS_BM ? &smem_small : &smem_wide, &plan)) != WS_OK) return s;
  const uint64_t R = (uint64_t)p->max_rows;
  ws_tmap mx, mw1, mact, mw2, my;
  if ((s = ws_tmap_2d_swizzled(&mx, p->x, WS_DTYPE_U8, R, (uint64_t)H, (uint64_t)H, BM, MX_BK, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mw1, p->w1, WS_DTYPE_U8, (uint64_t)p->groups * 2 * I, (uint64_t)H, (uint64_t)H, 64, MX_BK,
                               WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mact, p->act, WS_DTYPE_U8, R, (uint64_t)I, (uint64_t)I, BM, MX_BK, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mw2, p->w2, WS_DTYPE_U8, (uint64_t)p->groups * H, (uint64_t)I, (uint64_t)I, 64, MX_BK,
                               WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&my, p->y, WS_DTYPE_BF16, R, (uint64_t)H, (uint64_t)H * 2, 64, 64, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  mx_args a;
  memset(&a, 0, sizeof a);
  if ((s = ws_tmap_2d(&a.map_xs, p->x_scale, WS_DTYPE_F32, (uint64_t)(H / 128), R, (uint64_t)p->x_scale_ld * 4, 1, BM)) != WS_OK ||
      (s = ws_tmap_2d(&a.map_as, p->act_scale, WS_DTYPE_F32, (uint64_t)(I / 128), R, (uint64_t)p->act_ld * 4, 1, BM)) != WS_OK)
    return s;
  /* pairs: the loader numbers 128-row blocks (the math reads neither bm) */
  const int sched_bm = p->pair ? 2 * BM : BM;
  a.l1 = moe_experts_shape(p->groups, p->max_rows, p->offsets, I, sched_bm, MOE_EXPERTS_L1_BN, H);
  a.l2.shape = moe_experts_shape(p->groups, p->max_rows, p->offsets, H, sched_bm, moe_experts_l2_bn(BM), I);
  a.pair = p->pair != 0;
  a.l2.d = (uint16_t *)p->y;
  a.l2.k = I;
  a.l2.rows = (long long)R;
  a.w1_scale = p->w1_scale;
  a.w2_scale = p->w2_scale;
  a.act = p->act;
  a.act_scale = p->act_scale;
  a.act_ld = (uint32_t)p->act_ld;
  a.ready = p->counters;
  a.seen = p->counters + mx_blocks(p->max_rows);
  a.next_item = p->counters + 2 * mx_blocks(p->max_rows);
  a.hidden = H;
  a.inter = I;
  a.bar = plan->layout.nbarriers + 1; /* the plan's first user barrier (mx_make_plan) */
  static int static_walk = -1; /* for measurements: WARPSPEC_MOE_SCHED=static or claimed (default), read once */
  if (static_walk < 0) {
    const char *sched = getenv("WARPSPEC_MOE_SCHED");
    static_walk = sched && !strcmp(sched, "static");
  }
  a.static_walk = static_walk && !p->pair;
  a.layer.drop = p->drop;
  int sms = 0; /* one CTA per SM (shared memory allows no more) */
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  if (p->sms > 0 && p->sms < sms) sms = p->sms;
  if (p->pair) { /* as many pairs as fit at once (a cluster's CTAs share a GPC) */
    int pairs = 0;
    if ((s = ws_plan_max_clusters(plan, kernel, 2, &pairs)) != WS_OK) return s;
    WS_REQUIRE(pairs > 0, "moe experts: no pair of CTAs fits on this device");
    const int want = sms / 2 > 0 ? sms / 2 : 1;
    sms = 2 * (want < pairs ? want : pairs);
  }
  if (p->layer) {
    const moe_layer_io *io = p->layer;
    const int B = mx_blocks(p->max_rows);
    mx_layer_args *ly = &a.layer;
    ly->on = 1;
    ly->tokens = io->tokens;
    ly->topk = io->topk;
    ly->experts = p->groups;
    ly->x_bf16 = io->x_scale == NULL;
    ly->scale_ld = p->x_scale_ld;
    /* about two items per CTA, at least a token each: at decode every token's copy and
     * sum run on their own CTA, all 8 warps on its columns */
    ly->tokens_per_item = io->tokens > 2 * sms ? (io->tokens + 2 * sms - 1) / (2 * sms) : 1;
    ly->token_items = (io->tokens + ly->tokens_per_item - 1) / ly->tokens_per_item;
    ly->nranks = 1;
    ly->expand_items = ly->reduce_items = ly->token_items;
    if (io->ep) { /* several ranks: at least one send and one gather item (their flags and
                   * acks); expand and reduce split what arrives, about as many rows as we send */
      ly->ep = *io->ep;
      ly->nranks = ly->ep.nranks;
      ly->send_items = ly->gather_items = ly->token_items > 0 ? ly->token_items : 1;
      const int share = ly->nranks * ly->send_items;
      ly->expand_items = ly->reduce_items = share < 2 * sms ? share : 2 * sms;
    }
    /* one GPU, few entries: every loader routes for itself (mx_self_route) */
    static int self_route = -1; /* WARPSPEC_MOE_SELF_ROUTE=0 turns it off (measurements), read once */
    if (self_route < 0) {
      const char *env = getenv("WARPSPEC_MOE_SELF_ROUTE");
      self_route = env && *env && atoi(env) == 0 ? 0 : WS_MOE_SELF_ROUTE_ENTRIES;
    }
    ly->self_route = ly->nranks == 1 && io->tokens >= 1 && (long long)io->tokens * io->topk <= self_route &&
                     p->groups < MX_SMEM_OFFSETS;
    ly->topk_idx = io->topk_idx;
    ly->topk_weights = io->topk_weights;
    ly->x = (const uint8_t *)io->x;
    ly->x_scale = io->x_scale;
    ly->out = (uint16_t *)io->out;
    ly->offsets = (int *)p->offsets; /* written by the route item */
    ly->entry_row = io->entry_row;
    ly->bad_id = io->bad_id;
    ly->xg = (uint8_t *)p->x;
    ly->xg_scale = (float *)p->x_scale;
    ly->routed = p->counters + 2 * B + 2;
    ly->expanded = ly->routed + 1;
    ly->l2_done = ly->routed + 2;
    ly->comb_seen = ly->routed + 3;
    ly->sent = ly->routed + 4;
    ly->reduced = ly->routed + 5;
    ly->gathered = ly->routed + 6;
  }
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&mx, &mw1, &mact, &mw2, &my, &a, &diag};
  const dim3 grid = {(unsigned)sms, 1, 1};
  if (p->pair) return ws_plan_launch_cluster_chained(plan, kernel, grid, 2, stream, args);
  return ws_plan_launch_chained(plan, kernel, grid, stream, args);
}
