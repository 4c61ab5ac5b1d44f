/* warpspec/device/pipe.cuh - typed multi-stage channels in shared memory.
 *
 * A pipe is STAGES slots of a user struct plus two mbarriers per slot: `full`
 * (writer -> readers) and `empty` (readers -> writer). Endpoints are indexed by the
 * iteration i that writer and readers both count: stage = i % stages, phase =
 * (i / stages) & 1, so the two sides cannot disagree about the ring; hot loops may
 * carry a ws_cursor instead and skip the division.
 *
 *   WS_PIPE_STORAGE(tile_pipe, tile_slot, 4);            // the struct in smem
 *   ws_pipe p = WS_PIPE_VIEW(&smem->tiles, "tiles",       // every thread builds the view
 *                            WS_ROLE_THREADS(k, LOADER),  // threads that commit an item
 *                            WS_ROLE_THREADS(k, MATH));   // threads that release it
 *   if (threadIdx.x == 0) ws_pipe_init(&p);
 *   ws_init_sync();
 *   writer:  s = ws_pipe_acquire(&p, &ctx, i);  fill smem->tiles.slot[s];  ws_pipe_commit(&p, &ctx, i);
 *            or ws_pipe_load_tile_2d(...) / ws_pipe_load_bulk(...) between acquire and commit;
 *            ws_pipe_close(&p, &ctx, n) ends the stream.
 *   reader:  s = i % stages; if (ws_pipe_wait(&p, &ctx, i)) break;  use slot[s];  ws_pipe_release(&p, &ctx, i);
 *
 * Arrival counts come from the role table (WS_ROLE_THREADS): every thread of the
 * writer replica arrives on `full` when it commits, every thread of every reader that
 * consumes the item arrives on `empty` when it releases. A slot is therefore free only
 * once each reading thread is done with it, never when a leader merely says so: the
 * leader-arrives-early deadlock (failure F1) cannot be written, no role-wide barrier
 * sits in the hot path, and each thread's own accesses are ordered by its own
 * release/acquire (what compute-sanitizer racecheck models).
 * `empty` barriers start ready: the writer's first lap never waits.
 * A slot filled by copies alone may have one writer arrival (writers = 1): the role
 * leader commits it first with all its bytes (ws_pipe_commit_bytes_at), then issues the
 * copies (ws_pipe_copy_tile_2d_at), one barrier operation a slot; only the leader closes.
 *
 * One rule the barriers cannot check: every endpoint visits the iterations in order
 * (0, 1, 2, ...). Phase parity only says "this slot's phase of parity p is done"; a
 * reader that skips iterations (replicas taking turns, i = r, r+2, ...) can wait on a
 * slot whose earlier phase has not completed yet (TMA loads finish out of order) and
 * pass at once on stale data. Give each replica its own pipe, or one replica all items.
 *
 * Proxies: a slot filled by ordinary stores and read by wgmma or a TMA store, or read
 * by ordinary loads and refilled by TMA, needs fence.proxy.async between the two
 * (failure F14). A new view assumes the worst and fences on commit and release;
 * ws_pipe_set_proxies() says how each side touches the slots and drops the fences
 * that are not needed (each costs a MEMBAR.CTA, about 100 ns on a hand-off). */
#ifndef WARPSPEC_DEVICE_PIPE_CUH
#define WARPSPEC_DEVICE_PIPE_CUH

#include <stddef.h>

#include "../tma.h"
#include "wait.cuh"

/* Barriers first, slots last: a pipe run with fewer stages than its capacity needs
 * only WS_PIPE_BYTES(TYPE, stages) of shared memory. Align SLOT for its copies
 * (TMA wants 128 bytes, swizzled tiles 1024). */
#define WS_PIPE_STORAGE(TYPE, SLOT, STAGES) \
  typedef struct {                          \
    uint64_t full[STAGES];                  \
    uint64_t empty[STAGES];                 \
    int closed[STAGES];                     \
    SLOT slot[STAGES];                      \
  } TYPE
#define WS_PIPE_BYTES(TYPE, STAGES) (offsetof(TYPE, slot) + (size_t)(STAGES) * sizeof(((TYPE *)0)->slot[0]))

typedef struct {
  uint64_t *full;
  uint64_t *empty;
  int *closed;
  uint32_t stages;
  uint32_t writer_arrivals; /* threads that commit one item                */
  uint32_t reader_arrivals; /* threads (over all readers) that release it  */
  uint32_t fence_commit;    /* generic writes -> async-proxy readers       */
  uint32_t fence_release;   /* generic reads -> async-proxy writers        */
  const char *name;
} ws_pipe;

/* How one side of a pipe touches the slots. */
enum {
  WS_PROXY_ANY = 0,      /* unknown or both: fence                                  */
  WS_PROXY_GENERIC = 1,  /* ordinary ld/st.shared (also ldmatrix, stmatrix)         */
  WS_PROXY_ASYNC = 2     /* TMA and bulk copies, wgmma operands                      */
};

typedef struct {
  uint32_t stage;
  uint32_t phase;
} ws_cursor;

WS_DEV ws_pipe ws_pipe_view(uint64_t *full, uint64_t *empty, int *closed, uint32_t stages, uint32_t writer_arrivals,
                            uint32_t reader_arrivals, const char *name) {
  ws_pipe p;
  p.full = full; p.empty = empty; p.closed = closed;
  p.stages = stages; p.writer_arrivals = writer_arrivals; p.reader_arrivals = reader_arrivals; p.name = name;
  p.fence_commit = 1; p.fence_release = 1;
  return p;
}

/* Every thread, right after the view: writer / reader are WS_PROXY_* of each side. */
WS_DEV void ws_pipe_set_proxies(ws_pipe *p, int writer, int reader) {
  p->fence_commit = writer != WS_PROXY_ASYNC && reader != WS_PROXY_GENERIC;
  p->fence_release = reader != WS_PROXY_ASYNC && writer != WS_PROXY_GENERIC;
}

#define WS_PIPE_CAPACITY(STORAGE) ((uint32_t)(sizeof((STORAGE)->full) / sizeof((STORAGE)->full[0])))
/* A view over all stages of the storage. WRITERS / READERS: thread counts, normally
 * WS_ROLE_THREADS(prefix, ROLE) of the committing replica and the sum over readers. */
#define WS_PIPE_VIEW(STORAGE, NAME, WRITERS, READERS) \
  ws_pipe_view((STORAGE)->full, (STORAGE)->empty, (STORAGE)->closed, WS_PIPE_CAPACITY(STORAGE), (WRITERS), (READERS), (NAME))
/* A view over the first `stages` stages (run-time depth, at most the capacity). */
#define WS_PIPE_VIEW_N(STORAGE, NAME, WRITERS, READERS, STAGES) \
  ws_pipe_view((STORAGE)->full, (STORAGE)->empty, (STORAGE)->closed, (STAGES), (WRITERS), (READERS), (NAME))

/* One thread, before ws_init_sync(). */
WS_DEV void ws_pipe_init(const ws_pipe *p) {
  for (uint32_t s = 0; s < p->stages; s++) {
    ws_mbarrier_init(&p->full[s], p->writer_arrivals);
    ws_mbarrier_init(&p->empty[s], p->reader_arrivals);
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

/* Every writer thread: publish the slot. Each thread's plain stores are released by
 * its own arrive (fenced for readers in the async proxy: wgmma, TMA stores); the
 * leader's bulk/tensor loads complete the phase's bytes. */
WS_DEV void ws_pipe_commit_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  (void)c;
  if (p->fence_commit) ws_fence_proxy_async_shared_cta();
  ws_mbarrier_arrive(&p->full[k.stage]);
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

/* The same with an L2 cache policy (ws_createpolicy_*). */
WS_DEV void ws_pipe_load_tile_2d_hint_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, void *dst, const ws_tmap *t,
                                         int col, int row, uint64_t policy) {
  if (!ws_role_leader(c)) return;
  ws_mbarrier_expect_tx(&p->full[k.stage], t->box_bytes);
  ws_cp_async_bulk_tensor_2d_global_to_shared_hint(dst, &t->map, col, row, &p->full[k.stage], policy);
}

/* A pipe whose writer side is one arrival (the role leader's; writer_arrivals 1) may
 * commit a stage before filling it: the leader's one arrival declares all the stage's copy
 * bytes, then the copies go out without an expect_tx each. One barrier operation a stage
 * instead of one per copy plus one per writer thread: a loader issuing six copies a stage
 * spent about 0.5 us a stage doing so (docs/design.md, session 45). The leader's own plain
 * stores into the slot before the commit are released by it; the phase completes when the
 * declared bytes have landed. `bytes` 0: a stage with no copies. */
WS_DEV void ws_pipe_commit_bytes_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, uint32_t bytes) {
  if (ws_role_leader(c)) ws_mbarrier_arrive_expect_tx(&p->full[k.stage], bytes);
}

/* After ws_pipe_commit_bytes_at: a copy counted in its bytes (the box's). */
WS_DEV void ws_pipe_copy_tile_2d_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, void *dst, const ws_tmap *t,
                                    int col, int row) {
  if (ws_role_leader(c)) ws_cp_async_bulk_tensor_2d_global_to_shared(dst, &t->map, col, row, &p->full[k.stage]);
}

/* The same with an L2 cache policy (ws_createpolicy_*). */
WS_DEV void ws_pipe_copy_tile_2d_hint_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, void *dst, const ws_tmap *t,
                                         int col, int row, uint64_t policy) {
  if (ws_role_leader(c))
    ws_cp_async_bulk_tensor_2d_global_to_shared_hint(dst, &t->map, col, row, &p->full[k.stage], policy);
}

/* The same for a 4-D map (ws_tmap_nd_swizzled), coordinates innermost first. */
WS_DEV void ws_pipe_copy_tile_4d_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, void *dst, const ws_tmap *t, int x,
                                    int y, int z, int w) {
  if (ws_role_leader(c)) ws_cp_async_bulk_tensor_4d_global_to_shared(dst, &t->map, x, y, z, w, &p->full[k.stage]);
}

/* Every writer thread: mark end of stream in the slot of cursor k (acquires it). */
WS_DEV void ws_pipe_close_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  ws_pipe_acquire_at(p, c, k);
  if (ws_role_leader(c)) p->closed[k.stage] = 1;
  ws_mbarrier_arrive(&p->full[k.stage]);
}

/* ---- reader ---------------------------------------------------------------------- */
/* Every reader thread: one look at the slot (no bound, no closed flag, no suspension): 1
 * if it is already full. The answer is not needed at once, so it can be asked right after
 * the previous stage's wgmmas are issued; finish with ws_pipe_wait_probed_at before using
 * the slot. A test, not a try_wait: try_wait suspends the warp until the slot fills or the
 * hardware's limit passes, and the math probes before it releases the stage it just read,
 * so each stage was held until the next had landed (one stage fewer in flight; the 1-token
 * MoE layer 1% slower, GEMMs level; docs/benchmarks.md, session 45). */
WS_DEV uint32_t ws_pipe_probe_at(const ws_pipe *p, ws_cursor k) {
  return ws_mbarrier_test_wait_parity(&p->full[k.stage], k.phase);
}

/* Every reader thread: the bounded wait, skipped when the earlier probe saw the slot
 * full; returns 1 if the writer closed the pipe. */
WS_DEV int ws_pipe_wait_probed_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, uint32_t full) {
  if (!full) ws_wait_parity(&p->full[k.stage], k.phase, c, p->name, WS_EDGE_FULL, (int)k.stage);
  /* A plain load: the wait acquired the writer's flag (and its "memory" clobber keeps the
   * load below it), and a caller that ignores the result pays nothing. A volatile read
   * here was a generic LD.STRONG.SYS in every GEMM K step. */
  return p->closed[k.stage];
}

/* Every reader thread: wait for the slot; returns 1 if the writer closed the pipe. */
WS_DEV int ws_pipe_wait_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  return ws_pipe_wait_probed_at(p, c, k, 0u);
}

/* Every reader thread: done with the slot. */
WS_DEV void ws_pipe_release_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  (void)c;
  if (p->fence_release) ws_fence_proxy_async_shared_cta();
  ws_mbarrier_arrive(&p->empty[k.stage]);
}

/* Every thread of a reader warp: done with the slot, one arrival per warp (lane 0 after
 * the warp's threads have all reached this point). For readers whose reads completed
 * warp-wide before this call (wgmma operands after wgmma.wait_group): 1/32 of the
 * barrier traffic of ws_pipe_release_at. The view's reader count must then be in warps
 * (WS_ROLE_WARPS), and every reader of that pipe must release this way. */
WS_DEV void ws_pipe_release_warp_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k) {
  __syncwarp();
  if (c->lane == 0) {
    if (p->fence_release) ws_fence_proxy_async_shared_cta();
    ws_mbarrier_arrive(&p->empty[k.stage]);
  }
}

/* ws_pipe_release_warp_at for a pipe whose slots the CTA `rank` of the cluster refills
 * (it multicasts into this CTA's stages too): the warp's lane 0 arrives on that CTA's
 * `empty` barrier, whose reader count must then include this CTA's warps. Relaxed: for
 * readers whose reads have completed (wgmma operands after wgmma.wait_group); the
 * .release.cluster form costs a MEMBAR.GPU per arrival. */
WS_DEV void ws_pipe_release_warp_to_at(const ws_pipe *p, const ws_ctx *c, ws_cursor k, uint32_t rank) {
  __syncwarp();
  if (c->lane == 0) {
    if (p->fence_release) ws_fence_proxy_async_shared_cta();
    ws_mbarrier_arrive_relaxed_cluster(ws_mapa_shared_cluster(&p->empty[k.stage], rank));
  }
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
