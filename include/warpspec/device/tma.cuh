/* warpspec/device/tma.cuh - TMA stores from shared memory, with the fences they need.
 *
 * TMA loads into pipes live in pipe.cuh (their bytes complete a pipe barrier). A store
 * reads shared memory through the async proxy, so ordinary stores that filled the
 * source must be fenced (fence.proxy.async) by each writing thread before the role
 * sync that precedes the issue (failure F14). */
#ifndef WARPSPEC_DEVICE_TMA_CUH
#define WARPSPEC_DEVICE_TMA_CUH

#include "../tma.h"
#include "role.cuh"

/* Every thread of the role: store box (col,row) from smem; the leader issues. */
WS_DEV void ws_tma_store_2d(const ws_ctx *c, const ws_tmap *t, const void *src, int col, int row) {
  ws_fence_proxy_async_shared_cta();
  ws_role_sync(c);
  if (ws_role_leader(c)) {
    ws_cp_async_bulk_tensor_2d_shared_to_global(&t->map, col, row, src);
    ws_cp_async_bulk_commit_group();
  }
}

/* Every thread of the role: store `bytes` from smem to global as one bulk copy. */
WS_DEV void ws_bulk_store(const ws_ctx *c, void *dst, const void *src, uint32_t bytes) {
  ws_fence_proxy_async_shared_cta();
  ws_role_sync(c);
  if (ws_role_leader(c)) {
    ws_cp_async_bulk_shared_to_global(dst, src, bytes);
    ws_cp_async_bulk_commit_group();
  }
}

/* Every thread of the role: after this, the sources of all but the last N stores
 * may be overwritten. N is a compile-time constant. */
#define WS_STORE_WAIT_READ(CTX, N)                                   \
  do {                                                               \
    if (ws_role_leader(CTX)) WS_CP_ASYNC_BULK_WAIT_GROUP_READ(N);    \
    ws_role_sync(CTX);                                               \
  } while (0)

/* Leader only, before the kernel ends: all stores fully written. */
WS_DEV void ws_store_drain(const ws_ctx *c) {
  if (ws_role_leader(c)) WS_CP_ASYNC_BULK_WAIT_GROUP(0);
}

#endif
