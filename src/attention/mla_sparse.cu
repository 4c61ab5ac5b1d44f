/* mla_sparse.cu - DeepSeek-V3.2 sparse MLA prefill (BF16) on the library's roles and pipes.
 *
 * Every query token attends, with all its heads, to its own list of `topk` rows of one
 * latent kv head (576 columns: 512 latent, which are also V, then 64 rope). One CTA per
 * (query token, 64 heads); the token's kv rows stream in blocks of 64 through a pipe.
 *   S_GATHER (4 warps, 40 regs)      the Q tile by TMA once (q pipe), then per block of 64
 *                                    indices the 64 rows by cp.async, 16 bytes at a time,
 *                                    8 lanes per 128-byte line (BF16), each piece
 *                                    placed in the 128-byte swizzle wgmma reads (nine
 *                                    [64][64] boxes); a masked index (-1, out of range,
 *                                    past topk) reads nothing and zero-fills its row, and
 *                                    each row's validity goes into the stage as a byte
 *                                    (the math warps mask by it: looking the indices up
 *                                    themselves cost them half their time in decode). A
 *                                    stage is committed (fence.proxy.async, arrive) as
 *                                    soon as its copies landed: double buffering.
 *   S_MATH (4 warps x 2, 232 regs)   the two warpgroups split the work of a block evenly,
 *                                    as a seesaw: warpgroup w computes S for keys
 *                                    32w .. 32w + 31 of the block (K = 576), they swap
 *                                    row maxima through shared memory (named barrier), each
 *                                    turns its half into P (bf16, written swizzled into one
 *                                    64 x 64 tile), and after a second barrier both run
 *                                    O[:, 256w .. 256w + 255] += P V on the whole block (V
 *                                    = the block's first 512 columns, read MN-major). The
 *                                    running max is the same in both (same inputs), each
 *                                    keeps its half of the row sums; they are added at the
 *                                    end. O / l in BF16, lse = scale m + ln l.
 * Two things shorten a block's path (design_mla.md 5.9, 5.10): the running maximum moves
 * only when a block's exceeds it by more than 2^8, so most blocks skip O's rescale, and
 * Q's last 8 k steps of S come from registers (the banks feed only K there).
 * The math threads read the stage's valid flags with plain loads, so each releases the
 * stage itself (ws_pipe_release_at): a lane-0 release after __syncwarp orders the other
 * lanes' loads only through the warp barrier, which racecheck does not follow.
 * Shared memory: Q 72 KB, two kv stages of 72 KB, the P tile 8 KB, the exchange arrays and
 * the barriers: 225 KB of the 227 available.
 * MLA decode (mla_decode.cu) runs the same kernel over page-table rows (with fewer heads
 * than 64 and s_q > 1, a sequence's tokens share the 64-row tiles: MLA_KEYS_ROWS); with
 * the FP8 cache (kv_fp8) with FP8 = 1: the gather dequantises each row into the BF16 stage
 * the math warps read (mla_fp8_gather.cuh), so the math is unchanged and the BF16 values
 * are exact (power-of-two tile scales). Paged decode with s_q x heads = 16 or 32 runs
 * mla_fewheads.cu's kernel instead (keys on wgmma's M side: a quarter to half of the
 * tensor work).
 * Files: mla_stage.cuh (shared memory, key modes, roles), mla_fp8_gather.cuh (the FP8 rows),
 * mla_rows.cuh (a CTA's keys and rows, the gathers), mla_math.cuh (softmax pieces, the two
 * products, Q's register fragments); here the kernel (gather and the math loop) and the
 * call. */
#include "../core/internal.h"
#include "../core/knobs.h"
#include "../core/size_check.h"
#include "warpspec/attention.h"
#include "warpspec/check.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "attn_device.cuh"
#include "mla_fp8_gather.cuh"
#include "mla_internal.h"
#include "mla_math.cuh"
#include "mla_rows.cuh"
#include "mla_stage.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

template <int FP8, int KEYS, int F16 = 0>
WS_KERNEL(mla_sparse) mla_sparse_kernel(const __grid_constant__ ws_tmap map_q, const __grid_constant__ mla_args a,
                                        ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  mla_smem *sm = (mla_smem *)ws_smem_align1024(smem_raw);
  ws_ctx ctx = WS_SELF(mla_sparse, diag);
  /* the head groups of a token are neighbours in the grid: they gather the same kv rows,
   * and the second finds them in L2 (token-major, the second group of every token ran a
   * wave later and read the whole cache from DRAM again; docs/design_mla.md, 5.2) */
  const int pack = KEYS == MLA_KEYS_ROWS ? a.s_q : 1; /* tokens whose rows share tiles */
  /* tile `tile` of element `elem` (a token; ROWS: a sequence), whose pack x heads rows are
   * [token][head] as in q (that count is computed where used: held from here, it changed
   * the code of the PLAIN and SPLIT kernels) */
  const int tiles = MLA_ROW_TILES(pack, a.heads), elem = (int)blockIdx.x / tiles, tile = (int)blockIdx.x % tiles;
  /* the tile's last token: its keys hold every row's */
  const int t_last = KEYS == MLA_KEYS_ROWS ? min(pack * a.heads - 1, (tile + 1) * MLA_BH - 1) / a.heads : 0;
  const int tok = elem * pack + t_last;
  int kbeg, nkeys;
  mla_keys<KEYS>(&a, tok, &kbeg, &nkeys);
  const int nblk = (nkeys + MLA_BN - 1) / MLA_BN;

  /* q: released once per warp (never refilled); kv: by every math thread (the flags) */
  const uint32_t writers = WS_ROLE_THREADS(mla_sparse, S_GATHER), q_readers = 2 * WS_ROLE_WARPS(mla_sparse, S_MATH),
                 kv_readers = 2 * WS_ROLE_THREADS(mla_sparse, S_MATH);
  ws_pipe qp = ws_pipe_view(sm->q_full, sm->q_empty, sm->q_closed, 1, writers, q_readers, "mla q");
  ws_pipe kvp = ws_pipe_view(sm->kv_full, sm->kv_empty, sm->kv_closed, MLA_STAGES, writers, kv_readers, "mla kv rows");
  ws_pipe_set_proxies(&qp, WS_PROXY_ASYNC, WS_PROXY_ASYNC);   /* TMA in, wgmma out                 */
  ws_pipe_set_proxies(&kvp, WS_PROXY_GENERIC, WS_PROXY_ASYNC); /* cp.async in (fenced), wgmma out */
  if (threadIdx.x == 0) {
    ws_pipe_init(&qp);
    ws_pipe_init(&kvp);
  }
  ws_init_sync();
  const ws_cursor c0 = {0, 0};

  if (ctx.role == S_GATHER) {
    WS_ENTER_ROLE(mla_sparse, S_GATHER);
    if (ws_role_leader(&ctx)) ws_prefetch_tensormap(&map_q.map);
    ws_pipe_acquire_at(&qp, &ctx, c0);
#pragma unroll 1
    for (int c = 0; c < MLA_BOXES; c++)
      ws_pipe_load_tile_2d_at(&qp, &ctx, c0, sm->q[c], &map_q, c * 64, elem * (pack * a.heads) + tile * MLA_BH);
    ws_pipe_commit_at(&qp, &ctx, c0);
    /* Double buffering: block nb is copied while the math warps work on nb - 1, and
     * published as soon as it has landed, so it is ready when they finish (publishing
     * it only after the next acquire would make every block wait for the one after).
     * The rows of the next block are looked up (page table / indices: global loads)
     * while this block is copied, and each block's rows are published as valid flags in
     * the stage: the math warps mask by them and never touch the indices themselves. */
    const int t = ws_role_thread(&ctx);
    ws_cursor k = c0;
    if (FP8) { /* lookup and conversion: row t % 64, half t / 64; copies: rows 4 (t >> 3) + j */
      int d_next, e;
      mla_fp8_rows_start<KEYS>(&a, tok, kbeg, nkeys, t, &d_next, &e);
      for (int nb = 0; nb < nblk; nb++, k = ws_cursor_next(k, MLA_STAGES)) {
        const uint32_t s = ws_pipe_acquire_at(&kvp, &ctx, k);
        mla_gather_fp8_block<KEYS, F16>(&ctx, &a, tok, kbeg, nkeys, nb, ws_smem_addr(sm->kv[s][0]), sm->valid[s],
                                        sm->rows[s], t, &d_next, &e, NULL, 1, sm->gmax, &sm->eblk[s]);
        ws_pipe_commit_at(&kvp, &ctx, k); /* fence.proxy.async (the generic stores), then arrive */
      }
      return;
    }
    /* BF16: 8 lanes per 128-byte line, 4 rows per warp instruction (mla_gather_bf16) */
    const int row0 = t >> 3;
    int r_next[4], e_next[4];
    mla_rows_start<KEYS>(&a, tok, kbeg, nkeys, row0, r_next, e_next);
    for (int nb = 0; nb < nblk; nb++, k = ws_cursor_next(k, MLA_STAGES)) {
      const uint32_t s = ws_pipe_acquire_at(&kvp, &ctx, k);
      int r[4];
      mla_rows_step<KEYS>(&a, tok, kbeg, nkeys, row0, nb, r, r_next, e_next);
      mla_gather_bf16<0, MLA_BOXES, 1>(ws_smem_addr(sm->kv[s][0]), sm->valid[s], a.kv, r, t);
      ws_cp_async_commit_group();
      WS_CP_ASYNC_WAIT_GROUP(0);          /* this thread's copies have landed      */
      ws_pipe_commit_at(&kvp, &ctx, k);   /* fence.proxy.async, then arrive        */
    }
    return;
  }

  WS_ENTER_ROLE(mla_sparse, S_MATH);
  const int w = ctx.replica, lane = ctx.lane, quad = lane & 3;
  const int r0 = ctx.warp * 16 + (lane >> 2); /* this thread's rows (heads) r0 and r0 + 8 */
  const float sl2 = a.scale_log2;
  float o[MLA_DV / 4]; /* 64 heads x 256 columns per warpgroup: 128 per thread */
#pragma unroll
  for (int i = 0; i < MLA_DV / 4; i++) o[i] = 0.0f;
  float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};

  ws_pipe_wait_at(&qp, &ctx, c0);
  /* F16 (the FP8 cache's f16 form, WARPSPEC_MLA_FP8_F16): Q to f16 with a power of two e
   * per row, both warpgroups; the stage's values are the true ones times 2^E (E per block,
   * mla_fp8_gather.cuh), so S is the true one times 2^(E - e): scaled back per row and
   * block before the softmax. O is kept in units of 2^-E_run and P written times
   * 2^(E_run - E); E_run follows a block whose E is more than 4 away (at most 100 finer),
   * O rescaled through alpha, so P x 2^(E_run - E) stays in [2^-4, 2^4] x P. */
  int eh[2] = {0, 0}, e_run = 0, e_set = 0, e_q = 0; /* e_q: the power of two on Q's rope fragments */
  if (F16) {
    mla_q_to_f16(sm, w * 128 + ws_role_thread(&ctx));
    ws_fence_proxy_async_shared_cta(); /* generic stores -> both warpgroups' wgmma reads */
    ws_named_sync((uint32_t)a.xchg_bar, 2 * WS_ROLE_THREADS(mla_sparse, S_MATH));
    eh[0] = (int)sm->qexp[r0];
    eh[1] = (int)sm->qexp[r0 + 8];
  }
  /* ROWS: each row's last key, from this warpgroup's first key of block 0 (padding rows
   * past the last token: no limit; in a tile of one token it is the CTA's own limit) */
  int lim[2] = {0, 0};
  if (KEYS == MLA_KEYS_ROWS) {
    const int n = a.seqlens[elem];
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const int t = (tile * MLA_BH + r0 + 8 * x) / a.heads;
      lim[x] = t < pack ? n - a.s_q + t - kbeg - 32 * w : 0x3fffffff;
    }
  }
  uint32_t qa[MLA_RSQ_STEPS][4]; /* Q's last k steps as wgmma A fragments */
  mla_q_fragments(sm, r0, quad, qa);
  ws_cursor k = c0;
  for (int nb = 0; nb < nblk; nb++, k = ws_cursor_next(k, MLA_STAGES)) {
    ws_pipe_wait_at(&kvp, &ctx, k);
    const uint16_t *stage = sm->kv[k.stage][0];
    float s[16];
    if (F16) { /* Q's rope fragments times 2^E: the stage's rope is the cache's own, its latent columns x 2^E */
      const int E = sm->eblk[k.stage];
      if (E != e_q) { /* the same in every thread; the previous block's S wgmmas are complete */
        mla_scale_rope_fragments(qa, ldexpf(1.0f, E - e_q));
        e_q = E;
      }
    }
    mla_s_issue<F16>(s, ws_wgmma_desc_k128b(sm->q[0]), ws_wgmma_desc_k128b(stage + 32 * w * 64), qa);
    /* the gather's flags for this thread's 8 keys, read while the wgmmas run */
    uint32_t valid[4];
    mla_read_valid<4>(valid, sm->valid[k.stage] + 32 * w, quad);
    float g = 1.0f, gshift = 1.0f; /* F16: P's factor 2^(E_run - E), O's rescale if E_run moves */
    if (F16) {
      const int E = sm->eblk[k.stage];
      gshift = mla_units_follow(E, &e_run, &e_set);
      g = ldexpf(1.0f, e_run - E);
    }
    WS_WGMMA_WAIT_GROUP(0);
    if (F16) { /* S x 2^e x 2^-E: the true scores (two factors: each stays a finite fp32) */
      const float f0 = ldexpf(1.0f, eh[0]), f1 = ldexpf(1.0f, eh[1]), fe = ldexpf(1.0f, -sm->eblk[k.stage]);
#pragma unroll
      for (int i = 0; i < 16; i++) s[i] = s[i] * ((i & 2) ? f1 : f0) * fe;
    }
    /* the block's row max (both warpgroups), P for this half into the shared 64 x 64 tile */
    float alpha[2];
    mla_s_to_p<KEYS, F16>(sm, s, valid, w, r0, quad, (uint32_t)a.xchg_bar, sl2, m_run, l_run, alpha,
                          (uint8_t *)sm->p, lim[0] - MLA_BN * nb, lim[1] - MLA_BN * nb, g);
    if (F16) {
      alpha[0] *= gshift; /* O only: l_run was rescaled by alpha alone */
      alpha[1] *= gshift;
    }
    ws_named_sync((uint32_t)a.xchg_bar, 2 * WS_ROLE_THREADS(mla_sparse, S_MATH));
    /* only a warp with a moved maximum rescales (alpha is 1 exactly elsewhere) */
    if (__any_sync(0xffffffffu, alpha[0] != 1.0f || alpha[1] != 1.0f)) attn_rescale<MLA_DV / 2>(o, alpha);
    mla_pv_issue<F16>(o, ws_wgmma_desc_k128b(sm->p), ws_wgmma_desc_mn128b(stage + 4 * w * MLA_BN * 64, MLA_BN * 128));
    WS_WGMMA_WAIT_GROUP(0);
    ws_pipe_release_at(&kvp, &ctx, k);
  }
  ws_pipe_release_warp_at(&qp, &ctx, c0);

  /* the row sums of both halves, then O / l and lse */
  float l[2];
#pragma unroll
  for (int x = 0; x < 2; x++) {
    l[x] = l_run[x];
    l[x] += __shfl_xor_sync(0xffffffffu, l[x], 1);
    l[x] += __shfl_xor_sync(0xffffffffu, l[x], 2);
  }
  if (quad == 0) { sm->lsum[w][r0] = l[0]; sm->lsum[w][r0 + 8] = l[1]; }
  ws_named_sync((uint32_t)a.xchg_bar, 2 * WS_ROLE_THREADS(mla_sparse, S_MATH));
#pragma unroll
  for (int x = 0; x < 2; x++) {
    const float lt = l[x] + sm->lsum[1 - w][r0 + 8 * x];
    const float inv = attn_row_inv(lt) * (F16 ? ldexpf(1.0f, -e_run) : 1.0f); /* 0: no key; NaN stays NaN; F16: O's units */
    const int er = tile * MLA_BH + r0 + 8 * x;
    if (er >= pack * a.heads) continue; /* a padding row past the element's last token */
    const size_t row = (size_t)elem * (pack * a.heads) + er;
    const float lse = attn_row_lse(lt, m_run[x], sl2);
    if (a.o_part) { /* a split of the keys: normalised partial O and its lse, merged later */
      float2 *out = (float2 *)(a.o_part + ((size_t)blockIdx.z * a.rows + row) * MLA_DV + 256 * w);
#pragma unroll
      for (int j = 0; j < MLA_WG_CHUNKS; j++) out[4 * j + quad] = make_float2(o[4 * j + 2 * x] * inv, o[4 * j + 2 * x + 1] * inv);
      if (w == 0 && quad == 0) a.lse_part[(size_t)blockIdx.z * a.rows + row] = lse;
      continue;
    }
    uint32_t *out = (uint32_t *)(a.o + row * MLA_DV + 256 * w);
#pragma unroll
    for (int j = 0; j < MLA_WG_CHUNKS; j++) out[4 * j + quad] = attn_pack_bf16(o[4 * j + 2 * x] * inv, o[4 * j + 2 * x + 1] * inv);
    if (a.lse && w == 0 && quad == 0) a.lse[row] = lse;
  }
}

/* ---- the call ---------------------------------------------------------------------- */

static ws_status mla_make_plan(const void *ctx, ws_plan *plan) {
  ws_status s = ws_plan_init(plan, (const char *)ctx, mla_sparse_roles, mla_sparse_NROLES, 0);
  if (s == WS_OK) s = ws_plan_set_smem(plan, sizeof(mla_smem) + 1024);
  int id = 0;
  if (s == WS_OK) s = ws_plan_add_barrier(plan, "mla exchange", &id);
  return s;
}

/* Checks shared by the calls, then the tensor map of q ([tokens x heads][576]), the plan
 * and the launch over row tiles x splits; a->kv8 set: the FP8 kernel. The key mode: index
 * lists (a->indices) split over CTAs (splits > 1, sparse decode): SPLIT; paged decode with
 * s_q > 1 and fewer heads than MLA_BH (a sequence's tokens share tiles): ROWS; else PLAIN. */
ws_status mla_launch(const void *q, int tokens, mla_args *a, int splits, float softmax_scale, cudaStream_t stream) {
  WS_REQUIRE((uint64_t)tokens * (uint64_t)a->heads < (1ull << 31), "mla: %d query rows x %d heads, at most 2^31 - 1",
             tokens, a->heads);
  ws_plan *plan = NULL;
  ws_status s;
  const int fp8 = a->kv8 != NULL;
  const int keys = a->indices != NULL ? (splits > 1 ? MLA_KEYS_SPLIT : MLA_KEYS_PLAIN)
                   : a->s_q > 1 && a->heads < MLA_BH ? MLA_KEYS_ROWS
                                                      : MLA_KEYS_PLAIN;
  /* the FP8 cache's form: 1 the BF16 dequantisation, 2 f16 (WARPSPEC_MLA_FP8_F16, the default) */
  const int form = fp8 ? 1 + ws_knobs_get()->mla_fp8_f16 : 0;
  static const int slots[3][3] = {{WS_PLAN_SLOT_MLA_SPARSE, WS_PLAN_SLOT_MLA_FP8, WS_PLAN_SLOT_MLA_FP8_F16},
                                  {WS_PLAN_SLOT_MLA_SPLIT, WS_PLAN_SLOT_MLA_SPLIT_FP8, WS_PLAN_SLOT_MLA_SPLIT_FP8_F16},
                                  {WS_PLAN_SLOT_MLA_ROWS, WS_PLAN_SLOT_MLA_ROWS_FP8, WS_PLAN_SLOT_MLA_ROWS_FP8_F16}};
  static const char *const names[3][3] = {{"mla_sparse", "mla_decode_fp8", "mla_decode_fp8_f16"},
                                          {"mla_sparse_split", "mla_sparse_split_fp8", "mla_sparse_split_fp8_f16"},
                                          {"mla_decode_rows", "mla_decode_rows_fp8", "mla_decode_rows_fp8_f16"}};
  static const void *const funcs[3][3] = {
      {(const void *)mla_sparse_kernel<0, MLA_KEYS_PLAIN>, (const void *)mla_sparse_kernel<1, MLA_KEYS_PLAIN>,
       (const void *)mla_sparse_kernel<1, MLA_KEYS_PLAIN, 1>},
      {(const void *)mla_sparse_kernel<0, MLA_KEYS_SPLIT>, (const void *)mla_sparse_kernel<1, MLA_KEYS_SPLIT>,
       (const void *)mla_sparse_kernel<1, MLA_KEYS_SPLIT, 1>},
      {(const void *)mla_sparse_kernel<0, MLA_KEYS_ROWS>, (const void *)mla_sparse_kernel<1, MLA_KEYS_ROWS>,
       (const void *)mla_sparse_kernel<1, MLA_KEYS_ROWS, 1>}};
  ws_tmap mq;
  if ((s = ws_tmap_2d_swizzled(&mq, q, WS_DTYPE_BF16, (uint64_t)tokens * a->heads, MLA_DQK, MLA_DQK * 2, MLA_BH, 64,
                               WS_SWIZZLE_128B)) != WS_OK)
    return s;
  const float scale = softmax_scale > 0.0f ? softmax_scale : 1.0f / sqrtf((float)MLA_DQK);
  a->scale_log2 = scale * ATTN_LOG2E;
  a->rows = tokens * a->heads;
  /* paged decode with 16 or 32 query rows per sequence (heads x s_q): keys on wgmma's M side */
  if (!a->indices && (a->heads * a->s_q == 16 || a->heads * a->s_q == 32) && (keys == MLA_KEYS_ROWS || a->s_q == 1))
    return mla_fewheads_launch(q, tokens, a, splits, stream);
  if ((s = ws_plan_cached(slots[keys][form], mla_make_plan, names[keys][form], &plan)) != WS_OK) return s;
  a->xchg_bar = plan->layout.nbarriers + 1; /* the plan's first user barrier (mla_make_plan) */
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&mq, a, &diag};
  const int pack = keys == MLA_KEYS_ROWS ? a->s_q : 1; /* the kernel's: tokens whose rows share tiles */
  const dim3 grid = {(unsigned)(tokens / pack) * (unsigned)MLA_ROW_TILES(pack, a->heads), 1, (unsigned)splits};
  return ws_plan_launch(plan, funcs[keys][form], grid, stream, args);
}

ws_status mla_shape_check(const char *what, int dim_qk, int dim_v, int heads) {
  if (dim_qk != MLA_DQK || dim_v != MLA_DV)
    return ws_fail(WS_ERR_UNSUPPORTED, "%s: dims %d/%d; the kernel is built for %d/%d (DeepSeek-V3 / V3.2)", what, dim_qk,
                   dim_v, MLA_DQK, MLA_DV);
  WS_REQUIRE(heads >= 1 && (heads % MLA_BH == 0 || MLA_BH % heads == 0) && heads / MLA_BH <= 65535,
             "%s: heads %d, a multiple of %d or a divisor of it (1, 2, 4, 8, 16, 32)", what, heads, MLA_BH);
  return WS_OK;
}

/* The problem's argument check (no GPU): shapes, dims, scale, pointers. */
extern "C" ws_status ws_mla_sparse_check(const ws_mla_sparse_problem *p) {
  WS_REQUIRE(p != NULL, "ws_mla_sparse: problem is NULL");
  WS_REQUIRE(p->s_q >= 1 && p->heads >= 1 && p->s_kv >= 1 && p->topk >= 1,
             "ws_mla_sparse: s_q %d, heads %d, s_kv %d, topk %d: all >= 1", p->s_q, p->heads, p->s_kv, p->topk);
  WS_REQUIRE(p->topk <= WS_EXTENT_MAX, "ws_mla_sparse: topk %d, at most 2^30", p->topk);
  WS_REQUIRE(p->dim_qk >= 64 && p->dim_qk % 64 == 0 && p->dim_v >= 64 && p->dim_v % 64 == 0 && p->dim_v <= p->dim_qk,
             "ws_mla_sparse: dims %d/%d (qk/v): multiples of 64, dim_v <= dim_qk (DeepSeek-V3.2: 576/512)", p->dim_qk,
             p->dim_v);
  WS_REQUIRE(isfinite(p->softmax_scale) && p->softmax_scale >= 0.0f, "ws_mla_sparse: softmax_scale %g",
             (double)p->softmax_scale);
  WS_REQUIRE(p->q && p->kv && p->indices && p->o, "ws_mla_sparse: q, kv, indices or o is NULL");
  WS_REQUIRE(attn_aligned16(p->q) && attn_aligned16(p->kv) && attn_aligned16(p->o), "ws_mla_sparse: q, kv and o must be 16-byte aligned");
  return WS_OK;
}

extern "C" ws_status ws_mla_sparse_forward(const ws_mla_sparse_problem *p, cudaStream_t stream) {
  ws_status s = ws_mla_sparse_check(p);
  if (s != WS_OK) return s;
  if ((s = mla_shape_check("ws_mla_sparse_forward", p->dim_qk, p->dim_v, p->heads)) != WS_OK) return s;
  WS_REQUIRE(((uintptr_t)p->indices & 3u) == 0 && ((uintptr_t)p->lse & 3u) == 0,
             "ws_mla_sparse_forward: indices and lse must be 4-byte aligned");
  mla_args a;
  memset(&a, 0, sizeof a);
  a.heads = p->heads;
  a.s_kv = p->s_kv;
  a.topk = p->topk;
  a.kv = (const uint16_t *)p->kv;
  a.indices = p->indices;
  a.o = (uint16_t *)p->o;
  a.lse = p->lse;
  return mla_launch(p->q, p->s_q, &a, 1, p->softmax_scale, stream);
}
