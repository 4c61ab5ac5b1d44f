/* attn_device.cuh - device helpers the attention kernels share. */
#ifndef WARPSPEC_ATTN_DEVICE_CUH
#define WARPSPEC_ATTN_DEVICE_CUH

#include <cuda_bf16.h>
#include <math.h>
#include <stdint.h>

#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"

/* 2^x on the SFU (ex2.approx, flush-to-zero): the softmax's exponent with the scale and
 * log2(e) folded into one FMA before it; 2^-inf = +0. */
static __device__ __forceinline__ float attn_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

/* Two floats as bf16x2 (lo in the low half: the lower column), round to nearest even. */
static __device__ __forceinline__ uint32_t attn_pack_bf16(float lo, float hi) {
  const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
  return *(const uint32_t *)&h;
}

#define ATTN_LN2 0.69314718055994531f
#define ATTN_LOG2E 1.4426950408889634f

/* ---- the q, k and v pipes of the flash and NSA kernels: TMA in, wgmma out ---------- */
static __device__ __forceinline__ void attn_pipes_setup(ws_pipe *q, ws_pipe *k, ws_pipe *v) {
  ws_pipe_set_proxies(q, WS_PROXY_ASYNC, WS_PROXY_ASYNC);
  ws_pipe_set_proxies(k, WS_PROXY_ASYNC, WS_PROXY_ASYNC);
  ws_pipe_set_proxies(v, WS_PROXY_ASYNC, WS_PROXY_ASYNC);
}

/* Thread 0 initialises the barriers, then the whole CTA syncs (ws_init_sync). */
static __device__ __forceinline__ void attn_pipes_init(const ws_pipe *q, const ws_pipe *k, const ws_pipe *v) {
  if (threadIdx.x == 0) {
    ws_pipe_init(q);
    ws_pipe_init(k);
    ws_pipe_init(v);
  }
  ws_init_sync();
}

/* The loader's leader prefetches the three tensor maps' descriptors. */
static __device__ __forceinline__ void attn_prefetch_maps(const ws_ctx *c, const ws_tmap *q, const ws_tmap *k,
                                                          const ws_tmap *v) {
  if (ws_role_leader(c)) {
    ws_prefetch_tensormap(&q->map);
    ws_prefetch_tensormap(&k->map);
    ws_prefetch_tensormap(&v->map);
  }
}

/* ---- the two matrix products of a key block, shared by the flash and NSA kernels ------
 * Q and K tiles are [rows][D] in 64-column boxes with the 128-byte swizzle (TMA's), the
 * descriptors made once by the caller (dq0: this warpgroup's 64 rows; dk: the stage).
 * S [64][BN] = Q K^T, issued and committed (the caller waits); KROWS: the K tile's rows per
 * box (BN = 64 over a 128-row tile: its first 64 keys). */
template <int DQK, int BM, int BN, int KROWS = BN>
static __device__ __forceinline__ void attn_qk_wgmma(float *s, uint64_t dq0, uint64_t dk) {
  static_assert(BN == 128 || BN == 64, "S is one m64n128 or m64n64 accumulator");
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < DQK / 16; kk++) {
    const int box = kk / 4;
    const uint32_t off = (uint32_t)(kk % 4) * 32;
    const uint64_t dqs = ws_wgmma_desc_advance(dq0, box * BM * 128 + off), dks = ws_wgmma_desc_advance(dk, box * KROWS * 128 + off);
    if (BN == 128) ws_wgmma_m64n128k16_bf16(s, dqs, dks, kk > 0);
    else ws_wgmma_m64n64k16_bf16(s, dqs, dks, kk > 0);
  }
  ws_wgmma_commit_group();
}

/* O [64][DV] += P V with P from registers (attn_p_fragments) and V [BN keys][DV] read
 * MN-major through dv (the stage's descriptor, lbo = BN x 128 bytes); committed. */
template <int DV, int BN>
static __device__ __forceinline__ void attn_pv_wgmma(float *o, uint32_t (*pa)[4], uint64_t dv) {
  ws_wgmma_fence();
#pragma unroll
  for (int t = 0; t < BN / 16; t++) {
    const uint64_t dvt = ws_wgmma_desc_advance(dv, t * 16 * 128);
    if (DV == 128) ws_wgmma_m64n128k16_bf16_rs_tb(o, pa[t], dvt, 1);
    else ws_wgmma_m64n64k16_bf16_rs_tb(o, pa[t], dvt, 1);
  }
  ws_wgmma_commit_group();
}

/* ---- turns between the two math warpgroups (named barriers from the plan) -------------
 * Each waits on its own barrier and hands over on the other's; PP = 0: no turns. The flash
 * kernel's ping-pong takes them around each product's issue, overlap-pingpong around each
 * block's exponentials (attn_softmax_block). */
typedef struct {
  uint32_t mine, other, both; /* named barrier ids, and the threads of both warpgroups */
} attn_turns;

template <int PP>
static __device__ __forceinline__ void attn_turn_take(const attn_turns *t) {
  if (PP) ws_bar_sync(t->mine, t->both);
}

template <int PP>
static __device__ __forceinline__ void attn_turn_pass(const attn_turns *t) {
  if (PP) ws_bar_arrive(t->other, t->both);
}

/* ---- the online softmax of one key block, shared by the flash and NSA kernels ---------
 * A thread holds two rows (x = 0, 1) of a warpgroup's 64 x BN S accumulator in wgmma's
 * layout: s[4j + 2x + e] is row x, column 8j + 2 quad + e; the four lanes of a quad share
 * the rows. */

/* New row maxima (over the quad), alpha = exp2 of each max's change (the factor for O and
 * the running sums), s turned into p = exp2(s sl2 - m sl2) in place, the sums updated. A
 * row with no key yet keeps max -inf: exponents taken relative to 0 give 0, not NaN. */
/* TURN = 1: the exponentials, the SFU's share of the block, in this warpgroup's turn
 * (taken after the maxima, handed over after the last exp2; `pass` 0 skips the hand-over),
 * so that the two warpgroups' exponentials alternate. */
template <int BN, int TURN = 0>
static __device__ __forceinline__ void attn_softmax_block(float *s, float *m_run, float *l_run, float *alpha, float sl2,
                                                          const attn_turns *turns = NULL, int pass = 1) {
  float mx[2] = {m_run[0], m_run[1]};
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    mx[0] = fmaxf(mx[0], fmaxf(s[4 * j], s[4 * j + 1]));
    mx[1] = fmaxf(mx[1], fmaxf(s[4 * j + 2], s[4 * j + 3]));
  }
  float msc[2];
#pragma unroll
  for (int x = 0; x < 2; x++) {
    mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 1));
    mx[x] = fmaxf(mx[x], __shfl_xor_sync(0xffffffffu, mx[x], 2));
    msc[x] = mx[x] == -INFINITY ? 0.0f : mx[x] * sl2;
    alpha[x] = attn_exp2(m_run[x] * sl2 - msc[x]);
    m_run[x] = mx[x];
    l_run[x] *= alpha[x];
  }
  if (TURN) {
    /* the exponents made to depend on a clock read after the turn's barrier (its top bit,
     * 0 for the next 146 years): ptxas otherwise hoists the exp2s above a bar.sync */
    attn_turn_take<TURN>(turns);
    uint64_t clk;
    asm volatile("mov.u64 %0, %%clock64;" : "=l"(clk));
    const float zero = (float)(uint32_t)(clk >> 63);
    msc[0] += zero;
    msc[1] += zero;
  }
#pragma unroll
  for (int j = 0; j < BN / 8; j++)
#pragma unroll
    for (int e = 0; e < 4; e++) {
      const int x = e >> 1;
      const float v = fmaf(s[4 * j + e], sl2, -msc[x]);
      const float p = attn_exp2(v);
      s[4 * j + e] = p;
      l_run[x] += p;
    }
  if (TURN && pass) {
    /* the hand-over's barrier id made to depend on both sums (never negative; a NaN
     * compares false), hence on every exp2: ptxas otherwise sinks them below a bar.arrive */
    const uint32_t dep = (uint32_t)(l_run[0] < 0.0f) | (uint32_t)(l_run[1] < 0.0f);
    ws_bar_arrive(turns->other + dep, turns->both);
  }
}

/* O (64 x DV accumulator, same layout) times each row's alpha. */
template <int DV>
static __device__ __forceinline__ void attn_rescale(float *o, const float *alpha) {
#pragma unroll
  for (int j = 0; j < DV / 8; j++) {
    o[4 * j] *= alpha[0]; o[4 * j + 1] *= alpha[0];
    o[4 * j + 2] *= alpha[1]; o[4 * j + 3] *= alpha[1];
  }
}

/* P as wgmma A fragments (bf16): keys 16t .. 16t + 15 are accumulator columns
 * 8(2t) .. 8(2t + 1) + 7. */
template <int BN>
static __device__ __forceinline__ void attn_p_fragments(const float *s, uint32_t (*pa)[4]) {
#pragma unroll
  for (int t = 0; t < BN / 16; t++) {
    pa[t][0] = attn_pack_bf16(s[8 * t + 0], s[8 * t + 1]);
    pa[t][1] = attn_pack_bf16(s[8 * t + 2], s[8 * t + 3]);
    pa[t][2] = attn_pack_bf16(s[8 * t + 4], s[8 * t + 5]);
    pa[t][3] = attn_pack_bf16(s[8 * t + 6], s[8 * t + 7]);
  }
}

/* The plain schedule's softmax of one block: new row maxima and sums, O rescaled, P as A
 * fragments for the PV that follows. */
template <int BN, int DV>
static __device__ __forceinline__ void attn_softmax_rescale_p(float *s, float *m_run, float *l_run, float sl2, float *o,
                                                              uint32_t (*pa)[4]) {
  float alpha[2];
  attn_softmax_block<BN>(s, m_run, l_run, alpha, sl2);
  attn_rescale<DV>(o, alpha);
  attn_p_fragments<BN>(s, pa);
}

/* ---- FA3's intra-warpgroup overlap, shared by the flash and NSA kernels -----------------
 * Per step n: S of block n + 1 (K stage kn) is issued before O += P_n V (V stage kc), and
 * its softmax runs while that PV is in flight; O is rescaled once the PV has retired. The
 * caller masks S between the two halves (attn_ov_issue returns with S done, the PV in
 * flight) and releases K there. P alternates between two fragment sets (no copies under
 * a PV). Tiles are [BN][D] bf16 in 64-column boxes, one per stage. With turns (TURN = 1,
 * overlap-pingpong) each block's exponentials run in the warpgroup's turn
 * (attn_softmax_block). */
template <int DQK, int DV, int BN>
static __device__ __forceinline__ void attn_ov_issue(const ws_pipe *kp, const ws_pipe *vp, const ws_ctx *ctx, ws_cursor kc,
                                                     ws_cursor kn, uint64_t dq0, uint64_t dk0, uint64_t dv0, float *s,
                                                     float *o, uint32_t (*pc)[4]) {
  /* the descriptor bases through an opaque move each step: otherwise ptxas hoists one
   * descriptor per k step out of the loop and runs out of uniform registers */
  asm volatile("mov.b64 %0, %0;" : "+l"(dq0));
  asm volatile("mov.b64 %0, %0;" : "+l"(dk0));
  asm volatile("mov.b64 %0, %0;" : "+l"(dv0));
  /* both waits before the issues: a bounded wait's report path is a call, and a call
   * between a wgmma's issue and its wait makes ptxas serialize */
  ws_pipe_wait_at(kp, ctx, kn);
  ws_pipe_wait_at(vp, ctx, kc);
  attn_qk_wgmma<DQK, 128, BN>(s, dq0, ws_wgmma_desc_advance(dk0, kn.stage * (uint32_t)(BN * DQK * 2)));
  attn_pv_wgmma<DV, BN>(o, pc, ws_wgmma_desc_advance(dv0, kc.stage * (uint32_t)(BN * DV * 2)));
  WS_WGMMA_WAIT_GROUP(1); /* S of n + 1 is done; the PV of n runs on */
}

/* The second half of a step, after the caller's mask: softmax of S into P_{n+1}, then
 * (the PV retired) V released and O rescaled. */
template <int DV, int BN, int TURN = 0>
static __device__ __forceinline__ void attn_ov_finish(const ws_pipe *vp, const ws_ctx *ctx, ws_cursor kc, float *s,
                                                      float *m_run, float *l_run, float sl2, float *o, uint32_t (*pn)[4],
                                                      const attn_turns *turns = NULL, int pass = 1) {
  float alpha[2];
  attn_softmax_block<BN, TURN>(s, m_run, l_run, alpha, sl2, turns, pass);
  attn_p_fragments<BN>(s, pn);
  WS_WGMMA_WAIT_GROUP(0); /* the PV has retired: O and P_n are free */
  ws_pipe_release_warp_at(vp, ctx, kc);
  attn_rescale<DV>(o, alpha);
}

/* The last block's PV. */
template <int DV, int BN>
static __device__ __forceinline__ void attn_ov_last(const ws_pipe *vp, const ws_ctx *ctx, ws_cursor kl, uint64_t dv0,
                                                    float *o, uint32_t (*pc)[4]) {
  ws_pipe_wait_at(vp, ctx, kl);
  attn_pv_wgmma<DV, BN>(o, pc, ws_wgmma_desc_advance(dv0, kl.stage * (uint32_t)(BN * DV * 2)));
  WS_WGMMA_WAIT_GROUP(0);
  ws_pipe_release_warp_at(vp, ctx, kl);
}

/* A row's sum over the four lanes of its quad (every lane of the warp must call it). */
static __device__ __forceinline__ float attn_quad_sum(float l) {
  l += __shfl_xor_sync(0xffffffffu, l, 1);
  return l + __shfl_xor_sync(0xffffffffu, l, 2);
}

/* A finished row, from its full sum l (attn_quad_sum) and running max m: the factor for
 * O / l and the lse = scale m + ln l; a row that saw no key (l exactly 0) gets O = 0 and
 * lse -inf (every other row's sum is >= 1, its largest term being 2^0). `l == 0`, not
 * `l > 0`: a NaN sum, from a NaN key or value, gives NaN as the reference's does, not an
 * empty row. */
static __device__ __forceinline__ float attn_row_inv(float l) { return l == 0.0f ? 0.0f : 1.0f / l; }
static __device__ __forceinline__ float attn_row_lse(float l, float m, float sl2) {
  return l == 0.0f ? -INFINITY : (m * sl2 + log2f(l)) * ATTN_LN2;
}

/* The end of row x: O / l in BF16 into `out` (the row's DV columns) and its lse into *lse
 * if lse is not NULL (attn_row_inv, attn_row_lse). */
template <int DV>
static __device__ __forceinline__ void attn_store_row(const float *o, int x, float l, float m, float sl2, int quad,
                                                      uint16_t *out, float *lse) {
  const float inv = attn_row_inv(l);
  uint32_t *dst = (uint32_t *)out;
#pragma unroll
  for (int j = 0; j < DV / 8; j++) dst[4 * j + quad] = attn_pack_bf16(o[4 * j + 2 * x] * inv, o[4 * j + 2 * x + 1] * inv);
  if (lse && quad == 0) *lse = attn_row_lse(l, m, sl2);
}

/* Host: 1 if p is 16-byte aligned (the argument checks of every attention op). */
static inline int attn_aligned16(const void *p) { return ((uintptr_t)p & 15u) == 0; }

#endif
