/* gemm_loader.cuh - the LOADER role every GEMM kernel shares: walk the CTA's tiles
 * (gemm_sched.cuh) and, per K step, acquire a stage, TMA-load the A tile (rows of the
 * tile's group) and the group's B tile into it, and commit. The transaction bytes come
 * from the two tensor maps. Stage s holds A at slots + s * slot_bytes and B b_offset
 * bytes further.
 * FP8 with args->scale_tma (K-block-major activation scales, k a multiple of 512): the
 * stage also gets its K block's scales, scale_offset bytes in, in the same transaction:
 * the A scales of the tile's rows (one contiguous run of bm + 4 floats from the tile's
 * first row rounded down to a multiple of 4: TMA wants the inner start 16-byte aligned,
 * and groups start on any row; the math skips first & 3), then the B scales of K blocks
 * ks & ~3 .. ks | 3 for the tile's columns (4 floats; the math reads ks & 3).
 * The math warps then read three floats of shared memory per K block instead of loading
 * them from global memory (gemm_fp8.cu).
 * Gathered A (args->a_rows): Hopper's TMA has no row gather, so every row of the A tile
 * is its own copy, a box of one row (bk elements, 128 bytes) from row a_rows[r] into
 * the tile's row r. The 128-byte swizzle follows the shared-memory address (the row's
 * 128-byte line within the 1024-byte atom), so the rows land exactly where one box of
 * the whole tile would put them, and the math is unchanged. The leader announces the
 * stage's bytes once, then each lane copies rows lane, lane + 32, ... of the tile; the
 * indices are read per K step from L1 (the wide tile's loader runs on 32 registers). */
#ifndef WARPSPEC_GEMM_LOADER_CUH
#define WARPSPEC_GEMM_LOADER_CUH

#include "gemm_sched.cuh"
#include "warpspec/device/warpspec.cuh"

/* The 1024-byte aligned start of the dynamic shared memory (128B-swizzled tiles). */
WS_DEV uint8_t *gemm_smem_base(uint8_t *raw) { return (uint8_t *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023); }

/* Shared-memory bytes of one stage's FP8 scales (gemm_load_tiles). */
#define GEMM_SCALE_A_BYTES(BM) ((((BM) + 4) * 4 + 127) / 128 * 128)
#define GEMM_SCALE_BYTES(BM) (GEMM_SCALE_A_BYTES(BM) + 4 * 4)

/* The gathered A tile of rows row0 .. row0 + bm - 1 (rows past A read its row 0; so do
 * padding rows, a_rows -1), K columns col .. col + bk - 1: one TMA copy per row. */
WS_DEV void gemm_gather_rows(const ws_pipe *pipe, const ws_ctx *c, ws_cursor k, uint8_t *stage, const ws_tmap *map_a,
                             const gemm_args *args, int col, int row0) {
  const int bm = args->shape.bm;
  if (ws_role_leader(c)) ws_mbarrier_expect_tx(&pipe->full[k.stage], (uint32_t)bm * map_a->box_bytes);
  __syncwarp(); /* the bytes announced before any copy can complete */
  for (int r = c->lane; r < bm; r += 32) {
    const long long row = (long long)row0 + r;
    const int src = row < args->rows ? __ldg(args->a_rows + row) : 0;
    ws_cp_async_bulk_tensor_2d_global_to_shared(stage + (size_t)r * map_a->box_bytes, &map_a->map, col, src < 0 ? 0 : src,
                                                &pipe->full[k.stage]);
  }
}

WS_DEV void gemm_load_tiles(const ws_pipe *pipe, const ws_ctx *c, const gemm_args *args, int bk, uint8_t *slots,
                            size_t slot_bytes, size_t b_offset, size_t scale_offset, const ws_tmap *map_a,
                            const ws_tmap *map_b) {
  const int scale_tma = scale_offset && args->scale_tma;
  if (ws_role_leader(c)) {
    ws_prefetch_tensormap(&map_a->map);
    ws_prefetch_tensormap(&map_b->map);
    if (scale_tma) {
      ws_prefetch_tensormap(&args->map_sa.map);
      ws_prefetch_tensormap(&args->map_sb.map);
    }
  }
  const int n = args->shape.n;
  gemm_cursor cur = gemm_cursor_start(&args->shape);
  gemm_tile tile;
  ws_cursor k = {0, 0};
  for (int t = (int)blockIdx.x; gemm_tile_at(&args->shape, &cur, t, &tile); t += (int)gridDim.x)
    for (int ks = tile.k0; ks < tile.k1; ks++, k = ws_cursor_next(k, pipe->stages)) {
      uint8_t *stage = slots + ws_pipe_acquire_at(pipe, c, k) * slot_bytes;
      if (args->a_rows) gemm_gather_rows(pipe, c, k, stage, map_a, args, ks * bk, tile.row0 + tile.tm * args->shape.bm);
      else ws_pipe_load_tile_2d_at(pipe, c, k, stage, map_a, ks * bk, tile.row0 + tile.tm * args->shape.bm);
      ws_pipe_load_tile_2d_at(pipe, c, k, stage + b_offset, map_b, ks * bk, tile.g * n + tile.tn * args->shape.bn);
      if (scale_tma) {
        ws_pipe_load_tile_2d_at(pipe, c, k, stage + scale_offset, &args->map_sa,
                                (tile.row0 + tile.tm * args->shape.bm) & ~3, ks);
        ws_pipe_load_tile_2d_at(pipe, c, k, stage + scale_offset + GEMM_SCALE_A_BYTES(args->shape.bm), &args->map_sb,
                                ks & ~3, tile.g * (n / 128) + tile.tn * (args->shape.bn / 128));
      }
      ws_pipe_commit_at(pipe, c, k);
    }
}

#endif
