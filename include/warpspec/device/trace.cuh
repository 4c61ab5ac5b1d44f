/* warpspec/device/trace.cuh - a role marks its timeline (warpspec/trace.h): lane 0 of
 * warp 0 of each replica, in the traced block only, appends {time, role, replica, kind,
 * arg, SM, role name}. Call it with the whole warp or with lane 0; it is one predicated branch while no
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
  ws_trace_event *e = &b->ev[i]; /* written in place: a local copy would take a stack frame */
  e->t_ns = ws_globaltimer();
  e->role = c->role;
  e->replica = c->replica;
  e->kind = kind;
  e->arg = arg;
  e->sm = (int)ws_smid();
  const char *name = c->role >= 0 ? c->layout->role_name[c->role] : "-";
  int n = 0;
  for (; n < WS_TRACE_NAME_LEN - 1 && name[n]; n++) e->name[n] = name[n];
  for (; n < WS_TRACE_NAME_LEN; n++) e->name[n] = 0;
}

#endif
