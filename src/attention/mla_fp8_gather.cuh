/* mla_fp8_gather.cuh - the MLA kernel's FP8 cache rows (mla_sparse.cu, FP8 = 1): copied
 * raw into the stage, then dequantised in place into the BF16 boxes the math reads. */
#ifndef WARPSPEC_MLA_FP8_GATHER_CUH
#define WARPSPEC_MLA_FP8_GATHER_CUH

#include "warpspec/attention.h"
#include "warpspec/device/fp8.cuh"
#include "attn_device.cuh"
#include "mla_stage.cuh"

/* ---- FP8 rows: dequantised in place, inside the stage ------------------------------
 * There is no shared memory left for a staging buffer, so the raw bytes land in the part
 * of the stage that is written last. The 512 e4m3 bytes of each row go by cp.async to the
 * stage's boxes 4..7, as eight raw chunks of 4 KB (chunk c: latent columns 64c .. 64c + 63
 * of all 64 rows); the rope's BF16 goes straight to box 8. Then the gather converts raw
 * chunk c into box c in four steps, each step writing only over raw chunks that every
 * thread has finished reading (a role barrier between steps):
 *   boxes 0-3 (below the raw area) | 4, 5 (over chunks 0-3) | 6 (over 4, 5) | 7 (over 6
 *   and its own chunk 7, which is read into registers before the barrier).
 * Inside a chunk two rows share a 128-byte line, the pieces XOR-swizzled by the line, so
 * that eight consecutive rows touch eight different bank groups, as the boxes do. */
#define MLA_RAW_OFFSET (4 * MLA_BN * 128) /* bytes: box 4 of a stage                       */
#define MLA_RAW_CHUNK (MLA_BN * 64)       /* bytes of a raw chunk: 64 rows x 64 e4m3       */
#define MLA_FP8_SCALES_AT 512             /* an FP8 row: 512 e4m3, the 4 fp32 tile scales,  */
#define MLA_FP8_ROPE_AT 528               /* then the 64 BF16 rope dims (warpspec/attention.h) */

static __device__ __forceinline__ uint32_t mla_raw_offset(int chunk, int row, int piece) {
  const int line = row >> 1, q = 4 * (row & 1) + piece;
  return MLA_RAW_OFFSET + (uint32_t)chunk * MLA_RAW_CHUNK + (uint32_t)line * 128u + (uint32_t)((q ^ (line & 7)) << 4);
}

/* The eight words converted from one raw piece (16 e4m3: 16 values of 2 bytes) into pieces
 * 2 piece and 2 piece + 1 of row `row` in box `chunk`. Addresses are shared-window
 * addresses. */
static __device__ __forceinline__ void mla_store_converted(uint32_t stage, int chunk, int row, int piece, const uint32_t *v) {
  const uint32_t box = stage + (uint32_t)chunk * MLA_BN * 128;
  ws_st_shared_v4_u32(box + mla_swizzle(row, 2 * piece), make_uint4(v[0], v[1], v[2], v[3]));
  ws_st_shared_v4_u32(box + mla_swizzle(row, 2 * piece + 1), make_uint4(v[4], v[5], v[6], v[7]));
}

static __device__ __forceinline__ uint4 mla_raw_load(uint32_t stage, int chunk, int row, int piece) {
  return ws_ld_shared_v4_u32(stage + mla_raw_offset(chunk, row, piece));
}

static __device__ __forceinline__ uint32_t mla_hmul2_u32(uint32_t a, uint32_t b) {
  const __half2 r = __hmul2(*(const __half2 *)&a, *(const __half2 *)&b);
  return *(const uint32_t *)&r;
}

/* The two conversions of a raw piece of latent tile chunk / 2, as the in-place steps below
 * call them (cvt(stage, chunk, row, piece, raw)):
 *   mla_to_bf16      times the row's tile scale, BF16 (the gather of the 64-row kernel, the
 *                    few-head math at 32 columns);
 *   mla_to_f16_scaled  f16 times the tile scale as an f16 pair, itself times the block's
 *                    power of two (the 64-row kernel's f16 form, below). */
struct mla_to_bf16 {
  float4 sc;
  __device__ __forceinline__ void operator()(uint32_t stage, int chunk, int row, int piece, uint4 raw) const {
    const float scale = chunk < 2 ? sc.x : chunk < 4 ? sc.y : chunk < 6 ? sc.z : sc.w;
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    uint32_t v[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const float2 f0 = ws_half2_bits_to_float2(ws_e4m3x2_lo_to_f16x2(w[i]));
      const float2 f1 = ws_half2_bits_to_float2(ws_e4m3x2_hi_to_f16x2(w[i]));
      v[2 * i] = attn_pack_bf16(f0.x * scale, f0.y * scale);
      v[2 * i + 1] = attn_pack_bf16(f1.x * scale, f1.y * scale);
    }
    mla_store_converted(stage, chunk, row, piece, v);
  }
};
struct mla_to_f16_scaled {
  uint32_t sc2[4];
  __device__ __forceinline__ void operator()(uint32_t stage, int chunk, int row, int piece, uint4 raw) const {
    const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
    uint32_t v[8];
#pragma unroll
    for (int i = 0; i < 4; i++) {
      v[2 * i] = mla_hmul2_u32(ws_e4m3x2_lo_to_f16x2(w[i]), sc2[chunk / 2]);
      v[2 * i + 1] = mla_hmul2_u32(ws_e4m3x2_hi_to_f16x2(w[i]), sc2[chunk / 2]);
    }
    mla_store_converted(stage, chunk, row, piece, v);
  }
};

/* One block of 64 FP8 rows into a stage, in two steps, so that the next block's rows are
 * looked up between them (with the lookups in flight across the copies, the 40-register
 * gather role spilled; each row is looked up once, by its converting threads, and the
 * copies read it from shared memory). Copy: 8 lanes per 128-byte line, 4 rows per warp
 * instruction, as the BF16 gather's: this thread copies 16-byte piece t & 7 of each
 * 128-byte part of rows 4 (t >> 3) + j, j = 0..3 (kv rows r[j], < 0: masked, zeros); rows
 * 4 apart put the four rows of an instruction on different swizzle lines, so that its 32
 * pieces land in 4 shared-memory wavefronts. (A thread per half row read 16 bytes of 32
 * rows per instruction: 32 lines for 512 bytes.) One commit group. */
static __device__ __forceinline__ void mla_gather_fp8_copy(uint32_t stage, const uint8_t *kv8, const int r[4], int t) {
  asm volatile("mov.b32 %0, %0;" : "+r"(t)); /* no shared-memory offsets hoisted out of the block loop */
  const int piece = t & 7, row0 = 4 * (t >> 3);
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int ok = r[j] >= 0, crow = row0 + j;
    const uint8_t *src = kv8 + (size_t)(ok ? r[j] : 0) * WS_MLA_FP8_ROW_BYTES + 16 * piece;
    const uint32_t bytes = ok ? 16u : 0u;
#pragma unroll
    for (int l = 0; l < 4; l++) { /* latent bytes 128 l .. + 127: raw pieces q = 8 l + piece */
      const int q = 8 * l + piece;
      ws_cp_async_cg_16_to(stage + mla_raw_offset(q >> 2, crow, q & 3), src + 128 * l, bytes);
    }
    ws_cp_async_cg_16_to(stage + 8 * MLA_BN * 128 + mla_swizzle(crow, piece), src + MLA_FP8_ROPE_AT, bytes);
  }
  ws_cp_async_commit_group();
}

/* The tile scales of kv row d (zeros for a masked row). */
static __device__ __forceinline__ float4 mla_fp8_scales(const uint8_t *kv8, int d) {
  return d >= 0 ? __ldg((const float4 *)(kv8 + (size_t)d * WS_MLA_FP8_ROW_BYTES + MLA_FP8_SCALES_AT))
                : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
}

/* The in-place conversion by the 128 threads of a role replica (ctx's barrier), the raw
 * bytes visible to all of them: this thread converts, in every chunk, the 32 columns
 * 32 half .. + 31 of row `row` (cvt: one of the conversions above). Ends after its own last
 * stores. Chunk by chunk, in the four steps the header describes (40 registers: the gather
 * role's form). */
template <typename CVT>
static __device__ __forceinline__ void mla_fp8_in_place(const ws_ctx *ctx, uint32_t stage, int row, int half, const CVT &cvt) {
#pragma unroll
  for (int c = 0; c < 8; c++) {
    if (c == 4) ws_role_sync(ctx); /* raw chunks 0-3 read: boxes 4, 5 may go over them */
    if (c == 6) ws_role_sync(ctx); /* raw chunks 4, 5 read: box 6 */
    const uint4 r0 = mla_raw_load(stage, c, row, 2 * half), r1 = mla_raw_load(stage, c, row, 2 * half + 1);
    if (c == 7) ws_role_sync(ctx); /* raw chunks 6, 7 read (7 into registers): box 7 */
    cvt(stage, c, row, 2 * half, r0);
    cvt(stage, c, row, 2 * half + 1, r1);
  }
}

/* The same by a warpgroup with registers to spare (mla_fewheads' math): each pair of raw
 * chunks is loaded whole before it is stored (16 registers), and the boxes go in three
 * steps (boxes 0-3, under which no raw byte lies; 4-5 over raw chunks 0-3; 6-7 over 4-7),
 * one barrier before each of the last two. The shared loads and stores are volatile asm and
 * keep their program order: converted a chunk at a time, each chunk's loads waited behind
 * the previous chunk's stores, and the loads' latency was paid eight times a block (a clock
 * probe, session 38: 3.9k of the warpgroup's 8.8k cycles a block). */
template <typename CVT>
static __device__ __forceinline__ void mla_fp8_in_place_ahead(const ws_ctx *ctx, uint32_t stage, int row, int half,
                                                              const CVT &cvt) {
  uint4 raw[4];
#pragma unroll
  for (int c = 0; c < 8; c += 2) {
#pragma unroll
    for (int i = 0; i < 4; i++) raw[i] = mla_raw_load(stage, c + (i >> 1), row, 2 * half + (i & 1));
    if (c >= 4) ws_role_sync(ctx); /* raw chunks 0-3 (c 4), 4-7 (c 6) read: boxes c, c + 1 may go over them */
#pragma unroll
    for (int i = 0; i < 4; i++) cvt(stage, c + (i >> 1), row, 2 * half + (i & 1), raw[i]);
  }
}

/* ---- The 64-row kernel's f16 form (WARPSPEC_MLA_FP8_F16, on by default) ------------
 * Each value as f16: e4m3 -> f16 (exact), times the row's tile scale in f16, that scale
 * first multiplied by 2^E, the block's power of two (its largest tile scale times 2^E in
 * [1, 2): every value then lies within 448 x 2 of f16's range). The rope's BF16 stays as
 * copied: the math multiplies Q's rope fragments by 2^E instead (registers, and only when E
 * moves), so that S is the true one times 2^E throughout. One unpack and one HMUL2 per two
 * values, where the BF16 form takes about 3.3 instructions a value. The math folds 2^-E
 * into S and into P (mla_sparse.cu). */
#define MLA_F16_EXP_MAX 64 /* |E| at most: Q's rope times 2^E stays a finite bf16 */

/* The block's power of two E (f16 form): the largest tile scale of its 64 rows from each
 * warp's (gmax, shared), written by the caller's warps before the barrier that precedes
 * this; bmax x 2^E in [1, 2), |E| <= MLA_F16_EXP_MAX; 0 for a block of masked rows. */
static __device__ __forceinline__ int mla_fp8_block_exp(const float *gmax) {
  const float bmax = fmaxf(fmaxf(gmax[0], gmax[1]), fmaxf(gmax[2], gmax[3]));
  return bmax > 0.0f && bmax <= 3.0e38f ? min(max(-ilogbf(bmax), -MLA_F16_EXP_MAX), MLA_F16_EXP_MAX) : 0;
}

/* Convert: once every thread's copies have landed, in place (as above). */
template <int F16 = 0>
static __device__ __forceinline__ void mla_gather_fp8_convert(const ws_ctx *ctx, uint32_t stage, float4 sc, int row,
                                                              int half, float *gmax = NULL, int *eblk = NULL) {
  /* row and half through an opaque move: otherwise the compiler keeps every address below
   * (loop invariants of the block loop) live across it, and 40 registers do not hold them */
  asm volatile("mov.b32 %0, %0;" : "+r"(row));
  asm volatile("mov.b32 %0, %0;" : "+r"(half));
  if (F16) { /* this warp's largest tile scale (its 32 rows), for the block's power of two */
    float m = fmaxf(fmaxf(sc.x, sc.y), fmaxf(sc.z, sc.w));
#pragma unroll
    for (int o = 1; o < 32; o <<= 1) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
    if (ctx->lane == 0) gmax[ctx->warp] = m;
  }
  WS_CP_ASYNC_WAIT_GROUP(0);
  ws_role_sync(ctx); /* every thread's raw bytes have landed (and the warps' maxima are in) */
  if (F16) {
    const int E = mla_fp8_block_exp(gmax);
    const float f = ldexpf(1.0f, E), v[4] = {sc.x, sc.y, sc.z, sc.w};
    mla_to_f16_scaled cvt;
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const __half2 h = __float2half2_rn(v[i] * f);
      cvt.sc2[i] = *(const uint32_t *)&h;
    }
    if (row == 0 && half == 0) *eblk = E; /* published with the stage's commit */
    mla_fp8_in_place(ctx, stage, row, half, cvt);
  } else {
    mla_fp8_in_place(ctx, stage, row, half, mla_to_bf16{sc});
  }
}

#endif
