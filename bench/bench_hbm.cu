/* bench_hbm.cu - `warpspec bench hbm`: what a few SMs can read and copy in local memory
 * (GPU 0, 512 MiB, median of 7), by CTA count (one CTA per SM):
 *   ld.v4        16-byte loads into registers, 8 per thread in flight, 512 threads
 *   cp.async     16-byte copies into each warp's shared-memory ring, 6 chunks of 2 KB
 *                in flight per warp (the combine's ep_stream.cuh), 16 warps
 *   TMA          1-D bulk copies of 16 KB into 12 stages, one thread issuing
 *   copy         ld.v4 + st.v4 to a second buffer (GB/s read; as many written)
 *   copy TMA     1-D bulk loads of 16 KB into 12 stages and, TMA_LEAD chunks behind, bulk
 *                stores of each stage to the second buffer, one thread issuing: the rate
 *                at which a few SMs copy without moving the bytes through registers (the
 *                dispatch's expand copies with ld.v4 + st.v4 today; design.md EP, session 27)
 *   weights 2-D  the MoE layer's L1 weight stream (layer_loader.cuh): the buffer as FP8
 *                weights [rows][7168], tiles of 256 rows taken by the CTAs in turn, each
 *                K step 4 TMA boxes of 64 rows x 128 bytes (128B swizzle) into one of
 *                W_STAGES stages of 32 KB, one thread issuing: 128 bytes of a row per box
 *   weights packed  the same bytes and stages with each 8 KB box contiguous in memory
 *                (a 1-D bulk copy): what a pre-packed weight layout would read
 *   weights 2-D, 6 stages  as weights 2-D with 6 stages in flight (more than the layer fits)
 *   W2 2-D       the L2 weight stream: rows of 2 KB (W2 [hidden][inter]), 16 K steps a tile
 *   W2 K rotated the same with tile t starting at K step t mod 16 (CTAs in step read
 *                different 128-byte columns of their rows)
 *   W2 packed    the same bytes with each 8 KB box contiguous
 * At 1 token the layer streams its L1 weights at 85% of the TMA 1-D rate and its L2 weights
 * at 65-75% (session 42); these say whether the rows' 128-byte pieces are the cause.
 *   stages + release    the L1 stream as the layer's 64-row tile consumes it: each stage 32 KB
 *                of weights and an 8 KB row tile (from L2), two math warpgroups that wait
 *                for it and release it (8 warps on its empty barrier), one loader warp
 *   stages + tile math  ... and do the layer's math on it first: each warpgroup four
 *                m64n128k32 (the tile's 64 rows on M), wait, 64 FMAs of promotion
 *   stages + weights on M  ... with the weights on wgmma's M side instead: each warpgroup two
 *                64-row weight boxes x four m64n16k32 (16 token rows on N)
 * In session 43 the 1-token layer streamed about 30 GB/s per SM whatever the number of busy
 * SMs, where a CTA of `weights 2-D` reads 61 at 66 CTAs: these three tell whether the
 * hand-off, the math, or neither holds a stage that long. Their GB/s count the weights only
 * (as the layer's floor does); the 8 KB row tile a stage (from L2, an unswizzled 1-D copy
 * read through a swizzled descriptor: timing only) is 25% more through the TMA unit.
 *   weights 2-D, 1 box / 16 boxes a stage  the `weights 2-D` stream with each stage's 256
 *                rows as one box or as sixteen: whether a CTA's rate follows the TMA
 *                operations it issues (session 45: the layer's loader spent ~85 ns on each)
 *                or the 128-byte rows the boxes are made of
 *   weights 2-D, from L2  the `weights 2-D` stream over the first W_L2_TILES tiles again and
 *                again (22 MB: after the warm-up run every copy should hit the L2 cache): how
 *                fast a CTA streams weights that an idle SM prefetched into L2 (an idea for
 *                the 1-token layer's L2 tiles, which wait for L1 while 36 SMs idle at Flash)
 * The MoE combine's reduce runs on at most 24 SMs and reads every expert output row; these
 * are the ceilings it is measured against (docs/benchmarks.md, session 19). */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/device/ptx.cuh"
#include "warpspec/device/wgmma.cuh"
#include "warpspec/status.h"
#include "warpspec/tma.h"

#include <stdio.h>

#define HBM_BYTES (512ull << 20)
#define LD_VEC 8
#define RING 7 /* cp.async: slots per warp, RING - 1 in flight */
#define RING_WARPS 16
#define TMA_CHUNK (16 * 1024)
#define TMA_STAGES 12
#define TMA_LEAD 8 /* copy TMA: a chunk is stored this many loads after its own */
#define W_K 7168           /* weights: bytes of a row (DeepSeek-V3's hidden, FP8)          */
#define W2_K 2048          /* L2's W2 rows: DeepSeek-V3's inter, FP8                        */
#define W_TILE_ROWS 256    /* rows of a tile (the layer's L1 tile: gate and up, 128 each)  */
#define W_BOX_ROWS 64
#define W_BOX_BYTES (W_BOX_ROWS * 128)
#define W_STAGE_BYTES (W_TILE_ROWS * 128)
#define W_STAGES 4         /* the layer's 64-row tile keeps 4 stages                        */
#define W_STAGES_MAX 6
#define W_L2_TILES 12      /* weights 2-D, from L2: 12 x 1.8 MB re-read                      */

/* Keeps the loads alive: a value no fill produces. */
#define SINK(acc, sink) \
  if ((acc).x == 0x9E3779B9u && (acc).y == 0x7F4A7C15u) *(sink) = (acc)

static __device__ __forceinline__ void mix(uint4 *acc, uint4 v) { acc->x ^= v.x; acc->y ^= v.y; acc->z ^= v.z; acc->w ^= v.w; }

__global__ void __launch_bounds__(512, 1) hbm_ld(const uint4 *p, uint64_t n, uint4 *sink) {
  uint4 acc = make_uint4(0, 0, 0, 0);
  const uint64_t nt = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i + (LD_VEC - 1) * nt < n; i += LD_VEC * nt) {
    uint4 v[LD_VEC];
#pragma unroll
    for (int u = 0; u < LD_VEC; u++) v[u] = ws_ld_global_nc_v4(p + i + u * nt);
#pragma unroll
    for (int u = 0; u < LD_VEC; u++) mix(&acc, v[u]);
  }
  SINK(acc, sink);
}

/* Each warp streams 2 KB chunks (gw, gw + nw, ...) through its own ring; a lane reads back
 * only its own copies, so cp.async.wait_group is all the synchronisation. */
__global__ void __launch_bounds__(RING_WARPS * 32, 1) hbm_cp_async(const uint4 *p, uint64_t n, uint4 *sink) {
  extern __shared__ __align__(16) uint4 ring[];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  uint4 *mine = ring + (size_t)warp * RING * 128;
  const uint32_t base = ws_smem_addr(mine);
  const uint64_t chunks = n / 128, gw = (uint64_t)blockIdx.x * RING_WARPS + warp, nw = (uint64_t)gridDim.x * RING_WARPS;
  const uint64_t steps = gw < chunks ? (chunks - gw + nw - 1) / nw : 0;
  uint4 acc = make_uint4(0, 0, 0, 0);
  for (uint64_t k = 0; k < steps + RING - 1; k++) {
    if (k < steps) {
      const uint4 *src = p + (gw + k * nw) * 128 + lane;
#pragma unroll
      for (int u = 0; u < 4; u++)
        ws_cp_async_cg_16_to(base + (uint32_t)(((k % RING) * 128 + 32 * u + lane) * 16), src + 32 * u, 16);
    }
    ws_cp_async_commit_group();
    if (k >= RING - 1) {
      WS_CP_ASYNC_WAIT_GROUP(RING - 1);
      const uint4 *s = mine + ((k - (RING - 1)) % RING) * 128 + lane;
#pragma unroll
      for (int u = 0; u < 4; u++) mix(&acc, s[32 * u]);
    }
  }
  SINK(acc, sink);
}

/* The TMA kernels' one thread per CTA: its stages' barriers, and the chunks of TMA_CHUNK
 * bytes it takes (blockIdx.x, blockIdx.x + gridDim.x, ...: its k-th at tma_offset(k)). */
static __device__ uint64_t tma_begin(uint64_t *full, uint64_t bytes) {
  for (int s = 0; s < TMA_STAGES; s++) ws_mbarrier_init(&full[s], 1);
  ws_fence_mbarrier_init();
  const uint64_t chunks = bytes / TMA_CHUNK;
  return blockIdx.x < chunks ? (chunks - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
}
static __device__ uint64_t tma_offset(uint64_t k) { return (blockIdx.x + k * gridDim.x) * TMA_CHUNK; }
/* This CTA's chunk k into stage k % TMA_STAGES, completing on its barrier. */
static __device__ void tma_load(uint8_t *stage, uint64_t *full, const uint8_t *p, uint64_t k) {
  const int s = (int)(k % TMA_STAGES);
  ws_mbarrier_arrive_expect_tx(&full[s], TMA_CHUNK);
  ws_cp_async_bulk_global_to_shared(stage + (size_t)s * TMA_CHUNK, p + tma_offset(k), TMA_CHUNK, &full[s]);
}

/* Until chunk k has landed in its stage. */
static __device__ void tma_wait(uint64_t *full, uint64_t k) {
  while (!ws_mbarrier_try_wait_parity(&full[k % TMA_STAGES], (uint32_t)(k / TMA_STAGES) & 1u)) {
  }
}

/* One thread per CTA keeps TMA_STAGES bulk loads in flight; nothing reads the data. */
__global__ void __launch_bounds__(32, 1) hbm_tma(const uint8_t *p, uint64_t bytes, uint4 *sink) {
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ uint64_t full[TMA_STAGES];
  if (threadIdx.x != 0) return;
  const uint64_t steps = tma_begin(full, bytes);
  for (uint64_t k = 0; k < steps + TMA_STAGES; k++) {
    if (k >= TMA_STAGES) tma_wait(full, k - TMA_STAGES); /* the oldest stage landed: reuse it */
    if (k < steps) tma_load(stage, full, p, k);
  }
  if (stage[5] == 0x11 && stage[7] == 0x22) sink->x = 1;
}

/* Weights: one thread per CTA streams its tiles (blockIdx.x, + gridDim.x, ...), K step by
 * K step, S steps in flight, rows of `row_bytes` (the K steps of a tile: row_bytes / 128);
 * packed: box q of step k of tile t is the 8 KB at ((t x steps + k) x 4 + q) x 8 KB, else
 * the 2-D box at (128 k, 256 t + 64 q). `rotate`: tile t starts its K steps at step
 * t mod steps (so that CTAs in step read different columns of their rows). */
template <int S>
__global__ void __launch_bounds__(32, 1) hbm_weights(const __grid_constant__ ws_tmap map, const uint8_t *p, int tiles,
                                                     int row_bytes, int packed, int rotate, int box_rows, int wrap,
                                                     uint4 *sink) {
  extern __shared__ __align__(1024) uint8_t raw[];
  __shared__ uint64_t full[S];
  /* the 128B swizzle needs 1 KB-aligned boxes: the dynamic base rounded up (1 KB spare) */
  uint8_t *stage = raw + ((1024u - (ws_smem_addr(raw) & 1023u)) & 1023u);
  if (threadIdx.x != 0) return;
  for (int s = 0; s < S; s++) ws_mbarrier_init(&full[s], 1);
  ws_fence_mbarrier_init();
  const int steps = row_bytes / 128;
  const int mine = (int)blockIdx.x < tiles ? (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
  const uint64_t total = (uint64_t)mine * steps;
  for (uint64_t j = 0; j < total + S; j++) {
    if (j >= S) { /* the oldest stage landed: reuse it */
      const uint64_t o = j - S;
      while (!ws_mbarrier_try_wait_parity(&full[o % S], (uint32_t)(o / S) & 1u)) {
      }
    }
    if (j >= total) continue;
    const int t = (int)blockIdx.x + (int)(j / steps) * (int)gridDim.x, s = (int)(j % S);
    const int k = (int)((j + (rotate ? (uint64_t)t : 0u)) % steps);
    uint8_t *dst = stage + (size_t)s * W_STAGE_BYTES;
    ws_mbarrier_arrive_expect_tx(&full[s], W_STAGE_BYTES);
    for (int q = 0; q < W_TILE_ROWS / box_rows; q++) {
      if (packed)
        ws_cp_async_bulk_global_to_shared(dst + q * W_BOX_BYTES, p + (((size_t)t * steps + k) * 4 + q) * W_BOX_BYTES,
                                          W_BOX_BYTES, &full[s]);
      else
        ws_cp_async_bulk_tensor_2d_global_to_shared(dst + q * box_rows * 128, &map.map, k * 128,
                                                    (wrap ? t % wrap : t) * W_TILE_ROWS + q * box_rows, &full[s]);
    }
  }
  if (stage[5] == 0x11 && stage[7] == 0x22) sink->x = 1;
}

__global__ void __launch_bounds__(512, 1) hbm_copy(const uint4 *p, uint4 *q, uint64_t n) {
  const uint64_t nt = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i + 3 * nt < n; i += 4 * nt) {
    uint4 v[4];
#pragma unroll
    for (int u = 0; u < 4; u++) v[u] = ws_ld_global_nc_v4(p + i + u * nt);
#pragma unroll
    for (int u = 0; u < 4; u++) ws_st_global_v4(q + i + u * nt, v[u]);
  }
}

/* One thread per CTA: chunk k is loaded into stage k % TMA_STAGES and stored from it
 * TMA_LEAD iterations later. Before a stage is loaded again its previous chunk's store
 * must have read it: the stores after that one number TMA_STAGES - 1 - TMA_LEAD. */
__global__ void __launch_bounds__(32, 1) hbm_tma_copy(const uint8_t *p, uint8_t *q, uint64_t bytes) {
  extern __shared__ __align__(128) uint8_t stage[];
  __shared__ uint64_t full[TMA_STAGES];
  if (threadIdx.x != 0) return;
  const uint64_t steps = tma_begin(full, bytes);
  for (uint64_t k = 0; k < steps + TMA_LEAD; k++) {
    if (k < steps) {
      if (k >= TMA_STAGES) WS_CP_ASYNC_BULK_WAIT_GROUP_READ(TMA_STAGES - 1 - TMA_LEAD);
      tma_load(stage, full, p, k);
    }
    if (k >= TMA_LEAD) {
      const uint64_t j = k - TMA_LEAD;
      tma_wait(full, j);
      ws_cp_async_bulk_shared_to_global(q + tma_offset(j), stage + (size_t)(j % TMA_STAGES) * TMA_CHUNK, TMA_CHUNK);
      ws_cp_async_bulk_commit_group();
    }
  }
  WS_CP_ASYNC_BULK_WAIT_GROUP(0);
}

/* The layer's stage loop (the rows above): warps 0-7 two math warpgroups, warp 8 the loader.
 * MODE 0 wait and release, 1 the 64-row tile's math, 2 the weights on M. The values are
 * whatever the buffers hold (timing only). */
#define SL_STAGES 4
#define SL_A_BYTES (64 * 128)
#define SL_THREADS (9 * 32)
template <int MODE>
__global__ void __launch_bounds__(SL_THREADS, 1) hbm_stage_loop(const __grid_constant__ ws_tmap map, const uint8_t *rows,
                                                                 int tiles, uint4 *sink) {
  extern __shared__ __align__(1024) uint8_t raw[];
  __shared__ uint64_t full[SL_STAGES], empty[SL_STAGES];
  uint8_t *base = raw + ((1024u - (ws_smem_addr(raw) & 1023u)) & 1023u);
  uint8_t *b_of = base, *a_of = base + SL_STAGES * W_STAGE_BYTES; /* [stage] weights, then [stage] rows */
  const int warp = (int)(threadIdx.x / 32), lane = (int)(threadIdx.x % 32), steps = W_K / 128;
  if (threadIdx.x == 0) {
    for (int s = 0; s < SL_STAGES; s++) {
      ws_mbarrier_init(&full[s], 1);
      ws_mbarrier_init(&empty[s], 8);
    }
    ws_fence_mbarrier_init();
  }
  __syncthreads();
  const int mine = (int)blockIdx.x < tiles ? (tiles - (int)blockIdx.x + (int)gridDim.x - 1) / (int)gridDim.x : 0;
  const uint64_t total = (uint64_t)mine * steps;
  if (warp == 8) { /* the loader */
    if (lane != 0) return;
    for (uint64_t j = 0; j < total; j++) {
      const int s = (int)(j % SL_STAGES), t = (int)blockIdx.x + (int)(j / steps) * (int)gridDim.x, k = (int)(j % steps);
      if (j >= SL_STAGES)
        while (!ws_mbarrier_try_wait_parity(&empty[s], (uint32_t)((j / SL_STAGES) - 1) & 1u)) {
        }
      ws_mbarrier_arrive_expect_tx(&full[s], W_STAGE_BYTES + SL_A_BYTES);
      for (int q = 0; q < W_TILE_ROWS / W_BOX_ROWS; q++)
        ws_cp_async_bulk_tensor_2d_global_to_shared(b_of + (size_t)s * W_STAGE_BYTES + q * W_BOX_BYTES, &map.map,
                                                    k * 128, t * W_TILE_ROWS + q * W_BOX_ROWS, &full[s]);
      ws_cp_async_bulk_global_to_shared(a_of + (size_t)s * SL_A_BYTES, rows + (size_t)(k % 8) * SL_A_BYTES, SL_A_BYTES,
                                        &full[s]); /* 64 KB of row tiles, L2-resident */
    }
    return;
  }
  const int wg = warp / 4;
  float acc[64], sum[64];
  for (int i = 0; i < 64; i++) sum[i] = 0.0f;
  for (uint64_t j = 0; j < total; j++) {
    const int s = (int)(j % SL_STAGES);
    while (!ws_mbarrier_try_wait_parity(&full[s], (uint32_t)(j / SL_STAGES) & 1u)) {
    }
    const uint8_t *b = b_of + (size_t)s * W_STAGE_BYTES, *a = a_of + (size_t)s * SL_A_BYTES;
    if (MODE == 1) { /* rows on M: A the 64-row tile, B this warpgroup's 128 weight rows */
      const uint64_t da = ws_wgmma_desc_k128b(a), db = ws_wgmma_desc_k128b(b + wg * 128 * 128);
      ws_wgmma_fence();
      for (int kk = 0; kk < 4; kk++)
        ws_wgmma_m64n128k32_e4m3(acc, ws_wgmma_desc_advance(da, kk * 32), ws_wgmma_desc_advance(db, kk * 32), kk > 0);
      ws_wgmma_commit_group();
      WS_WGMMA_WAIT_GROUP(0);
      for (int i = 0; i < 64; i++) sum[i] += acc[i] * 0.5f;
    } else if (MODE == 2) { /* weights on M: two 64-row boxes of this warpgroup, 16 token rows on N */
      const uint64_t dt = ws_wgmma_desc_k128b(a);
      for (int h = 0; h < 2; h++) {
        const uint64_t dw = ws_wgmma_desc_k128b(b + (wg * 2 + h) * W_BOX_BYTES);
        ws_wgmma_fence();
        for (int kk = 0; kk < 4; kk++)
          ws_wgmma_m64n16k32_e4m3(acc + 8 * h, ws_wgmma_desc_advance(dw, kk * 32), ws_wgmma_desc_advance(dt, kk * 32),
                                  kk > 0);
        ws_wgmma_commit_group();
      }
      WS_WGMMA_WAIT_GROUP(0);
      for (int i = 0; i < 16; i++) sum[i] += acc[i] * 0.5f;
    }
    __syncwarp();
    if (lane == 0) ws_mbarrier_arrive(&empty[s]);
  }
  float x = 0.0f;
  for (int i = 0; i < 64; i++) x += sum[i];
  if (x == 1.2345f) sink->x = 1u;
}

enum { M_LD, M_CP_ASYNC, M_TMA, M_COPY, M_TMA_COPY, M_WEIGHTS, M_WEIGHTS_PACKED, M_WEIGHTS_DEEP, M_W2, M_W2_ROTATED,
       M_W2_PACKED, M_STAGE_RELEASE, M_STAGE_TILE_MATH, M_STAGE_WEIGHTS_ON_M, M_WEIGHTS_BOX256, M_WEIGHTS_BOX16, M_WEIGHTS_L2, M_COUNT };
#define SL_SMEM (SL_STAGES * (W_STAGE_BYTES + SL_A_BYTES) + 1024)

/* The weights' tiles in the buffer, a whole number per CTA (an uneven last round would
 * be the grid's tail, not the rate), and the bytes they read: rows of W_K bytes (L1's
 * W1) or W2_K (L2's W2: [hidden][inter], rows of 2 KB). */
static int w_row_bytes(int m) { return m >= M_W2 && m <= M_W2_PACKED ? W2_K : W_K; }
static int w_tiles_all(int m) { return (int)(HBM_BYTES / ((uint64_t)W_TILE_ROWS * w_row_bytes(m))); }
static int w_tiles(int m, int ctas) { return w_tiles_all(m) - w_tiles_all(m) % ctas; }
static double w_bytes(int m, int ctas) { return (double)w_tiles(m, ctas) * W_TILE_ROWS * w_row_bytes(m); }

static int launch(int m, int ctas, uint4 *p, uint4 *q, uint4 *sink, const ws_tmap *wmap, const ws_tmap *w2map,
                  const ws_tmap *wmap256, const ws_tmap *wmap16) {
  const uint64_t n = HBM_BYTES / 16;
  if (m == M_STAGE_RELEASE)
    hbm_stage_loop<0><<<ctas, SL_THREADS, SL_SMEM>>>(*wmap, (const uint8_t *)q, w_tiles(m, ctas), sink);
  else if (m == M_STAGE_TILE_MATH)
    hbm_stage_loop<1><<<ctas, SL_THREADS, SL_SMEM>>>(*wmap, (const uint8_t *)q, w_tiles(m, ctas), sink);
  else if (m == M_STAGE_WEIGHTS_ON_M)
    hbm_stage_loop<2><<<ctas, SL_THREADS, SL_SMEM>>>(*wmap, (const uint8_t *)q, w_tiles(m, ctas), sink);
  else if (m == M_WEIGHTS || m == M_WEIGHTS_PACKED || (m >= M_W2 && m <= M_W2_PACKED))
    hbm_weights<W_STAGES><<<ctas, 32, W_STAGES * W_STAGE_BYTES + 1024>>>(
        m >= M_W2 ? *w2map : *wmap, (const uint8_t *)p, w_tiles(m, ctas), w_row_bytes(m),
        m == M_WEIGHTS_PACKED || m == M_W2_PACKED, m == M_W2_ROTATED, W_BOX_ROWS, 0, sink);
  else if (m == M_WEIGHTS_BOX256 || m == M_WEIGHTS_BOX16) /* the same stream, 1 or 16 boxes a stage */
    hbm_weights<W_STAGES><<<ctas, 32, W_STAGES * W_STAGE_BYTES + 1024>>>(m == M_WEIGHTS_BOX256 ? *wmap256 : *wmap16,
                                                                         (const uint8_t *)p, w_tiles(m, ctas), W_K, 0, 0,
                                                                         m == M_WEIGHTS_BOX256 ? 256 : 16, 0, sink);
  else if (m == M_WEIGHTS_L2) /* the same stream over 22 MB, re-read from L2 */
    hbm_weights<W_STAGES><<<ctas, 32, W_STAGES * W_STAGE_BYTES + 1024>>>(*wmap, (const uint8_t *)p, w_tiles(m, ctas), W_K,
                                                                         0, 0, W_BOX_ROWS, W_L2_TILES, sink);
  else if (m == M_WEIGHTS_DEEP)
    hbm_weights<W_STAGES_MAX><<<ctas, 32, W_STAGES_MAX * W_STAGE_BYTES + 1024>>>(*wmap, (const uint8_t *)p,
                                                                                 w_tiles(m, ctas), W_K, 0, 0, W_BOX_ROWS,
                                                                                 0, sink);
  else if (m == M_LD) hbm_ld<<<ctas, 512>>>(p, n, sink);
  else if (m == M_CP_ASYNC) hbm_cp_async<<<ctas, RING_WARPS * 32, RING_WARPS * RING * 2048>>>(p, n, sink);
  else if (m == M_TMA) hbm_tma<<<ctas, 32, TMA_STAGES * TMA_CHUNK>>>((const uint8_t *)p, HBM_BYTES, sink);
  else if (m == M_TMA_COPY)
    hbm_tma_copy<<<ctas, 32, TMA_STAGES * TMA_CHUNK>>>((const uint8_t *)p, (uint8_t *)q, HBM_BYTES);
  else hbm_copy<<<ctas, 512>>>(p, q, n);
  CK(cudaGetLastError());
  return 0;
}

extern "C" int bench_hbm(void) {
  uint4 *p, *q, *sink;
  CK(cudaSetDevice(0));
  CK(cudaMalloc(&p, HBM_BYTES));
  CK(cudaMalloc(&q, HBM_BYTES));
  CK(cudaMalloc(&sink, 64));
  CK(cudaMemset(p, 0x5A, HBM_BYTES));
  CK(cudaFuncSetAttribute(hbm_cp_async, cudaFuncAttributeMaxDynamicSharedMemorySize, RING_WARPS * RING * 2048));
  CK(cudaFuncSetAttribute(hbm_tma, cudaFuncAttributeMaxDynamicSharedMemorySize, TMA_STAGES * TMA_CHUNK));
  CK(cudaFuncSetAttribute(hbm_tma_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, TMA_STAGES * TMA_CHUNK));
  CK(cudaFuncSetAttribute(hbm_weights<W_STAGES>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          W_STAGES * W_STAGE_BYTES + 1024));
  CK(cudaFuncSetAttribute(hbm_weights<W_STAGES_MAX>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                          W_STAGES_MAX * W_STAGE_BYTES + 1024));
  CK(cudaFuncSetAttribute(hbm_stage_loop<0>, cudaFuncAttributeMaxDynamicSharedMemorySize, SL_SMEM));
  CK(cudaFuncSetAttribute(hbm_stage_loop<1>, cudaFuncAttributeMaxDynamicSharedMemorySize, SL_SMEM));
  CK(cudaFuncSetAttribute(hbm_stage_loop<2>, cudaFuncAttributeMaxDynamicSharedMemorySize, SL_SMEM));
  ws_tmap wmap, w2map, wmap256, wmap16;
  if (ws_tmap_2d_swizzled(&wmap, p, WS_DTYPE_U8, (uint64_t)w_tiles_all(M_WEIGHTS) * W_TILE_ROWS, W_K, W_K, W_BOX_ROWS,
                          128, WS_SWIZZLE_128B) != WS_OK ||
      ws_tmap_2d_swizzled(&wmap256, p, WS_DTYPE_U8, (uint64_t)w_tiles_all(M_WEIGHTS) * W_TILE_ROWS, W_K, W_K, 256, 128,
                          WS_SWIZZLE_128B) != WS_OK ||
      ws_tmap_2d_swizzled(&wmap16, p, WS_DTYPE_U8, (uint64_t)w_tiles_all(M_WEIGHTS) * W_TILE_ROWS, W_K, W_K, 16, 128,
                          WS_SWIZZLE_128B) != WS_OK ||
      ws_tmap_2d_swizzled(&w2map, p, WS_DTYPE_U8, (uint64_t)w_tiles_all(M_W2) * W_TILE_ROWS, W2_K, W2_K, W_BOX_ROWS,
                          128, WS_SWIZZLE_128B) != WS_OK) {
    fprintf(stderr, "bench hbm: weights tensor map: %s\n", ws_last_error());
    return -1;
  }
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  const int ctas[] = {8, 16, 24, 32, 48, 66, 128, 132};
  const int nc = (int)(sizeof ctas / sizeof ctas[0]);
  const char *names[M_COUNT] = {"ld.v4, 8 in flight", "cp.async ring (combine)", "TMA 1-D, 12 x 16 KB",
                                "copy ld.v4 + st.v4", "copy TMA 1-D load + store", "weights 2-D, 4 x 32 KB",
                                "weights packed, 4 x 32 KB", "weights 2-D, 6 x 32 KB",
                                "W2 2-D, 2 KB rows", "W2 2-D, K rotated", "W2 packed", "stages + release",
                                "stages + tile math", "stages + weights on M", "weights 2-D, 1 box a stage",
                                "weights 2-D, 16 boxes a stage", "weights 2-D, from L2"};
  printf("bench hbm: %s, 512 MiB, GB/s read (copy: as many written too), median of 7, by CTAs (one per SM)\n",
         prop.name);
  printf("  %-24s", "method");
  for (int i = 0; i < nc; i++) printf(" %7d", ctas[i]);
  printf("\n");
  for (int m = 0; m < M_COUNT; m++) {
    if (m == M_TMA_COPY) CK(cudaMemset(q, 0, HBM_BYTES)); /* the copy check below must see its bytes */
    printf("  %-24s", names[m]);
    for (int i = 0; i < nc; i++) {
      if (ctas[i] > prop.multiProcessorCount) { printf(" %7s", "-"); continue; }
      float t[8];
      for (int r = 0; r < 8; r++) { /* run 0 warms up */
        CK(cudaEventRecord(a));
        if (launch(m, ctas[i], p, q, sink, &wmap, &w2map, &wmap256, &wmap16)) return -1;
        CK(cudaEventRecord(b));
        CK(cudaEventSynchronize(b));
        CK(cudaEventElapsedTime(&t[r], a, b));
      }
      const double bytes = m >= M_WEIGHTS ? w_bytes(m, ctas[i]) : (double)HBM_BYTES;
      printf(" %7.0f", bytes / (bench_median(t + 1, 7) * 1e6));
    }
    printf("\n");
  }
  { /* the bulk copy moved the bytes: its first and last 64 KB hold the fill */
    static unsigned char h[2][64 << 10];
    CK(cudaMemcpy(h[0], q, sizeof h[0], cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(h[1], (char *)q + HBM_BYTES - sizeof h[1], sizeof h[1], cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < sizeof h[0]; i++)
      if (h[0][i] != 0x5A || h[1][i] != 0x5A) {
        fprintf(stderr, "bench hbm: the TMA copy left byte %zu wrong\n", i);
        return -1;
      }
  }
  CK(cudaFree(p));
  CK(cudaFree(q));
  CK(cudaFree(sink));
  return 0;
}
