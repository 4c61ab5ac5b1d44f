/* gemm_bf16.cu - BF16 GEMM D = A x B^T, dense or grouped, on the library's roles and pipes.
 *
 * Persistent grid; CTAs walk 128 x 256 tiles of D group by group (gemm_sched.cuh).
 *   LOADER (1 warp, 40 regs)       per 64-wide K step: acquire a stage, TMA-load the A
 *                                  tile (128 x 64) and the group's B tile (256 x 64), both
 *                                  with the 128-byte swizzle, commit (bytes from the maps).
 *   MATH   (4 warps x 2, 232 regs) replica r owns rows 64r..64r+63 of the tile: wait,
 *                                  4 x wgmma m64n256k16 from shared memory, release the
 *                                  previous stage once its wgmmas are done (one group in
 *                                  flight); after the last K step, write the bf16 rows
 *                                  that belong to the group (A rows past it are loaded,
 *                                  unused): full rows through shared memory and TMA
 *                                  stores, two 64 x 64 chunks at a time (gemm_epilogue.cuh). */
#include "../core/internal.h"
#include "gemm_epilogue.cuh"
#include "gemm_loader.cuh"
#include "warpspec/device/wgmma.cuh"

#include <cuda_bf16.h>

#define BF16_BM 128
#define BF16_BN 256
#define BF16_BK 64
#define BF16_STAGES 4

typedef struct __align__(1024) {
  uint16_t a[BF16_BM * BF16_BK]; /* 16 KiB, 8-row groups of 1024 B */
  uint16_t b[BF16_BN * BF16_BK]; /* 32 KiB */
} bf16_stage;

WS_PIPE_STORAGE(bf16_pipe, bf16_stage, BF16_STAGES);

/* The pipe, then per math warpgroup two 64 x 64 bf16 chunks for the TMA-store epilogue. */
typedef struct {
  bf16_pipe pipe;
  __align__(1024) uint8_t out[2][2 * GEMM_CHUNK_BYTES];
} bf16_smem;

#define BF16_ROLES(ROLE) ROLE(G_LOADER, 1, 40, 1) ROLE(G_MATH, 4, 232, 2)
WS_DECLARE_ROLES(gemm_bf16, BF16_ROLES);

/* Split-K in clusters (args->cluster_split, WARPSPEC_GEMM_CLUSTER_K: on for 2 slices, measured
 * in session 38, gemm_launch.c): this CTA is slice `split` of its tile's S, the S
 * CTAs of the tile one cluster, one work item each. Every math thread: the tile's fp32
 * sums go into this CTA's stages (free: the loader has nothing more to load), and after a
 * cluster barrier the CTA sums rows split x 128 / S .. of every slice's partial through
 * distributed shared memory, in slice order (the bits of gemm_splitk_reduce), and stores
 * them as bf16. No workspace, no summing kernel, no fp32 round trip through HBM. */
#define BF16_PART_LD (BF16_BN + 8) /* floats per partial row */
WS_DEV void bf16_cluster_sum(bf16_smem *sm, const ws_ctx *c, const gemm_args *args, const gemm_tile *tile,
                             const float *acc) {
  static_assert(sizeof(sm->pipe.slot) >= BF16_BM * BF16_PART_LD * sizeof(float), "the partial overlays the stages");
  float *part = (float *)sm->pipe.slot;
  ws_cluster_sync(); /* both math warpgroups are past their last wgmma: the stages may be overwritten */
  const int r0 = 64 * c->replica + 16 * c->warp + c->lane / 4, c0 = 2 * (c->lane % 4);
#pragma unroll
  for (int j = 0; j < BF16_BN / 8; j++)
#pragma unroll
    for (int h = 0; h < 2; h++)
      *(float2 *)(part + (r0 + 8 * h) * BF16_PART_LD + 8 * j + c0) = make_float2(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
  ws_cluster_sync(); /* every slice's partial is complete and visible in the cluster */
  const int S = args->shape.splits, q = tile->split, n = args->shape.n, vecs = BF16_BN / 8;
  const int r_lo = q * BF16_BM / S, r_hi = (q + 1) * BF16_BM / S;
  for (int v = c->replica * 128 + ws_role_thread(c); v < (r_hi - r_lo) * vecs; v += 256) {
    const int r = r_lo + v / vecs, local = tile->tm * BF16_BM + r, col = tile->tn * BF16_BN + 8 * (v % vecs);
    if (local >= tile->count || col >= n) continue; /* n is a multiple of 8: a vector is in or out */
    ws_st_global_v4(args->d + (size_t)(tile->row0 + local) * (size_t)n + (size_t)col,
                    gemm_cluster_sum8_bf16(part + r * BF16_PART_LD + 8 * (v % vecs), S));
  }
  ws_cluster_sync(); /* no peer reads this CTA's partial any more */
}

WS_KERNEL(gemm_bf16) gemm_bf16_kernel(const __grid_constant__ ws_tmap map_a, const __grid_constant__ ws_tmap map_b,
                                      const __grid_constant__ ws_tmap map_d, const __grid_constant__ gemm_args args,
                                      ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  bf16_smem *sm = (bf16_smem *)gemm_smem_base(smem_raw);
  bf16_pipe *st = &sm->pipe;
  ws_ctx ctx = WS_SELF(gemm_bf16, diag);
  /* wgmma reads a stage warpgroup-wide: released once per warp (ws_pipe_release_warp_at) */
  /* the loader's leader commits each stage with its bytes (gemm_load_tiles, dense A) */
  ws_pipe pipe = WS_PIPE_VIEW(st, "gemm_bf16", 1, 2 * WS_ROLE_WARPS(gemm_bf16, G_MATH));
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC); /* TMA in, wgmma out */
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  gemm_cursor cur = gemm_cursor_start(&args.shape);
  gemm_tile tile;
  ws_cursor c = {0, 0};

  if (ctx.role == G_LOADER) {
    WS_ENTER_ROLE(gemm_bf16, G_LOADER);
    if (ctx.spare) return;
    gemm_load_tiles(&pipe, &ctx, &args, BF16_BK, (uint8_t *)st->slot, sizeof(bf16_stage), offsetof(bf16_stage, b), 0, &map_a,
                    &map_b);
    return;
  }

  WS_ENTER_ROLE(gemm_bf16, G_MATH);
  float acc[BF16_BN / 2];
  for (int t = (int)blockIdx.x; gemm_tile_at(&args.shape, &cur, t, &tile); t += (int)gridDim.x) {
    /* One K step's wgmmas stay in flight while the next stage is awaited: a stage is
     * released once the group after it was issued and it has completed (wait_group 1). */
    ws_cursor prev = c;
    uint32_t full = ws_pipe_probe_at(&pipe, c);
    for (int ks = tile.k0; ks < tile.k1; ks++, c = ws_cursor_next(c, pipe.stages)) {
      const uint32_t s = c.stage;
      ws_pipe_wait_probed_at(&pipe, &ctx, c, full);
      const uint64_t da = ws_wgmma_desc_k128b(st->slot[s].a + ctx.replica * 64 * BF16_BK);
      const uint64_t db = ws_wgmma_desc_k128b(st->slot[s].b);
      ws_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BF16_BK / 16; kk++)
        ws_wgmma_m64n256k16_bf16(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32),
                                 ks > tile.k0 || kk > 0);
      ws_wgmma_commit_group();
      /* probe the next stage now, look at the answer at the next issue; never past the
       * tile's last block (gemm_fp8.cu) */
      full = ks + 1 < tile.k1 ? ws_pipe_probe_at(&pipe, ws_cursor_next(c, pipe.stages)) : 0u;
      if (ks > tile.k0) {
        WS_WGMMA_WAIT_GROUP(1);
        ws_pipe_release_warp_at(&pipe, &ctx, prev);
      }
      prev = c;
    }
    WS_WGMMA_WAIT_GROUP(0);
    ws_pipe_release_warp_at(&pipe, &ctx, prev);
    if (args.cluster_split) { /* one item per CTA */
      bf16_cluster_sum(sm, &ctx, &args, &tile, acc);
      continue;
    }
    gemm_store_fragment<BF16_BN, 2>(&ctx, &args, &tile, tile.tm * BF16_BM + ctx.replica * 64, acc, sm->out[ctx.replica],
                                    &map_d);
  }
  ws_store_drain(&ctx);
}

extern "C" const gemm_kernel *gemm_bf16_kernel_desc(void) {
  static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_BF16, "gemm_bf16", gemm_bf16_roles, gemm_bf16_NROLES, sizeof(bf16_smem) + 1024,
                                (const void *)gemm_bf16_kernel, BF16_BM, BF16_BN, BF16_BK, 0, WS_DTYPE_BF16, 2, 1, 0};
  return &k;
}
