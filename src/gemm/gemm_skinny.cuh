/* gemm_skinny.cuh - what the two skinny kernels share (gemm_bf16_skinny.cu,
 * gemm_fp8_skinny.cu): a problem of few rows (BF16 dense up to 128, FP8 dense or a masked
 * group's room up to 64) with the weights on wgmma's M side (64 weight rows a CTA) and A's
 * rows on N (TOK = 16, 32, 64; BF16 also 128), GEMM_SKINNY_KBOXES(TOK) K boxes a stage
 * (256 contiguous bytes of each weight row at two), and a tile's K slices as one cluster
 * that sums its fp32 partials through distributed shared memory. This file: the
 * shared-memory layout, the loader, the partial's store and the cluster's sum. */
#ifndef WARPSPEC_GEMM_SKINNY_CUH
#define WARPSPEC_GEMM_SKINNY_CUH

#include "gemm_args.h"
#include "gemm_epilogue.cuh"
#include "warpspec/device/warpspec.cuh"

#define SK_BN 64     /* weight rows per CTA: one math warpgroup */
#define SK_KBOXES GEMM_SKINNY_KBOXES(64) /* K boxes per stage up to 64 rows of A (the FP8 kernel's) */
template <int TOK>
constexpr int sk_kboxes() { return GEMM_SKINNY_KBOXES(TOK); }
#define SK_MAXST 12  /* stages at most */
#define SK_PAD 4     /* floats after each partial row: the fragment's stores hit 32 banks */

/* As many stages of STAGE as fit beside the partial, at most SK_MAXST (2048: the barriers'
 * 1024-byte block and the alignment of the dynamic shared memory) */
template <typename STAGE, int TOK>
struct sk_smem {
  static constexpr int part_bytes = TOK * (SK_BN + SK_PAD) * 4;
  static constexpr int fit = (232448 - 2048 - part_bytes) / (int)sizeof(STAGE);
  static constexpr int stages = fit > SK_MAXST ? SK_MAXST : fit;
  WS_PIPE_STORAGE(pipe_t, STAGE, stages);
  pipe_t pipe;
  __align__(16) float part[TOK][SK_BN + SK_PAD]; /* D^T's tile as partial sums, by row of A */
};

/* The loader warp of both kernels: prefetch the two tensor maps, then for each stage
 * k0 .. k1 - 1 of this slice, KB boxes of bk elements along K: the weights' SK_BN rows from
 * wrow (evict-first: each weight byte is read by one CTA) and A's rows from arow. A stage
 * past K loads zeros (TMA fills what lies outside the matrix), which add nothing. */
template <int KB, typename STAGE>
WS_DEV void sk_load_stages(const ws_pipe *pipe, const ws_ctx *ctx, STAGE *slots, const ws_tmap *map_a,
                           const ws_tmap *map_b, int k0, int k1, int bk, int wrow, int arow) {
  if (ws_role_leader(ctx)) {
    ws_prefetch_tensormap(&map_a->map);
    ws_prefetch_tensormap(&map_b->map);
  }
  const uint64_t once = ws_createpolicy_fractional_evict_first();
  const uint32_t bytes = (uint32_t)KB * (map_b->box_bytes + map_a->box_bytes); /* a stage's copies */
  ws_cursor c = {0, 0};
  for (int ks = k0; ks < k1; ks++, c = ws_cursor_next(c, pipe->stages)) {
    STAGE *st = &slots[ws_pipe_acquire_at(pipe, ctx, c)];
    const int kb = ks * KB; /* first K step of the stage */
    ws_pipe_commit_bytes_at(pipe, ctx, c, bytes); /* the pipe's one writer arrival, before its copies */
#pragma unroll
    for (int b = 0; b < KB; b++) {
      ws_pipe_copy_tile_2d_hint_at(pipe, ctx, c, st->b[b], map_b, (kb + b) * bk, wrow, once);
      ws_pipe_copy_tile_2d_at(pipe, ctx, c, st->a[b], map_a, (kb + b) * bk, arow);
    }
  }
}

/* The accumulator of a m64nTOK wgmma into part[A row][weight row]: register j of a
 * thread holds weight row 16 w + lane / 4 (+ 8 for j % 4 >= 2) and A row
 * 8 (j / 4) + 2 (lane % 4) + j % 2. With rows of SK_BN + 4 = 68 floats, a store's 32
 * lanes fall on 32 banks (A row x 4 + weight row). */
template <int TOK>
WS_DEV void sk_store_partial(float (*part)[SK_BN + SK_PAD], const float *acc, const ws_ctx *c) {
  const int wrow = 64 * c->replica + 16 * c->warp + c->lane / 4, col = 2 * (c->lane % 4);
#pragma unroll
  for (int j = 0; j < TOK / 2; j++) part[8 * (j / 4) + col + (j % 2)][wrow + 8 * ((j / 2) % 2)] = acc[j];
}

/* Every math thread of CTA q of S: its share of tile column `tile`'s columns (SK_BN / S
 * weight rows, whole 8-column vectors, the A rows below `count`), summed over the S partials
 * in slice order, into D's rows row0 + .. (a masked group's). */
template <int TOK>
WS_DEV void sk_reduce_store_rows(float (*part)[SK_BN + SK_PAD], const gemm_args *args, int tile, int q, int S, int t,
                                 int threads, long long row0, int count) {
  /* the tile's 8-column vectors split over the S CTAs as evenly as whole vectors go */
  const int nv = SK_BN / 8, v0 = q * nv / S, vecs = (q + 1) * nv / S - v0, n = args->shape.n;
  for (int v = t; v < TOK * vecs; v += threads) {
    const int row = v / vecs, col = 8 * (v0 + v % vecs), j = tile * SK_BN + col;
    if (row >= count || j >= n) continue; /* n is a multiple of 8: a vector is in or out */
    ws_st_global_v4(args->d + (size_t)(row0 + row) * (size_t)n + (size_t)j, gemm_cluster_sum8_bf16(&part[row][col], S));
  }
}
/* ... of a dense problem: every A row below m */
template <int TOK>
WS_DEV void sk_reduce_store(float (*part)[SK_BN + SK_PAD], const gemm_args *args, int tile, int q, int S, int t,
                            int threads) {
  sk_reduce_store_rows<TOK>(part, args, tile, q, S, t, threads, 0, (int)args->rows);
}

#endif
