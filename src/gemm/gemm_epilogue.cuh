/* gemm_epilogue.cuh - one math warpgroup writes its 64 x BN fp32 fragment (the wgmma
 * m64nBN accumulator layout) to D as bf16.
 *
 * Rows that all belong to the tile's group (the common case) go through shared memory
 * and TMA stores: the fragment is written into 64 x 64 chunks laid out with the 128-byte
 * swizzle (16-byte column chunk c of row r sits at chunk c ^ (r % 8), so the 8 rows a
 * warp writes at once hit 32 different banks), then one thread stores each chunk with
 * a tensor map of D (box 64 x 64, 128B swizzle); columns past n are clipped by the TMA
 * unit. This replaces 4-byte scattered global stores (half of every 32-byte sector) with
 * full lines, and the stores run on while the warpgroup starts its next tile.
 * A warpgroup owns NBUF chunk buffers; before refilling one it waits until the TMA unit
 * has read the previous contents (cp.async.bulk.wait_group.read), and no longer. A tile's
 * first chunk waits for every earlier store: the previous tile may have issued an odd number
 * (its last tile column ends inside the tile), its last one still reading buffer 0.
 * Rows that run past the group (the last, partial tile of an expert; masked padding
 * rows) are written with plain stores, row by row, so nothing outside the group moves.
 * Under split-K the fragment goes to the slice's fp32 partial tile instead. */
#ifndef WARPSPEC_GEMM_EPILOGUE_CUH
#define WARPSPEC_GEMM_EPILOGUE_CUH

#include <cuda_bf16.h>

#include "gemm_sched.cuh"
#include "warpspec/device/tma.cuh"

#define GEMM_CHUNK_BYTES (64 * 64 * 2) /* one 64 x 64 bf16 chunk */

WS_DEV uint32_t gemm_pack_bf16x2(float lo, float hi) {
  const __nv_bfloat162 v = __floats2bfloat162_rn(lo, hi);
  return *(const uint32_t *)&v;
}

/* K slices summed inside a cluster (gemm_bf16_skinny, gemm_bf16's cluster split): the 8
 * fp32 values at shared address `at` (16-byte aligned) in each of the cluster's first S
 * CTAs, added in rank order from zero (the order gemm_splitk_reduce adds its slices in)
 * and packed as 8 bf16. The partials must be complete and visible: a cluster barrier
 * between their stores and this. */
WS_DEV uint4 gemm_cluster_sum8_bf16(const void *at, int S) {
  float s[8] = {0, 0, 0, 0, 0, 0, 0, 0};
  for (int p = 0; p < S; p++) {
    const uint32_t a = ws_mapa_shared_cluster(at, (uint32_t)p);
    const uint4 lo = ws_ld_shared_cluster_v4_u32(a), hi = ws_ld_shared_cluster_v4_u32(a + 16);
    s[0] += __uint_as_float(lo.x); s[1] += __uint_as_float(lo.y); s[2] += __uint_as_float(lo.z); s[3] += __uint_as_float(lo.w);
    s[4] += __uint_as_float(hi.x); s[5] += __uint_as_float(hi.y); s[6] += __uint_as_float(hi.z); s[7] += __uint_as_float(hi.w);
  }
  return make_uint4(gemm_pack_bf16x2(s[0], s[1]), gemm_pack_bf16x2(s[2], s[3]), gemm_pack_bf16x2(s[4], s[5]),
                    gemm_pack_bf16x2(s[6], s[7]));
}

/* Plain stores, row by row, of the fragment's rows that belong to the group: bf16 into
 * D, or (part != NULL, split-K) fp32 into this slice's partial tile. */
template <int BN>
WS_DEV void gemm_store_rows(const ws_ctx *c, const gemm_args *args, const gemm_tile *tile, int local0, const float *frag,
                            float *part) {
  const int n = args->shape.n, r0 = local0 + c->warp * 16 + c->lane / 4;
#pragma unroll
  for (int j = 0; j < BN / 8; j++) {
    const int col = tile->tn * BN + 8 * j + 2 * (c->lane % 4);
    if (col >= n) continue;
#pragma unroll
    for (int h = 0; h < 2; h++) {
      const int local = r0 + 8 * h;
      if (local >= tile->count) continue;
      const size_t at = (size_t)(tile->row0 + local) * n + col;
      const float lo = frag[4 * j + 2 * h], hi = frag[4 * j + 2 * h + 1];
      if (part) *(float2 *)(part + at) = make_float2(lo, hi);
      else *(uint32_t *)(args->d + at) = gemm_pack_bf16x2(lo, hi);
    }
  }
}

/* frag: BN / 2 floats of the m64nBN accumulator; local0: first row of this warpgroup
 * inside the group; stage: NBUF x GEMM_CHUNK_BYTES of 1024-byte aligned shared memory
 * owned by this warpgroup; map_d: D with box 64 x 64 and the 128-byte swizzle. */
template <int BN, int NBUF>
WS_DEV void gemm_store_fragment(const ws_ctx *c, const gemm_args *args, const gemm_tile *tile, int local0,
                                const float *frag, uint8_t *stage, const ws_tmap *map_d) {
  if (args->partial) { /* split-K: this slice's fp32 sums, reduced by a second kernel */
    gemm_store_rows<BN>(c, args, tile, local0, frag,
                        args->partial + (size_t)tile->split * (size_t)args->rows * (size_t)args->shape.n);
    return;
  }
  if (local0 + 64 > tile->count) { /* the group ends inside these rows */
    gemm_store_rows<BN>(c, args, tile, local0, frag, NULL);
    return;
  }
  const int n = args->shape.n, col0 = tile->tn * BN, lane = c->lane;
  const int rl = c->warp * 16 + lane / 4; /* this thread's rows: rl and rl + 8 (same row % 8) */
#pragma unroll
  for (int h = 0; h < BN / 64; h++) {
    /* Chunks past n are not staged at all: the wait below counts stores issued, so a
     * skipped chunk's buffer could still be under an earlier store's read (a 128 x 256
     * tile with n % 256 in 1..128 overwrote rows 48-63 of its first chunk, session 44). */
    if (col0 + h * 64 >= n) break;
    uint8_t *buf = stage + (h % NBUF) * GEMM_CHUNK_BYTES;
    /* one store per chunk, in order: at most NBUF - 1 may still be reading, so the
     * buffer's previous store (NBUF chunks ago) has read it, the later ones may run on;
     * the tile's first chunk: none (the stores before it came a whole K loop earlier) */
    if (h == 0) WS_STORE_WAIT_READ(c, 0);
    else WS_STORE_WAIT_READ(c, NBUF - 1);
#pragma unroll
    for (int j = 0; j < 8; j++) {
      const int jj = h * 8 + j;
      const uint32_t off = ((uint32_t)(j ^ (rl & 7)) << 4) + 4u * (uint32_t)(lane % 4);
      ws_st_shared_u32(ws_smem_addr(buf + rl * 128 + off), gemm_pack_bf16x2(frag[4 * jj], frag[4 * jj + 1]));
      ws_st_shared_u32(ws_smem_addr(buf + (rl + 8) * 128 + off), gemm_pack_bf16x2(frag[4 * jj + 2], frag[4 * jj + 3]));
    }
    ws_tma_store_2d(c, map_d, buf, col0 + h * 64, tile->row0 + local0);
  }
}

#endif
