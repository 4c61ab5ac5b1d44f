/* warpspec/device/trace.cuh - a role marks its timeline (warpspec/trace.h): lane 0 of
 * warp 0 of each replica, in the traced block only, appends {time, role, replica, kind,
 * arg, SM, role name} (or in every block: WS_TRACE_ALL_BLOCKS). Call it with the whole warp or with lane 0; it is one predicated branch while no
 * trace runs (the pointer is a kernel parameter, in ws_diag). */
#ifndef WARPSPEC_DEVICE_TRACE_CUH
#define WARPSPEC_DEVICE_TRACE_CUH

#include "role.cuh"
#include "warpspec/trace.h"

#include <stddef.h>

static_assert(WS_NAME_LEN % 4 == 0 && WS_NAME_LEN >= WS_TRACE_NAME_LEN && WS_TRACE_NAME_LEN == 12 &&
                  offsetof(ws_trace_event, name) % 4 == 0 && offsetof(ws_layout, role_name) % 4 == 0,
              "ws_trace_mark copies a role name as three aligned words");

/* The trace buffer if this thread writes the marks of its role replica (lane 0 of warp 0,
 * in the traced block), else NULL. */
WS_DEV struct ws_trace_buf *ws_trace_writer(const ws_ctx *c) {
  struct ws_trace_buf *b = c->diag.trace;
  if (b == NULL || c->lane != 0 || c->warp != 0 ||
      (c->diag.trace_block != WS_TRACE_ALL_BLOCKS && (int)blockIdx.x != c->diag.trace_block))
    return NULL;
  return b;
}

/* One event, written in place (a local copy would take a stack frame). */
WS_DEV void ws_trace_put(ws_trace_event *e, const ws_ctx *c, uint64_t t, int kind, int arg) {
  e->t_ns = t;
  e->role = c->role;
  e->replica = c->replica;
  e->kind = kind;
  e->arg = arg;
  e->sm = (int)ws_smid();
  /* the name's first 11 bytes as three words (the table's rows are NUL-padded) */
  uint32_t *dst = (uint32_t *)e->name;
  const uint32_t *src = c->role >= 0 ? (const uint32_t *)c->layout->role_name[c->role] : NULL;
  dst[0] = src ? src[0] : 0x2du; /* "-" outside the role table */
  dst[1] = src ? src[1] : 0u;
  dst[2] = src ? src[2] & 0x00ffffffu : 0u;
}

/* (ws_trace_writer's test written out: through the helper, ptxas laid every kernel's
 * marks out differently, and the shipped kernels are kept as they were measured.) */
WS_DEV void ws_trace_mark(const ws_ctx *c, int kind, int arg) {
  struct ws_trace_buf *b = c->diag.trace;
  if (b == NULL || c->lane != 0 || c->warp != 0 ||
      (c->diag.trace_block != WS_TRACE_ALL_BLOCKS && (int)blockIdx.x != c->diag.trace_block))
    return;
  const unsigned int i = atomicAdd(&b->count, 1u);
  if (i >= b->capacity) return;
  ws_trace_put(&b->ev[i], c, ws_globaltimer(), kind, arg);
}

/* ---- probes: the points of a stretch of code, written as one batch -------------------
 * A mark claims its slot with an atomic round trip to the trace buffer (about 0.4 us on
 * a loaded H100), so marks a microsecond apart mostly measure themselves. A probe keeps
 * the times of up to WS_PROBE_POINTS points in registers and appends them with one atomic
 * (WS_PROBE_FLUSH) as WS_TRACE_PROBE events, arg = base + the point's number (base: what
 * the caller tells its kinds of work apart by). Probes exist only
 * in a build with WS_PROBES (cmake -DWS_PROBES=ON); otherwise the macros are empty and
 * the kernels are the shipped ones. Point numbers must be compile-time constants:
 *   WS_PROBE_DECLARE(p); WS_PROBE(p, 0); ... WS_PROBE(p, 1); ... WS_PROBE_FLUSH(&ctx, p, 2, 0);
 * bench/trace_probes.py reports the time between consecutive points. */
#define WS_PROBE_POINTS 12
#ifdef WS_PROBES
typedef struct {
  uint32_t t[WS_PROBE_POINTS]; /* the low 32 bits of %globaltimer: one register a point */
} ws_probe;
#define WS_PROBE_DECLARE(p) ws_probe p
#define WS_PROBE(p, i) ((p).t[(i)] = (uint32_t)ws_globaltimer())
#define WS_PROBE_FLUSH(c, p, n, base) ws_probe_flush((c), &(p), (n), (base))
WS_DEV void ws_probe_flush(const ws_ctx *c, const ws_probe *p, int n, int base) {
  struct ws_trace_buf *b = ws_trace_writer(c);
  if (b == NULL) return;
  const uint64_t now = ws_globaltimer(); /* each point is less than 4 s before it */
  const unsigned int i0 = atomicAdd(&b->count, (unsigned)n);
#pragma unroll
  for (int k = 0; k < WS_PROBE_POINTS; k++)
    if (k < n && i0 + k < b->capacity)
      ws_trace_put(&b->ev[i0 + k], c, now - (uint32_t)((uint32_t)now - p->t[k]), WS_TRACE_PROBE, base + k);
}
#else
#define WS_PROBE_DECLARE(p) (void)0
#define WS_PROBE(p, i) ((void)0)
#define WS_PROBE_FLUSH(c, p, n, base) ((void)0)
#endif

#endif
