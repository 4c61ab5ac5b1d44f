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
 * WARPSPEC_MLA_SCHEDULE=overlap issues S of block nb + 1 before the PV of block nb and
 * runs its mask, max exchange and P under that PV (mla_overlap_blocks; P in the rope box).
 * Shared memory: Q 72 KB, two kv stages of 72 KB, the P tile 8 KB, the exchange arrays and
 * the barriers: 225 KB of the 227 available.
 * MLA decode (mla_decode.cu) runs the same kernel over page-table rows (with fewer heads
 * than 64 and s_q > 1, a sequence's tokens share the 64-row tiles: MLA_KEYS_ROWS); with
 * the FP8 cache (kv_fp8) with FP8 = 1: the gather dequantises each row into the BF16 stage
 * the math warps read (mla_gather_fp8), so the math is unchanged and the BF16 values are
 * exact (power-of-two tile scales). */
#include "../core/internal.h"
#include "../core/knobs.h"
#include "../core/size_check.h"
#include "warpspec/attention.h"
#include "warpspec/check.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "attn_device.cuh"
#include "mla_internal.h"
#include "warpspec/device/fp8.cuh"

#include <cuda_bf16.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#define MLA_BOXES (MLA_DQK / 64) /* 64-column boxes of a row: 9              */
#define MLA_PIECES (MLA_DQK / 8) /* 16-byte pieces of a row: 72              */
#define MLA_STAGES 2
#define MLA_WG_CHUNKS (MLA_DV / 2 / 8) /* 8-column chunks of a warpgroup's 256 output columns: 32 */

typedef struct {
  uint16_t q[MLA_BOXES][MLA_BH * 64];               /* 1024-byte aligned boxes, 8 KB each */
  uint16_t kv[MLA_STAGES][MLA_BOXES][MLA_BN * 64];
  uint16_t p[MLA_BH * 64];                          /* P: [64 heads][64 keys], swizzled  */
  float rmax[2][MLA_BH];                            /* each warpgroup's block row maxima */
  float lsum[2][MLA_BH];                            /* each warpgroup's row sums (end)   */
  uint8_t valid[MLA_STAGES][MLA_BN];                /* the stage's rows: 1 read, 0 masked */
  int rows[MLA_STAGES][MLA_BN];                     /* FP8: the stage's kv rows, for the copies */
  uint64_t q_full[1], q_empty[1], kv_full[MLA_STAGES], kv_empty[MLA_STAGES];
  int q_closed[1], kv_closed[MLA_STAGES];
} mla_smem;


/* A kernel's key mode, a template parameter rather than a runtime test, so that each
 * kernel holds only its own case's code (a runtime branch for ROWS cost 128-head decode
 * 1-3%, docs/design_mla.md 8):
 *   PLAIN  one token per CTA: prefill's index lists, paged decode with 64+ heads or s_q 1,
 *          and sparse decode when one CTA takes a whole list;
 *   SPLIT  sparse decode with its index lists split over CTAs;
 *   ROWS   paged decode with fewer heads than MLA_BH and s_q > 1: a sequence's s_q tokens
 *          share tiles (MLA_ROW_TILES), each row masked at its own token's causal limit. */
enum { MLA_KEYS_PLAIN = 0, MLA_KEYS_SPLIT = 1, MLA_KEYS_ROWS = 2 };

/* This CTA's keys: the first key's index and the count. SPLIT: keys chunk z .. of the
 * token's list, z = blockIdx.z. ROWS: tok is the tile's last token, whose keys hold every
 * row's. */
template <int KEYS>
static __device__ __forceinline__ void mla_keys(const mla_args *a, int tok, int *kbeg, int *nkeys) {
  if (KEYS == MLA_KEYS_SPLIT) {
    const int b0 = (int)blockIdx.z * a->chunk; /* < topk + chunk <= 2^31 - 1: ws_mla_sparse_decode_check */
    *kbeg = b0;
    *nkeys = max(0, min(a->topk - b0, a->chunk));
    return;
  }
  if (KEYS == MLA_KEYS_PLAIN && a->indices) { *kbeg = 0; *nkeys = a->topk; return; }
  const int n = a->seqlens[tok / a->s_q];
  const int last = n - a->s_q + tok % a->s_q; /* causal: the query's own position */
  const int b0 = (int)blockIdx.z * a->chunk;
  *kbeg = b0;
  *nkeys = max(0, min(min(n, last + 1), b0 + a->chunk) - b0);
}

/* The kv row of key kk (0 .. nkeys - 1) of this CTA, or -1 when masked (never read), found
 * in two steps so that the gather can load the next block's index entries and look at them
 * only when it copies that block: mla_row_fetch loads the entry of an index list
 * (MLA_ROW_NONE past the keys), mla_row_resolve turns it into the row. Done in one step,
 * the compiler tested each loaded index right after its load and the gather waited there
 * on every block. A paged cache's page entry is looked up in mla_row_resolve, one block
 * ahead: fetched two blocks ahead it made paged decode slower (docs/design_mla.md 6.1,
 * docs/benchmarks.md session 23). */
#define MLA_ROW_NONE (-2147483647 - 1)
template <int KEYS>
static __device__ __forceinline__ int mla_row_fetch(const mla_args *a, int tok, int kbeg, int nkeys, int kk) {
  if (kk >= nkeys) return MLA_ROW_NONE;
  if (KEYS == MLA_KEYS_SPLIT) return __ldg(a->indices + (size_t)tok * a->topk + kbeg + kk);
  if (KEYS == MLA_KEYS_PLAIN && a->indices) return __ldg(a->indices + (size_t)tok * a->topk + kk);
  return kk; /* paged: looked up by mla_row_resolve */
}
template <int KEYS>
static __device__ __forceinline__ int mla_row_resolve(const mla_args *a, int tok, int kbeg, int e) {
  if (e == MLA_ROW_NONE) return -1;
  int r = e;
  if (KEYS == MLA_KEYS_ROWS || (KEYS == MLA_KEYS_PLAIN && !a->indices)) {
    const int j = kbeg + e;
    const int page = __ldg(a->block_table + (size_t)(tok / a->s_q) * a->max_pages + j / a->page_size);
    /* 64-bit: a page id past the cache must not wrap onto one of its rows */
    const long long row = (long long)page * a->page_size + j % a->page_size;
    r = page >= 0 && row < a->s_kv ? (int)row : -1;
  }
  return r >= 0 && r < a->s_kv ? r : -1;
}

#define MLA_ROLES(ROLE) ROLE(S_GATHER, 4, 40, 1) ROLE(S_MATH, 4, 232, 2)
WS_DECLARE_ROLES(mla_sparse, MLA_ROLES);

/* Byte offset of 16-byte piece `piece` (0..7) of row `row` in a [rows][128 B] box with
 * the 128-byte swizzle (what TMA writes and wgmma's 128B descriptors read). */
static __device__ __forceinline__ uint32_t mla_swizzle(int row, int piece) {
  return ws_swizzle128_offset((uint32_t)row, (uint32_t)piece);
}

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

/* 16 e4m3 (raw piece `piece` of a row in chunk `chunk`) times the tile's scale, stored as
 * 16 BF16: pieces 2 piece and 2 piece + 1 of the row in box `chunk`. Addresses are
 * shared-window addresses. */
static __device__ __forceinline__ void mla_dequant_store(uint32_t stage, int chunk, int row, int piece, uint4 raw,
                                                         float scale) {
  const uint32_t w[4] = {raw.x, raw.y, raw.z, raw.w};
  uint32_t v[8];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float2 f0 = ws_from_e4m3x2((uint16_t)(w[i] & 0xFFFFu)), f1 = ws_from_e4m3x2((uint16_t)(w[i] >> 16));
    v[2 * i] = attn_pack_bf16(f0.x * scale, f0.y * scale);
    v[2 * i + 1] = attn_pack_bf16(f1.x * scale, f1.y * scale);
  }
  const uint32_t box = stage + (uint32_t)chunk * MLA_BN * 128;
  ws_st_shared_v4_u32(box + mla_swizzle(row, 2 * piece), make_uint4(v[0], v[1], v[2], v[3]));
  ws_st_shared_v4_u32(box + mla_swizzle(row, 2 * piece + 1), make_uint4(v[4], v[5], v[6], v[7]));
}

static __device__ __forceinline__ uint4 mla_raw_load(uint32_t stage, int chunk, int row, int piece) {
  return ws_ld_shared_v4_u32(stage + mla_raw_offset(chunk, row, piece));
}

/* Both pieces of this thread's 32 columns in chunk `chunk`, converted and stored. */
static __device__ __forceinline__ void mla_dequant_chunk(uint32_t stage, int chunk, int row, int half, float scale) {
  const uint4 r0 = mla_raw_load(stage, chunk, row, 2 * half), r1 = mla_raw_load(stage, chunk, row, 2 * half + 1);
  mla_dequant_store(stage, chunk, row, 2 * half, r0, scale);
  mla_dequant_store(stage, chunk, row, 2 * half + 1, r1, scale);
}

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

/* Convert: once every thread's copies have landed, this thread converts, in every chunk,
 * the 32 columns 32 half .. + 31 of row `row` (its scales sc). */
static __device__ __forceinline__ void mla_gather_fp8_convert(const ws_ctx *ctx, uint32_t stage, float4 sc, int row,
                                                              int half) {
  /* row and half through an opaque move: otherwise the compiler keeps every address below
   * (loop invariants of the block loop) live across it, and 40 registers do not hold them */
  asm volatile("mov.b32 %0, %0;" : "+r"(row));
  asm volatile("mov.b32 %0, %0;" : "+r"(half));
  WS_CP_ASYNC_WAIT_GROUP(0);
  ws_role_sync(ctx); /* every thread's raw bytes have landed */
  mla_dequant_chunk(stage, 0, row, half, sc.x);
  mla_dequant_chunk(stage, 1, row, half, sc.x);
  mla_dequant_chunk(stage, 2, row, half, sc.y);
  mla_dequant_chunk(stage, 3, row, half, sc.y);
  ws_role_sync(ctx); /* raw chunks 0-3 read: boxes 4, 5 may go over them */
  mla_dequant_chunk(stage, 4, row, half, sc.z);
  mla_dequant_chunk(stage, 5, row, half, sc.z);
  ws_role_sync(ctx); /* raw chunks 4, 5 read: box 6 */
  mla_dequant_chunk(stage, 6, row, half, sc.w);
  const uint4 last0 = mla_raw_load(stage, 7, row, 2 * half), last1 = mla_raw_load(stage, 7, row, 2 * half + 1);
  ws_role_sync(ctx); /* raw chunks 6, 7 read: box 7 */
  mla_dequant_store(stage, 7, row, 2 * half, last0, sc.w);
  mla_dequant_store(stage, 7, row, 2 * half + 1, last1, sc.w);
}

/* ---- the softmax pieces both schedules share -------------------------------------
 * A math thread holds rows r0 and r0 + 8 of a 64 x (8 NJ) S accumulator (s[4j + 2x + e]:
 * row x, key 8j + 2 quad + e). */

/* The gather's valid flags of this thread's keys: `flags` is the stage's first flag of
 * the accumulator's key 0. */
template <int NJ>
static __device__ __forceinline__ void mla_read_valid(uint32_t *valid, const uint8_t *flags, int quad) {
#pragma unroll
  for (int j = 0; j < NJ; j++) valid[j] = *(const uint16_t *)(flags + 8 * j + 2 * quad);
}

/* Rows of several tokens in one tile (MLA_KEYS_ROWS): this thread's keys past each of its
 * two rows' own causal limit to -inf. lim0 / lim1: the last key rows r0 / r0 + 8 see,
 * counted from this warpgroup's first key of the block (key column 8j + 2 quad + e of the
 * accumulator). */
static __device__ __forceinline__ void mla_mask_rows(float *s, int lim0, int lim1, int quad) {
#pragma unroll
  for (int j = 0; j < 4; j++)
#pragma unroll
    for (int e = 0; e < 2; e++) {
      const int col = 8 * j + 2 * quad + e;
      if (col > lim0) s[4 * j + e] = -INFINITY;
      if (col > lim1) s[4 * j + 2 + e] = -INFINITY;
    }
}

/* Masked keys (past topk, -1, out of range; their rows were zero-filled) to -inf, and
 * this thread's row maxima of the block. */
template <int NJ>
static __device__ __forceinline__ void mla_mask_max(float *s, const uint32_t *valid, float *mx) {
#pragma unroll
  for (int j = 0; j < NJ; j++)
#pragma unroll
    for (int e = 0; e < 2; e++)
      if (((valid[j] >> (8 * e)) & 0xFFu) == 0) {
        s[4 * j + e] = -INFINITY;
        s[4 * j + 2 + e] = -INFINITY;
      }
#pragma unroll
  for (int j = 0; j < NJ; j++) {
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
}

/* The rows' new maximum over the quad, both warpgroups (through shared memory and the
 * exchange barrier) and the running one; alpha = exp2 of its change, the scaled maximum
 * msc for the exponents, the running sums rescaled. */
static __device__ __forceinline__ void mla_exchange_max(mla_smem *sm, float *mx, int w, int r0, int quad, uint32_t bar,
                                                        float sl2, float *m_run, float *l_run, float *alpha,
                                                        float *msc) {
#pragma unroll
  for (int x = 0; x < 2; x++) {
    mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 1));
    mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 2));
  }
  if (quad == 0) { sm->rmax[w][r0] = mx[0]; sm->rmax[w][r0 + 8] = mx[1]; }
  ws_named_sync(bar, 2 * WS_ROLE_THREADS(mla_sparse, S_MATH));
#pragma unroll
  for (int x = 0; x < 2; x++) {
    const float m_new = fmaxf(m_run[x], fmaxf(mx[x], sm->rmax[1 - w][r0 + 8 * x]));
    msc[x] = m_new == -INFINITY ? 0.0f : m_new * sl2;
    alpha[x] = attn_exp2(m_run[x] * sl2 - msc[x]);
    m_run[x] = m_new;
    l_run[x] *= alpha[x];
  }
}

/* P = exp2(s sl2 - msc) in BF16 into a swizzled [64][64] tile (`pt`), columns from
 * 16-byte piece piece0 on; the running sums grow by it. */
template <int NJ>
static __device__ __forceinline__ void mla_write_p(uint8_t *pt, const float *s, int r0, int quad, int piece0, float sl2,
                                                   const float *msc, float *l_run) {
#pragma unroll
  for (int j = 0; j < NJ; j++)
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const float p0 = attn_exp2(fmaf(s[4 * j + 2 * x], sl2, -msc[x]));
      const float p1 = attn_exp2(fmaf(s[4 * j + 2 * x + 1], sl2, -msc[x]));
      l_run[x] += p0 + p1;
      *(uint32_t *)(pt + mla_swizzle(r0 + 8 * x, piece0 + j) + 4 * quad) = attn_pack_bf16(p0, p1);
    }
}

/* From a finished S (this warpgroup's 32 keys) to P: masked, its row maxima exchanged
 * with the other warpgroup (the named barrier), P written into the tile `pt` (columns
 * 32w ..) and fenced for wgmma's reads; alpha, the factor for O. */
template <int KEYS>
static __device__ __forceinline__ void mla_s_to_p(mla_smem *sm, float *s, const uint32_t *valid, int w, int r0, int quad,
                                                  uint32_t bar, float sl2, float *m_run, float *l_run, float *alpha,
                                                  uint8_t *pt, int lim0, int lim1) {
  float mx[2] = {-INFINITY, -INFINITY}, msc[2];
  if (KEYS == MLA_KEYS_ROWS) mla_mask_rows(s, lim0, lim1, quad);
  mla_mask_max<4>(s, valid, mx);
  mla_exchange_max(sm, mx, w, r0, quad, bar, sl2, m_run, l_run, alpha, msc);
  mla_write_p<4>(pt, s, r0, quad, 4 * w, sl2, msc, l_run);
  ws_fence_proxy_async_shared_cta(); /* generic stores -> wgmma's reads */
}

/* ---- the two matrix products of a block, shared by both schedules ------------------ */

/* S for warpgroup w's 32 keys of a stage: Q [64][576] x rows 32w .. 32w + 31; committed.
 * dq: Q's first box; dk: the stage's first box, at its row 32w. */
static __device__ __forceinline__ void mla_s_issue(float *s, uint64_t dq, uint64_t dk) {
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < MLA_DQK / 16; kk++) {
    const uint32_t off = (uint32_t)(kk / 4) * MLA_BN * 128 + (uint32_t)(kk % 4) * 32; /* the box, the k step */
    ws_wgmma_m64n32k16_bf16(s, ws_wgmma_desc_advance(dq, off), ws_wgmma_desc_advance(dk, off), kk > 0);
  }
  ws_wgmma_commit_group();
}

/* O[:, 256w ..] += P [64][64 keys] x V [64 keys][256 columns: the stage's boxes 4w .. 4w + 3],
 * P a swizzled [64][64] tile; committed. dp: P; dv: the stage's box 4w, MN-major. */
static __device__ __forceinline__ void mla_pv_issue(float *o, uint64_t dp, uint64_t dv) {
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < MLA_BN / 16; kk++)
    ws_wgmma_m64n256k16_bf16_tb(o, ws_wgmma_desc_advance(dp, (uint32_t)kk * 32), ws_wgmma_desc_advance(dv, kk * 16 * 128), 1);
  ws_wgmma_commit_group();
}

/* The descriptors of a stage (bytes apart), made from the bases through an opaque move:
 * otherwise ptxas hoists one descriptor per k step out of the block loop and runs out of
 * uniform registers (it spilled). */
typedef struct {
  uint64_t q, k, v; /* Q's box 0; stage 0's box 0 at row 32w; stage 0's box 4w, MN-major */
} mla_descs;

static __device__ __forceinline__ mla_descs mla_descs_make(mla_smem *sm, int w) {
  const mla_descs d = {ws_wgmma_desc_k128b(sm->q[0]), ws_wgmma_desc_k128b(sm->kv[0][0] + 32 * w * 64),
                       ws_wgmma_desc_mn128b(sm->kv[0][4 * w], MLA_BN * 128)};
  return d;
}
#define MLA_STAGE_BYTES ((uint32_t)(MLA_BOXES * MLA_BN * 128))

/* ---- the overlapped schedule (WARPSPEC_MLA_SCHEDULE=overlap), FA3's within each
 * warpgroup: S of block nb + 1 is issued before O += P_nb V_nb, and its mask, the max
 * exchange and P_{nb+1} run while that PV is in flight; O is rescaled once it retired.
 * P_nb lives in its own stage's rope box (box 8): after the exchange barrier both
 * warpgroups' S of that stage are done, so its rope columns are dead and two P tiles
 * (this block's and the next) need no shared memory of their own. */
template <int KEYS>
static __device__ __forceinline__ void mla_overlap_blocks(mla_smem *sm, const ws_pipe *kvp, const ws_ctx *ctx,
                                                          const mla_args *a, int nblk, float *o, float *m_run,
                                                          float *l_run, int lim0, int lim1) {
  if (nblk == 0) return;
  const int w = ctx->replica, quad = ctx->lane & 3;
  const int r0 = ctx->warp * 16 + (ctx->lane >> 2);
  const float sl2 = a->scale_log2;
  const uint32_t bar = (uint32_t)a->xchg_bar, both = 2 * WS_ROLE_THREADS(mla_sparse, S_MATH);
  const mla_descs d0 = mla_descs_make(sm, w);
  {
    const ws_cursor k0 = ws_cursor_at(0, MLA_STAGES);
    float s[16], alpha[2];
    uint32_t valid[4];
    ws_pipe_wait_at(kvp, ctx, k0);
    mla_s_issue(s, d0.q, ws_wgmma_desc_advance(d0.k, k0.stage * MLA_STAGE_BYTES));
    mla_read_valid<4>(valid, sm->valid[k0.stage] + 32 * w, quad);
    WS_WGMMA_WAIT_GROUP(0);
    mla_s_to_p<KEYS>(sm, s, valid, w, r0, quad, bar, sl2, m_run, l_run, alpha, (uint8_t *)sm->kv[k0.stage][8], lim0,
                     lim1); /* O is 0 */
    ws_named_sync(bar, both);
  }
#pragma unroll 1
  for (int nb = 0; nb + 1 < nblk; nb++) {
    const ws_cursor kc = ws_cursor_at((uint32_t)nb, MLA_STAGES), kn = ws_cursor_at((uint32_t)nb + 1, MLA_STAGES);
    float s[16], alpha[2];
    uint32_t valid[4];
    mla_descs d = d0;
    asm volatile("mov.b64 %0, %0;" : "+l"(d.q));
    asm volatile("mov.b64 %0, %0;" : "+l"(d.k));
    asm volatile("mov.b64 %0, %0;" : "+l"(d.v));
    ws_pipe_wait_at(kvp, ctx, kn); /* before the issues: a wait's report path is a call */
    mla_s_issue(s, d.q, ws_wgmma_desc_advance(d.k, kn.stage * MLA_STAGE_BYTES));
    mla_pv_issue(o, ws_wgmma_desc_k128b(sm->kv[kc.stage][8]), ws_wgmma_desc_advance(d.v, kc.stage * MLA_STAGE_BYTES));
    mla_read_valid<4>(valid, sm->valid[kn.stage] + 32 * w, quad);
    WS_WGMMA_WAIT_GROUP(1); /* S of nb + 1 is done; the PV of nb runs on */
    /* P into stage kn's rope box: after the exchange barrier both warpgroups' S of it are done */
    mla_s_to_p<KEYS>(sm, s, valid, w, r0, quad, bar, sl2, m_run, l_run, alpha, (uint8_t *)sm->kv[kn.stage][8],
                     lim0 - MLA_BN * (nb + 1), lim1 - MLA_BN * (nb + 1));
    WS_WGMMA_WAIT_GROUP(0); /* the PV of nb has retired: O free, stage kc read */
    ws_pipe_release_warp_at(kvp, ctx, kc);
    attn_rescale<MLA_DV / 2>(o, alpha);
    ws_named_sync(bar, both); /* P of nb + 1 complete (both halves) */
  }
  const ws_cursor kl = ws_cursor_at((uint32_t)nblk - 1, MLA_STAGES);
  mla_pv_issue(o, ws_wgmma_desc_k128b(sm->kv[kl.stage][8]), ws_wgmma_desc_advance(d0.v, kl.stage * MLA_STAGE_BYTES));
  WS_WGMMA_WAIT_GROUP(0);
  ws_pipe_release_warp_at(kvp, ctx, kl);
}

template <int FP8, int OV, int KEYS>
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

  const uint32_t writers = WS_ROLE_THREADS(mla_sparse, S_GATHER), readers = 2 * WS_ROLE_WARPS(mla_sparse, S_MATH);
  ws_pipe qp = ws_pipe_view(sm->q_full, sm->q_empty, sm->q_closed, 1, writers, readers, "mla q");
  ws_pipe kvp = ws_pipe_view(sm->kv_full, sm->kv_empty, sm->kv_closed, MLA_STAGES, writers, readers, "mla kv rows");
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
      const int row = t & 63, half = t >> 6, row0 = 4 * (t >> 3);
      /* d_next: the next block's row, resolved a block ahead; e: the entry
       * of the block after it, loaded a block ahead (MLA_ROW_NONE: none) */
      int d_next = mla_row_resolve<KEYS>(&a, tok, kbeg, mla_row_fetch<KEYS>(&a, tok, kbeg, nkeys, row));
      int e = mla_row_fetch<KEYS>(&a, tok, kbeg, nkeys, MLA_BN + row);
      for (int nb = 0; nb < nblk; nb++, k = ws_cursor_next(k, MLA_STAGES)) {
        const uint32_t s = ws_pipe_acquire_at(&kvp, &ctx, k), stage = ws_smem_addr(sm->kv[s][0]);
        const int d = d_next;
        if (half == 0) {
          sm->valid[s][row] = d >= 0;
          sm->rows[s][row] = d;
        }
        ws_role_sync(&ctx); /* the block's kv rows, for the copies */
        int r[4];
#pragma unroll
        for (int j = 0; j < 4; j++) r[j] = sm->rows[s][row0 + j];
        mla_gather_fp8_copy(stage, a.kv8, r, t);
        const float4 sc = mla_fp8_scales(a.kv8, d);
        /* the next block's row (its entry landed a block ago), and the entry of
         * the block after it, while these land */
        d_next = mla_row_resolve<KEYS>(&a, tok, kbeg, e);
        e = mla_row_fetch<KEYS>(&a, tok, kbeg, nkeys, (nb + 2) * MLA_BN + row);
        mla_gather_fp8_convert(&ctx, stage, sc, row, half);
        ws_pipe_commit_at(&kvp, &ctx, k); /* fence.proxy.async (the generic stores), then arrive */
      }
      return;
    }
    /* BF16: 8 lanes per 128-byte line, 4 rows per warp instruction. Thread t copies the
     * 16-byte piece t & 7 of each of the 9 boxes of rows (t >> 3) + 16 j, j = 0..3: a warp
     * instruction reads four whole lines and fills four whole 128-byte rows of a box. (A
     * thread per half row read 16 bytes of 32 lines per instruction: twice the L2 sectors
     * and 8x the shared-memory wavefronts; docs/design_mla.md, 5.1.) */
    const int piece = t & 7, row0 = t >> 3;
    /* r_next: the next block's rows, resolved a block ahead; e_next: the
     * entries of the block after it, loaded a block ahead */
    int r_next[4], e_next[4];
#pragma unroll
    for (int j = 0; j < 4; j++) {
      r_next[j] = mla_row_resolve<KEYS>(&a, tok, kbeg, mla_row_fetch<KEYS>(&a, tok, kbeg, nkeys, row0 + 16 * j));
      e_next[j] = mla_row_fetch<KEYS>(&a, tok, kbeg, nkeys, MLA_BN + row0 + 16 * j);
    }
    for (int nb = 0; nb < nblk; nb++, k = ws_cursor_next(k, MLA_STAGES)) {
      const uint32_t s = ws_pipe_acquire_at(&kvp, &ctx, k);
      int r[4];
#pragma unroll
      for (int j = 0; j < 4; j++) {
        r[j] = r_next[j];
        r_next[j] = mla_row_resolve<KEYS>(&a, tok, kbeg, e_next[j]);
        e_next[j] = mla_row_fetch<KEYS>(&a, tok, kbeg, nkeys, (nb + 2) * MLA_BN + row0 + 16 * j);
      }
      const uint32_t stage = ws_smem_addr(sm->kv[s][0]);
#pragma unroll
      for (int j = 0; j < 4; j++) {
        const int row = row0 + 16 * j, ok = r[j] >= 0;
        if (piece == 0) sm->valid[s][row] = ok;
        const uint8_t *src = (const uint8_t *)(a.kv + (size_t)(ok ? r[j] : 0) * MLA_DQK) + piece * 16;
        const uint32_t dst = stage + mla_swizzle(row, piece);
#pragma unroll
        for (int b = 0; b < MLA_BOXES; b++)
          ws_cp_async_cg_16_to(dst + (uint32_t)b * (MLA_BN * 128), src + b * 128, ok ? 16u : 0u);
      }
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
  if (OV) mla_overlap_blocks<KEYS>(sm, &kvp, &ctx, &a, nblk, o, m_run, l_run, lim[0], lim[1]);
  ws_cursor k = c0;
  for (int nb = 0; nb < (OV ? 0 : nblk); nb++, k = ws_cursor_next(k, MLA_STAGES)) {
    ws_pipe_wait_at(&kvp, &ctx, k);
    const uint16_t *stage = sm->kv[k.stage][0];
    float s[16];
    mla_s_issue(s, ws_wgmma_desc_k128b(sm->q[0]), ws_wgmma_desc_k128b(stage + 32 * w * 64));
    /* the gather's flags for this thread's 8 keys, read while the wgmmas run */
    uint32_t valid[4];
    mla_read_valid<4>(valid, sm->valid[k.stage] + 32 * w, quad);
    WS_WGMMA_WAIT_GROUP(0);
    /* the block's row max (both warpgroups), P for this half into the shared 64 x 64 tile */
    float alpha[2];
    mla_s_to_p<KEYS>(sm, s, valid, w, r0, quad, (uint32_t)a.xchg_bar, sl2, m_run, l_run, alpha, (uint8_t *)sm->p,
                     lim[0] - MLA_BN * nb, lim[1] - MLA_BN * nb);
    ws_named_sync((uint32_t)a.xchg_bar, 2 * WS_ROLE_THREADS(mla_sparse, S_MATH));
    attn_rescale<MLA_DV / 2>(o, alpha);
    mla_pv_issue(o, ws_wgmma_desc_k128b(sm->p), ws_wgmma_desc_mn128b(stage + 4 * w * MLA_BN * 64, MLA_BN * 128));
    WS_WGMMA_WAIT_GROUP(0);
    ws_pipe_release_warp_at(&kvp, &ctx, k);
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
    const float inv = attn_row_inv(lt); /* 0: no key; NaN stays NaN */
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
  const int ov = ws_knobs_get()->mla_overlap; /* WARPSPEC_MLA_SCHEDULE=overlap */
  static const int slots[3][2][2] = {{{WS_PLAN_SLOT_MLA_SPARSE, WS_PLAN_SLOT_MLA_OV},
                                      {WS_PLAN_SLOT_MLA_FP8, WS_PLAN_SLOT_MLA_FP8_OV}},
                                     {{WS_PLAN_SLOT_MLA_SPLIT, WS_PLAN_SLOT_MLA_SPLIT_OV},
                                      {WS_PLAN_SLOT_MLA_SPLIT_FP8, WS_PLAN_SLOT_MLA_SPLIT_FP8_OV}},
                                     {{WS_PLAN_SLOT_MLA_ROWS, WS_PLAN_SLOT_MLA_ROWS_OV},
                                      {WS_PLAN_SLOT_MLA_ROWS_FP8, WS_PLAN_SLOT_MLA_ROWS_FP8_OV}}};
  static const char *const names[3][2][2] = {
      {{"mla_sparse", "mla_sparse_overlap"}, {"mla_decode_fp8", "mla_decode_fp8_overlap"}},
      {{"mla_sparse_split", "mla_sparse_split_overlap"}, {"mla_sparse_split_fp8", "mla_sparse_split_fp8_overlap"}},
      {{"mla_decode_rows", "mla_decode_rows_overlap"}, {"mla_decode_rows_fp8", "mla_decode_rows_fp8_overlap"}}};
  static const void *const funcs[3][2][2] = {
      {{(const void *)mla_sparse_kernel<0, 0, MLA_KEYS_PLAIN>, (const void *)mla_sparse_kernel<0, 1, MLA_KEYS_PLAIN>},
       {(const void *)mla_sparse_kernel<1, 0, MLA_KEYS_PLAIN>, (const void *)mla_sparse_kernel<1, 1, MLA_KEYS_PLAIN>}},
      {{(const void *)mla_sparse_kernel<0, 0, MLA_KEYS_SPLIT>, (const void *)mla_sparse_kernel<0, 1, MLA_KEYS_SPLIT>},
       {(const void *)mla_sparse_kernel<1, 0, MLA_KEYS_SPLIT>, (const void *)mla_sparse_kernel<1, 1, MLA_KEYS_SPLIT>}},
      {{(const void *)mla_sparse_kernel<0, 0, MLA_KEYS_ROWS>, (const void *)mla_sparse_kernel<0, 1, MLA_KEYS_ROWS>},
       {(const void *)mla_sparse_kernel<1, 0, MLA_KEYS_ROWS>, (const void *)mla_sparse_kernel<1, 1, MLA_KEYS_ROWS>}}};
  if ((s = ws_plan_cached(slots[keys][fp8][ov], mla_make_plan, names[keys][fp8][ov], &plan)) != WS_OK) return s;
  ws_tmap mq;
  if ((s = ws_tmap_2d_swizzled(&mq, q, WS_DTYPE_BF16, (uint64_t)tokens * a->heads, MLA_DQK, MLA_DQK * 2, MLA_BH, 64,
                               WS_SWIZZLE_128B)) != WS_OK)
    return s;
  a->xchg_bar = plan->layout.nbarriers + 1; /* the plan's first user barrier (mla_make_plan) */
  const float scale = softmax_scale > 0.0f ? softmax_scale : 1.0f / sqrtf((float)MLA_DQK);
  a->scale_log2 = scale * ATTN_LOG2E;
  a->rows = tokens * a->heads;
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&mq, a, &diag};
  const int pack = keys == MLA_KEYS_ROWS ? a->s_q : 1; /* the kernel's: tokens whose rows share tiles */
  const dim3 grid = {(unsigned)(tokens / pack) * (unsigned)MLA_ROW_TILES(pack, a->heads), 1, (unsigned)splits};
  return ws_plan_launch(plan, funcs[keys][fp8][ov], grid, stream, args);
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
