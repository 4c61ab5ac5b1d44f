/* nsa_fwd.cu - NSA (native sparse attention) selected-block attention, forward, BF16, on
 * the library's roles and pipes: the flash kernel's structure over a list of key blocks.
 *
 * Query i of kv group g attends to the keys of its own top-n blocks of 64 (block_indices
 * [i][g][0 .. topn)), causally (keys <= i). The group's heads_q / heads_kv query heads share
 * the selection, so a work item is all the heads of group g for 128 / group consecutive
 * tokens: 128 query rows, row r = (token r / group, head g x group + r % group). Every warp's
 * 16 rows belong to one token (group is a multiple of 16). The grid is persistent: a CTA
 * takes items c, c + grid, ...
 *   N_LOADER (1 warp, 40 regs)      builds the item's block list, then TMA-loads the Q rows
 *                                   (one box per token and 64 columns) and, per tile of
 *                                   128 keys, the K and V rows of two listed blocks.
 *                                   The list is the union of the tokens' selections,
 *                                   with each token's count of each block: a block the
 *                                   tokens share is loaded once; a token that did not
 *                                   select it masks it; a block listed twice by a token
 *                                   counts twice (its scores get + ln 2, as the reference's
 *                                   duplicate rows do).
 *   N_MATH (4 warps x 2, 232 regs)  per warpgroup 64 rows (4 tokens of 16 heads): S = Q K^T,
 *                                   the mask from the counts and the causal limit, the
 *                                   online softmax (attn_device.cuh), O += P V with P from
 *                                   registers, as the flash kernel. They take the
 *                                   item's tile count and the tiles' blocks and counts
 *                                   from shared memory (written with Q and K), release Q
 *                                   after their last S: the loader prepares the next item
 *                                   (list, Q) while they finish this one.
 * Neighbouring tokens select mostly the same blocks in NSA (the selection comes from the
 * compressed attention, and the first and local blocks are always in it), so the union
 * is close to one token's top-n. The worst case, disjoint random selections, computes
 * up to 128 / group times the useful work: the bench measures both. */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/attention.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "attn_device.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <string.h>

#define NSA_BM 128        /* query rows per CTA: two math warpgroups of 64           */
#define NSA_BN 128        /* keys per K / V tile: two blocks                          */
#define NSA_BLOCK 64      /* keys per NSA block (the kernel's only block size)        */
#define NSA_STAGES 2
#define NSA_MAX_TOPN 64   /* the list holds up to 8 tokens x 64 blocks                */
#define NSA_MAX_LIST (8 * NSA_MAX_TOPN)

template <int D> struct __align__(1024) nsa_tile { uint16_t x[128 * D]; };

/* What the math warps need of a K tile, written by the loader with it: the two blocks
 * and each token's count of them (0: not selected, masked). */
typedef struct {
  int blk[2];
  uint8_t cnt[2][8];
} nsa_tile_info;

/* The loader's own state: counts[b], one byte per token of the item (two words), and
 * one claim bit per block (the first lane to count a block appends it to `list`). */
template <int DQK, int DV, int MAXB> struct nsa_smem {
  WS_PIPE_STORAGE(q_pipe, nsa_tile<DQK>, 1);
  WS_PIPE_STORAGE(k_pipe, nsa_tile<DQK>, NSA_STAGES);
  WS_PIPE_STORAGE(v_pipe, nsa_tile<DV>, NSA_STAGES);
  q_pipe q;
  k_pipe k;
  v_pipe v;
  nsa_tile_info info[NSA_STAGES]; /* with the K stage of the same index                     */
  int ntiles;                     /* with the Q tile: tiles of the item (-1: no more items) */
  int item_g, item_t0;            /* with the Q tile: its kv group and first token          */
  uint32_t counts[MAXB][2];
  uint32_t claimed[MAXB / 32];
  int list[NSA_MAX_LIST];
  int nlist;
};

typedef struct {
  int tokens, heads_q, heads_kv, group, topn, nblocks, items;
  float scale_log2;
  const int *sel; /* [tokens][heads_kv][topn] */
  uint16_t *o;
  float *lse;
} nsa_args;

#define NSA_ROLES(ROLE) ROLE(N_LOADER, 1, 40, 1) ROLE(N_MATH, 4, 232, 2)
WS_DECLARE_ROLES(nsa_fwd, NSA_ROLES);

/* Item `it` (kv group g, first token t0): items are numbered group-major within a token
 * range, so that the CTAs running together share the tokens' K / V rows in L2. */
static __device__ __forceinline__ void nsa_item(const nsa_args *a, int it, int *g, int *t0) {
  *g = it % a->heads_kv;
  *t0 = it / a->heads_kv * (NSA_BM / a->group);
}

/* The union of the item's tokens' selections (one warp): counts, claim bits and the list
 * of distinct blocks, in no particular order (the softmax does not care). Blocks past
 * the end, negative, or after a token (its keys all in the future) are skipped. */
template <int DQK, int DV, int MAXB>
static __device__ __forceinline__ void nsa_build_list(nsa_smem<DQK, DV, MAXB> *sm, const nsa_args *a, int g, int t0,
                                                      int toks, int lane) {
  const int last = min(a->tokens, t0 + toks) - 1;
  const int nb = min(a->nblocks, last / NSA_BLOCK + 1); /* blocks any token here can see */
  for (int i = lane; i < nb; i += 32) { sm->counts[i][0] = 0u; sm->counts[i][1] = 0u; }
  for (int i = lane; i < (nb + 31) / 32; i += 32) sm->claimed[i] = 0u;
  if (lane == 0) sm->nlist = 0;
  __syncwarp();
  for (int j = 0; j < toks; j++) {
    const int t = t0 + j;
    if (t >= a->tokens) break;
    const int *sel = a->sel + ((size_t)t * a->heads_kv + g) * a->topn;
    for (int e = lane; e < a->topn; e += 32) {
      const int b = __ldg(sel + e);
      if (b < 0 || b >= nb || b * NSA_BLOCK > t) continue;
      atomicAdd(&sm->counts[b][j >> 2], 1u << (8 * (j & 3)));
      const uint32_t bit = 1u << (b & 31);
      if ((atomicOr(&sm->claimed[b >> 5], bit) & bit) == 0) sm->list[atomicAdd(&sm->nlist, 1)] = b;
    }
  }
  __syncwarp();
}

/* The rows of blocks b0 and b1 (64 each) of one kv head (columns col0 .. col0 + D - 1)
 * into the two halves of a [128][D] tile, one 64-column box at a time. */
template <int D>
static __device__ __forceinline__ void nsa_load_blocks(const ws_pipe *p, const ws_ctx *ctx, ws_cursor k, uint16_t *tile,
                                                       const ws_tmap *map, int col0, int b0, int b1) {
#pragma unroll 1
  for (int c = 0; c < D / 64; c++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      ws_pipe_load_tile_2d_at(p, ctx, k, tile + c * NSA_BN * 64 + h * NSA_BLOCK * 64, map, col0 + c * 64,
                              (h ? b1 : b0) * NSA_BLOCK);
}

/* Persistent: CTA c takes items c, c + grid, ... The loader builds the next item's list
 * while the math warps finish the current one, and its Q tile as soon as they have
 * issued their last S (they release Q then); the K / V tiles of consecutive items flow
 * through the same pipes. */
template <int DQK, int DV, int MAXB>
WS_KERNEL(nsa_fwd) nsa_fwd_kernel(const __grid_constant__ ws_tmap map_q, const __grid_constant__ ws_tmap map_k,
                                  const __grid_constant__ ws_tmap map_v, const __grid_constant__ nsa_args a, ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  typedef nsa_smem<DQK, DV, MAXB> smem_t;
  smem_t *sm = (smem_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  ws_ctx ctx = WS_SELF(nsa_fwd, diag);
  const int toks = NSA_BM / a.group;

  const uint32_t writers = WS_ROLE_THREADS(nsa_fwd, N_LOADER), readers = 2 * WS_ROLE_WARPS(nsa_fwd, N_MATH);
  ws_pipe qp = WS_PIPE_VIEW(&sm->q, "nsa q", writers, readers);
  ws_pipe kp = WS_PIPE_VIEW(&sm->k, "nsa k", writers, readers);
  ws_pipe vp = WS_PIPE_VIEW(&sm->v, "nsa v", writers, readers);
  attn_pipes_setup(&qp, &kp, &vp); /* TMA in, wgmma out */
  attn_pipes_init(&qp, &kp, &vp);

  if (ctx.role == N_LOADER) {
    WS_ENTER_ROLE(nsa_fwd, N_LOADER);
    if (ctx.spare) return;
    ctx.role = N_LOADER;
    ctx.warp = 0; /* one warp: the leader is lane 0 (a constant less to keep) */
    attn_prefetch_maps(&ctx, &map_q, &map_k, &map_v);
    /* only two counters cross the loops (items done, tiles done): 40 registers */
    int kt = 0;
    for (int ni = 0;; ni++) {
      /* sm through an opaque move each item: otherwise ptxas hoists every shared address
       * of the loop out of it and spills them (40 registers) */
      smem_t *lsm = sm;
      asm volatile("" : "+l"(lsm));
      ws_pipe qp = WS_PIPE_VIEW(&lsm->q, "nsa q", writers, readers), kp = WS_PIPE_VIEW(&lsm->k, "nsa k", writers, readers),
              vp = WS_PIPE_VIEW(&lsm->v, "nsa v", writers, readers);
      attn_pipes_setup(&qp, &kp, &vp);
      const int it = (int)blockIdx.x + ni * (int)gridDim.x;
      const ws_cursor qc = ws_cursor_at((uint32_t)ni, 1);
      int g = 0, t0 = 0;
      const int more = it < a.items;
      if (more) {
        nsa_item(&a, it, &g, &t0);
        nsa_build_list(lsm, &a, g, t0, toks, ctx.lane);
      }
      const int n = more ? lsm->nlist : 0, tiles = (n + 1) / 2;
      /* the Q tile and the item's tile count (-1: the end), published by the q pipe */
      ws_pipe_acquire_at(&qp, &ctx, qc);
      if (ws_role_leader(&ctx)) {
        lsm->ntiles = more ? tiles : -1;
        lsm->item_g = g;
        lsm->item_t0 = t0;
      }
      if (more)
#pragma unroll 1
        for (int c = 0; c < DQK / 64; c++)
          for (int j = 0; j < toks; j++) /* the group's heads of token t0 + j: rows past the end read as zeros */
            ws_pipe_load_tile_2d_at(&qp, &ctx, qc, lsm->q.slot[0].x + c * NSA_BM * 64 + j * a.group * 64, &map_q, c * 64,
                                    (t0 + j) * a.heads_q + g * a.group);
      ws_pipe_commit_at(&qp, &ctx, qc);
      if (!more) break;
      for (int i = 0; i < tiles; i++, kt++) {
        const ws_cursor k = ws_cursor_at((uint32_t)kt, NSA_STAGES);
        /* a lone last block is loaded twice (its second copy masked): no stale rows in the tile */
        const int b0 = lsm->list[2 * i], b1 = 2 * i + 1 < n ? lsm->list[2 * i + 1] : b0;
        uint32_t s = ws_pipe_acquire_at(&kp, &ctx, k);
        if (ctx.lane < 16) { /* the tile's blocks and each token's count of them */
          const int h = ctx.lane >> 3, j = ctx.lane & 7;
          const int valid = h == 0 || 2 * i + 1 < n;
          lsm->info[s].cnt[h][j] = (uint8_t)(valid && j < toks ? (lsm->counts[h ? b1 : b0][j >> 2] >> (8 * (j & 3))) & 0xFFu : 0u);
          if (j == 0) lsm->info[s].blk[h] = h ? b1 : b0;
        }
        __syncwarp();
        nsa_load_blocks<DQK>(&kp, &ctx, k, lsm->k.slot[s].x, &map_k, g * DQK, b0, b1);
        ws_pipe_commit_at(&kp, &ctx, k);
        s = ws_pipe_acquire_at(&vp, &ctx, k);
        nsa_load_blocks<DV>(&vp, &ctx, k, lsm->v.slot[s].x, &map_v, g * DV, b0, b1);
        ws_pipe_commit_at(&vp, &ctx, k);
      }
    }
    return;
  }

  WS_ENTER_ROLE(nsa_fwd, N_MATH);
  ctx.role = N_MATH; /* a constant from here: the timeout reports no longer keep it in a register */
  const int lane = ctx.lane, quad = lane & 3;
  const int wg = __shfl_sync(0xffffffffu, ctx.replica, 0);
  const int tok = (wg * 64 + ctx.warp * 16) / a.group; /* this warp's 16 rows: one token's heads */
  const float sl2 = a.scale_log2;
  const uint64_t dq0 = ws_wgmma_desc_k128b(sm->q.slot[0].x + wg * 64 * 64);
  const uint64_t dk0 = ws_wgmma_desc_k128b(sm->k.slot[0].x);
  const uint64_t dv0 = ws_wgmma_desc_mn128b(sm->v.slot[0].x, NSA_BN * 128);
  const uint32_t k_stage_bytes = (uint32_t)sizeof(sm->k.slot[0]), v_stage_bytes = (uint32_t)sizeof(sm->v.slot[0]);
  ws_cursor qc = {0, 0}, k = {0, 0};
  for (;; qc = ws_cursor_next(qc, 1)) {
    ws_pipe_wait_at(&qp, &ctx, qc);
    /* Shared values the loader rewrites after the warp's release are read by lane 0 and
     * broadcast: the release (one arrive per warp after __syncwarp) then orders a single
     * reader, which compute-sanitizer's racecheck can follow. */
    int tiles = 0, g = 0, t = 0;
    if (lane == 0) { tiles = sm->ntiles; g = sm->item_g; t = sm->item_t0 + tok; }
    tiles = __shfl_sync(0xffffffffu, tiles, 0);
    if (tiles < 0) break; /* the loader's end mark; the Q stage is left as it is */
    g = __shfl_sync(0xffffffffu, g, 0);
    t = __shfl_sync(0xffffffffu, t, 0);
    float o[DV / 2];
#pragma unroll
    for (int i = 0; i < DV / 2; i++) o[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    for (int i = 0; i < tiles; i++, k = ws_cursor_next(k, NSA_STAGES)) {
      float s[NSA_BN / 2];
      ws_pipe_wait_at(&kp, &ctx, k);
      const uint64_t dk = ws_wgmma_desc_advance(dk0, k.stage * k_stage_bytes);
      attn_qk_wgmma<DQK, NSA_BM, NSA_BN>(s, dq0, dk);
      WS_WGMMA_WAIT_GROUP(0);
      /* mask: blocks this token did not select, keys after it; a block selected c times
       * gets log2(c) / sl2 added to its scores, i.e. its probabilities times c. Per block
       * half: keys first .. first + lim are valid (lim < 0: none). */
      int info[2] = {0, 0}; /* per half: this token's count | first key << 8 (lane 0 reads, as above) */
      if (lane == 0)
#pragma unroll
        for (int h = 0; h < 2; h++) info[h] = sm->info[k.stage].cnt[h][tok] | sm->info[k.stage].blk[h] * NSA_BLOCK << 8;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int v = __shfl_sync(0xffffffffu, info[h], 0), cnt = v & 0xFF;
        const int lim = cnt > 0 ? t - (v >> 8) : -1;
        if (lim < NSA_BLOCK - 1 || cnt > 1) {
          const float bonus = cnt > 1 ? log2f((float)cnt) / sl2 : 0.0f;
#pragma unroll
          for (int j = 8 * h; j < 8 * h + 8; j++)
#pragma unroll
            for (int e = 0; e < 2; e++) {
              const int ok = 8 * (j - 8 * h) + 2 * quad + e <= lim;
              s[4 * j + e] = ok ? s[4 * j + e] + bonus : -INFINITY;
              s[4 * j + 2 + e] = ok ? s[4 * j + 2 + e] + bonus : -INFINITY;
            }
        }
      }
      ws_pipe_release_warp_at(&kp, &ctx, k); /* the tile info read, K no longer needed */
      if (i == tiles - 1) ws_pipe_release_warp_at(&qp, &ctx, qc); /* its last S: the next Q may come */

      uint32_t pa[NSA_BN / 16][4];
      attn_softmax_rescale_p<NSA_BN, DV>(s, m_run, l_run, sl2, o, pa);

      ws_pipe_wait_at(&vp, &ctx, k);
      const uint64_t dv = ws_wgmma_desc_advance(dv0, k.stage * v_stage_bytes);
      attn_pv_wgmma<DV, NSA_BN>(o, pa, dv);
      WS_WGMMA_WAIT_GROUP(0);
      ws_pipe_release_warp_at(&vp, &ctx, k);
    }
    if (tiles == 0) ws_pipe_release_warp_at(&qp, &ctx, qc); /* an item with no key: Q unread */

#pragma unroll
    for (int x = 0; x < 2; x++) {
      const float l = attn_quad_sum(l_run[x]);
      if (t >= a.tokens) continue;
      const int r = wg * 64 + ctx.warp * 16 + (lane >> 2) + 8 * x; /* the row in the CTA's 128 */
      const size_t row = (size_t)t * a.heads_q + (size_t)g * a.group + r % a.group;
      attn_store_row<DV>(o, x, l, m_run[x], sl2, quad, a.o + row * DV, a.lse ? a.lse + row : NULL);
    }
  }
}

/* ---- the call ---------------------------------------------------------------------- */
typedef struct {
  int slot, dqk, dv, max_blocks;
  const char *name;
  const void *func;
  size_t smem;
} nsa_variant;

static ws_status nsa_make_plan(const void *ctx, ws_plan *plan) {
  const nsa_variant *v = (const nsa_variant *)ctx;
  ws_status s = ws_plan_init(plan, v->name, nsa_fwd_roles, nsa_fwd_NROLES, 0);
  if (s == WS_OK) s = ws_plan_set_smem(plan, v->smem);
  return s;
}

/* MAXB: the blocks the counts can hold, i.e. the longest sequence / 64 (shared memory). */
#define NSA_VARIANT(SLOT, DQK, DV, MAXB, NAME) \
  {SLOT, DQK, DV, MAXB, NAME, (const void *)nsa_fwd_kernel<DQK, DV, MAXB>, sizeof(nsa_smem<DQK, DV, MAXB>) + 1024}

static const nsa_variant *nsa_variant_of(int dqk, int dv) {
  static const nsa_variant v[] = {
      NSA_VARIANT(WS_PLAN_SLOT_NSA_128, 128, 128, 2048, "nsa_fwd_128"),
      NSA_VARIANT(WS_PLAN_SLOT_NSA_192, 192, 128, 1024, "nsa_fwd_192_128"),
  };
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i].dqk == dqk && v[i].dv == dv) return &v[i];
  return NULL;
}

/* The problem's argument check (no GPU): shapes, dims, scale, pointers. */
extern "C" ws_status ws_nsa_check(const ws_nsa_problem *p) {
  WS_REQUIRE(p != NULL, "ws_nsa: problem is NULL");
  WS_REQUIRE(p->tokens >= 1 && p->topn >= 1 && p->block >= 1, "ws_nsa: tokens %d, topn %d, block %d: all >= 1",
             p->tokens, p->topn, p->block);
  WS_REQUIRE(p->tokens <= WS_EXTENT_MAX, "ws_nsa: tokens %d, at most 2^30", p->tokens);
  const int64_t listed = ws_mul_sat(p->topn, p->block);
  WS_REQUIRE(listed <= WS_EXTENT_MAX, "ws_nsa: topn %d x block %d = %lld keys listed per query, at most 2^30", p->topn,
             p->block, (long long)listed);
  WS_REQUIRE(p->heads_q >= 1 && p->heads_kv >= 1 && p->heads_q % p->heads_kv == 0,
             "ws_nsa: heads_q %d must be a positive multiple of heads_kv %d", p->heads_q, p->heads_kv);
  WS_REQUIRE((p->dim_qk == 128 && p->dim_v == 128) || (p->dim_qk == 192 && p->dim_v == 128) ||
                 (p->dim_qk == 64 && p->dim_v == 64),
             "ws_nsa: head dims %d/%d (qk/v): 64/64, 128/128 or 192/128", p->dim_qk, p->dim_v);
  WS_REQUIRE(isfinite(p->softmax_scale) && p->softmax_scale >= 0.0f, "ws_nsa: softmax_scale %g", (double)p->softmax_scale);
  WS_REQUIRE(p->q && p->k && p->v && p->block_indices && p->o, "ws_nsa: q, k, v, block_indices or o is NULL");
  WS_REQUIRE(attn_aligned16(p->q) && attn_aligned16(p->k) && attn_aligned16(p->v) && attn_aligned16(p->o),
             "ws_nsa: q, k, v and o must be 16-byte aligned");
  return WS_OK;
}

extern "C" ws_status ws_nsa_forward(const ws_nsa_problem *p, cudaStream_t stream) {
  ws_status s = ws_nsa_check(p);
  if (s != WS_OK) return s;
  const int group = p->heads_q / p->heads_kv;
  if (p->block != NSA_BLOCK)
    return ws_fail(WS_ERR_UNSUPPORTED, "ws_nsa_forward: block %d; the kernel is built for blocks of %d keys", p->block,
                   NSA_BLOCK);
  if (group % 16 != 0 || NSA_BM % group != 0)
    return ws_fail(WS_ERR_UNSUPPORTED, "ws_nsa_forward: %d query heads per kv head; the kernel takes 16, 32, 64 or 128 "
                   "(a warp's 16 rows are one token's heads)", group);
  WS_REQUIRE(p->topn <= NSA_MAX_TOPN, "ws_nsa_forward: topn %d, at most %d", p->topn, NSA_MAX_TOPN);
  const nsa_variant *v = nsa_variant_of(p->dim_qk, p->dim_v);
  if (!v) return ws_fail(WS_ERR_UNSUPPORTED, "ws_nsa_forward: head dims %d/%d; the kernel takes NSA's 128/128 and 192/128",
                         p->dim_qk, p->dim_v);
  const int nblocks = (p->tokens + NSA_BLOCK - 1) / NSA_BLOCK;
  if (nblocks > v->max_blocks)
    return ws_fail(WS_ERR_UNSUPPORTED, "ws_nsa_forward: %d tokens (%d blocks); dims %d/%d take at most %d tokens",
                   p->tokens, nblocks, p->dim_qk, p->dim_v, v->max_blocks * NSA_BLOCK);
  WS_REQUIRE((uint64_t)p->tokens * p->heads_q < (1ull << 31), "ws_nsa_forward: %d tokens x %d heads, at most 2^31 - 1",
             p->tokens, p->heads_q);
  WS_REQUIRE(((uintptr_t)p->lse & 3u) == 0 && ((uintptr_t)p->block_indices & 3u) == 0,
             "ws_nsa_forward: lse and block_indices must be 4-byte aligned");
  const long long items = (long long)(p->tokens + NSA_BM / group - 1) / (NSA_BM / group) * p->heads_kv;
  WS_REQUIRE(items < (1ll << 31), "ws_nsa_forward: %lld work items (kv heads x token groups), at most 2^31 - 1", items);
  /* the loader's TMA column of kv head g is g x dim_qk, an int (v has no more columns) */
  const uint64_t ck = (uint64_t)p->heads_kv * p->dim_qk, cv = (uint64_t)p->heads_kv * p->dim_v;
  WS_REQUIRE(ck <= WS_INDEX_MAX, "ws_nsa_forward: heads_kv %d x dim_qk %d = %llu columns of k, at most 2^31 - 1",
             p->heads_kv, p->dim_qk, (unsigned long long)ck);
  int sms = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  ws_plan *plan = NULL;
  if ((s = ws_plan_cached(v->slot, nsa_make_plan, v, &plan)) != WS_OK) return s;
  ws_tmap mq, mk, mv;
  if ((s = ws_tmap_2d_swizzled(&mq, p->q, WS_DTYPE_BF16, (uint64_t)p->tokens * p->heads_q, p->dim_qk,
                               (uint64_t)p->dim_qk * 2, group, 64, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mk, p->k, WS_DTYPE_BF16, p->tokens, ck, ck * 2, NSA_BLOCK, 64, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mv, p->v, WS_DTYPE_BF16, p->tokens, cv, cv * 2, NSA_BLOCK, 64, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  nsa_args a;
  memset(&a, 0, sizeof a);
  a.tokens = p->tokens;
  a.heads_q = p->heads_q;
  a.heads_kv = p->heads_kv;
  a.group = group;
  a.topn = p->topn;
  a.nblocks = nblocks;
  a.items = (int)items;
  const float scale = p->softmax_scale > 0.0f ? p->softmax_scale : 1.0f / sqrtf((float)p->dim_qk);
  a.scale_log2 = scale * ATTN_LOG2E;
  a.sel = p->block_indices;
  a.o = (uint16_t *)p->o;
  a.lse = p->lse;
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&mq, &mk, &mv, &a, &diag};
  const dim3 grid = {(unsigned)(items < sms ? items : sms), 1, 1}; /* persistent */
  return ws_plan_launch(plan, v->func, grid, stream, args);
}
