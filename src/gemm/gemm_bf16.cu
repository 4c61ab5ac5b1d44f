/* gemm_bf16.cu - BF16 GEMM D = A x B^T, dense or grouped, on the library's roles and pipes.
 *
 * Persistent grid; CTAs walk 128 x 256 tiles of D group by group (gemm_sched.cuh).
 *   LOADER (1 warp, 40 regs)       per 64-wide K step: acquire a stage, TMA-load the A
 *                                  tile (128 x 64) and the group's B tile (256 x 64), both
 *                                  with the 128-byte swizzle, commit (bytes from the maps).
 *   MATH   (4 warps x 2, 232 regs) replica r owns rows 64r..64r+63 of the tile: wait,
 *                                  4 x wgmma m64n256k16 from shared memory, release the
 *                                  previous stage once its wgmmas are done (one group in
 *                                  flight); after the last K step, write bf16 rows that
 *                                  belong to the group (A rows past it are loaded, unused).
 * STATUS: compiled and SASS-checked (HGMMA) only; not yet run on a GPU. */
#include "../core/internal.h"
#include "gemm_sched.cuh"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "warpspec/gemm.h"

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

#define BF16_ROLES(ROLE) ROLE(G_LOADER, 1, 40, 1) ROLE(G_MATH, 4, 232, 2)
WS_DECLARE_ROLES(gemm_bf16, BF16_ROLES);

typedef struct {
  uint16_t *d;
  int k;
  gemm_shape shape;
} bf16_args;

WS_KERNEL(gemm_bf16) gemm_bf16_kernel(const __grid_constant__ ws_tmap map_a, const __grid_constant__ ws_tmap map_b,
                                      const __grid_constant__ bf16_args args, ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  bf16_pipe *st = (bf16_pipe *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  ws_ctx ctx = WS_SELF(gemm_bf16, diag);
  ws_pipe pipe = WS_PIPE_VIEW(st, "gemm_bf16", WS_ROLE_THREADS(gemm_bf16, G_LOADER), 2 * WS_ROLE_THREADS(gemm_bf16, G_MATH));
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC); /* TMA in, wgmma out */
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  const int ksteps = args.k / BF16_BK, n = args.shape.n;
  gemm_cursor cur = gemm_cursor_start(&args.shape);
  gemm_tile tile;
  ws_cursor c = {0, 0};

  if (ctx.role == G_LOADER) {
    WS_ENTER_ROLE(gemm_bf16, G_LOADER);
    if (ctx.spare) return;
    if (ws_role_leader(&ctx)) {
      ws_prefetch_tensormap(&map_a.map);
      ws_prefetch_tensormap(&map_b.map);
    }
    for (long long t = blockIdx.x; gemm_tile_at(&args.shape, &cur, t, &tile); t += gridDim.x)
      for (int ks = 0; ks < ksteps; ks++, c = ws_cursor_next(c, pipe.stages)) {
        const uint32_t s = ws_pipe_acquire_at(&pipe, &ctx, c);
        ws_pipe_load_tile_2d_at(&pipe, &ctx, c, st->slot[s].a, &map_a, ks * BF16_BK, tile.row0 + tile.tm * BF16_BM);
        ws_pipe_load_tile_2d_at(&pipe, &ctx, c, st->slot[s].b, &map_b, ks * BF16_BK, tile.g * n + tile.tn * BF16_BN);
        ws_pipe_commit_at(&pipe, &ctx, c);
      }
    return;
  }

  WS_ENTER_ROLE(gemm_bf16, G_MATH);
  float acc[BF16_BN / 2];
  const int warp = ctx.warp, lane = ctx.lane;
  for (long long t = blockIdx.x; gemm_tile_at(&args.shape, &cur, t, &tile); t += gridDim.x) {
    /* One K step's wgmmas stay in flight while the next stage is awaited: a stage is
     * released once the group after it was issued and it has completed (wait_group 1). */
    ws_cursor prev = c;
    for (int ks = 0; ks < ksteps; ks++, c = ws_cursor_next(c, pipe.stages)) {
      const uint32_t s = c.stage;
      ws_pipe_wait_at(&pipe, &ctx, c);
      const uint64_t da = ws_wgmma_desc_k128b(st->slot[s].a + ctx.replica * 64 * BF16_BK);
      const uint64_t db = ws_wgmma_desc_k128b(st->slot[s].b);
      ws_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < BF16_BK / 16; kk++)
        ws_wgmma_m64n256k16_bf16(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32),
                                 ks > 0 || kk > 0);
      ws_wgmma_commit_group();
      if (ks > 0) {
        WS_WGMMA_WAIT_GROUP(1);
        ws_pipe_release_at(&pipe, &ctx, prev);
      }
      prev = c;
    }
    WS_WGMMA_WAIT_GROUP(0);
    ws_pipe_release_at(&pipe, &ctx, prev);
    /* accumulator layout of m64nNk16: pair j covers columns 8j + 2(lane % 4) + {0, 1} of
     * rows 16 warp + lane / 4 (registers 4j, 4j+1) and that row + 8 (4j+2, 4j+3) */
    const int local0 = tile.tm * BF16_BM + ctx.replica * 64 + warp * 16 + lane / 4;
#pragma unroll
    for (int j = 0; j < BF16_BN / 8; j++) {
      const int col = tile.tn * BF16_BN + 8 * j + 2 * (lane % 4);
      if (col >= n) continue;
#pragma unroll
      for (int h = 0; h < 2; h++) {
        const int local = local0 + 8 * h;
        if (local >= tile.count) continue;
        const __nv_bfloat162 v = __floats2bfloat162_rn(acc[4 * j + 2 * h], acc[4 * j + 2 * h + 1]);
        *(__nv_bfloat162 *)(args.d + (size_t)(tile.row0 + local) * n + col) = v;
      }
    }
  }
}

extern "C" ws_status ws_gemm_bf16(const ws_gemm_problem *p, cudaStream_t stream) {
  static thread_local ws_plan plans[16];
  static thread_local int planned[16];
  int dev = 0, sms = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_REQUIRE(dev < 16, "ws_gemm: device %d beyond 16", dev);
  WS_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  ws_status s;
  if (!planned[dev]) {
    if ((s = ws_plan_init(&plans[dev], "gemm_bf16", gemm_bf16_roles, gemm_bf16_NROLES, 0)) != WS_OK) return s;
    if ((s = ws_plan_set_smem(&plans[dev], sizeof(bf16_pipe) + 1024)) != WS_OK) return s;
    planned[dev] = 1;
  }
  const size_t rows = ws_gemm_rows(p);
  if (rows == 0) return WS_OK;
  ws_tmap ma, mb;
  if ((s = ws_tmap_2d_swizzled(&ma, p->a, WS_DTYPE_BF16, rows, (uint64_t)p->k, (uint64_t)p->k * 2, BF16_BM, BF16_BK,
                               WS_SWIZZLE_128B)) != WS_OK)
    return s;
  if ((s = ws_tmap_2d_swizzled(&mb, p->b, WS_DTYPE_BF16, (uint64_t)p->n * p->groups, (uint64_t)p->k, (uint64_t)p->k * 2,
                               BF16_BN, BF16_BK, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  bf16_args a;
  a.d = (uint16_t *)p->d;
  a.k = p->k;
  a.shape.layout = p->layout;
  a.shape.groups = p->groups;
  a.shape.m = p->m;
  a.shape.n = p->n;
  a.shape.bm = BF16_BM;
  a.shape.bn = BF16_BN;
  a.shape.offsets = p->group_offsets;
  a.shape.rows = p->group_rows;
  /* dense: exactly the tiles; grouped: the counts live on the device, so one CTA per SM */
  const long long dense_tiles = (long long)((p->m + BF16_BM - 1) / BF16_BM) * ((p->n + BF16_BN - 1) / BF16_BN);
  const unsigned grid = (unsigned)(p->layout == WS_GEMM_DENSE && dense_tiles < sms ? dense_tiles : sms);
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&ma, &mb, &a, &diag};
  return ws_plan_launch(&plans[dev], (const void *)gemm_bf16_kernel, dim3{grid, 1, 1}, stream, args);
}

extern "C" ws_status ws_gemm_bf16_plan(ws_plan *plan) {
  WS_REQUIRE(plan != NULL, "ws_gemm_plan: plan is NULL");
  ws_status s = ws_plan_init(plan, "gemm_bf16", gemm_bf16_roles, gemm_bf16_NROLES, 0);
  return s != WS_OK ? s : ws_plan_set_smem(plan, sizeof(bf16_pipe) + 1024);
}
