/* stream_copy.cu - device-to-device copy through a TMA-fed pipe.
 *
 * The buffer is seen as rows of WS_STREAM_ROW_BYTES; each pipe item is one box of
 * WS_STREAM_BOX_ROWS rows (32 KiB). CTAs take boxes round-robin (persistent grid).
 * Per CTA:
 *   LOADER  (1 warp)        acquire slot, TMA-load a box, commit.
 *   STORER  (1 warp)        [TMA mode]    wait, TMA-store the slot, release it once
 *                                         the engine has read it: item i-1 after issuing
 *                                         item i (with one stage: at once).
 *   WRITER  (8 warps)       [threads mode] wait, 16-byte loads from smem, 16-byte
 *                                         stores, release. One replica on purpose: replicas
 *                                         taking turns would wait on iterations out of order,
 *                                         which phase parity cannot tell apart (pipe.cuh).
 * Bytes past the last whole row (< 1 KiB) are copied by block 0 with byte stores. */
#include "warpspec/device/warpspec.cuh"
#include "warpspec/stream.h"
#include "../core/internal.h"
#include "../core/size_check.h"

typedef struct __align__(128) {
  uint8_t bytes[WS_STREAM_BOX_ROWS * WS_STREAM_ROW_BYTES];
} stream_slot;

WS_PIPE_STORAGE(stream_pipe, stream_slot, WS_STREAM_MAX_STAGES);

#define STREAM_TMA_ROLES(ROLE) ROLE(LOADER, 1, WS_REGS_ENTRY, 1) ROLE(STORER, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(stream_tma, STREAM_TMA_ROLES);

#define STREAM_THREADS_ROLES(ROLE) ROLE(T_LOADER, 1, 40, 1) ROLE(T_WRITER, WS_STREAM_WRITER_WARPS, 232, 1)
WS_DECLARE_ROLES(stream_threads, STREAM_THREADS_ROLES);

typedef struct {
  uint32_t stages;  /* pipe depth in use */
  uint32_t evict_first; /* L2 hint on loads and stores */
  size_t rows;      /* whole rows */
  uint32_t boxes;   /* boxes over all rows */
  const uint8_t *src_tail;
  uint8_t *dst_tail;
  uint32_t tail_bytes;
  uint32_t contiguous; /* 1: each CTA copies one contiguous run of boxes */
} stream_args;

/* Items of this CTA: boxes blockIdx.x, blockIdx.x + gridDim.x, ... (round robin), or
 * one run of ceil(boxes / grid) boxes (contiguous). */
static __device__ __forceinline__ uint32_t cta_items(const stream_args *a) {
  if (a->contiguous) {
    const uint32_t per = (a->boxes + gridDim.x - 1) / gridDim.x, start = blockIdx.x * per;
    return start < a->boxes ? (a->boxes - start < per ? a->boxes - start : per) : 0;
  }
  return a->boxes > blockIdx.x ? (a->boxes - blockIdx.x + gridDim.x - 1) / gridDim.x : 0;
}
static __device__ __forceinline__ int item_row(const stream_args *a, uint32_t k) {
  const uint32_t box = a->contiguous ? blockIdx.x * ((a->boxes + gridDim.x - 1) / gridDim.x) + k : blockIdx.x + k * gridDim.x;
  return (int)(box * WS_STREAM_BOX_ROWS);
}

static __device__ __forceinline__ void copy_tail(const stream_args *a) {
  if (blockIdx.x == 0)
    for (uint32_t i = threadIdx.x; i < a->tail_bytes; i += blockDim.x) a->dst_tail[i] = a->src_tail[i];
}

static __device__ __forceinline__ void load_items(const ws_pipe *p, const ws_ctx *c, stream_pipe *st,
                                                  const ws_tmap *in, const stream_args *a, uint32_t n) {
  const uint32_t evict_first = a->evict_first;
  if (ws_role_leader(c)) ws_prefetch_tensormap(&in->map);
  const uint64_t policy = ws_createpolicy_fractional_evict_first();
  ws_cursor k = {0, 0};
  for (uint32_t i = 0; i < n; i++, k = ws_cursor_next(k, p->stages)) {
    const uint32_t s = ws_pipe_acquire_at(p, c, k);
    if (evict_first) ws_pipe_load_tile_2d_hint_at(p, c, k, st->slot[s].bytes, in, 0, item_row(a, i), policy);
    else ws_pipe_load_tile_2d_at(p, c, k, st->slot[s].bytes, in, 0, item_row(a, i));
    ws_pipe_commit_at(p, c, k);
  }
}

WS_KERNEL(stream_tma) stream_tma_kernel(const __grid_constant__ ws_tmap in, const __grid_constant__ ws_tmap out,
                                        stream_args a, ws_diag diag) {
  extern __shared__ __align__(128) uint8_t smem[];
  stream_pipe *st = (stream_pipe *)smem;
  ws_ctx ctx = WS_SELF(stream_tma, diag);
  ws_pipe pipe = WS_PIPE_VIEW_N(st, "stream", WS_ROLE_THREADS(stream_tma, LOADER), WS_ROLE_THREADS(stream_tma, STORER),
                                a.stages);
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_ASYNC); /* TMA in, TMA out: no fences */
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  copy_tail(&a);
  const uint32_t n = cta_items(&a);

  if (ctx.role == LOADER) {
    load_items(&pipe, &ctx, st, &in, &a, n);
  } else {
    if (ws_role_leader(&ctx)) ws_prefetch_tensormap(&out.map);
    const uint64_t policy = ws_createpolicy_fractional_evict_first();
    ws_cursor k = {0, 0}, prev = {0, 0};
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t s = k.stage;
      ws_pipe_wait_at(&pipe, &ctx, k);
      /* The slot came from TMA (async proxy): no generic writes to fence. */
      if (ws_role_leader(&ctx)) {
        if (a.evict_first) ws_cp_async_bulk_tensor_2d_shared_to_global_hint(&out.map, 0, item_row(&a, i), st->slot[s].bytes, policy);
        else ws_cp_async_bulk_tensor_2d_shared_to_global(&out.map, 0, item_row(&a, i), st->slot[s].bytes);
        ws_cp_async_bulk_commit_group();
      }
      if (pipe.stages == 1) {
        WS_STORE_WAIT_READ(&ctx, 0); /* one slot: free it before the next load */
        ws_pipe_release_at(&pipe, &ctx, k);
      } else if (i > 0) {
        WS_STORE_WAIT_READ(&ctx, 1); /* store i-1 has read its slot */
        ws_pipe_release_at(&pipe, &ctx, prev);
      }
      prev = k;
      k = ws_cursor_next(k, pipe.stages);
    }
    ws_store_drain(&ctx);
  }
}

WS_KERNEL(stream_threads) stream_threads_kernel(const __grid_constant__ ws_tmap in, uint8_t *dst, stream_args a,
                                                ws_diag diag) {
  extern __shared__ __align__(128) uint8_t smem[];
  stream_pipe *st = (stream_pipe *)smem;
  ws_ctx ctx = WS_SELF(stream_threads, diag);
  ws_pipe pipe = WS_PIPE_VIEW_N(st, "stream", WS_ROLE_THREADS(stream_threads, T_LOADER),
                                WS_ROLE_THREADS(stream_threads, T_WRITER), a.stages);
  ws_pipe_set_proxies(&pipe, WS_PROXY_ASYNC, WS_PROXY_GENERIC); /* TMA in, ld.shared out */
  if (threadIdx.x == 0) ws_pipe_init(&pipe);
  ws_init_sync();
  copy_tail(&a);
  const uint32_t n = cta_items(&a);

  if (ctx.role == T_LOADER) {
    WS_ENTER_ROLE(stream_threads, T_LOADER);
    if (ctx.spare) return;
    load_items(&pipe, &ctx, st, &in, &a, n);
  } else {
    WS_ENTER_ROLE(stream_threads, T_WRITER);
    const int t = ws_role_thread(&ctx);
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t s = i % a.stages;
      ws_pipe_wait(&pipe, &ctx, i);
      const size_t row0 = (size_t)item_row(&a, i);
      const size_t rows = a.rows - row0 < WS_STREAM_BOX_ROWS ? a.rows - row0 : WS_STREAM_BOX_ROWS;
      const uint4 *from = (const uint4 *)st->slot[s].bytes;
      uint4 *to = (uint4 *)(dst + row0 * WS_STREAM_ROW_BYTES);
      const int vecs = (int)(rows * WS_STREAM_ROW_BYTES / sizeof(uint4));
#pragma unroll 4
      for (int v = t; v < vecs; v += (int)ctx.nthreads) ws_st_global_v4(&to[v], from[v]);
      ws_pipe_release(&pipe, &ctx, i);
    }
  }
}

static ws_status plan_for(ws_stream_mode mode, int stages, ws_plan *plan) {
  ws_status s = mode == WS_STREAM_STORE_TMA
                    ? ws_plan_init(plan, "stream_tma", stream_tma_roles, stream_tma_NROLES, 0)
                    : ws_plan_init(plan, "stream_threads", stream_threads_roles, stream_threads_NROLES, 0);
  if (s != WS_OK) return s;
  return ws_plan_set_smem(plan, WS_PIPE_BYTES(stream_pipe, stages));
}

static ws_status make_plan(const void *mode, ws_plan *plan) {
  return plan_for(*(const ws_stream_mode *)mode, WS_STREAM_STAGES, plan);
}

static int valid_mode(ws_stream_mode m) { return m == WS_STREAM_STORE_TMA || m == WS_STREAM_STORE_THREADS; }

extern "C" ws_status ws_stream_plan(ws_stream_mode mode, int stages, ws_plan *plan) {
  WS_REQUIRE(plan != NULL, "ws_stream_plan: plan is NULL");
  WS_REQUIRE(valid_mode(mode), "ws_stream_plan: mode %d unknown", (int)mode);
  WS_REQUIRE(stages >= 0 && stages <= WS_STREAM_MAX_STAGES, "ws_stream_plan: stages %d, must be 1..%d (0: default)",
             stages, WS_STREAM_MAX_STAGES);
  return plan_for(mode, stages ? stages : WS_STREAM_STAGES, plan);
}

extern "C" ws_status ws_stream_copy(void *dst, const void *src, size_t bytes, const ws_stream_opts *opts,
                                    cudaStream_t stream) {
  ws_stream_opts o = {WS_STREAM_STORE_THREADS, 0, 0, 0, 0, 0};
  if (opts) o = *opts;
  WS_REQUIRE(valid_mode(o.mode), "ws_stream_copy: mode %d unknown", (int)o.mode);
  WS_REQUIRE(o.stages >= 0 && o.stages <= WS_STREAM_MAX_STAGES, "ws_stream_copy: stages %d, must be 1..%d (0: default)",
             o.stages, WS_STREAM_MAX_STAGES);
  WS_REQUIRE(o.ctas_per_sm >= 0 && o.ctas_per_sm <= 4, "ws_stream_copy: ctas_per_sm %d, must be 1..4 (0: default)",
             o.ctas_per_sm);
  WS_REQUIRE(o.ctas >= 0, "ws_stream_copy: ctas %d, must be >= 1 (0: from ctas_per_sm)", o.ctas);
  if (bytes == 0) return WS_OK;
  WS_REQUIRE(dst != NULL && src != NULL, "ws_stream_copy: dst or src is NULL");
  WS_REQUIRE(((uintptr_t)dst & 15u) == 0 && ((uintptr_t)src & 15u) == 0,
             "ws_stream_copy: dst %p and src %p must be 16-byte aligned", dst, src);
  WS_REQUIRE(ws_span_fits(dst, bytes) && ws_span_fits(src, bytes),
             "ws_stream_copy: %zu bytes from %p or to %p run past the end of the address space", bytes, src, dst);
  const uint8_t *s8 = (const uint8_t *)src;
  uint8_t *d8 = (uint8_t *)dst;
  WS_REQUIRE(d8 + bytes <= s8 || s8 + bytes <= d8, "ws_stream_copy: source and destination overlap");
  WS_REQUIRE(bytes / WS_STREAM_ROW_BYTES < (1ull << 31), "ws_stream_copy: %zu bytes is more than this kernel's 2 TiB row "
             "range", bytes);
  const int stages = o.stages ? o.stages : WS_STREAM_STAGES;

  int sms = 0;
  ws_status sm_st = ws_device_sms(&sms);
  if (sm_st != WS_OK) return sm_st;
  /* Plans are made and checked once per thread, device and mode; the depth is per call. */
  ws_plan *plan = NULL;
  ws_status st = ws_plan_cached(o.mode == WS_STREAM_STORE_TMA ? WS_PLAN_SLOT_STREAM_TMA : WS_PLAN_SLOT_STREAM_THREADS,
                                make_plan, &o.mode, &plan);
  if (st != WS_OK) return st;
  if ((st = ws_plan_set_smem(plan, WS_PIPE_BYTES(stream_pipe, stages))) != WS_OK) return st;

  stream_args a;
  a.stages = (uint32_t)stages;
  a.evict_first = o.l2_evict_first != 0;
  a.contiguous = o.contiguous != 0;
  a.rows = bytes / WS_STREAM_ROW_BYTES;
  a.boxes = (uint32_t)((a.rows + WS_STREAM_BOX_ROWS - 1) / WS_STREAM_BOX_ROWS);
  a.tail_bytes = (uint32_t)(bytes % WS_STREAM_ROW_BYTES);
  a.src_tail = s8 + a.rows * WS_STREAM_ROW_BYTES;
  a.dst_tail = d8 + a.rows * WS_STREAM_ROW_BYTES;

  ws_tmap in, out;
  /* A buffer shorter than one row still launches (for the tail) with a 1-row map. */
  const uint64_t map_rows = a.rows ? a.rows : 1;
  if ((st = ws_tmap_2d(&in, src, WS_DTYPE_U32, map_rows, WS_STREAM_ROW_BYTES / 4, WS_STREAM_ROW_BYTES,
                       WS_STREAM_BOX_ROWS, WS_STREAM_ROW_BYTES / 4)) != WS_OK)
    return st;
  if ((st = ws_tmap_2d(&out, dst, WS_DTYPE_U32, map_rows, WS_STREAM_ROW_BYTES / 4, WS_STREAM_ROW_BYTES,
                       WS_STREAM_BOX_ROWS, WS_STREAM_ROW_BYTES / 4)) != WS_OK)
    return st;
  if (a.rows == 0) a.boxes = 0;
  ws_diag diag;
  if ((st = ws_diag_get(&diag)) != WS_OK) return st;
  unsigned grid = o.ctas > 0 ? (unsigned)o.ctas : (unsigned)(sms * (o.ctas_per_sm ? o.ctas_per_sm : WS_STREAM_CTAS_PER_SM));
  if (a.boxes > 0 && grid > a.boxes) grid = a.boxes;
  if (o.mode == WS_STREAM_STORE_TMA) {
    void *args[] = {&in, &out, &a, &diag};
    return ws_plan_launch(plan, (const void *)stream_tma_kernel, dim3{grid, 1, 1}, stream, args);
  }
  void *args[] = {&in, &d8, &a, &diag};
  return ws_plan_launch(plan, (const void *)stream_threads_kernel, dim3{grid, 1, 1}, stream, args);
}
