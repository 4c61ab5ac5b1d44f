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
 * Gathered A (args->a_rows): Hopper's TMA has no row gather. One TMA copy of a one-row
 * box per row was correct (the 128-byte swizzle follows the shared-memory address) but
 * the TMA unit took about 40 ns per such copy: the L1 GEMM of the MoE layer at 4096
 * tokens ran 4.3x slower (H100, session 18). The rows come by 16-byte cp.async instead
 * (gemm_gather_rows), from four loader warps; the indices are read per K step from L1
 * (the wide tile's loader runs on 32 registers). The K block's scales come with them
 * (4-byte cp.async into the stage's scale slot): with the math warps loading their
 * gathered rows' scales from global memory, those loads queued behind the loader's
 * 1024 cp.asyncs per stage in the SM's load/store path, and 43% of the warps' stall
 * samples sat at the loop's scale loads (ncu, H200, session 22; the L1 GEMM 2.3x the
 * copied rows' time). */
#ifndef WARPSPEC_GEMM_LOADER_CUH
#define WARPSPEC_GEMM_LOADER_CUH

#include "gemm_sched.cuh"
#include "warpspec/device/warpspec.cuh"

/* The 1024-byte aligned start of the dynamic shared memory (128B-swizzled tiles). */
WS_DEV uint8_t *gemm_smem_base(uint8_t *raw) { return ws_smem_align1024(raw); }

/* Shared-memory bytes of one stage's FP8 scales (gemm_load_tiles). */
#define GEMM_SCALE_A_BYTES(BM) ((((BM) + 4) * 4 + 127) / 128 * 128)
#define GEMM_SCALE_BYTES(BM) (GEMM_SCALE_A_BYTES(BM) + 4 * 4)

/* The gathered A tile of rows row0 .. row0 + bm - 1 (rows past A read its row 0; so do
 * padding rows, a_rows -1), the K block at byte col_bytes of each row: 16-byte cp.async
 * pieces, 8 lanes per row and 4 rows per warp instruction, each piece stored where the
 * 128-byte swizzle puts it (piece p of row r at 16 x (p ^ (r & 7))). With `scales` (the
 * stage's scale slot, a shared-window address; 0: none) the lane of piece 0 also copies
 * the row's scale of K block ks to scales + 4 r. Every lane then arrives on the stage's
 * full barrier when its copies have landed (noinc: those arrivals are the pipe's writer
 * count); the math fences the async proxy before wgmma. */
WS_DEV void gemm_gather_rows(const ws_ctx *c, uint8_t *stage, const gemm_args *args, size_t col_bytes, int row0,
                             int part, int parts, uint32_t scales, int ks) {
  const int bm = args->shape.bm, piece = c->lane & 7, rows = (int)args->rows; /* rows <= 2^30 (ws_gemm_check) */
  const int r0 = part * (bm / parts), r1 = r0 + bm / parts; /* this warp's share of the tile's rows */
  const uint32_t base = ws_smem_addr(stage), row_bytes = args->a_row_bytes;
  const uint8_t *g = args->a_gather + col_bytes + (uint32_t)piece * 16u;
  const float *sk = args->a_scale + (uint32_t)ks * args->a_ks; /* column ks of the rows' scales */
  /* unrolled: the index loads of several rows in flight before their copies (one at a
   * time, each copy waited for its index: the gathered L1 GEMM ran 2.9x the contiguous) */
#pragma unroll 8
  for (int r = r0 + (c->lane >> 3); r < r1; r += 4) {
    const int src = row0 + r < rows ? __ldg(args->a_rows + row0 + r) : 0;
    ws_cp_async_cg_16_to(base + ws_swizzle128_offset((uint32_t)r, (uint32_t)piece),
                         g + (uint64_t)(uint32_t)max(src, 0) * row_bytes, 16);
    if (scales && piece == 0) ws_cp_async_ca_4_to(scales + 4u * (uint32_t)r, sk + (uint32_t)max(src, 0) * args->a_rs);
  }
}

/* The loaders' leader warms the descriptors of the tensor maps it loads through (the K
 * block's scales' too when they come by TMA). */
WS_DEV void gemm_prefetch_maps(const gemm_args *args, const ws_tmap *map_a, const ws_tmap *map_b, int scale_tma) {
  ws_prefetch_tensormap(&map_a->map);
  ws_prefetch_tensormap(&map_b->map);
  if (scale_tma) {
    ws_prefetch_tensormap(&args->map_sa.map);
    ws_prefetch_tensormap(&args->map_sb.map);
  }
}

/* The row of b_scale (one per 128 columns of each group's n columns of B) where tile t's
 * bn columns start. */
WS_DEV int gemm_b_scale_row(const gemm_tile *t, int n, int bn) { return t->g * (n / 128) + t->tn * (bn / 128); }

/* part / parts: this loader warp's share when several copy a gathered A (the first one
 * also loads B); 0 / 1 otherwise. */
WS_DEV void gemm_load_tiles(const ws_pipe *pipe, const ws_ctx *c, const gemm_args *args, int bk, uint8_t *slots,
                            size_t slot_bytes, size_t b_offset, size_t scale_offset, const ws_tmap *map_a,
                            const ws_tmap *map_b, int part = 0, int parts = 1) {
  const int scale_tma = scale_offset && args->scale_tma;
  if (ws_role_leader(c) && part == 0) gemm_prefetch_maps(args, map_a, map_b, scale_tma);
  const int n = args->shape.n;
  const uint32_t dense_bytes =
      map_a->box_bytes + map_b->box_bytes + (scale_tma ? args->map_sa.box_bytes + args->map_sb.box_bytes : 0u);
  gemm_cursor cur = gemm_cursor_start(&args->shape);
  gemm_tile tile;
  ws_cursor k = {0, 0};
  for (int t = (int)blockIdx.x; gemm_tile_at(&args->shape, &cur, t, &tile); t += (int)gridDim.x)
    for (int ks = tile.k0; ks < tile.k1; ks++, k = ws_cursor_next(k, pipe->stages)) {
      uint8_t *stage = slots + ws_pipe_acquire_at(pipe, c, k) * slot_bytes;
      if (args->a_rows) { /* gathered: the A rows by cp.async, B by TMA, the scales by cp.async where the stage has room */
        const uint32_t sc = scale_offset ? ws_smem_addr(stage + scale_offset) : 0u;
        gemm_gather_rows(c, stage, args, (size_t)ks * 128u, tile.row0 + tile.tm * args->shape.bm, part, parts, sc, ks);
        /* the B scale of this tile's 128 columns, where the math reads the K-block-major form's (ks & 3) */
        if (sc && part == 0 && c->lane == 0)
          ws_cp_async_ca_4_to(sc + (uint32_t)GEMM_SCALE_A_BYTES(args->shape.bm) + 4u * (uint32_t)(ks & 3),
                              args->b_scale + ((uint32_t)gemm_b_scale_row(&tile, n, args->shape.bn) *
                                               (uint32_t)args->shape.ksteps + (uint32_t)ks));
        if (part == 0) /* a padding warp's lane 0 is a "leader" too: one B copy per stage */
          ws_pipe_load_tile_2d_at(pipe, c, k, stage + b_offset, map_b, ks * bk, tile.g * n + tile.tn * args->shape.bn);
        ws_cp_async_mbarrier_arrive_noinc(&pipe->full[k.stage]);
        continue;
      }
      /* dense: the pipe's one writer arrival (the leader's), with the stage's bytes, then its copies */
      ws_pipe_commit_bytes_at(pipe, c, k, dense_bytes);
      ws_pipe_copy_tile_2d_at(pipe, c, k, stage, map_a, ks * bk, tile.row0 + tile.tm * args->shape.bm);
      ws_pipe_copy_tile_2d_at(pipe, c, k, stage + b_offset, map_b, ks * bk, tile.g * n + tile.tn * args->shape.bn);
      if (scale_tma) {
        ws_pipe_copy_tile_2d_at(pipe, c, k, stage + scale_offset, &args->map_sa,
                                (tile.row0 + tile.tm * args->shape.bm) & ~3, ks);
        ws_pipe_copy_tile_2d_at(pipe, c, k, stage + scale_offset + GEMM_SCALE_A_BYTES(args->shape.bm), &args->map_sb,
                                ks & ~3, gemm_b_scale_row(&tile, n, args->shape.bn));
      }
    }
}

/* gemm_load_tiles for a CTA pair (gemm_fp8_wide_pair; dense, A by TMA): the two CTAs of a
 * cluster work on tiles (tm, 2c) and (tm, 2c + 1) (gemm_sched.cuh) and share the A tile:
 * each loads its half of A's rows (map_a's box is bm / 2 rows) into both CTAs' stage
 * (multicast), its own B and scales. The leader expects the whole stage's bytes at once,
 * the peer's half included, which may land before or after; the stage is acquired only
 * when the math of both CTAs released it (their empty barriers count both, gemm_fp8.cu),
 * since this CTA's multicast writes into the peer's stage too. A phantom tile's B and B
 * scales lie past the matrix: TMA fills them with zeros, and counts their bytes. */
WS_DEV void gemm_load_tiles_pair(const ws_pipe *pipe, const ws_ctx *c, const gemm_args *args, int bk, uint8_t *slots,
                                 size_t slot_bytes, size_t b_offset, size_t scale_offset, const ws_tmap *map_a,
                                 const ws_tmap *map_b, int part = 0, int parts = 1) {
  (void)part;
  (void)parts;
  const int scale_tma = scale_offset && args->scale_tma, rank = (int)(blockIdx.x & 1u);
  if (ws_role_leader(c)) gemm_prefetch_maps(args, map_a, map_b, scale_tma);
  const int n = args->shape.n, bm = args->shape.bm;
  const uint32_t half = map_a->box_bytes; /* bm / 2 rows */
  const uint32_t bytes = 2u * half + map_b->box_bytes + (scale_tma ? args->map_sa.box_bytes + args->map_sb.box_bytes : 0u);
  gemm_cursor cur = gemm_cursor_start<2>(&args->shape);
  gemm_tile tile;
  ws_cursor k = {0, 0};
  for (int t = (int)(blockIdx.x >> 1); gemm_tile_at<2>(&args->shape, &cur, t, &tile, rank); t += (int)(gridDim.x >> 1))
    for (int ks = tile.k0; ks < tile.k1; ks++, k = ws_cursor_next(k, pipe->stages)) {
      uint8_t *stage = slots + ws_pipe_acquire_at(pipe, c, k) * slot_bytes;
      if (ws_role_leader(c)) { /* the pipe's one writer arrival, with the whole stage's bytes */
        uint64_t *full = &pipe->full[k.stage];
        const int row = tile.row0 + tile.tm * bm;
        ws_mbarrier_arrive_expect_tx(full, bytes);
        ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(stage + rank * half, &map_a->map, ks * bk, row + rank * (bm / 2),
                                                              full, 0x3);
        ws_cp_async_bulk_tensor_2d_global_to_shared(stage + b_offset, &map_b->map, ks * bk,
                                                    tile.g * n + tile.tn * args->shape.bn, full);
        if (scale_tma) {
          ws_cp_async_bulk_tensor_2d_global_to_shared(stage + scale_offset, &args->map_sa.map, row & ~3, ks, full);
          ws_cp_async_bulk_tensor_2d_global_to_shared(stage + scale_offset + GEMM_SCALE_A_BYTES(bm), &args->map_sb.map,
                                                      ks & ~3, gemm_b_scale_row(&tile, n, args->shape.bn), full);
        }
      }
    }
}

/* GEMM_GATHER_L2_PF 1: the row copies ask L2 for 256 bytes on a miss (the row's next K
 * block with this one); 0 for the A/B, which measured level (EP2 L1, session 24). */
#ifndef GEMM_GATHER_L2_PF
#define GEMM_GATHER_L2_PF 1
#endif
/* gemm_load_tiles for a gathered A when the loader has the registers to keep a tile's rows
 * (gemm_fp8_gather: four warps at the entry cap; the 192-row kernel's loader runs on 32
 * registers and keeps gemm_load_tiles): per tile, each lane loads its rows' indices once
 * and keeps their source addresses, shared-memory offsets and scale rows in registers;
 * per K step it only issues the copies (gemm_gather_rows re-read the indices and redid
 * the 64-bit address arithmetic at every step: the loader warps' samples were spread
 * over that arithmetic while the math waited for stages, ncu, session 22). Same stage
 * contents and arrivals as gemm_load_tiles' gathered path. map_a is unused (the same
 * signature, for FP8_KERNEL_BODY). */
WS_DEV void gemm_load_gathered(const ws_pipe *pipe, const ws_ctx *c, const gemm_args *args, int bk, uint8_t *slots,
                               size_t slot_bytes, size_t b_offset, size_t scale_offset, const ws_tmap *map_a,
                               const ws_tmap *map_b, int part = 0, int parts = 1) {
  (void)map_a;
  constexpr int R = 8; /* rows per lane: 128-row tile, four warps, four rows per warp instruction */
  if (ws_role_leader(c) && part == 0) ws_prefetch_tensormap(&map_b->map);
  const int n = args->shape.n, bm = args->shape.bm, piece = c->lane & 7, rows = (int)args->rows;
  const int first = part * (bm / parts) + (c->lane >> 3); /* this lane's rows: first + 4 i, i < R */
  gemm_cursor cur = gemm_cursor_start(&args->shape);
  gemm_tile tile;
  ws_cursor k = {0, 0};
  for (int t = (int)blockIdx.x; gemm_tile_at(&args->shape, &cur, t, &tile); t += (int)gridDim.x) {
    const int row0 = tile.row0 + tile.tm * bm;
    const uint8_t *src[R];
    const float *srow[R];
#pragma unroll
    for (int i = 0; i < R; i++) { /* rows past A and padding rows (-1) read A row 0 */
      const int r = first + 4 * i;
      const uint32_t a = (uint32_t)max(row0 + r < rows ? __ldg(args->a_rows + row0 + r) : 0, 0);
      src[i] = args->a_gather + (uint64_t)a * args->a_row_bytes + (uint32_t)piece * 16u;
      srow[i] = args->a_scale + a * args->a_rs;
    }
    const uint32_t bscale = (uint32_t)gemm_b_scale_row(&tile, n, args->shape.bn) * (uint32_t)args->shape.ksteps;
    for (int ks = tile.k0; ks < tile.k1; ks++, k = ws_cursor_next(k, pipe->stages)) {
      uint8_t *stage = slots + ws_pipe_acquire_at(pipe, c, k) * slot_bytes;
      const uint32_t base = ws_smem_addr(stage), sc = base + (uint32_t)scale_offset;
#pragma unroll
      for (int i = 0; i < R; i++) {
        const uint32_t r = (uint32_t)(first + 4 * i);
        const uint32_t at = base + ws_swizzle128_offset(r, (uint32_t)piece);
#if GEMM_GATHER_L2_PF
        ws_cp_async_cg_16_to_pf256(at, src[i] + (uint32_t)ks * 128u);
#else
        ws_cp_async_cg_16_to(at, src[i] + (uint32_t)ks * 128u, 16);
#endif
        if (piece == 0) ws_cp_async_ca_4_to(sc + 4u * r, srow[i] + (uint32_t)ks * args->a_ks);
      }
      if (part == 0) {
        if (c->lane == 0)
          ws_cp_async_ca_4_to(sc + (uint32_t)GEMM_SCALE_A_BYTES(bm) + 4u * (uint32_t)(ks & 3), args->b_scale + (bscale + (uint32_t)ks));
        ws_pipe_load_tile_2d_at(pipe, c, k, stage + b_offset, map_b, ks * bk, tile.g * n + tile.tn * args->shape.bn);
      }
      ws_cp_async_mbarrier_arrive_noinc(&pipe->full[k.stage]);
    }
  }
}

#endif
