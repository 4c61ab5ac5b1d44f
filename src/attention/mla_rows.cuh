/* mla_rows.cuh - which kv rows a CTA of the MLA kernels reads (mla_sparse.cu and the
 * 16-head decode's mla_fewheads.cu): its keys, and each key's row looked up in two
 * steps (the index entry loaded early, resolved when the block is copied). */
#ifndef WARPSPEC_MLA_ROWS_CUH
#define WARPSPEC_MLA_ROWS_CUH

#include "mla_fp8_gather.cuh"
#include "mla_internal.h"
#include "mla_stage.cuh"

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

/* ---- the BF16 gather of a block, shared by the kernels -------------------------------
 * Gather thread t (of 128) owns rows row0 + 16 j (row0 = t >> 3, j = 0..3) of every block
 * and 16-byte piece t & 7 of each of their 128-byte lines: a warp instruction reads four
 * whole lines and fills four whole rows of a box. (A thread per half row read 16 bytes of
 * 32 lines per instruction: twice the L2 sectors and 8x the shared-memory wavefronts;
 * docs/design_mla.md, 5.1.) The rows are looked up a block ahead and their index entries
 * loaded two blocks ahead (mla_row_fetch / mla_row_resolve). */

/* Before the first block: r_next = block 0's rows, e_next = block 1's entries. */
template <int KEYS>
static __device__ __forceinline__ void mla_rows_start(const mla_args *a, int tok, int kbeg, int nkeys, int row0,
                                                      int *r_next, int *e_next) {
#pragma unroll
  for (int j = 0; j < 4; j++) {
    r_next[j] = mla_row_resolve<KEYS>(a, tok, kbeg, mla_row_fetch<KEYS>(a, tok, kbeg, nkeys, row0 + 16 * j));
    e_next[j] = mla_row_fetch<KEYS>(a, tok, kbeg, nkeys, MLA_BN + row0 + 16 * j);
  }
}

/* Block nb's rows into r; the look-ahead moves on by a block. */
template <int KEYS>
static __device__ __forceinline__ void mla_rows_step(const mla_args *a, int tok, int kbeg, int nkeys, int row0, int nb,
                                                     int *r, int *r_next, int *e_next) {
#pragma unroll
  for (int j = 0; j < 4; j++) {
    r[j] = r_next[j];
    r_next[j] = mla_row_resolve<KEYS>(a, tok, kbeg, e_next[j]);
    e_next[j] = mla_row_fetch<KEYS>(a, tok, kbeg, nkeys, (nb + 2) * MLA_BN + row0 + 16 * j);
  }
}

/* The copies of rows r (< 0: masked, zero-filled, nothing read) into boxes B0 .. B1 - 1 of
 * the stage at shared address `stage`; with FLAGS, piece 0's thread writes each row's flag
 * into `valid` (1 read, 0 masked). Not committed. */
template <int B0, int B1, int FLAGS>
static __device__ __forceinline__ void mla_gather_bf16(uint32_t stage, uint8_t *valid, const uint16_t *kv, const int *r,
                                                       int t) {
  const int piece = t & 7, row0 = t >> 3;
#pragma unroll
  for (int j = 0; j < 4; j++) {
    const int row = row0 + 16 * j, ok = r[j] >= 0;
    if (FLAGS && piece == 0) valid[row] = ok;
    const uint8_t *src = (const uint8_t *)(kv + (size_t)(ok ? r[j] : 0) * MLA_DQK) + piece * 16;
    const uint32_t dst = stage + mla_swizzle(row, piece);
#pragma unroll
    for (int b = B0; b < B1; b++) ws_cp_async_cg_16_to(dst + (uint32_t)b * (MLA_BN * 128), src + b * 128, ok ? 16u : 0u);
  }
}

/* ---- the FP8 gather of a block (mla_fp8_gather.cuh), shared by the kernels -----------
 * Gather thread t looks up row t % 64 (half t / 64 of its conversion) a block ahead (d) and
 * loads its index entry two blocks ahead (e); the copies take rows 4 (t >> 3) + j from the
 * stage's row list. */
template <int KEYS>
static __device__ __forceinline__ void mla_fp8_rows_start(const mla_args *a, int tok, int kbeg, int nkeys, int t, int *d,
                                                          int *e) {
  const int row = t & 63;
  *d = mla_row_resolve<KEYS>(a, tok, kbeg, mla_row_fetch<KEYS>(a, tok, kbeg, nkeys, row));
  *e = mla_row_fetch<KEYS>(a, tok, kbeg, nkeys, MLA_BN + row);
}

/* Block nb into the acquired stage at shared address `stage`: its rows and flags published
 * in `rows` / `valid` (the stage's), the raw copies, the look-ahead moved on, then either
 * the in-place conversion (scales NULL) or, for a consumer that converts (scales: the
 * stage's 64 float4), the rows' tile scales copied beside the raw bytes and, with `land`,
 * every copy landed (without: the caller arrives when they land, mbarrier-tracked). Not
 * committed. */
template <int KEYS, int F16 = 0>
static __device__ __forceinline__ void mla_gather_fp8_block(const ws_ctx *ctx, const mla_args *a, int tok, int kbeg,
                                                            int nkeys, int nb, uint32_t stage, uint8_t *valid, int *rows,
                                                            int t, int *d_next, int *e, float4 *scales = NULL,
                                                            int land = 1, float *gmax = NULL, int *eblk = NULL) {
  const int row = t & 63, half = t >> 6, row0 = 4 * (t >> 3);
  const int d = *d_next;
  if (half == 0) {
    valid[row] = d >= 0;
    rows[row] = d;
  }
  ws_role_sync(ctx); /* the block's kv rows, for the copies */
  int r[4];
#pragma unroll
  for (int j = 0; j < 4; j++) r[j] = rows[row0 + j];
  if (scales && half == 0) /* joins the copies' commit group; a masked row's are zeros */
    ws_cp_async_cg_16_to(ws_smem_addr(scales + row), a->kv8 + (size_t)(d >= 0 ? d : 0) * WS_MLA_FP8_ROW_BYTES + MLA_FP8_SCALES_AT,
                         d >= 0 ? 16u : 0u);
  mla_gather_fp8_copy(stage, a->kv8, r, t);
  const float4 sc = scales ? make_float4(0.0f, 0.0f, 0.0f, 0.0f) : mla_fp8_scales(a->kv8, d);
  /* the next block's row (its entry landed a block ago), and the entry of the block after
   * it, while these land */
  *d_next = mla_row_resolve<KEYS>(a, tok, kbeg, *e);
  *e = mla_row_fetch<KEYS>(a, tok, kbeg, nkeys, (nb + 2) * MLA_BN + row);
  if (scales) {
    if (land) WS_CP_ASYNC_WAIT_GROUP(0);
  }
  else mla_gather_fp8_convert<F16>(ctx, stage, sc, row, half, gmax, eblk); /* F16: the f16 form and its E */
}

#endif
