/* gemm_fp8.cu - FP8 (E4M3) GEMM with DeepSeek-style block scales, dense or grouped:
 * D[r][j] = sum_k A[r][k] a_scale[r][k/128] B[g][j][k] b_scale[g][j/128][k/128], bf16 out.
 *
 * Persistent grid; CTAs walk WGS x 64 by 128 tiles of D group by group (gemm_sched.cuh).
 *   MATH   (4 warps x WGS) replica r owns rows 64r..64r+63: per K block, 4 x wgmma
 *                          m64n128k32 into a fresh fp32 accumulator, then promote:
 *                          total += acc x a_scale(row) x b_scale (fp32, CUDA cores). The
 *                          two-level sum applies the block scales and keeps the tensor
 *                          cores' limited FP8 accumulation short.
 *   LOADER (1 warp)        per 128-wide K block: acquire a stage, TMA-load the A tile
 *                          (WGS x 64 x 128 bytes) and the group's B tile (and, 192-row
 *                          tile with K-block-major scales, the block's scales), commit.
 * Two instances: gemm_fp8 (WGS = 2, 128-row tiles, 6 stages) and gemm_fp8_wide (WGS = 3,
 * 192-row tiles, 4 stages, setmaxnreg 160 / 32); ws_gemm_tile picks one per problem. A
 * gathered A (a_rows: the MoE layer's L1 over the received rows in place) takes a third,
 * gemm_fp8_gather: the 128-row tile with four loader warps copying rows and scales
 * (gemm_loader.cuh), 5 stages (each with its scale slot), the scales read from the stage.
 * Why three (H200, docs/benchmarks.md): a warpgroup's K block is a chain of four
 * dependent wgmmas, and one chain alone keeps the tensor cores about half busy. The
 * warpgroups wait on the same stage, so their chains run together and their promotions
 * run together, with nothing in flight during the promotion; a third chain per stage
 * took 8192^3 from ~1055 to ~1160-1180 TFLOPS; reading the scales from the stage
 * (K-block-major scales, one TMA box per stage) instead of three global loads per K
 * block took it to ~1280, at the board's power limit (as cuBLASLt, about 1400 MHz both).
 * The K loop is kept lean (scale offsets pinned per tile, one descriptor word, scales
 * loaded a block ahead, the next stage probed right after the issue). Measured and not
 * kept: ordered issue (two and three warpgroups), strict turns, two accumulator chains,
 * two accumulators, a split-N software pipeline, cuBLASLt's own order, 256-row tiles,
 * yield/reuse bits of the promotion FFMAs patched in
 * SASS, and the scales copied into shared memory with 4-byte cp.async by the loader warp:
 * all within 3% or slower, the last 12-20% slower. The 128-row kernel keeps the global
 * scale loads: every shared-memory form made it ~10% slower.
 * CTA pairs (gemm_fp8_wide_pair: 2-CTA clusters side by side along N, each CTA loading half
 * of the shared A tile into both by multicast) measured level at 8192^3 early on, and 5-18%
 * faster at every shape once the 192-row tile read its scales from the stage (session 25):
 * on by default (WARPSPEC_GEMM_PAIR), A by TMA only. The 128-row tile in pairs was 5-13%
 * slower on dense 64-512-row problems and level on the MoE layer (branch s25-gemm-pair128).
 * The epilogue stores full rows through shared memory and TMA (gemm_epilogue.cuh). */
#include "../core/internal.h"
#include "gemm_epilogue.cuh"
#include "gemm_loader.cuh"
#include "fp8_mma.cuh"
#include "warpspec/device/wgmma.cuh"

#include <cuda_bf16.h>

/* The 192-row tile's pipe depth and epilogue buffers per warpgroup (shared memory: 4 x 41
 * KiB + 3 x 16 KiB; 5 stages with one buffer measured the same). */
#ifndef FP8_WIDE_STAGES
#define FP8_WIDE_STAGES 4
#endif
#ifndef FP8_WIDE_NBUF
#define FP8_WIDE_NBUF 2
#endif

/* Two tile shapes share one math loop (fp8_math below): the 128-row tile of two math
 * warpgroups (gemm_fp8) and the 192-row tile of three (gemm_fp8_wide). */
#define FP8_BN 128
#define FP8_BK 128

/* A stage: the A and B tiles (TMA, 128B swizzle); the 192-row tile's also holds the K
 * block's scales when they come by TMA (gemm_loader.cuh: bm A scales, then 4 B scales). */
typedef struct __align__(1024) {
  uint8_t a[128 * FP8_BK]; /* 16 KiB */
  uint8_t b[FP8_BN * FP8_BK]; /* 16 KiB */
} fp8_stage;

typedef struct __align__(1024) {
  uint8_t a[192 * FP8_BK]; /* 24 KiB */
  uint8_t b[FP8_BN * FP8_BK]; /* 16 KiB */
  float scales[GEMM_SCALE_BYTES(192) / 4];
} fp8_wide_stage;

/* The gathered A's 128-row stage: the loader copies each K block's scales into it. */
typedef struct __align__(1024) {
  uint8_t a[128 * FP8_BK]; /* 16 KiB */
  uint8_t b[FP8_BN * FP8_BK]; /* 16 KiB */
  float scales[GEMM_SCALE_BYTES(128) / 4];
} fp8_gather_stage;

WS_PIPE_STORAGE(fp8_pipe, fp8_stage, 6);
WS_PIPE_STORAGE(fp8_wide_pipe, fp8_wide_stage, FP8_WIDE_STAGES);
/* 5 x 33 KiB beside two epilogue buffers per warpgroup; 6 stages fit with one
 * (-DFP8_GATHER_STAGES=6 -DFP8_GATHER_NBUF=1, for measurement: the gathered loader is
 * latency-bound, ncu session 22) */
#ifndef FP8_GATHER_STAGES
#define FP8_GATHER_STAGES 5
#endif
#ifndef FP8_GATHER_NBUF
#define FP8_GATHER_NBUF 2
#endif
WS_PIPE_STORAGE(fp8_gather_pipe, fp8_gather_stage, FP8_GATHER_STAGES);

/* The pipe, then per math warpgroup NBUF 64 x 64 bf16 chunks for the TMA-store epilogue. */
typedef struct {
  fp8_pipe pipe;
  __align__(1024) uint8_t out[2][2 * GEMM_CHUNK_BYTES];
} fp8_smem;

typedef struct {
  fp8_wide_pipe pipe;
  __align__(1024) uint8_t out[3][FP8_WIDE_NBUF * GEMM_CHUNK_BYTES];
} fp8_wide_smem;

typedef struct {
  fp8_gather_pipe pipe;
  __align__(1024) uint8_t out[2][FP8_GATHER_NBUF * GEMM_CHUNK_BYTES];
} fp8_gather_smem;

/* Math first, so its warpgroups sit on warpgroup boundaries, then one loader warp:
 * 288 threads at the entry cap (ptxas allocates as if 384: 168 registers), no
 * setmaxnreg. 3-4% faster than a 40/232/232 split of the same loop, same-run A/B on an
 * H200 (8192^3: 963 / 972 against 936 / 936 TFLOPS). */
#define FP8_ROLES(ROLE) ROLE(F_MATH, 4, WS_REGS_ENTRY, 2) ROLE(F_LOADER, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(gemm_fp8, FP8_ROLES);
/* Three math warpgroups and a loader warpgroup (one working warp): 512 threads enter at
 * 128 registers; the math groups take 160, the loader group gives back to 32 (the whole
 * pool: 3 x 128 x 160 + 128 x 32 = 65536). */
#define FP8_WIDE_ROLES(ROLE) ROLE(FW_MATH, 4, 160, 3) ROLE(FW_LOADER, 1, 32, 1)
WS_DECLARE_ROLES(gemm_fp8_wide, FP8_WIDE_ROLES);
/* The same roles for the pair kernel, under its own name (timeouts name its pipe) */
#define FP8_WIDE_PAIR_ROLES(ROLE) ROLE(FWP_MATH, 4, 160, 3) ROLE(FWP_LOADER, 1, 32, 1)
WS_DECLARE_ROLES(gemm_fp8_wide_pair, FP8_WIDE_PAIR_ROLES);
/* The gathered A: gemm_fp8's math and four loader warps, 384 threads at the entry cap
 * (168 registers, as gemm_fp8's 288 get). */
#define FP8_GATHER_ROLES(ROLE) ROLE(FG_MATH, 4, WS_REGS_ENTRY, 2) ROLE(FG_LOADER, 1, WS_REGS_ENTRY, 4)
WS_DECLARE_ROLES(gemm_fp8_gather, FP8_GATHER_ROLES);

typedef struct {
  float a0, a1, b;
} fp8_scales;

/* Where this thread's scales live in global memory for one tile, as element offsets (the
 * bases stay in the kernel's constant bank): a_scale rows r0 and r0 + 8 (clamped into A,
 * so the loads need no predicate: rows past the group are never stored) and the tile's
 * row of b_scale; K block kb adds kb x args.a_ks (A) and kb (B). 32-bit offsets:
 * ws_gemm_check bounds the scale counts. */
typedef struct {
  uint32_t a0, a1, b;
} fp8_scale_ptrs;

static __device__ __forceinline__ fp8_scales fp8_load_scales(const gemm_args *args, fp8_scale_ptrs p, int kb) {
  fp8_scales s;
  const uint32_t ka = (uint32_t)kb * args->a_ks;
  s.a0 = __ldg(args->a_scale + (p.a0 + ka));
  s.a1 = __ldg(args->a_scale + (p.a1 + ka));
  s.b = __ldg(args->b_scale + (p.b + (uint32_t)kb));
  return s;
}

/* total += acc x a_scale x b_scale; registers 4j, 4j+1 are row r0, 4j+2, 4j+3 row r0 + 8. */
static __device__ __forceinline__ void fp8_promote(float *total, const float *acc, fp8_scales s) {
  const float f0 = s.a0 * s.b, f1 = s.a1 * s.b;
#pragma unroll
  for (int j = 0; j < FP8_BN / 8; j++) {
    total[4 * j + 0] += acc[4 * j + 0] * f0;
    total[4 * j + 1] += acc[4 * j + 1] * f0;
    total[4 * j + 2] += acc[4 * j + 2] * f1;
    total[4 * j + 3] += acc[4 * j + 3] * f1;
  }
}

/* One math warpgroup's part of every tile: WGS warpgroups of 64 rows each share a stage
 * (tile WGS x 64 rows by FP8_BN columns), then store their fragment. SMEM_SCALES: the
 * loader put each K block's scales into its stage (args.scale_tma); else every thread
 * loads its three from global memory one K block ahead. PAIR 2 (gemm_fp8_wide_pair): the
 * CTA is rank blockIdx.x & 1 of a pair sharing each A tile (gemm_sched.cuh); each warp
 * releases its stage in both CTAs (both loaders write into it), a phantom tile is not
 * stored, and the CTA leaves only with its peer. */
template <int WGS, int NBUF, int SMEM_SCALES, int PAIR = 1, typename SMEM>
WS_DEV void fp8_math(SMEM *sm, const ws_pipe *pipe_in, const ws_ctx *ctx_in, const gemm_args *args_in,
                     const ws_tmap *map_d) {
  const ws_pipe pipe = *pipe_in;
  const ws_ctx ctx = *ctx_in;
  const gemm_args &args = *args_in;
  const int kblocks = args.k / FP8_BK, n = args.shape.n, rank = PAIR > 1 ? (int)(blockIdx.x & 1u) : 0;
  gemm_cursor cur = gemm_cursor_start<PAIR>(&args.shape);
  gemm_tile tile;
  /* The warpgroup from lane 0. ws_ctx_make's warp index is warp-uniform to the compiler
   * already; this second broadcast still changes the schedule ptxas picks, and the
   * kernel was measured with it (docs/benchmarks.md, run N). */
  const int wg = __shfl_sync(0xffffffffu, ctx.replica, 0);
  const uint64_t da0 = ws_wgmma_desc_k128b(sm->pipe.slot[0].a + wg * 64 * FP8_BK);
  const uint64_t db0 = ws_wgmma_desc_k128b(sm->pipe.slot[0].b);
  const uint32_t stage_bytes = (uint32_t)sizeof(sm->pipe.slot[0]);
  /* this thread's rows inside the tile: lr and lr + 8 */
  const int lr = ctx.replica * 64 + ctx.warp * 16 + ctx.lane / 4;
  float acc[FP8_BN / 2], total[FP8_BN / 2];
  ws_cursor c = {0, 0};
  for (int t = (int)blockIdx.x / PAIR; gemm_tile_at<PAIR>(&args.shape, &cur, t, &tile, rank); t += (int)gridDim.x / PAIR) {
    const int local_wg = tile.tm * (WGS * 64) + ctx.replica * 64;
    fp8_scale_ptrs sp = {0u, 0u, 0u};
    fp8_scales s = {0.0f, 0.0f, 0.0f};
    if constexpr (!SMEM_SCALES) {
      const int last = (int)(args.rows - 1), r0 = tile.row0 + tile.tm * (WGS * 64) + lr; /* rows < 2^31 */
      /* (a gathered A never comes here: its loader puts the scales into the stages) */
      const int s0 = min(r0, last), s1 = min(r0 + 8, last);
      sp.a0 = (uint32_t)s0 * args.a_rs;
      sp.a1 = (uint32_t)s1 * args.a_rs;
      /* a phantom tile (pairs) reads its partner's B scales: its own row of them lies past b_scale */
      const int tn = PAIR > 1 && gemm_tile_phantom(&args.shape, &tile) ? tile.tn - 1 : tile.tn;
      sp.b = ((uint32_t)tile.g * (uint32_t)(n / 128) + (uint32_t)tn * (FP8_BN / 128)) * (uint32_t)kblocks;
      ws_pin_u32(&sp.a0); /* computed once per tile: ptxas would otherwise redo it per K block */
      ws_pin_u32(&sp.a1);
      ws_pin_u32(&sp.b);
      /* Scales are loaded one K block ahead: loaded in the same block, the compiler put
       * the first use of them ahead of the wgmma issue, and every block waited for the
       * loads. */
      s = fp8_load_scales(&args, sp, tile.k0);
    }
    /* the stage's A scales start at the tile's first row & ~3 (TMA), at its first row (gathered) */
    const int a_first = args.a_rows ? 0 : tile.row0 & 3;
#pragma unroll
    for (int i = 0; i < FP8_BN / 2; i++) total[i] = 0.0f;
    uint32_t full = ws_pipe_probe_at(&pipe, c);
    for (int kb = tile.k0; kb < tile.k1; kb++, c = ws_cursor_next(c, pipe.stages)) {
      fp8_scales next = s;
      if constexpr (!SMEM_SCALES) next = fp8_load_scales(&args, sp, min(kb + 1, tile.k1 - 1));
      fp8_issue(acc, &pipe, &ctx, da0, db0, stage_bytes, c, full, args.a_rows != NULL);
      if constexpr (SMEM_SCALES) {
        /* The block's scales came with its tiles: read after the issue (the latency hides
         * behind the wgmmas) and before the release. Three shared loads in place of the
         * global ones: +5% at large M on an H200 (docs/benchmarks.md). */
        const float *sc = sm->pipe.slot[c.stage].scales;
        s.a0 = ws_ld_shared_f32(sc + a_first + lr);
        s.a1 = ws_ld_shared_f32(sc + a_first + lr + 8);
        s.b = ws_ld_shared_f32(sc + GEMM_SCALE_A_BYTES(WGS * 64) / 4 + (kb & 3));
      }
      /* Probe the next stage now and look at the answer only at the next issue: the
       * probe's latency, paid before every issue when waited for at once, hides behind
       * the wgmmas and the promotion. Not past the tile's last block: that stage is not
       * this tile's (with try_wait, the probe's form before session 45, a probe of a stage
       * that was not coming held the warp and cost small problems up to 20%). */
      full = kb + 1 < tile.k1 ? ws_pipe_probe_at(&pipe, ws_cursor_next(c, pipe.stages)) : 0u;
      WS_WGMMA_WAIT_GROUP(0);
      ws_pipe_release_warp_at(&pipe, &ctx, c);
      if constexpr (PAIR > 1) ws_pipe_release_warp_to_at(&pipe, &ctx, c, (uint32_t)rank ^ 1u);
      fp8_promote(total, acc, s);
      s = next;
    }
    if (PAIR == 1 || !gemm_tile_phantom(&args.shape, &tile))
      gemm_store_fragment<FP8_BN, NBUF>(&ctx, &args, &tile, local_wg, total, sm->out[ctx.replica], map_d);
  }
  ws_store_drain(&ctx);
  /* the peer's math arrives on this CTA's empty barriers, and its loader copies into this
   * CTA's stages, until its last K block: neither CTA leaves before both got here */
  if constexpr (PAIR > 1) ws_exit_sync_cluster();
}

/* The kernels: the pipe (readers release once per warp: wgmma reads a stage
 * warpgroup-wide, ws_pipe_release_warp_at), the role branches, and the bodies above. */
#define FP8_KERNEL_BODY(P, SMEM, LOADER, LOAD, MATH, WGS, SCALE_OFFSET, PARTS, PAIRS, ...)                   \
  extern __shared__ __align__(1024) uint8_t smem_raw[];                                                       \
  SMEM *sm = (SMEM *)gemm_smem_base(smem_raw);                                                                \
  ws_ctx ctx = WS_SELF(P, diag);                                                                              \
  const int parts = (PARTS); /* loader warps at work: the padding warps join a gathered A's copies */        \
  /* PAIRS 2: both CTAs' math warps release each stage (their loaders both write into it) */                \
  /* a gathered A: every loader thread's cp.async arrival; dense: the leader's (gemm_load_tiles) */         \
  ws_pipe pipe = WS_PIPE_VIEW(&sm->pipe, #P, args.a_rows ? parts * WS_ROLE_THREADS(P, LOADER) : 1u,              \
                              (WGS) * WS_ROLE_WARPS(P, MATH) * (PAIRS));                                      \
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC);                                                 \
  if (threadIdx.x == 0) ws_pipe_init(&pipe);                                                                  \
  if ((PAIRS) > 1) ws_init_sync_cluster(); /* the peer's barriers exist before its first multicast */        \
  else ws_init_sync();                                                                                        \
  if (ctx.role == LOADER) {                                                                                   \
    WS_ENTER_ROLE(P, LOADER);                                                                                 \
    if (ctx.replica >= parts) return; /* a padding warp (ctx.spare) not needed */                            \
    LOAD(&pipe, &ctx, &args, FP8_BK, (uint8_t *)sm->pipe.slot, sizeof(sm->pipe.slot[0]),                      \
                    offsetof(__typeof__(sm->pipe.slot[0]), b), (SCALE_OFFSET), &map_a, &map_b, ctx.replica, parts); \
    return;                                                                                                   \
  }                                                                                                           \
  WS_ENTER_ROLE(P, MATH);                                                                                     \
  if (ctx.spare) return;                                                                                      \
  __VA_ARGS__

WS_KERNEL(gemm_fp8) gemm_fp8_kernel(const __grid_constant__ ws_tmap map_a, const __grid_constant__ ws_tmap map_b,
                                    const __grid_constant__ ws_tmap map_d, const __grid_constant__ gemm_args args,
                                    ws_diag diag) {
  /* scales from global memory: through shared memory this tile measured 10% slower */
  FP8_KERNEL_BODY(gemm_fp8, fp8_smem, F_LOADER, gemm_load_tiles, F_MATH, 2, 0, 1, 1, fp8_math<2, 2, 0>(sm, &pipe, &ctx, &args, &map_d));
}

WS_KERNEL(gemm_fp8_wide) gemm_fp8_wide_kernel(const __grid_constant__ ws_tmap map_a,
                                              const __grid_constant__ ws_tmap map_b,
                                              const __grid_constant__ ws_tmap map_d,
                                              const __grid_constant__ gemm_args args, ws_diag diag) {
  /* gathered A: the loader warpgroup's four warps copy the rows and their scales (one warp
   * issuing every row's copies kept the L1 GEMM of the MoE layer at 2.4x the contiguous one) */
  FP8_KERNEL_BODY(gemm_fp8_wide, fp8_wide_smem, FW_LOADER, gemm_load_tiles, FW_MATH, 3, offsetof(fp8_wide_stage, scales),
                  args.a_rows ? 4 : 1, 1,
                  if (args.scale_tma || args.a_rows) fp8_math<3, FP8_WIDE_NBUF, 1>(sm, &pipe, &ctx, &args, &map_d);
                  else fp8_math<3, FP8_WIDE_NBUF, 0>(sm, &pipe, &ctx, &args, &map_d));
}

/* The 192-row tile in CTA pairs (clusters of two along N sharing each A tile by multicast,
 * gemm_load_tiles_pair; WARPSPEC_GEMM_PAIR, A by TMA only): cuBLASLt's kernels at the
 * shapes where we trail run 2-CTA clusters (docs/benchmarks.md, session 24). */
WS_KERNEL(gemm_fp8_wide_pair) gemm_fp8_wide_pair_kernel(const __grid_constant__ ws_tmap map_a,
                                                   const __grid_constant__ ws_tmap map_b,
                                                   const __grid_constant__ ws_tmap map_d,
                                                   const __grid_constant__ gemm_args args, ws_diag diag) {
  FP8_KERNEL_BODY(gemm_fp8_wide_pair, fp8_wide_smem, FWP_LOADER, gemm_load_tiles_pair, FWP_MATH, 3,
                  offsetof(fp8_wide_stage, scales), 1, 2,
                  if (args.scale_tma) fp8_math<3, FP8_WIDE_NBUF, 1, 2>(sm, &pipe, &ctx, &args, &map_d);
                  else fp8_math<3, FP8_WIDE_NBUF, 0, 2>(sm, &pipe, &ctx, &args, &map_d));
}

WS_KERNEL(gemm_fp8_gather) gemm_fp8_gather_kernel(const __grid_constant__ ws_tmap map_a,
                                                  const __grid_constant__ ws_tmap map_b,
                                                  const __grid_constant__ ws_tmap map_d,
                                                  const __grid_constant__ gemm_args args, ws_diag diag) {
  /* a_rows is set (gemm_kernel_for): rows and scales by the four loader warps, each tile's rows kept in registers */
  FP8_KERNEL_BODY(gemm_fp8_gather, fp8_gather_smem, FG_LOADER, gemm_load_gathered, FG_MATH, 2, offsetof(fp8_gather_stage, scales), 4,
                  1, fp8_math<2, FP8_GATHER_NBUF, 1>(sm, &pipe, &ctx, &args, &map_d));
}

extern "C" const gemm_kernel *gemm_fp8_kernel_desc(void) {
  static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_FP8, "gemm_fp8", gemm_fp8_roles, gemm_fp8_NROLES, sizeof(fp8_smem) + 1024,
                                (const void *)gemm_fp8_kernel, 128, FP8_BN, FP8_BK, 0, WS_DTYPE_U8, 1, 1, 0};
  return &k;
}

extern "C" const gemm_kernel *gemm_fp8_gather_kernel_desc(void) {
  static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_FP8_GATHER, "gemm_fp8_gather", gemm_fp8_gather_roles,
                                gemm_fp8_gather_NROLES, sizeof(fp8_gather_smem) + 1024, (const void *)gemm_fp8_gather_kernel,
                                128, FP8_BN, FP8_BK, 0, WS_DTYPE_U8, 1, 1, 0};
  return &k;
}

extern "C" const gemm_kernel *gemm_fp8_wide_kernel_desc(void) {
  static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_FP8_WIDE, "gemm_fp8_wide", gemm_fp8_wide_roles, gemm_fp8_wide_NROLES,
                                sizeof(fp8_wide_smem) + 1024, (const void *)gemm_fp8_wide_kernel, 192, FP8_BN, FP8_BK, 1,
                                WS_DTYPE_U8, 1, 1, 0};
  return &k;
}

extern "C" const gemm_kernel *gemm_fp8_wide_pair_kernel_desc(void) {
  static const gemm_kernel k = {WS_PLAN_SLOT_GEMM_FP8_WIDE_PAIR, "gemm_fp8_wide_pair", gemm_fp8_wide_pair_roles,
                                gemm_fp8_wide_pair_NROLES, sizeof(fp8_wide_smem) + 1024, (const void *)gemm_fp8_wide_pair_kernel,
                                192, FP8_BN, FP8_BK, 1, WS_DTYPE_U8, 1, 2, 0};
  return &k;
}
