/* gemm_loader.cuh - the LOADER role every GEMM kernel shares: walk the CTA's tiles
 * (gemm_sched.cuh) and, per K step, acquire a stage, TMA-load the A tile (rows of the
 * tile's group) and the group's B tile into it, and commit. The transaction bytes come
 * from the two tensor maps. Stage s holds A at slots + s * slot_bytes and B b_offset
 * bytes further. In pairs (shape.pair = 2) the A map's box is half the tile's rows:
 * each CTA loads its half of the shared A tile into both CTAs (multicast). */
#ifndef WARPSPEC_GEMM_LOADER_CUH
#define WARPSPEC_GEMM_LOADER_CUH

#include "gemm_sched.cuh"
#include "warpspec/device/warpspec.cuh"

/* The 1024-byte aligned start of the dynamic shared memory (128B-swizzled tiles). */
WS_DEV uint8_t *gemm_smem_base(uint8_t *raw) { return (uint8_t *)(((uintptr_t)raw + 1023) & ~(uintptr_t)1023); }

/* Where this CTA walks the work items: its cluster's first item, the stride between
 * its items, and its rank in the cluster (consecutive blockIdx.x form a cluster). */
typedef struct {
  int first, stride, rank;
} gemm_walk;

WS_DEV gemm_walk gemm_walk_of(const gemm_shape *s) {
  gemm_walk w;
  w.rank = (int)blockIdx.x % s->pair;
  w.first = (int)blockIdx.x / s->pair;
  w.stride = (int)gridDim.x / s->pair;
  return w;
}

WS_DEV void gemm_load_tiles(const ws_pipe *pipe, const ws_ctx *c, const gemm_args *args, int bk, uint8_t *slots,
                            size_t slot_bytes, size_t b_offset, const ws_tmap *map_a, const ws_tmap *map_b) {
  if (ws_role_leader(c)) {
    ws_prefetch_tensormap(&map_a->map);
    ws_prefetch_tensormap(&map_b->map);
  }
  const int n = args->shape.n;
  gemm_cursor cur = gemm_cursor_start(&args->shape);
  gemm_tile tile;
  ws_cursor k = {0, 0};
  const gemm_walk w = gemm_walk_of(&args->shape);
  const int half = args->shape.bm / 2;
  for (int t = w.first; gemm_tile_at(&args->shape, &cur, t, w.rank, &tile); t += w.stride)
    for (int ks = tile.k0; ks < tile.k1; ks++, k = ws_cursor_next(k, pipe->stages)) {
      uint8_t *stage = slots + ws_pipe_acquire_at(pipe, c, k) * slot_bytes;
      const int row = tile.row0 + tile.tm * args->shape.bm, col = tile.g * n + tile.tn * args->shape.bn;
      if (args->shape.pair == 2) {
        /* both halves of A land here (this CTA's and the partner's), and all of B */
        ws_pipe_expect_tx_at(pipe, c, k, 2 * map_a->box_bytes + map_b->box_bytes);
        ws_pipe_multicast_tile_2d_at(pipe, c, k, stage + w.rank * map_a->box_bytes, map_a, ks * bk, row + w.rank * half, 0x3);
        ws_pipe_copy_tile_2d_at(pipe, c, k, stage + b_offset, map_b, ks * bk, col);
      } else {
        ws_pipe_load_tile_2d_at(pipe, c, k, stage, map_a, ks * bk, row);
        ws_pipe_load_tile_2d_at(pipe, c, k, stage + b_offset, map_b, ks * bk, col);
      }
      ws_pipe_commit_at(pipe, c, k);
    }
}

#endif
