/* gemm_fp8_skinny.cu - FP8 (E4M3, DeepSeek block scales) D = A x B^T for a dense problem of
 * at most 64 rows: gemm_bf16_skinny.cu's operand swap for the FP8 weights of a decode step.
 *
 * At a few rows the 128 x 128 tile (gemm_fp8.cu) is padding on wgmma's M side and fills the
 * GPU by split-K through a workspace: 1 x (4096, 7168) takes 28 us on an H200 for 29 MB of
 * weights (1 TB/s; cuBLASLt on 16 rows the same). Here, as in the BF16 skinny kernel,
 *   D^T[n x m] = B[n x k] x A[m x k]^T
 * the weights on M (64 rows a CTA, one math warpgroup) and A's rows on N (TOK = 16, 32 or
 * 64, TMA zero-fills the rows past m); a stage holds two K blocks (256 contiguous bytes of
 * each weight row and TOK x 256 bytes of A); a tile's stages are cut into S slices that run
 * as one cluster and sum their fp32 partials through distributed shared memory in slice
 * order (gemm_skinny.cuh). What FP8 adds is the promotion: each 128-deep K block goes into a
 * fresh accumulator (four m64nTOKk32) and is added to the total times the weights' scale of
 * the block (one per CTA: its 64 rows lie in one 128-row scale block) and each A row's
 * scale, as the other FP8 kernels do (fp8_promote in gemm_fp8.cu). The thread's TOK / 4 A
 * rows' scales for a stage are loaded before it waits for the stage: their latency hides
 * behind the wait on the weights.
 *   LOADER (1 warp)   per stage: acquire, TMA-load two 64 x 128 weight boxes (evict-first)
 *                     and two TOK x 128 boxes of A, commit.
 *   MATH   (4 warps)  per K block: 4 x wgmma m64nTOKk32, wait, promote; release the stage;
 *                     then the partial and its share of the cluster's sum.
 * Grouped masked problems (a decode step's experts: at most 64 rows a group) run the same
 * way, a tile being (group, tile column): the group's rows from its first, its weights and
 * scales, its count of rows stored; a group without rows loads nothing.
 * On by default (WARPSPEC_GEMM_FP8_SKINNY=0 gives the 128 x 128 tile with split-K):
 * 1.09-1.45x cuBLASLt at 1-64 rows on an H200 (`test_gemm_gpu fp8skinny` tests it;
 * docs/design_gemm.md 5.2-5.3). */
#include "../core/internal.h"
#include "gemm_args.h"
#include "gemm_epilogue.cuh"
#include "gemm_sched.cuh"
#include "gemm_skinny.cuh"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"

#define SKF_BK 128 /* e4m3 per 128-byte swizzled row: one TMA box, one K block (the scales' 128) */

template <int TOK>
struct __align__(1024) skf_stage {
  uint8_t b[SK_KBOXES][SK_BN * SKF_BK]; /* weights, 8 KiB a box */
  uint8_t a[SK_KBOXES][TOK * SKF_BK];   /* A's rows (TOK x 128 B a box, a multiple of 1024 B) */
};

#define SKF_ROLES(ROLE) ROLE(SKF_MATH, 4, WS_REGS_ENTRY, 1) ROLE(SKF_LOADER, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(gemm_fp8_skinny, SKF_ROLES);

template <int TOK>
WS_DEV void skf_wgmma(float *acc, uint64_t da, uint64_t db, int accumulate) {
  if constexpr (TOK == 64) ws_wgmma_m64n64k32_e4m3(acc, da, db, accumulate);
  else if constexpr (TOK == 32) ws_wgmma_m64n32k32_e4m3(acc, da, db, accumulate);
  else ws_wgmma_m64n16k32_e4m3(acc, da, db, accumulate);
}

/* The scales of one K block for this thread: the weights' (the CTA's 64 rows lie in one
 * 128-row block) times each of its TOK / 4 A rows' (8 c8 + 2 (lane % 4) + e, index 2 c8 + e,
 * rows past m clamped into A: their columns are zeros and never stored). A K block past K
 * (the last stage's second half when K has an odd count of blocks) gets 0: its boxes are
 * zeros and add nothing. */
template <int TOK>
WS_DEV void skf_scales(const gemm_args *args, int g, int col, int row0, int count, int kb, int lane, float *f) {
  const int kblocks = args->k / SKF_BK, kc = min(kb, kblocks - 1);
  const float live = kb < kblocks ? 1.0f : 0.0f;
  const size_t sblock = (size_t)g * (size_t)(args->shape.n / 128) + (size_t)(col * SK_BN / 128);
  const float sb = live * __ldg(args->b_scale + sblock * (size_t)kblocks + (size_t)kc);
#pragma unroll
  for (int c = 0; c < TOK / 4; c++) {
    const int row = row0 + min(8 * (c / 2) + 2 * (lane % 4) + (c % 2), count - 1);
    f[c] = __ldg(args->a_scale + ((uint32_t)row * args->a_rs + (uint32_t)kc * args->a_ks)) * sb;
  }
}

template <int TOK>
WS_DEV void skf_body(const ws_tmap *map_a, const ws_tmap *map_b, const gemm_args *args, ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  sk_smem<skf_stage<TOK>, TOK> *sm = (sk_smem<skf_stage<TOK>, TOK> *)ws_smem_align1024(smem_raw);
  ws_ctx ctx = WS_SELF(gemm_fp8_skinny, diag);
  /* wgmma reads a stage warpgroup-wide: released once per warp */
  ws_pipe pipe = WS_PIPE_VIEW(&sm->pipe, "gemm_fp8_skinny", 1 /* the loader's leader: sk_load_stages */,
                              WS_ROLE_WARPS(gemm_fp8_skinny, SKF_MATH));
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC); /* TMA in, wgmma out */
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  /* the cluster is the tile's S slices, rank q = slice q (1-D clusters along x); tiles are
   * (group, tile column), a dense problem one group of every row */
  const int S = args->shape.splits, q = (int)ws_cluster_ctarank(), tile = (int)blockIdx.x / S;
  const int cols = (args->shape.n + SK_BN - 1) / SK_BN, g = tile / cols, col = tile % cols;
  int row0 = 0, count = (int)args->rows;
  if (args->shape.layout == WS_GEMM_GROUPED_MASKED) gemm_group_rows(&args->shape, g, &row0, &count);
  count = max(count, 0); /* a group without rows: no loads, nothing stored (the cluster still meets) */
  /* ksteps counts K blocks; the slices cut whole stages of SK_KBOXES of them */
  const int nst = (args->shape.ksteps + SK_KBOXES - 1) / SK_KBOXES;
  const int k0 = (int)((long long)q * nst / S), k1 = count > 0 ? (int)((long long)(q + 1) * nst / S) : k0;

  if (ctx.role == SKF_LOADER) {
    WS_ENTER_ROLE(gemm_fp8_skinny, SKF_LOADER);
    /* a masked group's TOK rows from its first; those past its count are computed, never stored */
    sk_load_stages<SK_KBOXES>(&pipe, &ctx, sm->pipe.slot, map_a, map_b, k0, k1, SKF_BK, g * args->shape.n + col * SK_BN,
                              row0);
  } else {
    WS_ENTER_ROLE(gemm_fp8_skinny, SKF_MATH);
    float acc[TOK / 2], total[TOK / 2];
#pragma unroll
    for (int j = 0; j < TOK / 2; j++) total[j] = 0.0f; /* a slice without stages adds zeros */
    ws_cursor c = {0, 0};
    uint32_t full = ws_pipe_probe_at(&pipe, c);
    for (int ks = k0; ks < k1; ks++, c = ws_cursor_next(c, pipe.stages)) {
      float f[SK_KBOXES][TOK / 4];
#pragma unroll
      for (int b = 0; b < SK_KBOXES; b++) skf_scales<TOK>(args, g, col, row0, count, ks * SK_KBOXES + b, ctx.lane, f[b]);
      ws_pipe_wait_probed_at(&pipe, &ctx, c, full);
      const skf_stage<TOK> *st = &sm->pipe.slot[c.stage];
#pragma unroll
      for (int b = 0; b < SK_KBOXES; b++) {
        const uint64_t da = ws_wgmma_desc_k128b(st->b[b]), db = ws_wgmma_desc_k128b(st->a[b]);
        ws_wgmma_fence();
#pragma unroll
        for (int kk = 0; kk < SKF_BK / 32; kk++)
          skf_wgmma<TOK>(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32), kk > 0);
        ws_wgmma_commit_group();
        if (b == SK_KBOXES - 1) full = ks + 1 < k1 ? ws_pipe_probe_at(&pipe, ws_cursor_next(c, pipe.stages)) : 0u;
        WS_WGMMA_WAIT_GROUP(0);
        /* register j: A row 8 (j / 4) + 2 (lane % 4) + j % 2, its scale f[2 (j / 4) + j % 2] */
#pragma unroll
        for (int j = 0; j < TOK / 2; j++) total[j] += acc[j] * f[b][2 * (j / 4) + (j % 2)];
      }
      ws_pipe_release_warp_at(&pipe, &ctx, c);
    }
    sk_store_partial<TOK>(sm->part, total, &ctx);
  }
  /* Every thread of the cluster, both times (the loader warp too: nobody leaves early).
   * After the first, every CTA's partial is complete and visible; after the second, no
   * peer still reads ours, so the CTA may end. */
  ws_cluster_sync();
  if (ctx.role == SKF_MATH) sk_reduce_store_rows<TOK>(sm->part, args, col, q, S, ws_role_thread(&ctx), 128, row0, count);
  ws_cluster_sync();
}

#define SKF_KERNEL(TOK)                                                                                        \
  WS_KERNEL(gemm_fp8_skinny)                                                                                   \
  gemm_fp8_skinny##TOK##_kernel(const __grid_constant__ ws_tmap map_a, const __grid_constant__ ws_tmap map_b, \
                                const __grid_constant__ ws_tmap map_d, const __grid_constant__ gemm_args args, \
                                ws_diag diag) {                                                                \
    (void)map_d; /* D is written from registers, 16 bytes a thread */                                         \
    skf_body<TOK>(&map_a, &map_b, &args, diag);                                                               \
  }
SKF_KERNEL(16)
SKF_KERNEL(32)
SKF_KERNEL(64)

/* bm: A's rows as the kernel reads them (one box), bn: weight rows per CTA, bk: one K block
 * (ksteps counts them; a stage takes SK_KBOXES). cluster_k: the K slices of a tile run as
 * one cluster and sum in shared memory (gemm_launch.c). */
#define SKF_DESC(TOK)                                                                                             \
  extern "C" const gemm_kernel *gemm_fp8_skinny##TOK##_kernel_desc(void) {                                        \
    static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_FP8_SKINNY##TOK, "gemm_fp8_skinny" #TOK,                       \
                                  gemm_fp8_skinny_roles, gemm_fp8_skinny_NROLES,                                  \
                                  sizeof(sk_smem<skf_stage<TOK>, TOK>) + 1024,                                    \
                                  (const void *)gemm_fp8_skinny##TOK##_kernel, TOK, SK_BN, SKF_BK, 0, WS_DTYPE_U8, \
                                  1, 1, 1};                                                                        \
    return &k;                                                                                                    \
  }
SKF_DESC(16)
SKF_DESC(32)
SKF_DESC(64)
