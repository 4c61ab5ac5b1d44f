/* layer_kernel.cu - the fused MoE kernel: a rank's experts in one persistent kernel
 * (the WS_MOE_FUSED_EXPERTS path), and with its work items (layer_items.cuh,
 * layer_items_ep.cuh) the whole layer (WS_MOE_FUSED_LAYER). Files of src/moe/layer/:
 * layer_kernel.h its arguments and launcher, layer_types.cuh / layer_loader.cuh /
 * layer_math.cuh its parts, layer_sched.cuh its item numbering, layer.c the one-call
 * layer on the host (every path), layer_auto.h WS_MOE_AUTO's rule.
 *
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
 * the last one (at few entries: when it has issued that one's loads; mx_schedule), and
 * the loader tells the math warpgroups which one through the item's first stage. Claimed
 * in order, the tiles that read the same weights (an expert's row blocks, numbered next
 * to each other) run at the same time on whichever CTAs are free, and read them once from DRAM
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
 * CTA has claimed and loads without waiting on anything; no residency assumption for the
 * experts alone (the whole layer's items wait across CTAs, and with
 * WARPSPEC_MOE_ROUTE_AT_ONCE item 0 runs on block 0 unclaimed: every later item waits on
 * block 0 being resident, which a grid of one CTA per SM gives; the waits are bounded).
 *
 * The math is the FP8 GEMM's (fp8_mma.cuh, the same promotion order and rounding) and
 * the SwiGLU is swiglu.cuh's: the layer's output equals the unfused path's bit for bit. */
#include "../../core/internal.h"
#include "../../core/knobs.h"
#include "../../core/size_check.h"
#include "warpspec/device/fp8.cuh"
#include "../../gemm/fp8_mma.cuh"
#include "../../gemm/gemm_epilogue.cuh"
#include "../../gemm/gemm_loader.cuh"
#include "layer_kernel.h"
#include "layer_sched.cuh"
#include "layer_items_ep.cuh"
#include "layer_items.cuh"
#include "../swiglu.cuh"

#include <cuda_bf16.h>

#include "warpspec/moe.h"
#include "layer_types.cuh"  /* shared memory, pipes, roles, arguments */
#include "layer_loader.cuh" /* the scheduler and loader warps         */
#include "layer_math.cuh"   /* the math warpgroups                     */

template <int BM, int PAIR>
WS_KERNEL(moe_experts) moe_experts_kernel(const __grid_constant__ ws_tmap map_x, const __grid_constant__ ws_tmap map_w1,
                                          const __grid_constant__ ws_tmap map_act,
                                          const __grid_constant__ ws_tmap map_w2,
                                          const __grid_constant__ ws_tmap map_y, const __grid_constant__ mx_args args,
                                          ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  mx_smem<BM> *sm = (mx_smem<BM> *)gemm_smem_base(smem_raw);
  ws_ctx ctx = WS_SELF(moe_experts, diag);
  /* both math warpgroups read every stage, released once per warp; the loader's leader
   * commits each stage once with its bytes (mx_load); in pairs rank 0's `empty` counts
   * both CTAs' math warps, its `full` the loader warp's arrivals, and rank 1's `full` the
   * one arrival of rank 0's loader (mx_load_pair) */
  const uint32_t rank = PAIR ? ws_cluster_ctarank() : 0u;
  ws_pipe pipe = WS_PIPE_VIEW(&sm->pipe, "moe experts", PAIR && rank == 0 ? WS_WARP_SIZE : 1,
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
 * and with several ranks sent, reduced, gathered; then one per L2 column tile of the
 * 64-row tile (slice_combine) */
extern "C" size_t moe_experts_counter_words(int max_rows, int hidden) {
  return 2 * (size_t)mx_blocks(max_rows) + 9 + (size_t)moe_experts_l2_items(MOE_EXPERTS_BM, hidden);
}

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
  /* W1 as [E][gate, up][I][H]: a box of 64 rows x {gate, up} lands one warpgroup's 128 B
   * rows (64-row tile) or one loop's (128-row tile) in one copy instead of two (not in pairs,
   * whose loader multicasts the 64-row boxes) */
  const int w1_gate_up = ws_knobs_get()->moe_w1_gate_up && !p->pair;
  const uint64_t w1_dims[4] = {(uint64_t)H, (uint64_t)I, 2, (uint64_t)p->groups};
  const uint64_t w1_strides[3] = {(uint64_t)H, (uint64_t)I * H, 2ull * I * H};
  const uint32_t w1_box[4] = {MX_BK, 64, 2, 1};
  if ((s = ws_tmap_2d_swizzled(&mx, p->x, WS_DTYPE_U8, R, (uint64_t)H, (uint64_t)H, BM, MX_BK, WS_SWIZZLE_128B)) != WS_OK ||
      (s = w1_gate_up ? ws_tmap_nd_swizzled(&mw1, p->w1, WS_DTYPE_U8, 4, w1_dims, w1_strides, w1_box, WS_SWIZZLE_128B)
                      : ws_tmap_2d_swizzled(&mw1, p->w1, WS_DTYPE_U8, (uint64_t)p->groups * 2 * I, (uint64_t)H,
                                            (uint64_t)H, 64, MX_BK, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mact, p->act, WS_DTYPE_U8, R, (uint64_t)I, (uint64_t)I, BM, MX_BK, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mw2, p->w2, WS_DTYPE_U8, (uint64_t)p->groups * H, (uint64_t)I, (uint64_t)I, MX_B_ROWS(BM), MX_BK,
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
  a.w1_gate_up = w1_gate_up;
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
  /* for measurements: WARPSPEC_MOE_SCHED=static gives each CTA a strided walk of the
   * items instead of claims from a counter (the default) */
  a.static_walk = ws_knobs_get()->moe_static_walk && !p->pair;
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
    /* one GPU, a few tokens: each L2 column tile's last epilogue sums it for every token
     * (mx_count_stored), no combine items */
    ly->slice_combine = ly->nranks == 1 && BM == MOE_EXPERTS_BM && io->tokens >= 1 &&
                        io->tokens <= MX_SLICE_COMBINE_TOKENS && moe_experts_l2_items(BM, H) <= 64 &&
                        ws_knobs_get()->moe_slice_combine; /* a 64-bit mask of column tiles */
    if (ly->slice_combine) ly->reduce_items = 0;
    /* one GPU, few entries: every loader routes for itself (mx_self_route) */
    /* WARPSPEC_MOE_SELF_ROUTE=0 turns it off (measurements) */
    const int self_route = ws_knobs_get()->moe_self_route ? WS_MOE_SELF_ROUTE_ENTRIES : 0;
    ly->self_route = ly->nranks == 1 && io->tokens >= 1 && (long long)io->tokens * io->topk <= self_route &&
                     p->groups < MX_SMEM_OFFSETS;
    ly->few_decode = ly->self_route && (long long)io->tokens * io->topk <= WS_MOE_FEW_DECODE_ENTRIES &&
                     ws_knobs_get()->moe_few_decode;
    ly->route_expands = ly->few_decode && io->tokens <= WS_MOE_ROUTE_EXPANDS_TOKENS;
    ly->route_at_once = !a.pair && ws_knobs_get()->moe_route_at_once;
    if (ly->route_expands) ly->expand_items = 0; /* the route item expands (mx_route_few) */
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
    ly->slice_done = ly->routed + 7;
  }
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&mx, &mw1, &mact, &mw2, &my, &a, &diag};
  const dim3 grid = {(unsigned)sms, 1, 1};
  if (p->pair) return ws_plan_launch_cluster_chained(plan, kernel, grid, 2, stream, args);
  return ws_plan_launch_chained(plan, kernel, grid, stream, args);
}
