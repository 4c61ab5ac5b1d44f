/* flash_fwd.cu - flash attention forward (BF16) on the library's roles and pipes.
 *
 * Persistent: one CTA per SM takes tiles (128 query rows of one head of one sequence) in
 * rounds, snaking over the order fa_work_at gives: with a causal mask the longest tiles first
 * within groups of heads whose K / V share the L2 (fa_head_group); without one, the query
 * blocks of a head together (their K / V shared in L2). The loader
 * runs ahead across tiles: the next tile's Q (two stages at d 64 and 128) and first K / V
 * blocks load while the math finishes the current one and writes its O.
 *   A_LOADER (1 warp, 24 regs)       TMA-loads each tile's Q once (q pipe), then
 *                                    per block of 128 keys the K tile (k pipe) and the V
 *                                    tile (v pipe), each as 64-column boxes with the
 *                                    128-byte swizzle; bytes from the tensor maps.
 *   A_MATH (4 warps x 2, 240 regs)   replica r owns query rows 64r .. 64r + 63. Per key
 *                                    block: S = Q K^T (wgmma, both operands in shared
 *                                    memory, K-major), masking (keys past the sequence,
 *                                    the causal diagonal), the online softmax in fp32
 *                                    registers (row max over the quad of lanes that share
 *                                    a row, exp2 with the scale folded in, the running
 *                                    sum, O rescaled), then O += P V with P straight from
 *                                    registers (the S accumulator's layout is wgmma's A
 *                                    fragment layout) and V read MN-major (no transpose).
 *                                    At the end O / l in BF16 and lse = scale m + ln l.
 * Both math replicas read every K and V tile: the pipes count 2 x 4 warp releases.
 * Keys are read as 128-row boxes: rows past the sequence (the next sequence's, or the
 * tensor's zero fill) are masked to -inf before the softmax, never summed.
 * Four schedules of the math warpgroups: plain (above); ping-pong, FA3's alternation of the
 * two warpgroups' matrix products (two named barriers from the plan); overlap, FA3's
 * intra-warpgroup pipelining (S of the next block issued before this block's PV, its
 * softmax under the PV); overlap-pingpong, the overlap with the two warpgroups'
 * exponentials in turns (as cuDNN's SM90 kernel alternates them), so that the SFU serves
 * one warpgroup at a time. The default depends on the head dim and the key blocks per
 * tile (fa_default_schedule). Opt-in at d 64: the tall tile, three math warpgroups of 64 rows
 * at 160 registers (WARPSPEC_ATTN_TILE_ROWS=192, FA_TALL_ROLES). The roles are split 24 / 240
 * registers as FA3's (the loader only issues TMA copies). O leaves through the tile's Q
 * slot by TMA stores (fa_store_o). */
#include "../core/internal.h"
#include "../core/knobs.h"
#include "../core/size_check.h"
#include "warpspec/attention.h"
#include "warpspec/check.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "attn_device.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define FA_BM 128 /* query rows per CTA: two math warpgroups of 64     */
#define FA_BN 128 /* keys per K / V tile                                 */
#define FA_STAGES 2

/* A tile of R rows (128: K / V, and Q of the 2-replica kernel; 192: Q of the tall one) of D
 * bf16 columns: D / 64 boxes of [R][64], 128B-swizzled. */
template <int D, int R = 128> struct __align__(1024) fa_tile { uint16_t x[R * D]; };

/* Q stages: two where they fit (d 64, 128: the next tile's Q loads under this one's math),
 * one at 192 (208 KB with one) */
#define FA_Q_STAGES(DQK) ((DQK) <= 128 ? 2 : 1)

template <int DQK, int DV, int BM = FA_BM> struct fa_smem {
  typedef fa_tile<DQK, BM> q_tile;
  WS_PIPE_STORAGE(q_pipe, q_tile, FA_Q_STAGES(DQK));
  WS_PIPE_STORAGE(k_pipe, fa_tile<DQK>, FA_STAGES);
  WS_PIPE_STORAGE(v_pipe, fa_tile<DV>, FA_STAGES);
  q_pipe q;
  k_pipe k;
  v_pipe v;
};

typedef struct {
  int seqlen_q, seqlen_k, heads_q, group, m_blocks, batch, tiles, mask, total_q;
  int head_group;     /* causal order: (sequence, head) pairs per group (fa_work_at) */
  int turn_bar;       /* ping-pong: named barriers turn_bar (replica 0's turn), + 1 (1's) */
  int o_tma;          /* O through the Q slot and a TMA store (fa_store_o); 0: plain stores */
  float scale_log2;   /* softmax_scale x log2(e): exp(x scale) = exp2(x scale_log2) */
  const int *cu_q, *cu_k;
  uint16_t *o;
  float *lse;
} fa_args;

#define FA_ROLES(ROLE) ROLE(A_LOADER, 1, 24, 1) ROLE(A_MATH, 4, 240, 2)
WS_DECLARE_ROLES(flash_fwd, FA_ROLES);
WS_DECLARE_ROLE_SET(flash_fwd);
/* The tall tile (WARPSPEC_ATTN_TILE_ROWS=192, d 64 only): three math warpgroups, 192 query
 * rows per tile (FA3's shape at d 64), the plain schedule at 160 registers (4 x 128 threads:
 * 128 x 24 + 384 x 160 fit the 64K registers). The roles in the same order as FA_ROLES. */
#define FA_TALL_ROLES(ROLE) ROLE(T_LOADER, 1, 24, 1) ROLE(T_MATH, 4, 160, 3)
WS_DECLARE_ROLES(flash_fwd_tall, FA_TALL_ROLES);
WS_DECLARE_ROLE_SET(flash_fwd_tall);
static_assert((int)T_LOADER == (int)A_LOADER && (int)T_MATH == (int)A_MATH,
              "the flash role tables list their roles alike");
/* The role table of the kernel with REPL math replicas. */
template <int REPL> struct fa_roles { typedef flash_fwd_set set; };
template <> struct fa_roles<3> { typedef flash_fwd_tall_set set; };

/* The Q slot of the tile before, given back to the loader once the TMA unit has read the
 * O rows staged in it (lane 0 issued the stores; its wait covers them). Called early in
 * the next tile (the plain loops: after its first S; the overlapped ones, whose registers
 * are tight there, at its start), so that the wait finds the reads done or nearly, and the
 * slot is free long before the loader needs it for the tile after next. */
static __device__ __forceinline__ void fa_release_q(const ws_pipe *qp, const ws_ctx *ctx, uint32_t stage, int has) {
  if (!has) return;
  if (ctx->lane == 0) WS_CP_ASYNC_BULK_WAIT_GROUP_READ(0);
  const ws_cursor pending = {stage, 0}; /* a release needs the stage only */
  ws_pipe_release_warp_at(qp, ctx, pending);
}

/* The overlapped schedule (WARPSPEC_ATTN_SCHEDULE=overlap, FA3's intra-warpgroup
 * pipelining): S of block nb + 1 is issued before O += P V of block nb, and its softmax
 * runs while that PV is in flight; O is rescaled once the PV has retired. The state it
 * carries is kept small (ptxas spills at 240 registers otherwise): the masks as three
 * precomputed limits, the descriptors and the stage sizes as constants. */
typedef struct {
  int lim0, lim1; /* a key column c of block kbase is masked in row x when kbase + c > lim_x + 0 (c = 8j + e, */
                  /* lim_x already less this lane's 2 quad)                                           */
  int tile_lim;   /* no column of a block ending at or before this needs the mask                     */
} fa_masks;

static __device__ __forceinline__ void fa_mask_ov(float *s, int kbase, const fa_masks *m) {
  if (kbase + FA_BN - 1 > m->tile_lim) {
#pragma unroll
    for (int j = 0; j < FA_BN / 8; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        if (kbase + 8 * j + e > m->lim0) s[4 * j + e] = -INFINITY;
        if (kbase + 8 * j + e > m->lim1) s[4 * j + 2 + e] = -INFINITY;
      }
  }
}

/* The plain loops' masks: on a block of KEYS keys from kbase that crosses the sequence's
 * end or the causal diagonal of the tile's first row (tile_row0), the keys past the
 * sequence and past each of this thread's two rows' causal limits (rows qi0, qi0 + 8) to
 * -inf. */
template <int KEYS>
static __device__ __forceinline__ void fa_mask_block(float *s, int kbase, int lk, int causal, int qi0, int tile_row0,
                                                     int diag_off, int quad) {
  if (kbase + KEYS > lk || (causal && kbase + KEYS - 1 > tile_row0 + diag_off)) {
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const int limit = causal ? min(lk - 1, qi0 + 8 * x + diag_off) : lk - 1;
#pragma unroll
      for (int j = 0; j < KEYS / 8; j++)
#pragma unroll
        for (int e = 0; e < 2; e++)
          if (kbase + 8 * j + 2 * quad + e > limit) s[4 * j + 2 * x + e] = -INFINITY;
    }
  }
}

/* One step of the overlapped schedule (attn_device.cuh): S of block nb + 1 under the PV
 * of block nb. */
template <int DQK, int DV, int PP>
static __device__ __forceinline__ void fa_overlap_step(const ws_pipe *kp, const ws_pipe *vp, const ws_ctx *ctx,
                                                       uint32_t kt, int nb, uint64_t dq0, uint64_t dk0, uint64_t dv0,
                                                       const fa_masks *mk, float sl2, float *o, float *m_run,
                                                       float *l_run, uint32_t (*pc)[4], uint32_t (*pn)[4],
                                                       const attn_turns *turns, int pass) {
  const ws_cursor kc = ws_cursor_at(kt + (uint32_t)nb, FA_STAGES), kn = ws_cursor_at(kt + (uint32_t)nb + 1, FA_STAGES);
  float s[FA_BN / 2];
  attn_ov_issue<DQK, DV, FA_BN>(kp, vp, ctx, kc, kn, dq0, dk0, dv0, s, o, pc);
  ws_pipe_release_warp_at(kp, ctx, kn);
  fa_mask_ov(s, (nb + 1) * FA_BN, mk);
  attn_ov_finish<DV, FA_BN, PP>(vp, ctx, kc, s, m_run, l_run, sl2, o, pn, turns, pass);
}

/* PP = 1: each block's exponentials in turns between the warpgroups (replica 1 has handed
 * replica 0 its first turn before; its own last hand-over, after the tile's last block, is
 * skipped). */
template <int DQK, int DV, int PP>
static __device__ __forceinline__ void fa_overlap_blocks(const ws_pipe *kp, const ws_pipe *vp, const ws_ctx *ctx,
                                                         uint32_t kt, int nblocks, uint64_t dq0, uint64_t dk0, uint64_t dv0,
                                                         const fa_masks *mk, float sl2, float *o, float *m_run,
                                                         float *l_run, const attn_turns *turns) {
  if (nblocks == 0) return;
  uint32_t p0[FA_BN / 16][4], p1[FA_BN / 16][4];
  const int last = ctx->replica == 1 ? nblocks - 1 : -1; /* the block whose hand-over replica 1 skips */
  {
    float s[FA_BN / 2], alpha[2];
    const ws_cursor k0 = ws_cursor_at(kt, FA_STAGES);
    ws_pipe_wait_at(kp, ctx, k0);
    attn_qk_wgmma<DQK, FA_BM, FA_BN>(s, dq0, ws_wgmma_desc_advance(dk0, k0.stage * (uint32_t)sizeof(fa_tile<DQK>)));
    WS_WGMMA_WAIT_GROUP(0);
    ws_pipe_release_warp_at(kp, ctx, k0);
    fa_mask_ov(s, 0, mk);
    attn_softmax_block<FA_BN, PP>(s, m_run, l_run, alpha, sl2, turns, last != 0); /* O is still 0: no rescale */
    attn_p_fragments<FA_BN>(s, p0);
  }
  int nb = 0;
  for (; nb + 2 < nblocks; nb += 2) { /* two steps: P alternates between p0 and p1 (no copies under a PV) */
    fa_overlap_step<DQK, DV, PP>(kp, vp, ctx, kt, nb, dq0, dk0, dv0, mk, sl2, o, m_run, l_run, p0, p1, turns, last != nb + 1);
    fa_overlap_step<DQK, DV, PP>(kp, vp, ctx, kt, nb + 1, dq0, dk0, dv0, mk, sl2, o, m_run, l_run, p1, p0, turns,
                                 last != nb + 2);
  }
  if (nb + 1 < nblocks) { /* the last PV on p1 or on p0: two straight paths, no register copy */
    fa_overlap_step<DQK, DV, PP>(kp, vp, ctx, kt, nb, dq0, dk0, dv0, mk, sl2, o, m_run, l_run, p0, p1, turns, last != nb + 1);
    attn_ov_last<DV, FA_BN>(vp, ctx, ws_cursor_at(kt + (uint32_t)nb + 1, FA_STAGES), dv0, o, p1);
  } else {
    attn_ov_last<DV, FA_BN>(vp, ctx, ws_cursor_at(kt + (uint32_t)nb, FA_STAGES), dv0, o, p0);
  }
}

/* One tile of the persistent grid: 128 query rows of one head of one sequence. */
typedef struct {
  int h, mb, q0, lq, k0, lk, diag_off, nblocks;
} fa_work;

/* The tile CTA c takes in round r: a snake over the tile order (c in even rounds, grid - 1
 * - c in odd ones). With the causal order below (longest first) a plain round-robin gives
 * CTA 0 the longest tile of every round and the last CTA the shortest, and the gap adds up
 * over the rounds (measured: causal d 128 10-13% slower than one CTA per tile, whose CTAs
 * the hardware hands out greedily); the snake pairs a round's longest with the next
 * round's shortest. Loader and math walk the same sequence. */
static __device__ __forceinline__ int fa_tile_of(int r, int c, int grid) {
  return r * grid + ((r & 1) ? grid - 1 - c : c);
}

/* Tile t, in the order the rounds take them (fa_tile_of). Causal: the (sequence, head)
 * pairs in groups of head_group (whose K / V fit the L2: WS_ATTN_L2_SHARE), one group
 * after the other; in a group the query blocks from the last, heads fastest, so the
 * longest key ranges go first and the grid ends on short ones. No mask: the query blocks
 * of one (sequence, head) next to each other, so the CTAs in flight read the K / V of a
 * few heads at a time (L2). 0 for a block past the end of a shorter sequence
 * (variable-length batches). */
template <int BM>
static __device__ __forceinline__ int fa_work_at(const fa_args *a, int t, fa_work *ti) {
  int b, r;
  if (a->mask != WS_ATTN_NO_MASK) {
    const int hb = a->heads_q * a->batch, per_group = a->head_group * a->m_blocks;
    const int first = t / per_group * a->head_group; /* the group's first pair */
    const int pairs = min(a->head_group, hb - first); /* the last group may be smaller */
    const int w = t - first * a->m_blocks;            /* the tile's place in its group */
    ti->mb = a->m_blocks - 1 - w / pairs;
    r = first + w % pairs;
    b = r / a->heads_q;
    ti->h = r % a->heads_q;
  } else {
    ti->mb = t % a->m_blocks;
    r = t / a->m_blocks;
    ti->h = r % a->heads_q;
    b = r / a->heads_q;
  }
  if (a->cu_q) {
    ti->q0 = a->cu_q[b]; ti->lq = a->cu_q[b + 1] - ti->q0;
    ti->k0 = a->cu_k[b]; ti->lk = a->cu_k[b + 1] - ti->k0;
  } else {
    ti->q0 = b * a->seqlen_q; ti->lq = a->seqlen_q;
    ti->k0 = b * a->seqlen_k; ti->lk = a->seqlen_k;
  }
  if (ti->mb * BM >= ti->lq) return 0;
  /* keys the tile's rows see: all of the sequence, or up to the causal limit of its last row */
  ti->diag_off = a->mask == WS_ATTN_CAUSAL_BOTTOM_RIGHT ? ti->lk - ti->lq : 0;
  const int last_row = min(ti->lq, (ti->mb + 1) * BM) - 1;
  const int kend = a->mask == WS_ATTN_NO_MASK ? ti->lk : max(0, min(ti->lk, last_row + ti->diag_off + 1));
  ti->nblocks = (kend + FA_BN - 1) / FA_BN;
  return 1;
}

/* The end of a tile for one warp: its 16 rows of O / l. Where all 16 lie in the sequence
 * (and o_tma), they go as BF16 into the warp's own 16 rows of the tile's Q slot (Q is read
 * by no wgmma any more: every one of this warpgroup's has retired), laid out as the Q boxes
 * are (64-column boxes of 128-byte rows, the 128-byte swizzle: 16-byte chunk c of row r at
 * c ^ (r % 8), so the 8 rows of one store hit 32 banks), then one TMA store per box writes
 * them with the O map (box 64 x 16). The plain form it replaces (4-byte stores, half of
 * each 32-byte sector, 32 per thread at d 128, held in the LSU queue ahead of the next
 * shuffle) took 16-21% of the math warps' samples at S 512-1024 (ncu, H200, session 29).
 * The slot is released to the loader only once the TMA unit has read it (fa_release_q);
 * other rows (the last, partial rows of a sequence) are stored as before. lse per row. */
template <int DV, int BM>
static __device__ __forceinline__ void fa_store_o(const fa_args *a, const ws_tmap *map_o, const fa_work *ti,
                                                 const float *o, const float *m_run, const float *l, float sl2,
                                                 int lane, int wrow, uint8_t *stage) {
  const int quad = lane & 3, r = lane >> 2;
  float inv[2];
#pragma unroll
  for (int x = 0; x < 2; x++) inv[x] = attn_row_inv(l[x]);
  const int tma = a->o_tma && wrow + 16 <= ti->lq;
  if (tma) {
#pragma unroll
    for (int x = 0; x < 2; x++)
#pragma unroll
      for (int j = 0; j < DV / 8; j++) {
        const uint32_t at = (uint32_t)((j / 8) * BM * 128 + (r + 8 * x) * 128 + (((j & 7) ^ r) << 4) + 4 * quad);
        const uint32_t w = attn_pack_bf16(o[4 * j + 2 * x] * inv[x], o[4 * j + 2 * x + 1] * inv[x]);
        ws_st_shared_u32(ws_smem_addr(stage + at), w);
      }
    ws_fence_proxy_async_shared_cta(); /* each writer: the TMA unit reads through the async proxy */
    __syncwarp();
    if (lane == 0) {
#pragma unroll
      for (int c = 0; c < DV / 64; c++)
        ws_cp_async_bulk_tensor_2d_shared_to_global(&map_o->map, ti->h * DV + c * 64, ti->q0 + wrow,
                                                    stage + c * BM * 128);
      ws_cp_async_bulk_commit_group();
    }
  }
#pragma unroll
  for (int x = 0; x < 2; x++) {
    const int qi = wrow + r + 8 * x;
    if (qi >= ti->lq) continue;
    float *lse = a->lse ? a->lse + (size_t)ti->h * a->total_q + ti->q0 + qi : NULL;
    if (!tma) {
      attn_store_row<DV>(o, x, l[x], m_run[x], sl2, quad, a->o + ((size_t)(ti->q0 + qi) * a->heads_q + ti->h) * DV, lse);
    } else if (lse && quad == 0) {
      *lse = attn_row_lse(l[x], m_run[x], sl2);
    }
  }
}

template <int DQK, int DV, int SCHED, int REPL, int OWN>
WS_KERNEL_T(fa_roles<REPL>::set) flash_fwd_kernel(const __grid_constant__ ws_tmap map_q, const __grid_constant__ ws_tmap map_k,
                                      const __grid_constant__ ws_tmap map_v, const __grid_constant__ ws_tmap map_o,
                                      const __grid_constant__ fa_args a, ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  typedef typename fa_roles<REPL>::set R;
  constexpr int BM = 64 * REPL; /* query rows per tile */
  typedef fa_smem<DQK, DV, BM> smem_t;
  smem_t *sm = (smem_t *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  ws_ctx ctx = WS_SELF_T(R, diag);
  const uint32_t writers = WS_ROLE_THREADS_T(R, A_LOADER), readers = REPL * WS_ROLE_WARPS_T(R, A_MATH);
  ws_pipe qp = WS_PIPE_VIEW(&sm->q, "attention q", writers, readers);
  ws_pipe kp = WS_PIPE_VIEW(&sm->k, "attention k", writers, readers);
  ws_pipe vp = WS_PIPE_VIEW(&sm->v, "attention v", writers, readers);
  attn_pipes_setup(&qp, &kp, &vp); /* TMA in, wgmma out */
  attn_pipes_init(&qp, &kp, &vp);
  const int step = (int)gridDim.x;

  if (ctx.role == A_LOADER) {
    WS_ENTER_ROLE_T(R, A_LOADER);
    if (ctx.spare) return;
    attn_prefetch_maps(&ctx, &map_q, &map_k, &map_v);
    uint32_t qt = 0, kt = 0; /* tiles and key blocks loaded so far */
    for (int r = 0; r * step < a.tiles; r++) {
      const int t = fa_tile_of(r, (int)blockIdx.x, step);
      fa_work ti;
      if (t >= a.tiles || !fa_work_at<BM>(&a, t, &ti)) continue;
      const ws_cursor qc = ws_cursor_at(qt++, FA_Q_STAGES(DQK));
      uint32_t s = ws_pipe_acquire_at(&qp, &ctx, qc);
#pragma unroll
      for (int c = 0; c < DQK / 64; c++)
        ws_pipe_load_tile_2d_at(&qp, &ctx, qc, sm->q.slot[s].x + c * BM * 64, &map_q, ti.h * DQK + c * 64,
                                ti.q0 + ti.mb * BM);
      ws_pipe_commit_at(&qp, &ctx, qc);
      const int hk = ti.h / a.group;
#pragma unroll 1
      for (int nb = 0; nb < ti.nblocks; nb++, kt++) {
        const ws_cursor k = ws_cursor_at(kt, FA_STAGES);
        const int row = ti.k0 + nb * FA_BN;
        s = ws_pipe_acquire_at(&kp, &ctx, k);
#pragma unroll
        for (int c = 0; c < DQK / 64; c++)
          ws_pipe_load_tile_2d_at(&kp, &ctx, k, sm->k.slot[s].x + c * FA_BN * 64, &map_k, hk * DQK + c * 64, row);
        ws_pipe_commit_at(&kp, &ctx, k);
        s = ws_pipe_acquire_at(&vp, &ctx, k);
#pragma unroll
        for (int c = 0; c < DV / 64; c++)
          ws_pipe_load_tile_2d_at(&vp, &ctx, k, sm->v.slot[s].x + c * FA_BN * 64, &map_v, hk * DV + c * 64, row);
        ws_pipe_commit_at(&vp, &ctx, k);
      }
    }
    return;
  }

  WS_ENTER_ROLE_T(R, A_MATH);
  const int lane = ctx.lane, quad = lane & 3;
  /* this thread's two rows (of its 64 x N accumulators): r and r + 8, tile-relative */
  const int row0 = ctx.replica * 64 + ctx.warp * 16 + (lane >> 2);
  const float sl2 = a.scale_log2;
  /* The warpgroup from lane 0 and the descriptors' bases made once: the loop adds
   * constants (box, k step) and the stage's offset to them, which ptxas keeps on the
   * uniform datapath; with the replica from ctx it moved every descriptor there with an
   * R2UR before each wgmma at d 64 and 128. */
  const int wg = __shfl_sync(0xffffffffu, ctx.replica, 0);
  const uint64_t dq00 = ws_wgmma_desc_k128b(sm->q.slot[0].x + wg * 64 * 64);
  const uint64_t dk0 = ws_wgmma_desc_k128b(sm->k.slot[0].x);
  const uint64_t dv0 = ws_wgmma_desc_mn128b(sm->v.slot[0].x, FA_BN * 128);
  const uint32_t q_stage_bytes = (uint32_t)sizeof(sm->q.slot[0]);
  const uint32_t k_stage_bytes = (uint32_t)sizeof(sm->k.slot[0]), v_stage_bytes = (uint32_t)sizeof(sm->v.slot[0]);
  /* Ping-pong (FA3's inter-warpgroup schedule): the two math warpgroups take turns to
   * issue their wgmmas, so that one's softmax runs while the other's matrix products do.
   * Replica r waits on barrier turn_bar + r (its turn), issues, then arrives on the
   * other's; in each tile replica 1 lets replica 0 go first, and skips its very last
   * hand-over, so that every barrier ends the tile with as many arrivals as waits. */
  const uint32_t my_turn = (uint32_t)(a.turn_bar + ctx.replica), other_turn = (uint32_t)(a.turn_bar + 1 - ctx.replica);
  const uint32_t both = 2 * WS_ROLE_THREADS_T(R, A_MATH);
  /* Q tiles and key blocks consumed so far, the same sequence as the loader's: cursors
   * advanced one step at a time (ptxas keeps them and the descriptors made from them on
   * the uniform datapath; from a running count it moved each descriptor there before
   * every wgmma at d 64); the overlapped steps take the count of blocks kt instead. */
  uint32_t kt = 0;
  ws_cursor qc = {0, 0}, k = {0, 0};
  /* 1: the Q slot before qc (two slots: the other one) holds O rows a TMA store may still
   * read (fa_store_o); one slot is given back at once */
  int q_has = 0;
  const uint32_t q_other = FA_Q_STAGES(DQK) - 1; /* stage ^ q_other: the slot before qc */
#pragma unroll 1
  for (int r = 0; r * step < a.tiles; r++) {
    const int t = fa_tile_of(r, (int)blockIdx.x, step);
    fa_work ti;
    if (t >= a.tiles || !fa_work_at<BM>(&a, t, &ti)) continue;
    const int nblocks = ti.nblocks, mb = ti.mb, lk = ti.lk, diag_off = ti.diag_off;
    const int qi0 = mb * BM + row0; /* query index in the sequence of the first row */
    float o[DV / 2];
#pragma unroll
    for (int i = 0; i < DV / 2; i++) o[i] = 0.0f;
    float m_run[2] = {-INFINITY, -INFINITY}, l_run[2] = {0.0f, 0.0f};
    ws_pipe_wait_at(&qp, &ctx, qc);
    /* the tile before's Q slot: in the plain loops after the first S (its O rows long read
     * by then); the overlapped ones' registers are tight there, so at the tile's start */
    fa_release_q(&qp, &ctx, qc.stage ^ q_other, q_has && (nblocks == 0 || SCHED >= 2));
    const uint64_t dq0 = ws_wgmma_desc_advance(dq00, qc.stage * q_stage_bytes);
    if ((SCHED == 1 || SCHED == 3) && ctx.replica == 1 && nblocks > 0) ws_bar_arrive(other_turn, both);
    if (SCHED >= 2) {
      const int causal = a.mask != WS_ATTN_NO_MASK;
      const fa_masks mk = {(causal ? min(lk - 1, qi0 + diag_off) : lk - 1) - 2 * quad,
                           (causal ? min(lk - 1, qi0 + 8 + diag_off) : lk - 1) - 2 * quad,
                           causal ? min(lk - 1, mb * BM + diag_off) : lk - 1};
      const attn_turns turns = {my_turn, other_turn, both};
      fa_overlap_blocks<DQK, DV, SCHED == 3>(&kp, &vp, &ctx, kt, nblocks, dq0, dk0, dv0, &mk, sl2, o, m_run, l_run, &turns);
    }
    /* OWN (WARPSPEC_ATTN_WG_BLOCKS=own, plain kernels): the key blocks this warpgroup's own
     * 64 rows see, a prefix of the tile's: none where they all lie past the sequence (the
     * last tile of a length that is not a multiple of the tile's rows: a third of the tall
     * tile's work at S 512), fewer on the causal diagonal; and of the last one only its
     * first 64 keys where they suffice (the first warpgroup of a 128-row causal tile). The
     * blocks after it are only waited for and released (a release before the stage is full
     * could count towards the round before). What the skipped keys would add is nothing
     * (every score -inf): O and lse equal walking them all up to the order of the sums. */
    int mine = nblocks, half = 0;
    if (OWN) {
      const int first = mb * BM + wg * 64, last = min(ti.lq, first + 64) - 1;
      const int kend = a.mask == WS_ATTN_NO_MASK ? lk : max(0, min(lk, last + diag_off + 1));
      mine = first >= ti.lq ? 0 : min(nblocks, (kend + FA_BN - 1) / FA_BN);
      half = mine > 0 && kend - (mine - 1) * FA_BN <= FA_BN / 2; /* its last block's first 64 keys do */
    }
#pragma unroll 1
    for (int nb = 0; nb < (SCHED >= 2 ? 0 : nblocks); nb++, k = ws_cursor_next(k, FA_STAGES)) {
      if (nb >= mine) { /* past this warpgroup's rows: the stages only */
        ws_pipe_wait_at(&kp, &ctx, k);
        ws_pipe_release_warp_at(&kp, &ctx, k);
        fa_release_q(&qp, &ctx, qc.stage ^ q_other, q_has && nb == 0);
        ws_pipe_wait_at(&vp, &ctx, k);
        ws_pipe_release_warp_at(&vp, &ctx, k);
        continue;
      }
      if (OWN && half && nb == mine - 1) { /* the last block's first 64 keys only (m64n64) */
        float s[FA_BN / 4];
        ws_pipe_wait_at(&kp, &ctx, k);
        attn_qk_wgmma<DQK, BM, FA_BN / 2, FA_BN>(s, dq0, ws_wgmma_desc_advance(dk0, k.stage * k_stage_bytes));
        WS_WGMMA_WAIT_GROUP(0);
        ws_pipe_release_warp_at(&kp, &ctx, k);
        fa_release_q(&qp, &ctx, qc.stage ^ q_other, q_has && nb == 0);
        fa_mask_block<FA_BN / 2>(s, nb * FA_BN, lk, a.mask != WS_ATTN_NO_MASK, qi0, mb * BM, diag_off, quad);
        uint32_t pa[FA_BN / 32][4];
        attn_softmax_rescale_p<FA_BN / 2, DV>(s, m_run, l_run, sl2, o, pa);
        ws_pipe_wait_at(&vp, &ctx, k);
        attn_pv_wgmma<DV, FA_BN / 2>(o, pa, ws_wgmma_desc_advance(dv0, k.stage * v_stage_bytes));
        WS_WGMMA_WAIT_GROUP(0);
        ws_pipe_release_warp_at(&vp, &ctx, k);
        continue;
      }
      /* S = Q K^T: 64 x 128 fp32 per warpgroup, 64 per thread */
      float s[FA_BN / 2];
      ws_pipe_wait_at(&kp, &ctx, k);
      const uint64_t dk = ws_wgmma_desc_advance(dk0, k.stage * k_stage_bytes);
      if ((SCHED == 1)) ws_bar_sync(my_turn, both);
      attn_qk_wgmma<DQK, BM, FA_BN>(s, dq0, dk);
      if ((SCHED == 1)) ws_bar_arrive(other_turn, both);
      WS_WGMMA_WAIT_GROUP(0);
      ws_pipe_release_warp_at(&kp, &ctx, k);
      fa_release_q(&qp, &ctx, qc.stage ^ q_other, q_has && nb == 0); /* the tile before's O has long been read */

      fa_mask_block<FA_BN>(s, nb * FA_BN, lk, a.mask != WS_ATTN_NO_MASK, qi0, mb * BM, diag_off, quad);

      /* online softmax (attn_device.cuh): new row max, rescale, exponentiate; P as A fragments */
      uint32_t pa[FA_BN / 16][4];
      attn_softmax_rescale_p<FA_BN, DV>(s, m_run, l_run, sl2, o, pa);

      /* O += P V: V [keys][dv] read MN-major, 16 keys (2048 bytes) per wgmma */
      ws_pipe_wait_at(&vp, &ctx, k);
      const uint64_t dv = ws_wgmma_desc_advance(dv0, k.stage * v_stage_bytes);
      if ((SCHED == 1)) ws_bar_sync(my_turn, both);
      attn_pv_wgmma<DV, FA_BN>(o, pa, dv);
      if ((SCHED == 1) && !(ctx.replica == 1 && nb == nblocks - 1)) ws_bar_arrive(other_turn, both);
      WS_WGMMA_WAIT_GROUP(0);
      ws_pipe_release_warp_at(&vp, &ctx, k);
    }
    if (SCHED >= 2) kt += (uint32_t)nblocks; /* the overlapped steps count blocks from kt */

    /* O / l in BF16, lse = scale x m + ln l (-inf and O = 0 for a row that saw no key);
     * the rows' sums first, so that no shuffle waits behind the stores */
    const float l[2] = {attn_quad_sum(l_run[0]), attn_quad_sum(l_run[1])};
    const int wrow = mb * BM + ctx.replica * 64 + ctx.warp * 16; /* the warp's first row */
    uint8_t *stage = (uint8_t *)sm->q.slot[qc.stage].x + (ctx.replica * 64 + ctx.warp * 16) * 128;
    fa_store_o<DV, BM>(&a, &map_o, &ti, o, m_run, l, sl2, lane, wrow, stage);
    q_has = 1; /* given back after its store has been read */
    if (FA_Q_STAGES(DQK) == 1) { /* one slot: the next Q waits for it */
      fa_release_q(&qp, &ctx, qc.stage, 1);
      q_has = 0;
    }
    qc = ws_cursor_next(qc, FA_Q_STAGES(DQK));
  }
  fa_release_q(&qp, &ctx, qc.stage ^ q_other, q_has);
  if (lane == 0) WS_CP_ASYNC_BULK_WAIT_GROUP(0); /* the CTA's shared memory outlives the stores */
}

/* ---- the call ---------------------------------------------------------------------- */
typedef struct {
  int slot, dqk, dv, sched; /* 0 plain, 1 ping-pong, 2 overlap, 3 overlap with ping-pong turns */
  int rows;                 /* query rows per tile: 128, or 192 (the tall d 64 kernel)        */
  const char *name;
  const void *func;
  size_t smem;
  const ws_role *roles;
  int nroles;
} fa_variant;

/* The ping-pong variants reserve two more named barriers (the turns), after the roles'. */
static ws_status fa_make_plan(const void *ctx, ws_plan *plan) {
  const fa_variant *v = (const fa_variant *)ctx;
  ws_status s = ws_plan_init(plan, v->name, v->roles, v->nroles, 0);
  if (s == WS_OK) s = ws_plan_set_smem(plan, v->smem);
  int id = 0;
  const int turns = v->sched == 1 || v->sched == 3;
  if (s == WS_OK && turns) s = ws_plan_add_barrier(plan, "turn of math 0", &id);
  if (s == WS_OK && turns) s = ws_plan_add_barrier(plan, "turn of math 1", &id);
  return s;
}

#define FA_VARIANT_R(SLOT, DQK, DV, PP, REPL, OWN, NAME)                                          \
  {SLOT, DQK, DV, PP, 64 * (REPL), NAME, (const void *)flash_fwd_kernel<DQK, DV, PP, REPL, OWN>,  \
   sizeof(fa_smem<DQK, DV, 64 * (REPL)>) + 1024, fa_roles<REPL>::set::roles, fa_roles<REPL>::set::nroles}
#define FA_VARIANT(SLOT, DQK, DV, PP, NAME) FA_VARIANT_R(SLOT, DQK, DV, PP, 2, 0, NAME)

/* The schedule by default, from the key blocks a query tile sees on average (`blocks`):
 * the overlapped schedules hide the softmax under matrix products once a tile has enough
 * blocks to amortise their prologue; at d 128 the overlap with the exponentials in turns
 * (overlap-pingpong) from WS_ATTN_PLAIN_MAX_BLOCKS on; at d 64 (short causal tiles: the
 * rest takes the tall tile) the overlap from WS_ATTN_OVERLAP_MIN_BLOCKS; plain for 192/128
 * (the overlapped one spills there). Each the fastest measured (config.h,
 * WS_ATTN_PLAIN_MAX_BLOCKS; docs/design.md, "Knobs: why these defaults").
 * WARPSPEC_ATTN_SCHEDULE=plain|pingpong|overlap|overlap-pingpong forces one (192/128 falls
 * back to plain where an overlapped one is asked); the bench compares them, with
 * ws_knobs_reload() between. */
static int fa_default_schedule(int dqk, int blocks) {
  if (dqk == 128) return blocks <= WS_ATTN_PLAIN_MAX_BLOCKS ? WS_ATTN_SCHED_PLAIN : WS_ATTN_SCHED_OVERLAP_PINGPONG;
  if (dqk == 64) return blocks >= WS_ATTN_OVERLAP_MIN_BLOCKS ? WS_ATTN_SCHED_OVERLAP : WS_ATTN_SCHED_PLAIN;
  return WS_ATTN_SCHED_PLAIN;
}

static const fa_variant *fa_variant_of(int dqk, int dv, int masked, int blocks) {
  static const fa_variant v[] = {
      FA_VARIANT(WS_PLAN_SLOT_ATTN_64, 64, 64, 0, "flash_fwd_64"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_128, 128, 128, 0, "flash_fwd_128"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_192, 192, 128, 0, "flash_fwd_192_128"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_64_PP, 64, 64, 1, "flash_fwd_64_pingpong"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_128_PP, 128, 128, 1, "flash_fwd_128_pingpong"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_192_PP, 192, 128, 1, "flash_fwd_192_128_pingpong"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_64_OV, 64, 64, 2, "flash_fwd_64_overlap"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_128_OV, 128, 128, 2, "flash_fwd_128_overlap"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_64_OVPP, 64, 64, 3, "flash_fwd_64_overlap_pingpong"),
      FA_VARIANT(WS_PLAN_SLOT_ATTN_128_OVPP, 128, 128, 3, "flash_fwd_128_overlap_pingpong"),
  };
  /* d 64: the tall kernel (plain schedule) by default without a mask or with enough key
   * blocks (WS_ATTN_TALL_MIN_BLOCKS), unless a schedule is forced; WARPSPEC_ATTN_TILE_ROWS
   * 128 / 192 forces a tile (192 wins over a forced schedule). */
  /* Opt-in (session 30; measured in session 32 on the quick sweep only: +13-18% for causal
   * d 64 on the tall tile at S 512-1024, -5% without a mask): WARPSPEC_ATTN_WG_BLOCKS=own,
   * each warpgroup on its own rows' key blocks (the plain kernels at d 64 and 128) */
  static const fa_variant tall[] = {
      FA_VARIANT_R(WS_PLAN_SLOT_ATTN_64_TALL, 64, 64, 0, 3, 0, "flash_fwd_64_tall"),
      FA_VARIANT_R(WS_PLAN_SLOT_ATTN_64_TALL_OWN, 64, 64, 0, 3, 1, "flash_fwd_64_tall_own")};
  static const fa_variant own[] = {FA_VARIANT_R(WS_PLAN_SLOT_ATTN_64_OWN, 64, 64, 0, 2, 1, "flash_fwd_64_own"),
                                   FA_VARIANT_R(WS_PLAN_SLOT_ATTN_128_OWN, 128, 128, 0, 2, 1, "flash_fwd_128_own")};
  const ws_knobs *kn = ws_knobs_get();
  const int rows = kn->attn_tile_rows, forced = kn->attn_schedule, own_blocks = kn->attn_wg_blocks;
  const int tall_default = forced == WS_ATTN_SCHED_AUTO && (!masked || blocks >= WS_ATTN_TALL_MIN_BLOCKS);
  if (dqk == 64 && (rows == 192 || (rows == 0 && tall_default))) return &tall[own_blocks ? 1 : 0];
  const int sched = forced != WS_ATTN_SCHED_AUTO ? forced : fa_default_schedule(dqk, blocks);
  if (own_blocks && sched == WS_ATTN_SCHED_PLAIN && (dqk == 64 || dqk == 128) && dv == dqk) return &own[dqk == 128];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++)
    if (v[i].dqk == dqk && v[i].dv == dv && v[i].sched == sched) return &v[i];
  for (size_t i = 0; i < sizeof v / sizeof v[0]; i++) /* no overlapped 192/128 (it spills): the plain one */
    if (v[i].dqk == dqk && v[i].dv == dv && v[i].sched == 0) return &v[i];
  return NULL;
}

/* The causal order's group (fa_work_at): as many (sequence, head) pairs as have their
 * K / V in 1 / WS_ATTN_L2_SHARE of the L2 (the query heads of one K / V head count as
 * one), but at least 1 / WS_ATTN_ROUND_BLOCKS of the grid, so that one round of the
 * persistent grid holds at most that many query blocks of a pair: their key ranges then
 * differ little and the CTAs' rounds stay even (long sequences, whose K / V stream
 * through the L2 with the CTAs of one head in step). WARPSPEC_ATTN_HEAD_GROUP forces it
 * (a number past the pairs: every pair in one group, the order before session 28). */
static ws_status fa_head_group(const ws_attn_problem *p, int grid, int *pairs) {
  const int all = p->heads_q * p->batch, group = p->heads_q / p->heads_kv;
  const int forced = ws_knobs_get()->attn_head_group;
  if (forced > 0) {
    *pairs = forced < all ? forced : all;
    return WS_OK;
  }
  size_t l2 = 0;
  ws_status s = ws_device_l2_bytes(&l2);
  if (s != WS_OK) return s;
  const uint64_t kv = (uint64_t)p->seqlen_k * (uint64_t)(p->dim_qk + p->dim_v) * 2u; /* bytes, one K / V head */
  const uint64_t fit = (uint64_t)l2 / WS_ATTN_L2_SHARE / kv * (uint64_t)group;
  const uint64_t even = (uint64_t)(grid + WS_ATTN_ROUND_BLOCKS - 1) / WS_ATTN_ROUND_BLOCKS;
  const uint64_t n = fit > even ? fit : even;
  *pairs = n < (uint64_t)all ? (int)n : all; /* n >= 1: even is, the grid being >= 1 */
  return WS_OK;
}

/* The problem's argument check (no GPU): shapes, dims, mask, scale, pointers. */
extern "C" ws_status ws_attn_check(const ws_attn_problem *p) {
  WS_REQUIRE(p != NULL, "ws_attn: problem is NULL");
  WS_REQUIRE(p->batch >= 1, "ws_attn: batch %d, must be >= 1", p->batch);
  WS_REQUIRE(p->seqlen_q >= 1 && p->seqlen_k >= 1, "ws_attn: seqlen_q %d, seqlen_k %d: both >= 1", p->seqlen_q,
             p->seqlen_k);
  WS_REQUIRE(p->seqlen_q <= WS_EXTENT_MAX && p->seqlen_k <= WS_EXTENT_MAX,
             "ws_attn: seqlen_q %d, seqlen_k %d: each at most 2^30", p->seqlen_q, p->seqlen_k);
  WS_REQUIRE((p->cu_seqlens_q == NULL) == (p->cu_seqlens_k == NULL),
             "ws_attn: cu_seqlens_q and cu_seqlens_k go together (both NULL for dense batches)");
  if (!p->cu_seqlens_q) { /* dense: the token of sequence b, row i is b x seqlen + i, an int */
    const int64_t rows_q = ws_mul_sat(p->batch, p->seqlen_q), rows_k = ws_mul_sat(p->batch, p->seqlen_k);
    WS_REQUIRE(rows_q <= WS_INDEX_MAX, "ws_attn: batch %d x seqlen_q %d = %lld query rows, at most 2^31 - 1", p->batch,
               p->seqlen_q, (long long)rows_q);
    WS_REQUIRE(rows_k <= WS_INDEX_MAX, "ws_attn: batch %d x seqlen_k %d = %lld key rows, at most 2^31 - 1", p->batch,
               p->seqlen_k, (long long)rows_k);
  }
  WS_REQUIRE(p->heads_q >= 1 && p->heads_kv >= 1 && p->heads_q % p->heads_kv == 0,
             "ws_attn: heads_q %d must be a positive multiple of heads_kv %d (GQA / MQA)", p->heads_q, p->heads_kv);
  WS_REQUIRE((p->dim_qk == 64 && p->dim_v == 64) || (p->dim_qk == 128 && p->dim_v == 128) ||
                 (p->dim_qk == 192 && p->dim_v == 128),
             "ws_attn: head dims %d/%d (qk/v) not supported: 64/64, 128/128 or 192/128", p->dim_qk, p->dim_v);
  WS_REQUIRE(p->mask == WS_ATTN_NO_MASK || p->mask == WS_ATTN_CAUSAL_TOP_LEFT || p->mask == WS_ATTN_CAUSAL_BOTTOM_RIGHT,
             "ws_attn: mask %d unknown", (int)p->mask);
  WS_REQUIRE(isfinite(p->softmax_scale) && p->softmax_scale >= 0.0f, "ws_attn: softmax_scale %g (0: 1/sqrt(dim_qk))",
             (double)p->softmax_scale);
  WS_REQUIRE(p->q && p->k && p->v && p->o, "ws_attn: q, k, v or o is NULL");
  WS_REQUIRE(attn_aligned16(p->q) && attn_aligned16(p->k) && attn_aligned16(p->v) && attn_aligned16(p->o),
             "ws_attn: q, k, v and o must be 16-byte aligned");
  return WS_OK;
}

extern "C" ws_status ws_attn_forward(const ws_attn_problem *p, cudaStream_t stream) {
  ws_status s = ws_check_mode() ? ws_attn_validate(p, stream) : ws_attn_check(p);
  if (s != WS_OK) return s;
  const int varlen = p->cu_seqlens_q != NULL;
  if (varlen)
    WS_REQUIRE(p->total_q >= 1 && p->total_k >= 1,
               "ws_attn_forward: variable-length batch needs total_q and total_k (rows of q and of k / v; got %d, %d)",
               p->total_q, p->total_k);
  const uint64_t rows_q = varlen ? (uint64_t)p->total_q : (uint64_t)p->batch * (uint64_t)p->seqlen_q;
  const uint64_t rows_k = varlen ? (uint64_t)p->total_k : (uint64_t)p->batch * (uint64_t)p->seqlen_k;
  WS_REQUIRE(rows_q < (1ull << 31) && rows_k < (1ull << 31), "ws_attn_forward: %llu query / %llu key rows, at most 2^31 - 1",
             (unsigned long long)rows_q, (unsigned long long)rows_k);
  WS_REQUIRE(((uintptr_t)p->lse & 3u) == 0, "ws_attn_forward: lse %p is not 4-byte aligned", (void *)p->lse);
  /* key blocks per query tile on average: all of seqlen_k (the longest, varlen), about
   * half under a causal mask */
  const int kblocks = (p->seqlen_k + FA_BN - 1) / FA_BN, masked = p->mask != WS_ATTN_NO_MASK;
  const fa_variant *v = fa_variant_of(p->dim_qk, p->dim_v, masked, masked ? (kblocks + 1) / 2 : kblocks);
  if (!v) return ws_fail(WS_ERR_UNSUPPORTED, "ws_attn_forward: head dims %d/%d", p->dim_qk, p->dim_v);
  const int m_blocks = (p->seqlen_q + v->rows - 1) / v->rows;
  WS_REQUIRE((uint64_t)m_blocks * (uint64_t)p->batch * (uint64_t)p->heads_q < (1ull << 31),
             "ws_attn_forward: %d heads x %d query blocks x %d sequences is more than 2^31 - 1 tiles", p->heads_q, m_blocks,
             p->batch);
  /* the loader's TMA column of head h is h x dim_qk, an int (k and v have no more columns) */
  const uint64_t cq = (uint64_t)p->heads_q * p->dim_qk, ck = (uint64_t)p->heads_kv * p->dim_qk,
                 cv = (uint64_t)p->heads_kv * p->dim_v;
  WS_REQUIRE(cq <= WS_INDEX_MAX, "ws_attn_forward: heads_q %d x dim_qk %d = %llu columns of q, at most 2^31 - 1",
             p->heads_q, p->dim_qk, (unsigned long long)cq);
  ws_plan *plan = NULL;
  if ((s = ws_plan_cached(v->slot, fa_make_plan, v, &plan)) != WS_OK) return s;
  ws_tmap mq, mk, mv;
  if ((s = ws_tmap_2d_swizzled(&mq, p->q, WS_DTYPE_BF16, rows_q, cq, cq * 2, (uint64_t)v->rows, 64, WS_SWIZZLE_128B)) !=
          WS_OK ||
      (s = ws_tmap_2d_swizzled(&mk, p->k, WS_DTYPE_BF16, rows_k, ck, ck * 2, FA_BN, 64, WS_SWIZZLE_128B)) != WS_OK ||
      (s = ws_tmap_2d_swizzled(&mv, p->v, WS_DTYPE_BF16, rows_k, cv, cv * 2, FA_BN, 64, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  /* O as the math's TMA stores write it: 16 rows (one warp's) x 64 columns per box */
  const uint64_t co = (uint64_t)p->heads_q * p->dim_v;
  ws_tmap mo;
  if ((s = ws_tmap_2d_swizzled(&mo, p->o, WS_DTYPE_BF16, rows_q, co, co * 2, 16, 64, WS_SWIZZLE_128B)) != WS_OK) return s;
  fa_args a;
  memset(&a, 0, sizeof a);
  a.seqlen_q = p->seqlen_q;
  a.seqlen_k = p->seqlen_k;
  a.heads_q = p->heads_q;
  a.group = p->heads_q / p->heads_kv;
  a.m_blocks = m_blocks;
  a.batch = p->batch;
  a.tiles = p->heads_q * m_blocks * p->batch;
  a.mask = (int)p->mask;
  a.total_q = (int)rows_q;
  a.turn_bar = plan->layout.nbarriers + 1; /* the ping-pong variants' first user barrier */
  a.o_tma = ws_knobs_get()->attn_o_tma;
  const float scale = p->softmax_scale > 0.0f ? p->softmax_scale : 1.0f / sqrtf((float)p->dim_qk);
  a.scale_log2 = scale * ATTN_LOG2E;
  a.cu_q = p->cu_seqlens_q;
  a.cu_k = p->cu_seqlens_k;
  a.o = (uint16_t *)p->o;
  a.lse = p->lse;
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&mq, &mk, &mv, &mo, &a, &diag};
  int sms = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  /* Persistent, one CTA per SM: it prefetches the next tile's Q while finishing one,
   * which one CTA per tile (the hardware hands them out greedily, longest first) cannot;
   * the grid measured never slower (docs/design.md). WARPSPEC_ATTN_GRID=tiles forces one
   * CTA per tile. */
  const int persistent = ws_knobs_get()->attn_persistent;
  const dim3 grid = {(unsigned)(persistent && a.tiles > sms ? sms : a.tiles), 1, 1};
  if ((s = fa_head_group(p, sms, &a.head_group)) != WS_OK) return s; /* CTAs in flight: the SMs either way */
  return ws_plan_launch(plan, v->func, grid, stream, args);
}
