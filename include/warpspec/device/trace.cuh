/* warpspec/device/trace.cuh - a role marks its timeline (warpspec/trace.h): lane 0 of
 * warp 0 of each replica, in the traced block only, appends {time, role, replica, kind,
 * arg}. Call it with the whole warp or with lane 0; it is one predicated branch while no
 * trace runs (the pointer is a kernel parameter, in ws_diag). */
#ifndef WARPSPEC_DEVICE_TRACE_CUH
#define WARPSPEC_DEVICE_TRACE_CUH

#include "role.cuh"
#include "warpspec/trace.h"

WS_DEV void ws_trace_mark(const ws_ctx *c, int kind, int arg) {
  struct ws_trace_buf *b = c->diag.trace;
  if (b == NULL || c->lane != 0 || c->warp != 0 || (int)blockIdx.x != c->diag.trace_block) return;
  const unsigned int i = atomicAdd(&b->count, 1u);
  if (i >= b->capacity) return;
  ws_trace_event e;
  e.t_ns = ws_globaltimer();
  e.role = c->role;
  e.replica = c->replica;
  e.kind = kind;
  e.arg = arg;
  e.sm = (int)ws_smid();
  e.pad = 0;
  b->ev[i] = e;
}

#endif
