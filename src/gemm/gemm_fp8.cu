/* gemm_fp8.cu - FP8 (E4M3) GEMM with DeepSeek-style block scales, dense or grouped:
 * D[r][j] = sum_k A[r][k] a_scale[r][k/128] B[g][j][k] b_scale[g][j/128][k/128], bf16 out.
 *
 * Persistent grid; CTAs walk 128 x 128 tiles of D group by group (gemm_sched.cuh).
 *   LOADER (1 warp, 40 regs)       per 128-wide K block: acquire a stage, TMA-load the A
 *                                  tile (128 x 128 bytes) and the group's B tile, commit.
 *   MATH   (4 warps x 2, 232 regs) replica r owns rows 64r..64r+63: per K block, 4 x wgmma
 *                                  m64n128k32 into a fresh fp32 accumulator, then promote:
 *                                  total += acc x a_scale(row) x b_scale (fp32, CUDA cores);
 *                                  the scales are loaded before the wait, so their latency
 *                                  hides behind it. The two-level sum also keeps the
 *                                  tensor cores' limited FP8 accumulation short.
 * STATUS: compiled and SASS-checked (QGMMA) only; not yet run on a GPU. */
#include "../core/internal.h"
#include "gemm_sched.cuh"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "warpspec/gemm.h"

#include <cuda_bf16.h>

#define FP8_BM 128
#define FP8_BN 128
#define FP8_BK 128
#define FP8_STAGES 6

typedef struct __align__(1024) {
  uint8_t a[FP8_BM * FP8_BK]; /* 16 KiB */
  uint8_t b[FP8_BN * FP8_BK]; /* 16 KiB */
} fp8_stage;

WS_PIPE_STORAGE(fp8_pipe, fp8_stage, FP8_STAGES);

#define FP8_ROLES(ROLE) ROLE(F_LOADER, 1, 40, 1) ROLE(F_MATH, 4, 232, 2)
WS_DECLARE_ROLES(gemm_fp8, FP8_ROLES);

typedef struct {
  uint16_t *d;
  const float *a_scale;
  const float *b_scale;
  int k;
  long long rows; /* rows of A and D */
  gemm_shape shape;
} fp8_args;

static __device__ __forceinline__ float ld_scale(const float *p) { return __ldg(p); }

WS_KERNEL(gemm_fp8) gemm_fp8_kernel(const __grid_constant__ ws_tmap map_a, const __grid_constant__ ws_tmap map_b,
                                    const __grid_constant__ fp8_args args, ws_diag diag) {
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  fp8_pipe *st = (fp8_pipe *)(((uintptr_t)smem_raw + 1023) & ~(uintptr_t)1023);
  ws_ctx ctx = WS_SELF(gemm_fp8, diag);
  ws_pipe pipe = WS_PIPE_VIEW(st, "gemm_fp8", WS_ROLE_THREADS(gemm_fp8, F_LOADER), 2 * WS_ROLE_THREADS(gemm_fp8, F_MATH));
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC);
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  const int kblocks = args.k / FP8_BK, n = args.shape.n;
  gemm_cursor cur = gemm_cursor_start(&args.shape);
  gemm_tile tile;
  ws_cursor c = {0, 0};

  if (ctx.role == F_LOADER) {
    WS_ENTER_ROLE(gemm_fp8, F_LOADER);
    if (ctx.spare) return;
    if (ws_role_leader(&ctx)) {
      ws_prefetch_tensormap(&map_a.map);
      ws_prefetch_tensormap(&map_b.map);
    }
    for (long long t = blockIdx.x; gemm_tile_at(&args.shape, &cur, t, &tile); t += gridDim.x)
      for (int kb = 0; kb < kblocks; kb++, c = ws_cursor_next(c, pipe.stages)) {
        const uint32_t s = ws_pipe_acquire_at(&pipe, &ctx, c);
        ws_pipe_load_tile_2d_at(&pipe, &ctx, c, st->slot[s].a, &map_a, kb * FP8_BK, tile.row0 + tile.tm * FP8_BM);
        ws_pipe_load_tile_2d_at(&pipe, &ctx, c, st->slot[s].b, &map_b, kb * FP8_BK, tile.g * n + tile.tn * FP8_BN);
        ws_pipe_commit_at(&pipe, &ctx, c);
      }
    return;
  }

  WS_ENTER_ROLE(gemm_fp8, F_MATH);
  float acc[FP8_BN / 2], total[FP8_BN / 2];
  const int warp = ctx.warp, lane = ctx.lane;
  for (long long t = blockIdx.x; gemm_tile_at(&args.shape, &cur, t, &tile); t += gridDim.x) {
    const int local0 = tile.tm * FP8_BM + ctx.replica * 64 + warp * 16 + lane / 4;
    const long long r0 = (long long)tile.row0 + local0, r1 = r0 + 8;
    const int ok0 = local0 < tile.count && r0 < args.rows, ok1 = local0 + 8 < tile.count && r1 < args.rows;
    const float *sb = args.b_scale + ((size_t)tile.g * (n / 128) + (size_t)tile.tn * (FP8_BN / 128)) * kblocks;
#pragma unroll
    for (int i = 0; i < FP8_BN / 2; i++) total[i] = 0.0f;
    for (int kb = 0; kb < kblocks; kb++, c = ws_cursor_next(c, pipe.stages)) {
      const float s0 = ok0 ? ld_scale(args.a_scale + r0 * kblocks + kb) : 0.0f;
      const float s1 = ok1 ? ld_scale(args.a_scale + r1 * kblocks + kb) : 0.0f;
      const float sbk = ld_scale(sb + kb);
      const uint32_t s = c.stage;
      ws_pipe_wait_at(&pipe, &ctx, c);
      const uint64_t da = ws_wgmma_desc_k128b(st->slot[s].a + ctx.replica * 64 * FP8_BK);
      const uint64_t db = ws_wgmma_desc_k128b(st->slot[s].b);
      ws_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < FP8_BK / 32; kk++)
        ws_wgmma_m64n128k32_e4m3(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32), kk > 0);
      ws_wgmma_commit_group();
      WS_WGMMA_WAIT_GROUP(0);
      ws_pipe_release_at(&pipe, &ctx, c);
      const float f0 = s0 * sbk, f1 = s1 * sbk;
#pragma unroll
      for (int j = 0; j < FP8_BN / 8; j++) {
        total[4 * j + 0] += acc[4 * j + 0] * f0;
        total[4 * j + 1] += acc[4 * j + 1] * f0;
        total[4 * j + 2] += acc[4 * j + 2] * f1;
        total[4 * j + 3] += acc[4 * j + 3] * f1;
      }
    }
#pragma unroll
    for (int j = 0; j < FP8_BN / 8; j++) {
      const int col = tile.tn * FP8_BN + 8 * j + 2 * (lane % 4);
      if (col >= n) continue;
      if (ok0)
        *(__nv_bfloat162 *)(args.d + (size_t)r0 * n + col) = __floats2bfloat162_rn(total[4 * j], total[4 * j + 1]);
      if (ok1)
        *(__nv_bfloat162 *)(args.d + (size_t)r1 * n + col) = __floats2bfloat162_rn(total[4 * j + 2], total[4 * j + 3]);
    }
  }
}

extern "C" ws_status ws_gemm_fp8(const ws_gemm_problem *p, cudaStream_t stream) {
  static thread_local ws_plan plans[16];
  static thread_local int planned[16];
  int dev = 0, sms = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_REQUIRE(dev < 16, "ws_gemm: device %d beyond 16", dev);
  WS_CUDA_TRY(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, dev));
  ws_status s;
  if (!planned[dev]) {
    if ((s = ws_plan_init(&plans[dev], "gemm_fp8", gemm_fp8_roles, gemm_fp8_NROLES, 0)) != WS_OK) return s;
    if ((s = ws_plan_set_smem(&plans[dev], sizeof(fp8_pipe) + 1024)) != WS_OK) return s;
    planned[dev] = 1;
  }
  const size_t rows = ws_gemm_rows(p);
  if (rows == 0) return WS_OK;
  ws_tmap ma, mb;
  if ((s = ws_tmap_2d_swizzled(&ma, p->a, WS_DTYPE_U8, rows, (uint64_t)p->k, (uint64_t)p->k, FP8_BM, FP8_BK,
                               WS_SWIZZLE_128B)) != WS_OK)
    return s;
  if ((s = ws_tmap_2d_swizzled(&mb, p->b, WS_DTYPE_U8, (uint64_t)p->n * p->groups, (uint64_t)p->k, (uint64_t)p->k, FP8_BN,
                               FP8_BK, WS_SWIZZLE_128B)) != WS_OK)
    return s;
  fp8_args a;
  a.d = (uint16_t *)p->d;
  a.a_scale = p->a_scale;
  a.b_scale = p->b_scale;
  a.k = p->k;
  a.rows = (long long)rows;
  a.shape.layout = p->layout;
  a.shape.groups = p->groups;
  a.shape.m = p->m;
  a.shape.n = p->n;
  a.shape.bm = FP8_BM;
  a.shape.bn = FP8_BN;
  a.shape.offsets = p->group_offsets;
  a.shape.rows = p->group_rows;
  const long long dense_tiles = (long long)((p->m + FP8_BM - 1) / FP8_BM) * ((p->n + FP8_BN - 1) / FP8_BN);
  const unsigned grid = (unsigned)(p->layout == WS_GEMM_DENSE && dense_tiles < sms ? dense_tiles : sms);
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&ma, &mb, &a, &diag};
  return ws_plan_launch(&plans[dev], (const void *)gemm_fp8_kernel, dim3{grid, 1, 1}, stream, args);
}

extern "C" ws_status ws_gemm_fp8_plan(ws_plan *plan) {
  WS_REQUIRE(plan != NULL, "ws_gemm_plan: plan is NULL");
  ws_status s = ws_plan_init(plan, "gemm_fp8", gemm_fp8_roles, gemm_fp8_NROLES, 0);
  return s != WS_OK ? s : ws_plan_set_smem(plan, sizeof(fp8_pipe) + 1024);
}
