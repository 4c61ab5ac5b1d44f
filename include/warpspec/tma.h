/* warpspec/tma.h - tensor maps for the TMA engine, with their box size attached.
 *
 * A ws_tmap is a CUtensorMap plus the bytes one box copy moves. Pipes take the
 * transaction byte count of a TMA load from here, never from the kernel author, so
 * expect_tx always equals what the engine writes (out-of-bounds fill included). */
#ifndef WARPSPEC_TMA_H
#define WARPSPEC_TMA_H

#include <cuda.h>
#include <stddef.h>
#include <stdint.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  CUtensorMap map;       /* 64-byte aligned; must stay the first member             */
  uint32_t box_bytes;    /* bytes of one box = transaction bytes of one load         */
  uint32_t box_cols;     /* inner (contiguous) box extent, elements                  */
  uint32_t box_rows;
  uint32_t elem_bytes;
} ws_tmap;

typedef enum { WS_DTYPE_U8 = 1, WS_DTYPE_U16 = 2, WS_DTYPE_U32 = 4, WS_DTYPE_F32 = 5, WS_DTYPE_BF16 = 6 } ws_dtype;

/* How TMA lays a box out in shared memory. 128B: rows of 128 bytes, 16-byte chunks
 * XOR-swizzled by row (what wgmma's 128B-swizzle descriptors read, bank-conflict free). */
typedef enum { WS_SWIZZLE_NONE = 0, WS_SWIZZLE_128B = 3 } ws_swizzle;

/* A row-major 2-D tensor of `rows` x `cols` elements, `row_stride` bytes apart, cut
 * into boxes of box_rows x box_cols elements, no swizzle. Checks the TMA rules
 * (16-byte aligned base and stride, box extents 1..256, inner box bytes multiple of
 * 16) and says which one failed. One rule is the kernel's to keep: a copy's inner start
 * coordinate x element bytes must be a multiple of 16, or the copy traps as an illegal
 * instruction (a box of scales starting at an odd float did, twice: benchmarks.md). */
ws_status ws_tmap_2d(ws_tmap *t, const void *base, ws_dtype dtype, uint64_t rows, uint64_t cols,
                     uint64_t row_stride, uint32_t box_rows, uint32_t box_cols);

/* The same with a shared-memory swizzle; 128B needs box_cols x element = 128 bytes. */
ws_status ws_tmap_2d_swizzled(ws_tmap *t, const void *base, ws_dtype dtype, uint64_t rows, uint64_t cols,
                              uint64_t row_stride, uint32_t box_rows, uint32_t box_cols, ws_swizzle swizzle);

/* A tensor of rank 2..5: dims[0] the contiguous extent (elements), dims[i] the others,
 * strides[i - 1] the bytes between consecutive indices of dimension i, each dimension
 * nested in the next (strides[i] >= strides[i - 1] x dims[i], as the driver requires), cut
 * into boxes of box[0] x .. x box[rank - 1] elements, laid out in shared memory in that
 * order (the innermost fastest). The same rules as ws_tmap_2d otherwise; box_cols and
 * box_rows are box[0] and box[1], box_bytes the whole box. Example: the MoE experts' W1,
 * [experts][gate, up][inter][hidden], as a 4-D tensor whose box takes the gate rows and
 * the up rows of the same columns in one copy. */
ws_status ws_tmap_nd_swizzled(ws_tmap *t, const void *base, ws_dtype dtype, int rank, const uint64_t *dims,
                              const uint64_t *strides, const uint32_t *box, ws_swizzle swizzle);

/* Bytes of one element of dtype (0 for an unknown value). */
size_t ws_dtype_bytes(ws_dtype dtype);

#ifdef __cplusplus
}
#endif
#endif
