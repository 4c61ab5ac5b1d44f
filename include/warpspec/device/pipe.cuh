/* warpspec/device/pipe.cuh - typed multi-stage channels in shared memory.
 *
 * A pipe is STAGES slots of a user struct plus two mbarriers per slot: `full`
 * (writer -> readers) and `empty` (readers -> writer). Endpoints are indexed by the
 * iteration i that writer and readers both count: stage = i % stages, phase =
 * (i / stages) & 1, so the two sides cannot disagree about the ring; hot loops may
 * carry a ws_cursor instead and skip the division.
 *
 *   WS_PIPE_STORAGE(tile_pipe, tile_slot, 4);            // the struct in smem
 *   ws_pipe p = WS_PIPE_VIEW(&smem->tiles, "tiles", 2);   // 2 readers, every thread
 *   if (threadIdx.x == 0) ws_pipe_init(&p);
 *   ws_init_sync();
 *   writer:  s = ws_pipe_acquire(&p, &ctx, i);  fill smem->tiles.slot[s];  ws_pipe_commit(&p, &ctx, i);
 *            or ws_pipe_load_tile_2d(...) / ws_pipe_load_bulk(...) between acquire and commit;
 *            ws_pipe_close(&p, &ctx, n) ends the stream.
 *   reader:  s = i % stages; if (ws_pipe_wait(&p, &ctx, i)) break;  use slot[s];  ws_pipe_release(&p, &ctx, i);
 *
 * Arrival counts: each commit is one arrival on `full` (after a role sync, by the role
 * leader) and each reader role replica releases once, so `empty` counts `readers`.
 * The role sync before the single arrive is what makes commit and release safe
 * against a leader that arrives while its siblings still read (failure F1).
 * `empty` barriers start ready: the writer's first lap never waits. */
#ifndef WARPSPEC_DEVICE_PIPE_CUH
#define WARPSPEC_DEVICE_PIPE_CUH

#include "../tma.h"
#include "wait.cuh"

#define WS_PIPE_STORAGE(TYPE, SLOT, STAGES) \
  typedef struct {                          \
    SLOT slot[STAGES];                      \
    uint64_t full[STAGES];                  \
    uint64_t empty[STAGES];                 \
    int closed[STAGES];                     \
  } TYPE

typedef struct {
  uint64_t *full;
  uint64_t *empty;
  int *closed;
  uint32_t stages;
  uint32_t readers;
  const char *name;
} ws_pipe;

typedef struct {
  uint32_t stage;
  uint32_t phase;
} ws_cursor;

WS_DEV ws_pipe ws_pipe_view(uint64_t *full, uint64_t *empty, int *closed, uint32_t stages, uint32_t readers,
                            const char *name) {
  ws_pipe p;
  p.full = full; p.empty = empty; p.closed = closed;
  p.stages = stages; p.readers = readers; p.name = name;
  return p;
}

#define WS_PIPE_CAPACITY(STORAGE) ((uint32_t)(sizeof((STORAGE)->full) / sizeof((STORAGE)->full[0])))
/* A view over all stages of the storage. */
#define WS_PIPE_VIEW(STORAGE, NAME, READERS) \
  ws_pipe_view((STORAGE)->full, (STORAGE)->empty, (STORAGE)->closed, WS_PIPE_CAPACITY(STORAGE), (READERS), (NAME))
/* A view over the first `stages` stages (run-time depth, at most the capacity). */
#define WS_PIPE_VIEW_N(STORAGE, NAME, READERS, STAGES) \
  ws_pipe_view((STORAGE)->full, (STORAGE)->empty, (STORAGE)->closed, (STAGES), (READERS), (NAME))

/* One thread, before ws_init_sync(). */
WS_DEV void ws_pipe_init(const ws_pipe *p) {
  for (uint32_t s = 0; s < p->stages; s++) {
    ws_mbarrier_init(&p->full[s], 1);
    ws_mbarrier_init(&p->empty[s], p->readers);
    p->closed[s] = 0;
  }
}

WS_DEV ws_cursor ws_cursor_at(uint32_t i, uint32_t stages) {
  ws_cursor c;
  c.stage = i % stages;
  c.phase = (i / stages) & 1u;
  return c;
}

WS_DEV ws_cursor ws_cursor_next(ws_cursor c, uint32_t stages) {
  if (++c.stage == stages) { c.stage = 0; c.phase ^= 1u; }
  return c;
}

/* ---- writer ---------------------------------------------------------------------- */
/* Every writer thread: wait until all readers released the slot. Returns the stage. */
WS_DEV uint32_t ws_pipe_acquire_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  ws_wait_parity(&p->empty[k.stage], k.phase ^ 1u, c, p->name, WS_EDGE_EMPTY, (int)k.stage);
  return k.stage;
}

/* Every writer thread: publish the slot. Plain stores of all writer threads and the
 * leader's bulk/tensor loads are covered. */
WS_DEV void ws_pipe_commit_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  ws_role_sync(c);
  if (ws_role_leader(c)) ws_mbarrier_arrive(&p->full[k.stage]);
}

/* Between acquire and commit, any writer thread may call these; the leader issues.
 * The transaction bytes are the copy's own: `bytes`, or the tensor map's box. */
WS_DEV void ws_pipe_load_bulk_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, void *dst, const void *src,
                                 uint32_t bytes) {
  if (!ws_role_leader(c)) return;
  ws_mbarrier_expect_tx(&p->full[k.stage], bytes);
  ws_cp_async_bulk_global_to_shared(dst, src, bytes, &p->full[k.stage]);
}

WS_DEV void ws_pipe_load_tile_2d_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, void *dst, const ws_tmap *t,
                                    int col, int row) {
  if (!ws_role_leader(c)) return;
  ws_mbarrier_expect_tx(&p->full[k.stage], t->box_bytes);
  ws_cp_async_bulk_tensor_2d_global_to_shared(dst, &t->map, col, row, &p->full[k.stage]);
}

/* Every writer thread: mark end of stream in the slot of cursor k (acquires it). */
WS_DEV void ws_pipe_close_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  ws_pipe_acquire_at(p, c, k);
  ws_role_sync(c);
  if (ws_role_leader(c)) {
    p->closed[k.stage] = 1;
    ws_mbarrier_arrive(&p->full[k.stage]);
  }
}

/* ---- reader ---------------------------------------------------------------------- */
/* Every reader thread: wait for the slot; returns 1 if the writer closed the pipe. */
WS_DEV int ws_pipe_wait_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  ws_wait_parity(&p->full[k.stage], k.phase, c, p->name, WS_EDGE_FULL, (int)k.stage);
  return *(volatile int *)&p->closed[k.stage];
}

/* Every reader thread: done with the slot. */
WS_DEV void ws_pipe_release_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  ws_role_sync(c);
  if (ws_role_leader(c)) ws_mbarrier_arrive(&p->empty[k.stage]);
}

/* ---- iteration-indexed forms ----------------------------------------------------- */
WS_DEV uint32_t ws_pipe_acquire(const ws_pipe *p, const ws_ctx *c, uint32_t i) {
  return ws_pipe_acquire_at(p, c, ws_cursor_at(i, p->stages));
}
WS_DEV void ws_pipe_commit(const ws_pipe *p, const ws_ctx *c, uint32_t i) {
  ws_pipe_commit_at(p, c, ws_cursor_at(i, p->stages));
}
WS_DEV void ws_pipe_load_bulk(const ws_pipe *p, const ws_ctx *c, uint32_t i, void *dst, const void *src, uint32_t bytes) {
  ws_pipe_load_bulk_at(p, c, ws_cursor_at(i, p->stages), dst, src, bytes);
}
WS_DEV void ws_pipe_load_tile_2d(const ws_pipe *p, const ws_ctx *c, uint32_t i, void *dst, const ws_tmap *t, int col,
                                 int row) {
  ws_pipe_load_tile_2d_at(p, c, ws_cursor_at(i, p->stages), dst, t, col, row);
}
WS_DEV void ws_pipe_close(const ws_pipe *p, const ws_ctx *c, uint32_t i) {
  ws_pipe_close_at(p, c, ws_cursor_at(i, p->stages));
}
WS_DEV int ws_pipe_wait(const ws_pipe *p, const ws_ctx *c, uint32_t i) {
  return ws_pipe_wait_at(p, c, ws_cursor_at(i, p->stages));
}
WS_DEV void ws_pipe_release(const ws_pipe *p, const ws_ctx *c, uint32_t i) {
  ws_pipe_release_at(p, c, ws_cursor_at(i, p->stages));
}

#endif
