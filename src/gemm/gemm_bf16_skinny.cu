/* gemm_bf16_skinny.cu - BF16 D = A x B^T for a dense problem of at most 64 rows (a
 * decode step's projection: a few tokens against a large weight).
 *
 * Such a GEMM is a stream of the weights: 2 n k bytes read once, next to which A and D
 * are small. The 128 x 256 tile (gemm_bf16.cu) puts A's few rows on wgmma's M side, where
 * most of the 128 rows are padding, and fills the GPU by split-K with an fp32 round trip
 * through global memory and a second kernel (1 x 64 of (4096, 7168): 32-34 us on an H200,
 * cuBLASLt 26-28 us). Here the operands swap:
 *   D^T[n x m] = B[n x k] x A[m x k]^T
 * the weights on wgmma's M side and A's rows on N (TOK = 16, 32 or 64: the rows rounded
 * up, TMA fills the rest with zeros; 128 for 65-128 rows, one K step a stage, since session
 * 39 the default, WARPSPEC_GEMM_SKINNY_ROWS). A CTA owns 64 weight rows; a stage holds two K
 * steps (256 contiguous bytes of each weight row, 16 KiB, and TOK x 256 bytes of A), as
 * many stages as fit (6 at TOK 64, 11 at 16). A tile's stages are cut into S slices (the
 * host picks S in 1..8 so that the tiles times S give most SMs a CTA), one CTA per slice,
 * and the S CTAs of a tile form a cluster: each writes its fp32 partial tile into its
 * own shared memory, and after a cluster barrier CTA q sums its share of the columns over
 * the S partials through distributed shared memory, in slice order (the same bits on
 * every run), and stores bf16. No workspace, no second kernel.
 *   LOADER (1 warp)   per stage: acquire, TMA-load two boxes of weights (64 x 64,
 *                     evict-first: each byte is read once) and two of A (TOK x 64), commit.
 *   MATH   (4 warps)  wait, 8 x wgmma m64nTOKk16 from shared memory, release the previous
 *                     stage once its wgmmas are done; then the partial and its share of
 *                     the sum.
 * Measured against 128 weight rows and two math warpgroups, one K step a stage, on an
 * H200 (docs/benchmarks.md, session 37): 64 rows and two steps were 8-12% faster at 64 x
 * (4096, 7168) and (7168, 2048); four steps a stage (two stages in flight) 30% slower; an
 * L2 prefetch of the next 8 steps 10% slower. The kernel reads at about half of DRAM's
 * peak (ncu), as cuBLASLt's at these shapes does (57-63%): the calls are 15-25 us, and the
 * first bytes' latency and the launch are a large part of that. */
#include "../core/internal.h"
#include "gemm_args.h"
#include "gemm_epilogue.cuh"
#include "gemm_skinny.cuh"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"


#define SK_WGS (SK_BN / 64)
#define SK_BK 64     /* bf16 per 128-byte swizzled row: one TMA box, one K step */

template <int TOK>
struct __align__(1024) sk_stage {
  uint16_t b[sk_kboxes<TOK>()][SK_BN * SK_BK]; /* weights, 8 KiB a box */
  uint16_t a[sk_kboxes<TOK>()][TOK * SK_BK];   /* A's rows (TOK x 128 B a box, a multiple of 1024 B) */
};

#define SK_ROLES(ROLE) ROLE(SK_MATH, 4, WS_REGS_ENTRY, SK_WGS) ROLE(SK_LOADER, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(gemm_bf16_skinny, SK_ROLES);

template <int TOK>
WS_DEV void sk_wgmma(float *acc, uint64_t da, uint64_t db, int accumulate) {
  if constexpr (TOK == 128) ws_wgmma_m64n128k16_bf16(acc, da, db, accumulate);
  else if constexpr (TOK == 64) ws_wgmma_m64n64k16_bf16(acc, da, db, accumulate);
  else if constexpr (TOK == 32) ws_wgmma_m64n32k16_bf16(acc, da, db, accumulate);
  else ws_wgmma_m64n16k16_bf16(acc, da, db, accumulate);
}

template <int TOK>
WS_DEV void sk_body(const ws_tmap *map_a, const ws_tmap *map_b, const gemm_args *args, ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  sk_smem<sk_stage<TOK>, TOK> *sm = (sk_smem<sk_stage<TOK>, TOK> *)ws_smem_align1024(smem_raw);
  ws_ctx ctx = WS_SELF(gemm_bf16_skinny, diag);
  /* wgmma reads a stage warpgroup-wide: released once per warp */
  ws_pipe pipe = WS_PIPE_VIEW(&sm->pipe, "gemm_bf16_skinny", 1 /* the loader's leader: sk_load_stages */,
                              SK_WGS * WS_ROLE_WARPS(gemm_bf16_skinny, SK_MATH));
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC); /* TMA in, wgmma out */
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  /* the cluster is the tile's S slices, rank q = slice q (1-D clusters along x) */
  const int S = args->shape.splits, q = (int)ws_cluster_ctarank(), tile = (int)blockIdx.x / S;
  /* the slices cut whole stages of KB K steps (a last stage past K loads zeros) */
  constexpr int KB = sk_kboxes<TOK>();
  const int nst = (args->shape.ksteps + KB - 1) / KB;
  const int k0 = (int)((long long)q * nst / S), k1 = (int)((long long)(q + 1) * nst / S); /* stages of this slice */

  if (ctx.role == SK_LOADER) {
    WS_ENTER_ROLE(gemm_bf16_skinny, SK_LOADER);
    sk_load_stages<KB>(&pipe, &ctx, sm->pipe.slot, map_a, map_b, k0, k1, SK_BK, tile * SK_BN, 0);
  } else {
    WS_ENTER_ROLE(gemm_bf16_skinny, SK_MATH);
    float acc[TOK / 2];
    ws_cursor c = {0, 0}, prev = c;
    uint32_t full = ws_pipe_probe_at(&pipe, c);
    /* a slice without stages (forced slices past the stages) adds zeros */
    if (k0 == k1)
      for (int j = 0; j < TOK / 2; j++) acc[j] = 0.0f;
    for (int ks = k0; ks < k1; ks++, c = ws_cursor_next(c, pipe.stages)) {
      ws_pipe_wait_probed_at(&pipe, &ctx, c, full);
      const sk_stage<TOK> *st = &sm->pipe.slot[c.stage];
      ws_wgmma_fence();
#pragma unroll
      for (int b = 0; b < KB; b++) {
        const uint64_t da = ws_wgmma_desc_k128b(st->b[b] + ctx.replica * 64 * SK_BK), db = ws_wgmma_desc_k128b(st->a[b]);
#pragma unroll
        for (int kk = 0; kk < SK_BK / 16; kk++)
          sk_wgmma<TOK>(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32),
                        ks > k0 || b > 0 || kk > 0);
      }
      ws_wgmma_commit_group();
      full = ks + 1 < k1 ? ws_pipe_probe_at(&pipe, ws_cursor_next(c, pipe.stages)) : 0u;
      if (ks > k0) {
        WS_WGMMA_WAIT_GROUP(1);
        ws_pipe_release_warp_at(&pipe, &ctx, prev);
      }
      prev = c;
    }
    WS_WGMMA_WAIT_GROUP(0);
    ws_pipe_release_warp_at(&pipe, &ctx, prev);
    sk_store_partial<TOK>(sm->part, acc, &ctx);
  }
  /* Every thread of the cluster, both times (the loader warp too: nobody leaves early).
   * After the first, every CTA's partial is complete and visible; after the second, no
   * peer still reads ours, so the CTA may end. */
  ws_cluster_sync();
  if (ctx.role == SK_MATH)
    sk_reduce_store<TOK>(sm->part, args, tile, q, S, ctx.replica * 128 + ws_role_thread(&ctx), 128 * SK_WGS);
  ws_cluster_sync();
}

#define SK_KERNEL(TOK)                                                                                          \
  WS_KERNEL(gemm_bf16_skinny)                                                                                   \
  gemm_bf16_skinny##TOK##_kernel(const __grid_constant__ ws_tmap map_a, const __grid_constant__ ws_tmap map_b, \
                                 const __grid_constant__ ws_tmap map_d, const __grid_constant__ gemm_args args, \
                                 ws_diag diag) {                                                                \
    (void)map_d; /* D is written from registers, 16 bytes a thread */                                          \
    sk_body<TOK>(&map_a, &map_b, &args, diag);                                                                 \
  }
SK_KERNEL(16)
SK_KERNEL(32)
SK_KERNEL(64)
SK_KERNEL(128)

/* bm: A's rows as the kernel reads them (one box), bn: weight rows per CTA, bk: one K
 * step (ksteps counts them; a stage takes sk_kboxes<TOK>()). cluster_k:
 * the K slices of a tile run as one cluster and sum in shared memory (gemm_launch.c). */
#define SK_DESC(TOK)                                                                                               \
  extern "C" const gemm_kernel *gemm_bf16_skinny##TOK##_kernel_desc(void) {                                        \
    static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_BF16_SKINNY##TOK, "gemm_bf16_skinny" #TOK,                      \
                                  gemm_bf16_skinny_roles, gemm_bf16_skinny_NROLES,                                  \
                                  sizeof(sk_smem<sk_stage<TOK>, TOK>) + 1024,                                       \
                                  (const void *)gemm_bf16_skinny##TOK##_kernel, TOK, SK_BN, SK_BK, 0, WS_DTYPE_BF16, \
                                  2, 1, 1};                                                                         \
    return &k;                                                                                                     \
  }
SK_DESC(16)
SK_DESC(32)
SK_DESC(64)
SK_DESC(128)
