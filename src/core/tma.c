/* tma.c - tensor maps through the driver's cuTensorMapEncodeTiled, found at run time
 * so the library does not link libcuda directly. */
#include "internal.h"

#include <cudaTypedefs.h>
#include <string.h>

size_t ws_dtype_bytes(ws_dtype d) {
  switch (d) {
  case WS_DTYPE_U8: return 1;
  case WS_DTYPE_U16: case WS_DTYPE_BF16: return 2;
  case WS_DTYPE_U32: case WS_DTYPE_F32: return 4;
  }
  return 0;
}

static CUtensorMapDataType cu_dtype(ws_dtype d) {
  switch (d) {
  case WS_DTYPE_U8: return CU_TENSOR_MAP_DATA_TYPE_UINT8;
  case WS_DTYPE_U16: return CU_TENSOR_MAP_DATA_TYPE_UINT16;
  case WS_DTYPE_BF16: return CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  case WS_DTYPE_U32: return CU_TENSOR_MAP_DATA_TYPE_UINT32;
  case WS_DTYPE_F32: return CU_TENSOR_MAP_DATA_TYPE_FLOAT32;
  }
  return CU_TENSOR_MAP_DATA_TYPE_UINT8;
}

static PFN_cuTensorMapEncodeTiled_v12000 encode_fn(void) {
  static PFN_cuTensorMapEncodeTiled_v12000 fn;
  if (fn == NULL) {
    void *p = NULL;
    enum cudaDriverEntryPointQueryResult q;
    if (cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &p, 12000, cudaEnableDefault, &q) == cudaSuccess &&
        q == cudaDriverEntryPointSuccess)
      fn = (PFN_cuTensorMapEncodeTiled_v12000)p;
    else
      (void)cudaGetLastError();
  }
  return fn;
}

/* The driver's encoding of a checked tensor map (rank 2..5, dims innermost first, strides
 * of dims 1.., box per dim), and the box's bytes beside it; `who` names the caller. */
static ws_status tmap_encode(ws_tmap *t, const void *base, ws_dtype dtype, int rank, const uint64_t *dims,
                             const uint64_t *strides, const uint32_t *box, ws_swizzle swizzle, const char *who) {
  PFN_cuTensorMapEncodeTiled_v12000 fn = encode_fn();
  if (fn == NULL) return ws_fail(WS_ERR_CUDA, "%s: cuTensorMapEncodeTiled not found in the driver", who);
  memset(t, 0, sizeof *t);
  cuuint64_t cd[5], cs[4];
  cuuint32_t cb[5], estr[5];
  uint64_t box_bytes = ws_dtype_bytes(dtype);
  for (int i = 0; i < rank; i++) {
    cd[i] = dims[i];
    cb[i] = box[i];
    estr[i] = 1;
    if (i > 0) cs[i - 1] = strides[i - 1];
    box_bytes *= box[i];
  }
  CUresult r = fn(&t->map, cu_dtype(dtype), (cuuint32_t)rank, (void *)base, cd, cs, cb, estr, CU_TENSOR_MAP_INTERLEAVE_NONE,
                  swizzle == WS_SWIZZLE_128B ? CU_TENSOR_MAP_SWIZZLE_128B : CU_TENSOR_MAP_SWIZZLE_NONE,
                  CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (r != CUDA_SUCCESS) return ws_fail(WS_ERR_CUDA, "%s: cuTensorMapEncodeTiled returned %d", who, (int)r);
  t->box_cols = box[0];
  t->box_rows = box[1];
  t->elem_bytes = (uint32_t)ws_dtype_bytes(dtype);
  t->box_bytes = (uint32_t)box_bytes;
  return WS_OK;
}

ws_status ws_tmap_2d(ws_tmap *t, const void *base, ws_dtype dtype, uint64_t rows, uint64_t cols, uint64_t row_stride,
                     uint32_t box_rows, uint32_t box_cols) {
  return ws_tmap_2d_swizzled(t, base, dtype, rows, cols, row_stride, box_rows, box_cols, WS_SWIZZLE_NONE);
}

ws_status ws_tmap_2d_swizzled(ws_tmap *t, const void *base, ws_dtype dtype, uint64_t rows, uint64_t cols,
                              uint64_t row_stride, uint32_t box_rows, uint32_t box_cols, ws_swizzle swizzle) {
  WS_REQUIRE(t != NULL && base != NULL, "ws_tmap_2d: tensor map or base pointer is NULL");
  const size_t eb = ws_dtype_bytes(dtype);
  WS_REQUIRE(eb != 0, "ws_tmap_2d: unknown dtype %d", (int)dtype);
  WS_REQUIRE(((uintptr_t)base & 15u) == 0, "ws_tmap_2d: base %p is not 16-byte aligned", base);
  WS_REQUIRE(rows >= 1 && cols >= 1 && rows < (1ull << 32) && cols < (1ull << 32),
             "ws_tmap_2d: shape %llu x %llu, each extent must be 1..2^32-1", (unsigned long long)rows, (unsigned long long)cols);
  WS_REQUIRE(row_stride % 16 == 0 && row_stride >= cols * eb && row_stride < (1ull << 40),
             "ws_tmap_2d: row stride %llu bytes must be a multiple of 16, at least cols x %zu = %llu, below 2^40",
             (unsigned long long)row_stride, eb, (unsigned long long)(cols * eb));
  WS_REQUIRE(box_rows >= 1 && box_rows <= 256 && box_cols >= 1 && box_cols <= 256,
             "ws_tmap_2d: box %u x %u, each extent must be 1..256", box_rows, box_cols);
  WS_REQUIRE((box_cols * eb) % 16 == 0, "ws_tmap_2d: box row of %u x %zu bytes is not a multiple of 16 bytes", box_cols, eb);
  WS_REQUIRE(swizzle == WS_SWIZZLE_NONE || swizzle == WS_SWIZZLE_128B, "ws_tmap_2d: swizzle %d unknown", (int)swizzle);
  WS_REQUIRE(swizzle != WS_SWIZZLE_128B || box_cols * eb == 128,
             "ws_tmap_2d: the 128B swizzle needs 128-byte box rows, got %u x %zu bytes", box_cols, eb);
  const uint64_t dims[2] = {cols, rows}, strides[1] = {row_stride};
  const uint32_t box[2] = {box_cols, box_rows};
  return tmap_encode(t, base, dtype, 2, dims, strides, box, swizzle, "ws_tmap_2d");
}

ws_status ws_tmap_nd_swizzled(ws_tmap *t, const void *base, ws_dtype dtype, int rank, const uint64_t *dims,
                              const uint64_t *strides, const uint32_t *box, ws_swizzle swizzle) {
  WS_REQUIRE(t != NULL && base != NULL && dims != NULL && strides != NULL && box != NULL,
             "ws_tmap_nd: tensor map, base, dims, strides or box is NULL");
  WS_REQUIRE(rank >= 2 && rank <= 5, "ws_tmap_nd: rank %d, must be 2..5", rank);
  const size_t eb = ws_dtype_bytes(dtype);
  WS_REQUIRE(eb != 0, "ws_tmap_nd: unknown dtype %d", (int)dtype);
  WS_REQUIRE(((uintptr_t)base & 15u) == 0, "ws_tmap_nd: base %p is not 16-byte aligned", base);
  uint64_t box_bytes = eb;
  for (int i = 0; i < rank; i++) {
    WS_REQUIRE(dims[i] >= 1 && dims[i] < (1ull << 32), "ws_tmap_nd: dims[%d] = %llu, must be 1..2^32-1", i,
               (unsigned long long)dims[i]);
    WS_REQUIRE(box[i] >= 1 && box[i] <= 256, "ws_tmap_nd: box[%d] = %u, must be 1..256", i, box[i]);
    box_bytes *= box[i];
  }
  for (int i = 1; i < rank; i++) {
    const uint64_t inner = i == 1 ? dims[0] * eb : strides[i - 2] * dims[i - 1];
    WS_REQUIRE(strides[i - 1] % 16 == 0 && strides[i - 1] >= inner && strides[i - 1] < (1ull << 40),
               "ws_tmap_nd: strides[%d] = %llu bytes must be a multiple of 16, at least %llu (dimension %d nested in "
               "dimension %d), below 2^40",
               i - 1, (unsigned long long)strides[i - 1], (unsigned long long)inner, i - 1, i);
  }
  WS_REQUIRE((box[0] * eb) % 16 == 0, "ws_tmap_nd: box row of %u x %zu bytes is not a multiple of 16 bytes", box[0], eb);
  WS_REQUIRE(swizzle == WS_SWIZZLE_NONE || swizzle == WS_SWIZZLE_128B, "ws_tmap_nd: swizzle %d unknown", (int)swizzle);
  WS_REQUIRE(swizzle != WS_SWIZZLE_128B || box[0] * eb == 128,
             "ws_tmap_nd: the 128B swizzle needs 128-byte box rows, got %u x %zu bytes", box[0], eb);
  WS_REQUIRE(box_bytes < (1ull << 32), "ws_tmap_nd: box of %llu bytes", (unsigned long long)box_bytes);
  return tmap_encode(t, base, dtype, rank, dims, strides, box, swizzle, "ws_tmap_nd");
}
