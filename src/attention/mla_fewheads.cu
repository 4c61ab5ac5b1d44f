/* mla_fewheads.cu - paged MLA decode with 16 or 32 heads (tensor parallelism over 8 or 4
 * GPUs), keys on wgmma's M side (docs/design_mla.md 8.1).
 *
 * Why: the kernel of mla_sparse.cu computes a 64-row tile per block whatever the heads, so
 * at 16 heads a block pays the whole tile's math (~4,400 cycles as it runs) for a quarter
 * of its rows, and that, not DRAM, sets the decode's speed (76% of a D2D copy). Here the
 * roles of the two operands swap: S^T = K Q^T is 64 keys x 16 heads (m64n16, 36 k steps),
 * the softmax runs down the columns (a head over the block's keys), P^T goes to shared
 * memory as the B operand, and O^T = V^T P^T reads V where it lies as an MN-major A
 * operand (8 column tiles of m64n16, 4 k steps): about a quarter of the tensor work. A
 * warpgroup then holds a whole block, so the two math warpgroups take alternate blocks with
 * their own maxima, sums and O^T and are merged once at the end, like two splits.
 *   S_GATHER (4 warps, 40 regs)     Q (16 x 576) once, then each block's 64 rows by
 *                                   cp.async into stage nb & 1 (mla_sparse.cu's paged
 *                                   gather: BF16 rows 8 lanes per 128-byte line, FP8 rows
 *                                   copied raw with their tile scales, mla_fp8_gather.cuh;
 *                                   the page entries one block ahead, a flag per row).
 *   S_MATH (4 warps x 2, 232 regs)  warpgroup w: blocks w, w + 2, ... in stage w; FP8 at
 *                                   32 columns: it first dequantises the block in place to
 *                                   BF16 (with a quarter of the tensor work the math warps
 *                                   have the time). FP8 at 16 columns (F16): the stages hold
 *                                   the raw rows only (40 KB: four stages, the warpgroup's
 *                                   blocks in w and w + 2), and the math unpacks keys and
 *                                   values from them straight into wgmma's A fragments in
 *                                   f16 (exact, unscaled; S^T summed per latent tile times
 *                                   the keys' tile scales, P^T written once per tile scale,
 *                                   Q in f16 with a power of two per head and its latent
 *                                   dims in the fragments' order): no converted copy in
 *                                   shared memory, no barrier for it.
 * The lazy rescale of mla_math.cuh applies per head. 32 heads: the same with N = 32
 * (m64n32, 128 O^T registers a thread). s_q > 1 (ROWS): a sequence's s_q x heads query
 * rows are the N columns, each masked at its token's causal limit. mla_launch runs it for
 * every paged decode (BF16 or FP8 cache) with s_q x heads = 16 or 32; the split and its
 * merge are the decode's.
 * Measured on one H200: 16 heads, B64 len 8192, 0.189 -> 0.170 ms BF16 (76% -> 85% of a D2D
 * copy's bandwidth), FP8 0.221 -> 0.184 ms (session 36); 32 heads, B128 len 4096, 0.186 ->
 * 0.178 ms BF16 (82-83%), FP8 0.218 -> 0.200 ms; s_q 2, 8 heads, 0.188 -> 0.172 ms (session
 * 37). FP8 holds a warpgroup's stage through copy, conversion and math (a clock probe:
 * 2.7k + 3.4-3.9k + 2.2k cycles a block at 16 heads); the conversion's loads ahead of its
 * stores took 16 heads to 0.175 ms, 32 heads to 0.194 (session 38, design_mla.md 8.1).
 * f16 operands at 16 columns (session 39): 0.171-0.173 -> 0.169-0.170 ms, now the BF16
 * cache's time for 57% of its bytes: the block's chain (the gather waits for its own copies
 * before it commits a stage), not the conversion, bounds both; at 32 columns the f16 form
 * (four P^T copies of 32 columns) was level or 2.5% slower and is not used. The gather
 * then arrives on a stage when its copies land instead of waiting for them
 * (WARPSPEC_MLA_GATHER_AHEAD, on): BF16 16 heads 0.172 -> 0.165 ms (88% of D2D), 32 heads
 * 0.177 -> 0.172, s_q 2 at 8 heads 0.172 -> 0.163; FP8 level to 1% faster (its warpgroups'
 * own work per block bounds it now). A clock probe of that FP8 block (session 40): per
 * warpgroup and block 3.0k cycles waiting for its stage (two stages for two warpgroups:
 * nothing is loaded ahead of a warpgroup), 2.7k converting in place, 2.4k of math; and the
 * stage's shared-memory traffic (raw in, raw out, f16 in, the wgmmas reading the f16 twice)
 * near 80 bytes a cycle. Hence the register form above (design_mla.md 8.1): FP8 16 heads
 * 0.169-0.172 -> 0.137 ms (2.53 TB/s of rows, 60% of D2D), each value now unpacked twice
 * (as a key and as a value: 256 unpacks a thread a block). Its profile (session 41): not
 * bound by a pipe (ALU 43% of peak issue), the math warps waiting on short dependencies
 * (LDS, ALU latency) -- two math warps a scheduler hide little. The high e4m3 pairs by
 * F2FP's H1 operand and V^T's two dims from one byte permute (128 instructions fewer a warp
 * and block): 0.134-0.136 -> 0.128-0.131 ms. */
#include "../core/internal.h"
#include "../core/knobs.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/wgmma.cuh"
#include "attn_device.cuh"
#include "mla_internal.h"
#include "mla_fp8_gather.cuh"
#include "mla_math.cuh"
#include "mla_rows.cuh"
#include "mla_stage.cuh"

#include <math.h>

/* F16 (FP8 at 16 columns): a stage holds the raw rows only, the math unpacking them into
 * wgmma's A fragments: the 8 raw chunks of mla_fp8_gather.cuh (32 KB), then the rope's BF16
 * box. 40 KB, so four stages fit where two 72 KB ones did. */
#define MFH_RAW_STAGE (5 * MLA_BN * 128)
/* the raw chunks end where the gather puts the rope's box (box 8), so that a stage cut to
 * start at the raw area holds both */
static_assert(MLA_RAW_OFFSET + 8 * MLA_RAW_CHUNK == 8 * MLA_BN * 128 &&
                  MFH_RAW_STAGE == 9 * MLA_BN * 128 - MLA_RAW_OFFSET,
              "the FP8 raw layout of mla_fp8_gather.cuh changed: the few-head stage must follow");

/* NH heads (16 or 32): every wgmma's N. F16: P^T once per tile scale (f16, below). */
template <int NH, int F16>
struct mfh_smem {
  static constexpr int NST = F16 ? 4 : 2; /* stages: block nb in nb % NST (mfh_slot)       */
  static constexpr int STAGE = F16 ? MFH_RAW_STAGE : MLA_BOXES * MLA_BN * 128;
  uint8_t kv[NST][STAGE];                   /* warpgroup w's blocks in stages w (+ 2); kv[1]: the end merge */
  uint16_t q[MLA_BOXES][NH * 64];           /* [NH heads][64 dims] boxes, 128-byte swizzle  */
  uint16_t pt[2][F16 ? 4 : 1][NH * 64];     /* P^T per warpgroup: [NH heads][64 keys]       */
  float qexp[NH];                           /* F16: 2^e of head h (Q's latent dims x 2^-e)  */
  float smax[2][4];                         /* F16: per warpgroup and warp, its keys' largest tile scale */
  float cmax[2][4][NH];                     /* per warpgroup and warp: the block's column maxima */
  float csum[2][4][NH];                     /* the end: column sums                          */
  float mrg_m[NH];                          /* the end: warpgroup 1's maxima                 */
  uint8_t valid[NST][MLA_BN];
  int rows[NST][MLA_BN];                    /* FP8: the stage's kv rows, for the copies      */
  float4 scales[NST][MLA_BN];               /* FP8: the stage's rows' tile scales            */
  uint64_t q_full[1], q_empty[1], full[NST], empty[NST];
  int q_closed[1], closed[NST];
};

/* Block nb's stage and the phase it is in there: F16 four stages in turn (warpgroup w's
 * blocks in w and w + 2, two of them in flight), else two (stage w). */
template <int F16>
static __device__ __forceinline__ int mfh_slot(int nb) { return F16 ? nb & 3 : nb & 1; }
template <int F16>
static __device__ __forceinline__ ws_cursor mfh_cursor(int nb) {
  const ws_cursor c = {0u, (uint32_t)(nb >> (F16 ? 2 : 1)) & 1u};
  return c;
}
/* Box `box` (64 columns of the 64 rows, 8 KB) of stage st */
template <int NH, int F16>
static __device__ __forceinline__ uint8_t *mfh_box(mfh_smem<NH, F16> *sm, int st, int box) {
  return sm->kv[st] + box * (MLA_BN * 128);
}

/* S^T += K Q^T (K-major both) and O^T += V^T P^T (V MN-major) at N = NH, BF16 operands
 * (the F16 form's own below: the keys and values from registers) */
template <int NH>
static __device__ __forceinline__ void mfh_wgmma_s(float *d, uint64_t da, uint64_t db, int acc) {
  if constexpr (NH == 32) ws_wgmma_m64n32k16_bf16(d, da, db, acc);
  else ws_wgmma_m64n16k16_bf16(d, da, db, acc);
}
template <int NH>
static __device__ __forceinline__ void mfh_wgmma_o(float *d, uint64_t da, uint64_t db) {
  if constexpr (NH == 32) ws_wgmma_m64n32k16_bf16_ta(d, da, db, 1);
  else ws_wgmma_m64n16k16_bf16_ta(d, da, db, 1);
}

/* FP8 cache: Q's latent dims to f16 in place, each head times 2^-e (its largest |q| into
 * [2^14, 2^15): f16 holds every bf16 value of that range exactly), the rope dims (bf16,
 * multiplied by keys still in bf16) times the same power of two; qexp[h] = 2^e goes onto
 * the head's softmax scale. Then the latent dims reordered inside each box as the keys'
 * A fragments take them (mfh_k_frags): k step s's k index 2 i + j holds dim 16 i + 4 s + j
 * and index 8 + 2 i + j dim 16 i + 4 s + 2 + j (i < 4, j < 2), so that a thread's 16-byte
 * load of a raw key row feeds four k steps. Thread t: piece t & 7 of heads (t >> 3) + 16 i,
 * by one warpgroup, before either starts (Q's wgmma reads follow a proxy fence and a
 * barrier). */
template <int NH, int F16>
static __device__ __forceinline__ void mfh_q_to_f16(mfh_smem<NH, F16> *sm, const ws_ctx *ctx) {
  const int t = ws_role_thread(ctx), piece = t & 7;
#pragma unroll
  for (int hh = t >> 3; hh < NH; hh += 16) {
    const uint32_t at = ws_smem_addr(sm->q[0]) + mla_swizzle(hh, piece);
    uint4 v[MLA_BOXES];
    float amax = 0.0f;
#pragma unroll
    for (int b = 0; b < MLA_BOXES; b++) {
      v[b] = ws_ld_shared_v4_u32(at + (uint32_t)b * (NH * 128));
      amax = mla_bf16x8_amax(v[b], amax);
    }
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 1));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 2));
    amax = fmaxf(amax, __shfl_xor_sync(0xffffffffu, amax, 4));
    const int e = mla_q_exp(amax);
    const float f = ldexpf(1.0f, -e);
#pragma unroll
    for (int b = 0; b < MLA_BOXES; b++)
      ws_st_shared_v4_u32(at + (uint32_t)b * (NH * 128), mla_q_piece_f16(v[b], f, b == MLA_BOXES - 1));
    if (piece == 0) sm->qexp[hh] = ldexpf(1.0f, e);
  }
  /* the reorder: this thread's piece p (k step p / 2, its half p % 2) gathers word i (dims
   * 2 i', 2 i' + 1 of the k step's order) from word 8 i + 2 (p / 2) + p % 2 of the box row */
#pragma unroll
  for (int hh = t >> 3; hh < NH; hh += 16) {
    ws_role_sync(ctx); /* every thread's f16 stores above (and the previous head's reorder) */
    uint4 v[MLA_BOXES - 1];
#pragma unroll
    for (int b = 0; b < MLA_BOXES - 1; b++) {
      const uint32_t row = ws_smem_addr(sm->q[b]);
      uint32_t x[4];
#pragma unroll
      for (int i = 0; i < 4; i++) {
        const int wsrc = 8 * i + 2 * (piece >> 1) + (piece & 1);
        x[i] = ws_ld_shared_u32(row + mla_swizzle(hh, wsrc >> 2) + 4u * (uint32_t)(wsrc & 3));
      }
      v[b] = make_uint4(x[0], x[1], x[2], x[3]);
    }
    ws_role_sync(ctx); /* the head's words read before any is overwritten */
#pragma unroll
    for (int b = 0; b < MLA_BOXES - 1; b++) ws_st_shared_v4_u32(ws_smem_addr(sm->q[b]) + mla_swizzle(hh, piece), v[b]);
  }
}

/* The keys' A fragments of S^T for latent tile `tile` (raw chunks 2 tile, 2 tile + 1; the
 * thread's keys r0 and r0 + 8): k step 4 h + s's four registers at f + 16 h + 4 s. One
 * 16-byte load per key and chunk (piece `quad`: dims 16 quad .. + 15 of the chunk), each
 * word the four dims 16 quad + 4 s .. + 3 of k step s, unpacked exactly to f16 pairs (Q's
 * latent dims are stored in that order, mfh_q_to_f16). raw: mla_raw_offset's base. The
 * loads (mfh_k_load) apart from the unpacking, so that they are issued before the wgmma wait
 * that frees the fragment set. */
struct mfh_k_raw {
  uint4 v[4]; /* chunk 2 tile + h: v[2 h] key r0, v[2 h + 1] key r0 + 8 */
};
static __device__ __forceinline__ mfh_k_raw mfh_k_load(uint32_t raw, int tile, int r0, int quad) {
  mfh_k_raw k;
#pragma unroll
  for (int h = 0; h < 2; h++) {
    k.v[2 * h] = ws_ld_shared_v4_u32(raw + mla_raw_offset(2 * tile + h, r0, quad));
    k.v[2 * h + 1] = ws_ld_shared_v4_u32(raw + mla_raw_offset(2 * tile + h, r0 + 8, quad));
  }
  return k;
}
static __device__ __forceinline__ void mfh_k_frags(uint32_t *f, const mfh_k_raw &k) {
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const uint4 x = k.v[2 * h], y = k.v[2 * h + 1];
    const uint32_t xs[4] = {x.x, x.y, x.z, x.w}, ys[4] = {y.x, y.y, y.z, y.w};
#pragma unroll
    for (int s = 0; s < 4; s++) {
      f[16 * h + 4 * s + 0] = ws_e4m3x2_lo_to_f16x2(xs[s]); /* key r0, k 2 quad, + 1     */
      f[16 * h + 4 * s + 1] = ws_e4m3x2_lo_to_f16x2(ys[s]); /* key r0 + 8                */
      f[16 * h + 4 * s + 2] = ws_e4m3x2_hi_to_f16x2(xs[s]); /* key r0, k 8 + 2 quad, + 1 */
      f[16 * h + 4 * s + 3] = ws_e4m3x2_hi_to_f16x2(ys[s]);
    }
  }
}

/* V^T's A fragments for O^T's column tile `tile` (V columns 64 tile .. + 63: raw chunk
 * `tile`), its four k steps (keys 16 kk .. + 15) at f + 4 kk. This warp's 16 rows of the
 * tile are the chunk's piece `warp`, in the order dim 16 warp + 2 g (row g) and + 1 (row
 * g + 8), g = lane / 4. Two transposed ldmatrix (lane l: key 32 q + l), each word the e4m3
 * pairs of dims 2 g, 2 g + 1 of two consecutive keys, split into a pair per dim by one byte
 * permute (dim 2 g's pair low, 2 g + 1's high) and unpacked to f16. The loads apart
 * (mfh_v_load), as for the keys. */
struct mfh_v_raw {
  uint4 m[2]; /* keys 0-31, 32-63 */
};
static __device__ __forceinline__ mfh_v_raw mfh_v_load(uint32_t raw, int tile, int warp, int lane) {
  mfh_v_raw v;
#pragma unroll
  for (int q = 0; q < 2; q++) v.m[q] = ws_ldmatrix_x4_trans(raw + mla_raw_offset(tile, 32 * q + lane, warp));
  return v;
}
static __device__ __forceinline__ void mfh_v_frags(uint32_t *f, const mfh_v_raw &v) {
#pragma unroll
  for (int q = 0; q < 2; q++) {
    const uint4 m = v.m[q];
    const uint32_t ms[4] = {m.x, m.y, m.z, m.w}; /* keys 32 q + 8 i .. + 7 */
#pragma unroll
    for (int i = 0; i < 4; i++) {
      const int kk = 2 * q + (i >> 1), hi = i & 1;
      const uint32_t pairs = __byte_perm(ms[i], 0u, 0x3120u); /* low half: dim 2 g's two keys, high: 2 g + 1's */
      f[4 * kk + 2 * hi + 0] = ws_e4m3x2_lo_to_f16x2(pairs);
      f[4 * kk + 2 * hi + 1] = ws_e4m3x2_hi_to_f16x2(pairs);
    }
  }
}

template <int NH, int FP8>
static __device__ __forceinline__ ws_pipe mfh_stage(mfh_smem<NH, FP8> *sm, int w) {
  ws_pipe p = ws_pipe_view(&sm->full[w], &sm->empty[w], &sm->closed[w], 1, WS_ROLE_THREADS(mla_sparse, S_GATHER),
                           WS_ROLE_THREADS(mla_sparse, S_MATH), "mla kv rows");
  ws_pipe_set_proxies(&p, WS_PROXY_GENERIC, WS_PROXY_ASYNC);
  return p;
}

/* The gather's arrival on a stage's full barrier once this thread's copies have landed
 * (WARPSPEC_MLA_GATHER_AHEAD): it goes on to the next block's lookups and copies at once
 * instead of waiting for them, so two blocks' copies are in flight where the stages allow.
 * The fence orders the thread's plain stores (the valid flags) before the arrival; the math
 * fences the async proxy after its wait (the stage's bytes came by cp.async, not TMA). */
static __device__ __forceinline__ void mfh_arrive_when_landed(uint64_t *full) {
  __threadfence_block();
  ws_cp_async_mbarrier_arrive_noinc(full);
}

/* FP8 cache at 16 columns: S^T's part of latent tile `tile` (128 dims, 8 k steps, f16, the
 * keys from the fragments f of mfh_k_frags) into acc, as one commit group. */
static __device__ __forceinline__ void mfh_issue_tile(float *acc, const uint32_t *f, uint64_t dq, int tile) {
  ws_wgmma_fence(); /* the fragments were written by ordinary instructions */
#pragma unroll
  for (int j = 0; j < 8; j++) {
    const int kk = 8 * tile + j;
    ws_wgmma_m64n16k16_f16_rs(acc, f + 4 * j, ws_wgmma_desc_advance(dq, (uint32_t)(kk / 4) * 16 * 128 + (uint32_t)(kk % 4) * 32),
                              j > 0);
  }
  ws_wgmma_commit_group();
}
/* ... and the rope's part (64 dims, 4 k steps, bf16 from the stage's rope box dr) */
static __device__ __forceinline__ void mfh_issue_rope(float *acc, uint64_t dr, uint64_t dq) {
  ws_wgmma_fence();
#pragma unroll
  for (int j = 0; j < 4; j++)
    ws_wgmma_m64n16k16_bf16(acc, ws_wgmma_desc_advance(dr, (uint32_t)j * 32),
                            ws_wgmma_desc_advance(dq, (uint32_t)(MLA_BOXES - 1) * 16 * 128 + (uint32_t)j * 32), j > 0);
  ws_wgmma_commit_group();
}
/* ... and O^T += V^T P^T for column tile `tile` (4 k steps, V^T from the fragments f of
 * mfh_v_frags, P^T times the tile scales of latent tile tile / 2 from dp) */
static __device__ __forceinline__ void mfh_issue_o(float *o, const uint32_t *f, uint64_t dp) {
  ws_wgmma_fence();
#pragma unroll
  for (int kk = 0; kk < MLA_BN / 16; kk++) ws_wgmma_m64n16k16_f16_rs(o, f + 4 * kk, ws_wgmma_desc_advance(dp, (uint32_t)kk * 32), 1);
  ws_wgmma_commit_group();
}

/* ROWS: s_q > 1, the NH = s_q x heads columns are a sequence's tokens' heads ([token][head],
 * as q and o hold them), each column masked at its own token's causal limit. */
template <int FP8, int NH, int ROWS>
WS_KERNEL(mla_sparse) mla_fewheads_kernel(const uint16_t *__restrict__ q, const __grid_constant__ mla_args a, ws_diag diag) {
  constexpr int NC = NH / 4; /* a thread's columns (heads) of an m64nNH accumulator */
  constexpr int NA = NH / 2; /* its registers of one */
  /* FP8 at 16 columns: f16 operands (the latent dims unpacked unscaled, the tile scales on S
   * and P^T); at 32 the four P^T copies cost more than the conversion they save (H200,
   * session 39), so the rows are dequantised to BF16 as before */
  constexpr int F16 = FP8 && NH == 16;
  extern __shared__ __align__(1024) uint8_t smem_raw[];
  mfh_smem<NH, F16> *sm = (mfh_smem<NH, F16> *)ws_smem_align1024(smem_raw);
  ws_ctx ctx = WS_SELF(mla_sparse, diag);
  /* tok: this CTA's NH query rows start at row tok x NH; kt: the token whose keys are read,
   * the sequence's last (it sees every key the others see) */
  const int tok = (int)blockIdx.x, kt = ROWS ? tok * a.s_q + a.s_q - 1 : tok;
  int kbeg, nkeys;
  mla_keys<MLA_KEYS_PLAIN>(&a, kt, &kbeg, &nkeys);
  const int nblk = (nkeys + MLA_BN - 1) / MLA_BN;
  ws_pipe qp = ws_pipe_view(sm->q_full, sm->q_empty, sm->q_closed, 1, WS_ROLE_THREADS(mla_sparse, S_GATHER),
                            2 * WS_ROLE_THREADS(mla_sparse, S_MATH), "mla q");
  ws_pipe_set_proxies(&qp, WS_PROXY_GENERIC, WS_PROXY_ASYNC);
  if (threadIdx.x == 0) {
    ws_pipe_init(&qp);
    for (int st = 0; st < mfh_smem<NH, F16>::NST; st++) {
      const ws_pipe p = mfh_stage<NH, F16>(sm, st);
      ws_pipe_init(&p);
    }
  }
  ws_init_sync();
  const ws_cursor c0 = {0, 0};

  if (ctx.role == S_GATHER) {
    WS_ENTER_ROLE(mla_sparse, S_GATHER);
    const int t = ws_role_thread(&ctx), piece = t & 7, row0 = t >> 3;
    { /* Q: heads (t >> 3) + 16 i, piece t & 7 of each box */
      ws_pipe_acquire_at(&qp, &ctx, c0);
#pragma unroll
      for (int hh = row0; hh < NH; hh += 16) {
        const uint8_t *src = (const uint8_t *)(q + ((size_t)tok * NH + hh) * MLA_DQK) + piece * 16;
        const uint32_t dst = ws_smem_addr(sm->q[0]) + mla_swizzle(hh, piece);
#pragma unroll
        for (int b = 0; b < MLA_BOXES; b++) ws_cp_async_cg_16_to(dst + (uint32_t)b * (NH * 128), src + b * 128, 16u);
      }
      ws_cp_async_commit_group();
      WS_CP_ASYNC_WAIT_GROUP(0);
      ws_pipe_commit_at(&qp, &ctx, c0);
    }
    if (FP8) { /* mla_sparse.cu's FP8 gather (mla_rows.cuh) */
      int d_next, e;
      mla_fp8_rows_start<MLA_KEYS_PLAIN>(&a, kt, kbeg, nkeys, t, &d_next, &e);
      for (int nb = 0; nb < nblk; nb++) {
        const int st = mfh_slot<F16>(nb);
        const ws_cursor k = mfh_cursor<F16>(nb);
        const ws_pipe sp = mfh_stage<NH, F16>(sm, st);
        ws_pipe_acquire_at(&sp, &ctx, k);
        /* F16: the stage is the raw area alone, so its base goes below it by the raw area's
         * offset in a 72 KB stage (nothing is stored there) */
        const uint32_t base = ws_smem_addr(sm->kv[st]) - (F16 ? (uint32_t)MLA_RAW_OFFSET : 0u);
        mla_gather_fp8_block<MLA_KEYS_PLAIN>(&ctx, &a, kt, kbeg, nkeys, nb, base, sm->valid[st], sm->rows[st], t, &d_next,
                                             &e, sm->scales[st], !a.gather_ahead);
        if (a.gather_ahead) mfh_arrive_when_landed(&sm->full[st]);
        else ws_pipe_commit_at(&sp, &ctx, k); /* fence.proxy.async (the generic stores), then arrive */
      }
    } else { /* BF16 (mla_rows.cuh) */
      int r_next[4], e_next[4];
      mla_rows_start<MLA_KEYS_PLAIN>(&a, kt, kbeg, nkeys, row0, r_next, e_next);
      for (int nb = 0; nb < nblk; nb++) {
        const int w = nb & 1;
        const ws_cursor k = {0u, (uint32_t)(nb >> 1) & 1u};
        const ws_pipe sp = mfh_stage<NH, F16>(sm, w);
        ws_pipe_acquire_at(&sp, &ctx, k);
        int r[4];
        mla_rows_step<MLA_KEYS_PLAIN>(&a, kt, kbeg, nkeys, row0, nb, r, r_next, e_next);
        mla_gather_bf16<0, MLA_BOXES, 1>(ws_smem_addr(sm->kv[w]), sm->valid[w], a.kv, r, t);
        ws_cp_async_commit_group();
        if (a.gather_ahead) {
          mfh_arrive_when_landed(&sm->full[w]);
        } else {
          WS_CP_ASYNC_WAIT_GROUP(0);
          ws_pipe_commit_at(&sp, &ctx, k);
        }
      }
    }
    WS_CP_ASYNC_WAIT_GROUP(0); /* nothing in flight when the gather leaves */
    return;
  }

  WS_ENTER_ROLE(mla_sparse, S_MATH);
  const int w = ctx.replica, lane = ctx.lane, quad = lane & 3, warp = ctx.warp;
  const int r0 = warp * 16 + (lane >> 2); /* this thread's keys (S^T rows) r0, r0 + 8; V columns in O^T */
  const uint32_t wg = WS_ROLE_THREADS(mla_sparse, S_MATH), bar_wg = (uint32_t)a.xchg_bar + w, bar_all = (uint32_t)a.xchg_bar + 2;
  const float sl2 = a.scale_log2;
  /* the thread's NC heads: 8 j + 2 quad + e, j < NH / 8, e in {0, 1}; index 2 j + e */
  float o[8 * NA]; /* O^T: 8 column tiles of m64nNH */
#pragma unroll
  for (int i = 0; i < 8 * NA; i++) o[i] = 0.0f;
  float m_run[NC], l_part[NC];
#pragma unroll
  for (int c = 0; c < NC; c++) { m_run[c] = -INFINITY; l_part[c] = 0.0f; }
  /* ROWS: the last key (relative to kbeg) each of the thread's columns may see, its token's
   * position: seqlen - s_q + token */
  int lim[ROWS ? NC : 1];
  if (ROWS) {
    const int last = a.seqlens[tok] - a.s_q - kbeg;
#pragma unroll
    for (int c = 0; c < NC; c++) lim[c] = last + (8 * (c >> 1) + 2 * quad + (c & 1)) / a.heads;
  }
  ws_pipe_wait_at(&qp, &ctx, c0);
  if (F16) { /* Q's latent dims to f16 by warpgroup 0, then both start */
    if (w == 0) {
      mfh_q_to_f16<NH, F16>(sm, &ctx);
      ws_fence_proxy_async_shared_cta(); /* generic stores -> both warpgroups' wgmma reads */
    }
    ws_named_sync(bar_all, 2 * wg);
  }
  /* the softmax scale of each of the thread's columns (FP8: times the head's 2^e) */
  float sl2c[NC];
#pragma unroll
  for (int c = 0; c < NC; c++) sl2c[c] = F16 ? sl2 * sm->qexp[8 * (c >> 1) + 2 * quad + (c & 1)] : sl2;
  /* FP8: P^T is written in units of 2^-e_run (e_run set from the largest tile scale of a
   * block, kept while blocks stay within 2^4 of it), so that P x scale stays in f16's range
   * and precision; O^T is in the same units and is rescaled when e_run moves */
  int e_run = 0, e_set = 0;
  const uint64_t dq = ws_wgmma_desc_k128b(sm->q[0]);
  const uint64_t dpt = ws_wgmma_desc_k128b(sm->pt[w][0]);
  uint8_t *pt = (uint8_t *)sm->pt[w][0];
  for (int nb = w; nb < nblk; nb += 2) {
    const int st = mfh_slot<F16>(nb);
    const ws_cursor k = mfh_cursor<F16>(nb);
    const ws_pipe sp = mfh_stage<NH, F16>(sm, st);
    ws_pipe_wait_at(&sp, &ctx, k);
    /* cp.async's bytes -> this warpgroup's wgmma reads (F16: the rope box) */
    if ((!FP8 || F16) && a.gather_ahead) ws_fence_proxy_async_shared_cta();
    /* F16: the raw rows' base for mla_raw_offset (the stage is the raw area); latent tiles
     * 0 and 1 of the keys loaded first, their latency under the scales' work below (the
     * loads are volatile: they issue where they stand) */
    const uint32_t raw = ws_smem_addr(sm->kv[st]) - (uint32_t)MLA_RAW_OFFSET;
    mfh_k_raw kt0, kt1;
    if constexpr (F16) {
      kt0 = mfh_k_load(raw, 0, r0, quad);
      kt1 = mfh_k_load(raw, 1, r0, quad);
    }
    float4 sc0 = make_float4(1.0f, 1.0f, 1.0f, 1.0f), sc1 = sc0; /* F16: keys r0, r0 + 8's tile scales */
    if (F16) { /* the block's largest tile scale, from every warp's after the column maxima's barrier */
      sc0 = sm->scales[st][r0];
      sc1 = sm->scales[st][r0 + 8];
      float smx = fmaxf(fmaxf(fmaxf(sc0.x, sc0.y), fmaxf(sc0.z, sc0.w)), fmaxf(fmaxf(sc1.x, sc1.y), fmaxf(sc1.z, sc1.w)));
#pragma unroll
      for (int o = 4; o < 32; o <<= 1) smx = fmaxf(smx, __shfl_xor_sync(0xffffffffu, smx, o));
      if (lane == 0) sm->smax[w][warp] = smx;
    } else if (FP8) { /* the raw rows dequantised to BF16 in place by this warpgroup */
      const int t = ws_role_thread(&ctx), row = t & 63;
      mla_fp8_in_place_ahead(&ctx, ws_smem_addr(sm->kv[st]), row, t >> 6, mla_to_bf16{sm->scales[st][row]});
      ws_fence_proxy_async_shared_cta(); /* generic stores -> the warpgroup's wgmma reads */
      ws_role_sync(&ctx);
    }
    float s[NA];
    if constexpr (F16) { /* S^T = sum over the 4 latent tiles of scale(key, tile) x S_tile, + the rope's part:
                * two accumulators and two fragment sets in turn, a tile's keys unpacked and the
                * previous tile's sum taken while the wgmmas of the one before run */
      const float f0[4] = {sc0.x, sc0.y, sc0.z, sc0.w}, f1[4] = {sc1.x, sc1.y, sc1.z, sc1.w};
      float ua[NA], ub[NA];
      uint32_t fa[32], fb[32];
      mfh_k_frags(fa, kt0);
      mfh_issue_tile(ua, fa, dq, 0);
      mfh_k_frags(fb, kt1);
      mfh_issue_tile(ub, fb, dq, 1);
      mfh_k_raw kr = mfh_k_load(raw, 2, r0, quad); /* the next tile's loads before the wait */
      WS_WGMMA_WAIT_GROUP(1); /* tile 0 done: ua summed, fa free */
#pragma unroll
      for (int i = 0; i < NA; i++) s[i] = ((i & 2) ? f1[0] : f0[0]) * ua[i]; /* regs 4j, 4j+1: key r0; 4j+2, 4j+3: r0 + 8 */
      mfh_k_frags(fa, kr);
      mfh_issue_tile(ua, fa, dq, 2);
      kr = mfh_k_load(raw, 3, r0, quad);
      WS_WGMMA_WAIT_GROUP(1);
#pragma unroll
      for (int i = 0; i < NA; i++) s[i] += ((i & 2) ? f1[1] : f0[1]) * ub[i];
      mfh_k_frags(fb, kr);
      mfh_issue_tile(ub, fb, dq, 3);
      WS_WGMMA_WAIT_GROUP(1);
#pragma unroll
      for (int i = 0; i < NA; i++) s[i] += ((i & 2) ? f1[2] : f0[2]) * ua[i];
      mfh_issue_rope(ua, ws_wgmma_desc_k128b(mfh_box(sm, st, 4)), dq); /* the rope: bf16 */
      WS_WGMMA_WAIT_GROUP(1);
#pragma unroll
      for (int i = 0; i < NA; i++) s[i] += ((i & 2) ? f1[3] : f0[3]) * ub[i];
      WS_WGMMA_WAIT_GROUP(0);
#pragma unroll
      for (int i = 0; i < NA; i++) s[i] += ua[i];
    } else {
      const uint64_t dk = ws_wgmma_desc_k128b(sm->kv[st]);
      ws_wgmma_fence();
#pragma unroll
      for (int kk = 0; kk < MLA_DQK / 16; kk++)
        mfh_wgmma_s<NH>(s, ws_wgmma_desc_advance(dk, (uint32_t)(kk / 4) * MLA_BN * 128 + (uint32_t)(kk % 4) * 32),
                        ws_wgmma_desc_advance(dq, (uint32_t)(kk / 4) * NH * 128 + (uint32_t)(kk % 4) * 32), kk > 0);
      ws_wgmma_commit_group();
      WS_WGMMA_WAIT_GROUP(0);
    }
    /* F16: V^T's first two column tiles loaded before the softmax, under it */
    mfh_v_raw vt0, vt1;
    if constexpr (F16) {
      vt0 = mfh_v_load(raw, 0, warp, lane);
      vt1 = mfh_v_load(raw, 1, warp, lane);
    }
    const int v0 = sm->valid[st][r0], v1 = sm->valid[st][r0 + 8];
    /* masked keys (rows) to -inf; the block's maximum per head (column) */
    float cm[NC];
#pragma unroll
    for (int j = 0; j < NH / 8; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        if (!v0) s[4 * j + e] = -INFINITY;
        if (!v1) s[4 * j + 2 + e] = -INFINITY;
        if (ROWS) { /* keys past the column's token */
          const int kr = nb * MLA_BN + r0;
          if (kr > lim[2 * j + e]) s[4 * j + e] = -INFINITY;
          if (kr + 8 > lim[2 * j + e]) s[4 * j + 2 + e] = -INFINITY;
        }
        float x = fmaxf(s[4 * j + e], s[4 * j + 2 + e]);
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 4));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 8));
        x = fmaxf(x, __shfl_xor_sync(0xffffffffu, x, 16));
        cm[2 * j + e] = x;
      }
    if (lane < 4) {
#pragma unroll
      for (int c = 0; c < NC; c++) sm->cmax[w][warp][8 * (c >> 1) + 2 * quad + (c & 1)] = cm[c];
    }
    ws_named_sync(bar_wg, wg); /* the warps' column maxima (and F16: their largest tile scales) */
    float gshift = 1.0f; /* F16: O^T's rescale when e_run moves */
    if (F16) {
      const float bmax = fmaxf(fmaxf(sm->smax[w][0], sm->smax[w][1]), fmaxf(sm->smax[w][2], sm->smax[w][3]));
      /* bmax x 2^eb in [1, 2) (clamped: 2^eb and 2^-eb stay finite fp32); a block of masked
       * rows only has zeros and leaves the units as they are */
      if (bmax > 0.0f && bmax <= 3.0e38f) gshift = mla_units_follow(min(max(-ilogbf(bmax), -126), 126), &e_run, &e_set);
    }
    float alpha[NC], msc[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) {
      const int h = 8 * (c >> 1) + 2 * quad + (c & 1);
      const float bm = fmaxf(fmaxf(sm->cmax[w][0][h], sm->cmax[w][1][h]), fmaxf(sm->cmax[w][2][h], sm->cmax[w][3][h]));
      const float m_old = m_run[c];
      float m_new = fmaxf(m_old, bm);
      const int keep = m_new * sl2c[c] - m_old * sl2c[c] <= MLA_LAZY_LOG2; /* from -inf: it moves */
      m_new = keep ? m_old : m_new;
      msc[c] = m_new == -INFINITY ? 0.0f : m_new * sl2c[c];
      alpha[c] = keep ? 1.0f : attn_exp2(m_old * sl2c[c] - msc[c]);
      m_run[c] = m_new;
    }
    /* P of the thread's keys r0 (p0) and r0 + 8 (p1) in its columns c = 2 j + e (heads 8 j +
     * 2 quad + e) */
    float p0[NC], p1[NC];
#pragma unroll
    for (int c = 0; c < NC; c++) {
      p0[c] = attn_exp2(fmaf(s[4 * (c >> 1) + (c & 1)], sl2c[c], -msc[c]));
      p1[c] = attn_exp2(fmaf(s[4 * (c >> 1) + 2 + (c & 1)], sl2c[c], -msc[c]));
      l_part[c] = l_part[c] * alpha[c] + p0[c] + p1[c];
    }
    /* P^T into its tile: head h, key r at row h, column r of a [NH][64] K-major box, by
     * transposed stmatrix. The 8 x 8 block of the warp's keys 16 warp + 8 kh .. + 7 by heads
     * 8 j .. + 7 is in the accumulator layout stmatrix takes (lane: key g, heads 2 quad and
     * + 1), and row i of its transpose is 16 bytes of head 8 j + i's row; lane l gives the
     * address of row l % 8 of block l / 8 (j = 2 jj + (l / 8) / 2, kh = (l / 8) % 2). F16:
     * one P^T per latent tile tq, P x scale(key, tq) x 2^e_run (u, a power of two), f16;
     * else bf16. */
    const float u = F16 ? ldexpf(1.0f, e_run) : 1.0f;
    const float g0[4] = {sc0.x * u, sc0.y * u, sc0.z * u, sc0.w * u}, g1[4] = {sc1.x * u, sc1.y * u, sc1.z * u, sc1.w * u};
#pragma unroll
    for (int tq = 0; tq < (F16 ? 4 : 1); tq++)
#pragma unroll
      for (int jj = 0; jj < NH / 16; jj++) {
        uint32_t m[4];
#pragma unroll
        for (int x = 0; x < 4; x++) {
          const int c = 2 * (2 * jj + (x >> 1));
          const float *p = (x & 1) ? p1 : p0;
          if (F16) {
            const float f = (x & 1) ? g1[tq] : g0[tq];
            const __half2 h = __floats2half2_rn(p[c] * f, p[c + 1] * f);
            m[x] = *(const uint32_t *)&h;
          } else {
            m[x] = attn_pack_bf16(p[c], p[c + 1]);
          }
        }
        const int mt = lane >> 3, head = 8 * (2 * jj + (mt >> 1)) + (lane & 7);
        ws_stmatrix_x4_trans(ws_smem_addr(pt) + (uint32_t)(tq * (NH * 128)) + mla_swizzle(head, 2 * warp + (mt & 1)),
                             make_uint4(m[0], m[1], m[2], m[3]));
      }
    ws_fence_proxy_async_shared_cta(); /* generic stores -> the warpgroup's wgmma reads */
    ws_named_sync(bar_wg, wg);         /* every warp's part of P^T (and the maxima read) */
    int moved = 0;
#pragma unroll
    for (int c = 0; c < NC; c++) moved |= alpha[c] != 1.0f;
    if (__any_sync(0xffffffffu, moved || gshift != 1.0f)) { /* gshift: FP8's e_run moved, the same in every thread */
#pragma unroll
      for (int t = 0; t < 8; t++)
#pragma unroll
        for (int i = 0; i < NA; i++) o[NA * t + i] *= alpha[2 * (i >> 2) + (i & 1)] * gshift;
    }
    if constexpr (F16) { /* O^T[V dims of tile t][heads] += V^T P^T (tile t / 2's P^T): V^T unpacked
                          * from the raw rows, two fragment sets in turn */
      uint32_t ga[16], gb[16];
      mfh_v_frags(ga, vt0);
      mfh_issue_o(o, ga, dpt);
      mfh_v_frags(gb, vt1);
      mfh_issue_o(o + NA, gb, dpt);
#pragma unroll
      for (int t = 2; t < 8; t++) {
        const mfh_v_raw vr = mfh_v_load(raw, t, warp, lane); /* before the wait */
        WS_WGMMA_WAIT_GROUP(1); /* tile t - 2 done: its fragment set is free */
        const uint64_t dp = ws_wgmma_desc_advance(dpt, (uint32_t)(t / 2) * (NH * 128));
        if (t & 1) {
          mfh_v_frags(gb, vr);
          mfh_issue_o(o + NA * t, gb, dp);
        } else {
          mfh_v_frags(ga, vr);
          mfh_issue_o(o + NA * t, ga, dp);
        }
      }
      WS_WGMMA_WAIT_GROUP(0);
    } else { /* O^T[64 t .. 64 t + 63][heads] += V^T P^T: V's box t read MN-major (columns along M) */
      ws_wgmma_fence();
#pragma unroll
      for (int t = 0; t < 8; t++) {
        const uint64_t dv = ws_wgmma_desc_mn128b(mfh_box(sm, st, t), MLA_BN * 128);
#pragma unroll
        for (int kk = 0; kk < MLA_BN / 16; kk++)
          mfh_wgmma_o<NH>(o + NA * t, ws_wgmma_desc_advance(dv, (uint32_t)kk * 16 * 128), ws_wgmma_desc_advance(dpt, (uint32_t)kk * 32));
      }
      ws_wgmma_commit_group();
      WS_WGMMA_WAIT_GROUP(0);
    }
    ws_pipe_release_at(&sp, &ctx, k);
  }
  ws_pipe_release_at(&qp, &ctx, c0);
  if (F16 && e_run != 0) { /* O^T from units of 2^-e_run back to values */
    const float u = ldexpf(1.0f, -e_run);
#pragma unroll
    for (int i = 0; i < 8 * NA; i++) o[i] *= u;
  }

  /* the column sums of the warpgroup, then warpgroup 1's maxima, sums and O^T to warpgroup 0
   * through shared memory (stage 1: every block has been read), merged as two splits */
  float l[NC];
#pragma unroll
  for (int c = 0; c < NC; c++) {
    float x = l_part[c];
    x += __shfl_xor_sync(0xffffffffu, x, 4);
    x += __shfl_xor_sync(0xffffffffu, x, 8);
    x += __shfl_xor_sync(0xffffffffu, x, 16);
    l[c] = x;
  }
  if (lane < 4) {
#pragma unroll
    for (int c = 0; c < NC; c++) sm->csum[w][warp][8 * (c >> 1) + 2 * quad + (c & 1)] = l[c];
  }
  /* warpgroup 1's O^T, thread-interleaved (entry i of thread t at i x 128 + t: a warp's
   * stores and loads are 32 consecutive floats; NH 32 needs 64 KB of the 72 KB stage) */
  float *scratch = (float *)sm->kv[1] + ws_role_thread(&ctx);
  /* F16: each warp reads the stage by itself (ldmatrix), so warpgroup 1's last block in
   * stage 1 must be read by all of its warps before any overwrites it */
  if (F16 && w == 1) ws_named_sync(bar_wg, wg);
  if (w == 1) {
#pragma unroll
    for (int i = 0; i < 8 * NA; i++) scratch[i * 128] = o[i];
    if (warp == 0 && lane < 4) {
#pragma unroll
      for (int c = 0; c < NC; c++) sm->mrg_m[8 * (c >> 1) + 2 * quad + (c & 1)] = m_run[c];
    }
  }
  ws_named_sync(bar_all, 2 * wg);
  if (w == 1) return;
  float f0[NC], f1[NC], inv[NC];
#pragma unroll
  for (int c = 0; c < NC; c++) {
    const int h = 8 * (c >> 1) + 2 * quad + (c & 1);
    const float l0 = sm->csum[0][0][h] + sm->csum[0][1][h] + sm->csum[0][2][h] + sm->csum[0][3][h];
    const float l1 = sm->csum[1][0][h] + sm->csum[1][1][h] + sm->csum[1][2][h] + sm->csum[1][3][h];
    const float m0 = m_run[c], m1 = sm->mrg_m[h], m = fmaxf(m0, m1);
    const float ms = m == -INFINITY ? 0.0f : m * sl2c[c];
    f0[c] = m0 == -INFINITY ? 0.0f : attn_exp2(m0 * sl2c[c] - ms);
    f1[c] = m1 == -INFINITY ? 0.0f : attn_exp2(m1 * sl2c[c] - ms);
    const float lt = l0 * f0[c] + l1 * f1[c];
    inv[c] = attn_row_inv(lt);
    const size_t row = (size_t)tok * NH + h;
    if (r0 == 0) { /* one thread per head */
      const float lse = attn_row_lse(lt, m, sl2c[c]);
      if (a.o_part) a.lse_part[(size_t)blockIdx.z * a.rows + row] = lse;
      else if (a.lse) a.lse[row] = lse;
    }
  }
#pragma unroll
  for (int t = 0; t < 8; t++)
#pragma unroll
    for (int i = 0; i < NA; i++) { /* V column 64 t + r0 + 8 x, head 8 j + 2 quad + e */
      const int x = (i >> 1) & 1, c = 2 * (i >> 2) + (i & 1), h = 8 * (i >> 2) + 2 * quad + (i & 1);
      const float v = (o[NA * t + i] * f0[c] + scratch[(NA * t + i) * 128] * f1[c]) * inv[c];
      /* F16: O^T's rows g, g + 8 of a warp are V columns 2 g, 2 g + 1 of its 16 (mfh_v_frags) */
      const int vc = F16 ? 16 * warp + 2 * (lane >> 2) + x : r0 + 8 * x;
      const size_t row = (size_t)tok * NH + h, col = (size_t)(64 * t + vc);
      if (a.o_part) a.o_part[((size_t)blockIdx.z * a.rows + row) * MLA_DV + col] = v;
      else a.o[row * MLA_DV + col] = __bfloat16_as_ushort(__float2bfloat16_rn(v));
    }
}

template <int NH, int FP8>
static ws_status mfh_make_plan(const void *ctx, ws_plan *plan) {
  ws_status s = ws_plan_init(plan, (const char *)ctx, mla_sparse_roles, mla_sparse_NROLES, 0);
  if (s == WS_OK) s = ws_plan_set_smem(plan, sizeof(mfh_smem<NH, FP8 && NH == 16>) + 1024);
  static const char *const names[3] = {"mla warpgroup 0", "mla warpgroup 1", "mla end merge"};
  for (int i = 0, id = 0; i < 3 && s == WS_OK; i++) s = ws_plan_add_barrier(plan, names[i], &id);
  return s;
}

/* Paged decode with s_q x heads = 16 or 32 query rows per sequence, BF16 or FP8 cache
 * (mla_launch): a filled in as for the sparse kernel, q the queries [tokens][heads][576],
 * tokens = sequences x s_q; one CTA per sequence and split. */
ws_status mla_fewheads_launch(const void *q, int tokens, mla_args *a, int splits, cudaStream_t stream) {
  const int nh = a->heads * a->s_q, rows = a->s_q > 1;
  WS_REQUIRE(nh == 16 || nh == 32, "mla_fewheads: %d heads x s_q %d (16 or 32 rows)", a->heads, a->s_q);
  ws_plan *plan = NULL;
  const int fp8 = a->kv8 != NULL, h32 = nh == 32;
  a->gather_ahead = ws_knobs_get()->mla_gather_ahead;
  static const int slots[2][2][2] = {
      {{WS_PLAN_SLOT_MLA_FEWHEADS, WS_PLAN_SLOT_MLA_FEWHEADS_FP8}, {WS_PLAN_SLOT_MLA_FEWHEADS32, WS_PLAN_SLOT_MLA_FEWHEADS32_FP8}},
      {{WS_PLAN_SLOT_MLA_FEWROWS, WS_PLAN_SLOT_MLA_FEWROWS_FP8}, {WS_PLAN_SLOT_MLA_FEWROWS32, WS_PLAN_SLOT_MLA_FEWROWS32_FP8}}};
  static const char *const names[2][2][2] = {{{"mla_fewheads", "mla_fewheads_fp8"}, {"mla_fewheads32", "mla_fewheads32_fp8"}},
                                             {{"mla_fewrows", "mla_fewrows_fp8"}, {"mla_fewrows32", "mla_fewrows32_fp8"}}};
  static const void *const funcs[2][2][2] = {
      {{(const void *)mla_fewheads_kernel<0, 16, 0>, (const void *)mla_fewheads_kernel<1, 16, 0>},
       {(const void *)mla_fewheads_kernel<0, 32, 0>, (const void *)mla_fewheads_kernel<1, 32, 0>}},
      {{(const void *)mla_fewheads_kernel<0, 16, 1>, (const void *)mla_fewheads_kernel<1, 16, 1>},
       {(const void *)mla_fewheads_kernel<0, 32, 1>, (const void *)mla_fewheads_kernel<1, 32, 1>}}};
  static ws_status (*const make[2][2])(const void *, ws_plan *) = {{mfh_make_plan<16, 0>, mfh_make_plan<16, 1>},
                                                                   {mfh_make_plan<32, 0>, mfh_make_plan<32, 1>}};
  ws_status s = ws_plan_cached(slots[rows][h32][fp8], make[h32][fp8], names[rows][h32][fp8], &plan);
  if (s != WS_OK) return s;
  a->xchg_bar = plan->layout.nbarriers + 1; /* the plan's three user barriers, in a row */
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  const void *qp = q;
  void *args[] = {(void *)&qp, a, &diag};
  const dim3 grid = {(unsigned)(tokens / a->s_q), 1, (unsigned)splits};
  return ws_plan_launch(plan, funcs[rows][h32][fp8], grid, stream, args);
}
