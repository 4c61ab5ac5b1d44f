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

WS_DEV void ws_trace_mark(const ws_ctx *c, int kind, int arg) {
  struct ws_trace_buf *b = c->diag.trace;
  if (b == NULL || c->lane != 0 || c->warp != 0 ||
      (c->diag.trace_block != WS_TRACE_ALL_BLOCKS && (int)blockIdx.x != c->diag.trace_block))
    return;
  const unsigned int i = atomicAdd(&b->count, 1u);
  if (i >= b->capacity) return;
  ws_trace_event *e = &b->ev[i]; /* written in place: a local copy would take a stack frame */
  e->t_ns = ws_globaltimer();
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

#endif
