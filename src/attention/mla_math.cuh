/* mla_math.cuh - the MLA kernel's math warpgroups (mla_sparse.cu): the softmax pieces of
 * a block (with the lazy rescale), the two matrix products, and Q's last k steps held in
 * registers; the block loop is in the kernel. */
#ifndef WARPSPEC_MLA_MATH_CUH
#define WARPSPEC_MLA_MATH_CUH

#include "warpspec/device/wgmma.cuh"
#include "attn_device.cuh"

#include <cuda_fp16.h>
#include "mla_stage.cuh"

/* ---- the softmax pieces -----------------------------------------------------------
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

/* The lazy rescale: the running maximum moves only when a block's exceeds it by more than
 * 2^MLA_LAZY_LOG2 in the exponent, so in most blocks alpha is 1 and O is not rescaled (128
 * FMULs per thread on the path from P to the PV issue, with the tensor cores idle). The
 * exponents stay at most MLA_LAZY_LOG2 (P at most 256, as exact in BF16 as any value); O
 * and l share the maximum used, so O / l and the lse do not depend on it but for rounding.
 * Both warpgroups take the same decision (the same inputs). Measured +2-5% (session 32). */
#define MLA_LAZY_LOG2 8.0f
#define MLA_RSQ_STEPS 8 /* Q's last 8 k steps (its boxes 7 and 8) from registers */

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
    float m_new = fmaxf(m_run[x], fmaxf(mx[x], sm->rmax[1 - w][r0 + 8 * x]));
    /* keep the running maximum unless the new one is past it by the bound (from -inf:
     * the difference is inf or NaN, so it moves, as an eager rescale would) */
    const int keep = m_new * sl2 - m_run[x] * sl2 <= MLA_LAZY_LOG2;
    m_new = keep ? m_run[x] : m_new;
    msc[x] = m_new == -INFINITY ? 0.0f : m_new * sl2;
    alpha[x] = keep ? 1.0f : attn_exp2(m_run[x] * sl2 - msc[x]);
    m_run[x] = m_new;
    l_run[x] *= alpha[x];
  }
}

/* P = exp2(s sl2 - msc) in BF16 into a swizzled [64][64] tile (`pt`), columns from
 * 16-byte piece piece0 on; the running sums grow by it. */
template <int NJ, int F16 = 0>
static __device__ __forceinline__ void mla_write_p(uint8_t *pt, const float *s, int r0, int quad, int piece0, float sl2,
                                                   const float *msc, float *l_run, float g = 1.0f) {
#pragma unroll
  for (int j = 0; j < NJ; j++)
#pragma unroll
    for (int x = 0; x < 2; x++) {
      const float p0 = attn_exp2(fmaf(s[4 * j + 2 * x], sl2, -msc[x]));
      const float p1 = attn_exp2(fmaf(s[4 * j + 2 * x + 1], sl2, -msc[x]));
      l_run[x] += p0 + p1;
      uint32_t packed;
      if (F16) { /* the FP8 f16 form: P x g (O's units against this block's V, mla_sparse.cu) */
        const __half2 h = __floats2half2_rn(p0 * g, p1 * g);
        packed = *(const uint32_t *)&h;
      } else {
        packed = attn_pack_bf16(p0, p1);
      }
      *(uint32_t *)(pt + mla_swizzle(r0 + 8 * x, piece0 + j) + 4 * quad) = packed;
    }
}

/* From a finished S (this warpgroup's 32 keys) to P: masked, its row maxima exchanged
 * with the other warpgroup (the named barrier), P written into the tile `pt` (columns
 * 32w ..) and fenced for wgmma's reads; alpha, the factor for O. */
template <int KEYS, int F16 = 0>
static __device__ __forceinline__ void mla_s_to_p(mla_smem *sm, float *s, const uint32_t *valid, int w, int r0, int quad,
                                                  uint32_t bar, float sl2, float *m_run, float *l_run, float *alpha,
                                                  uint8_t *pt, int lim0, int lim1, float g = 1.0f) {
  float mx[2] = {-INFINITY, -INFINITY}, msc[2];
  if (KEYS == MLA_KEYS_ROWS) mla_mask_rows(s, lim0, lim1, quad);
  mla_mask_max<4>(s, valid, mx);
  mla_exchange_max(sm, mx, w, r0, quad, bar, sl2, m_run, l_run, alpha, msc);
  mla_write_p<4, F16>(pt, s, r0, quad, 4 * w, sl2, msc, l_run, g);
  ws_fence_proxy_async_shared_cta(); /* generic stores -> wgmma's reads */
}

/* ---- the two matrix products of a block ------------------------------------------- */

/* S for warpgroup w's 32 keys of a stage: Q [64][576] x rows 32w .. 32w + 31; committed.
 * dq: Q's first box; dk: the stage's first box, at its row 32w; qa: Q's last k steps. */
template <int F16 = 0>
static __device__ __forceinline__ void mla_s_issue(float *s, uint64_t dq, uint64_t dk, const uint32_t (*qa)[4]) {
  constexpr int RSQ = MLA_RSQ_STEPS;
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < MLA_DQK / 16; kk++) {
    const uint32_t off = (uint32_t)(kk / 4) * MLA_BN * 128 + (uint32_t)(kk % 4) * 32; /* the box, the k step */
    /* F16 (the FP8 cache's f16 form): the 512 latent columns in f16, the rope's 64 in bf16 */
    const int f16 = F16 && kk < MLA_DV / 16;
    if (kk >= MLA_DQK / 16 - RSQ) { /* Q's last RSQ k steps from registers (mla_q_fragments) */
      if (f16) ws_wgmma_m64n32k16_f16_rs(s, qa[kk - (MLA_DQK / 16 - RSQ)], ws_wgmma_desc_advance(dk, off), kk > 0);
      else ws_wgmma_m64n32k16_bf16_rs(s, qa[kk - (MLA_DQK / 16 - RSQ)], ws_wgmma_desc_advance(dk, off), kk > 0);
    } else {
      if (f16) ws_wgmma_m64n32k16_f16(s, ws_wgmma_desc_advance(dq, off), ws_wgmma_desc_advance(dk, off), kk > 0);
      else ws_wgmma_m64n32k16_bf16(s, ws_wgmma_desc_advance(dq, off), ws_wgmma_desc_advance(dk, off), kk > 0);
    }
  }
  ws_wgmma_commit_group();
}

/* Q's last MLA_RSQ_STEPS k steps as wgmma A fragments in this thread's registers, read
 * once per CTA from the swizzled Q boxes. Why: S is 36 m64n32k16 per warpgroup with both
 * operands in shared memory, 3 KB per 16 tensor cycles against the banks' 2 KB
 * (design_mla.md 4: S bound at ~1,728 cycles of 1,152); each k step from registers leaves
 * only the 1 KB of K (measured +0.5-1% over the lazy rescale alone, session 32). Rows r0
 * and r0 + 8 (the accumulator's), columns 16 t + 2 quad (+1) and + 8 of each step, packed
 * bf16x2. */
static __device__ __forceinline__ void mla_q_fragments(const mla_smem *sm, int r0, int quad, uint32_t (*qa)[4]) {
  constexpr int RSQ = MLA_RSQ_STEPS;
#pragma unroll
  for (int t = 0; t < RSQ; t++) {
    const int kk = MLA_DQK / 16 - RSQ + t, box = kk / 4, col = (kk % 4) * 16 + 2 * quad;
    const uint8_t *b = (const uint8_t *)sm->q[box];
#pragma unroll
    for (int h = 0; h < 2; h++) /* columns col (+1), then col + 8 (+1) */
#pragma unroll
      for (int x = 0; x < 2; x++) /* rows r0, r0 + 8 */
        qa[t][2 * h + x] = *(const uint32_t *)(b + mla_swizzle(r0 + 8 * x, (col + 8 * h) / 8) + ((col + 8 * h) % 8) * 2);
  }
}

/* The FP8 cache's f16 form: Q's rope k steps (the last 4 of the register fragments, bf16
 * pairs) times f, a power of two (exact). */
static __device__ __forceinline__ void mla_scale_rope_fragments(uint32_t (*qa)[4], float f) {
#pragma unroll
  for (int t = MLA_RSQ_STEPS - (MLA_DQK - MLA_DV) / 16; t < MLA_RSQ_STEPS; t++)
#pragma unroll
    for (int i = 0; i < 4; i++)
      qa[t][i] = attn_pack_bf16(__uint_as_float(qa[t][i] << 16) * f, __uint_as_float(qa[t][i] & 0xFFFF0000u) * f);
}

/* O[:, 256w ..] += P [64][64 keys] x V [64 keys][256 columns: the stage's boxes 4w .. 4w + 3],
 * P a swizzled [64][64] tile; committed. dp: P; dv: the stage's box 4w, MN-major. */
template <int F16 = 0>
static __device__ __forceinline__ void mla_pv_issue(float *o, uint64_t dp, uint64_t dv) {
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < MLA_BN / 16; kk++) {
    if (F16) ws_wgmma_m64n256k16_f16_tb(o, ws_wgmma_desc_advance(dp, (uint32_t)kk * 32), ws_wgmma_desc_advance(dv, kk * 16 * 128), 1);
    else ws_wgmma_m64n256k16_bf16_tb(o, ws_wgmma_desc_advance(dp, (uint32_t)kk * 32), ws_wgmma_desc_advance(dv, kk * 16 * 128), 1);
  }
  ws_wgmma_commit_group();
}

/* ---- The FP8 cache's f16 forms (mla_fewheads.cu at 16 columns; here with
 * WARPSPEC_MLA_FP8_F16): Q in f16 with a power of two per row, O in lazily kept units ---- */

/* The largest |value| of eight bf16 (a 16-byte piece of Q) and amax. */
static __device__ __forceinline__ float mla_bf16x8_amax(uint4 v, float amax) {
  const uint32_t x[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++)
    amax = fmaxf(amax, fmaxf(fabsf(__uint_as_float(x[i] << 16)), fabsf(__uint_as_float(x[i] & 0xFFFF0000u))));
  return amax;
}

/* A Q row's power of two e (the row goes to f16 times 2^-e): its largest |value| into
 * [2^14, 2^15), where f16 holds every bf16 value exactly; 0 for a row of zeros (or not
 * finite); |e| <= 126, so that 2^e and 2^-e are finite fp32. */
static __device__ __forceinline__ int mla_q_exp(float amax) {
  return amax > 0.0f && amax <= 3.0e38f ? min(max(ilogbf(amax) - 14, -126), 126) : 0;
}

/* A piece of Q times f (2^-e): eight latent values as f16 pairs, or (rope) eight rope
 * values as bf16 pairs (the rope's products stay in bf16). */
static __device__ __forceinline__ uint4 mla_q_piece_f16(uint4 v, float f, int rope) {
  const uint32_t x[4] = {v.x, v.y, v.z, v.w};
  uint32_t y[4];
#pragma unroll
  for (int i = 0; i < 4; i++) {
    const float lo = __uint_as_float(x[i] << 16) * f, hi = __uint_as_float(x[i] & 0xFFFF0000u) * f;
    if (!rope) {
      const __half2 h = __floats2half2_rn(lo, hi);
      y[i] = *(const uint32_t *)&h;
    } else {
      y[i] = attn_pack_bf16(lo, hi);
    }
  }
  return make_uint4(y[0], y[1], y[2], y[3]);
}

/* O's units 2^-e_run against a block's power of two eb: e_run follows a block more than
 * 2^4 away, coarser (O shrinks) or finer (O grows by at most 2^100: O is a convex sum of
 * values within 448 x 2^100 of the units, far from fp32's end), so that P x 2^(e_run - eb)
 * stays in [2^-4, 2^4] x P and a block of small values keeps f16's precision even when the
 * attention sits on it. The first block sets it. Returns O's factor: 2^(eb - old e_run) when
 * it moved, else 1. The same in every thread (eb is the block's). */
static __device__ __forceinline__ float mla_units_follow(int eb, int *e_run, int *e_set) {
  if (*e_set && eb >= *e_run - 4 && (eb <= *e_run + 4 || eb - *e_run > 100)) return 1.0f;
  const float gshift = *e_set ? ldexpf(1.0f, eb - *e_run) : 1.0f;
  *e_run = eb;
  *e_set = 1;
  return gshift;
}

/* The FP8 cache's f16 form: Q's 512 latent columns to f16 in place, each row (head) times
 * 2^-e (its largest |q| into [2^14, 2^15): exact), the 64 rope columns (bf16) times the
 * same; qexp[row] = e. By the 256 threads of both math warpgroups (t), 4 per row, each row
 * read twice (its maximum, then the conversion) to keep registers low; the caller fences
 * and meets the other warpgroup before any wgmma reads Q. */
static __device__ __forceinline__ void mla_q_to_f16(mla_smem *sm, int t) {
  const int row = t >> 2, sub = t & 3;
  const uint32_t q0 = ws_smem_addr(sm->q[0]);
  float amax = 0.0f;
#pragma unroll 6
  for (int p = sub; p < MLA_PIECES; p += 4)
    amax = mla_bf16x8_amax(ws_ld_shared_v4_u32(q0 + (uint32_t)(p / 8) * (MLA_BH * 128) + mla_swizzle(row, p % 8)), amax);
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
  amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
  const int e = mla_q_exp(amax);
  const float f = ldexpf(1.0f, -e);
#pragma unroll 6
  for (int p = sub; p < MLA_PIECES; p += 4) {
    const uint32_t at = q0 + (uint32_t)(p / 8) * (MLA_BH * 128) + mla_swizzle(row, p % 8);
    ws_st_shared_v4_u32(at, mla_q_piece_f16(ws_ld_shared_v4_u32(at), f, p >= MLA_DV / 8));
  }
  if (sub == 0) sm->qexp[row] = (float)e;
}

#endif
