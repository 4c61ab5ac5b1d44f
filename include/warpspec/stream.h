/* warpspec/stream.h - a warp-specialized device-to-device copy.
 *
 * The library's demonstration kernel and the pipe benchmark: a loader role streams
 * 32 KiB boxes from memory into a 4-stage pipe with TMA, and writer roles store
 * them back out, either by TMA stores (one warp) or by a role of two warpgroups
 * issuing 16-byte stores. Any byte count; the pointers need 16-byte alignment. */
#ifndef WARPSPEC_STREAM_H
#define WARPSPEC_STREAM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "plan.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  WS_STREAM_STORE_THREADS = 0, /* writer: 2 warpgroups of 16-byte global stores (default) */
  WS_STREAM_STORE_TMA = 1      /* writer: one warp issuing TMA tensor stores              */
} ws_stream_mode;

/* Tuning knobs; zero means the default (thread stores, WS_STREAM_STAGES deep, one
 * CTA per SM: the fastest measured on H200, see docs/benchmarks.md). */
typedef struct {
  ws_stream_mode mode;
  int stages;       /* pipe depth, 1..WS_STREAM_MAX_STAGES                     */
  int ctas_per_sm;  /* persistent grid = ctas_per_sm x SMs, 1..4              */
  int ctas;         /* exact grid size instead (for tests), >= 1              */
  int l2_evict_first; /* 1: hint loads and stores evict-first (data used once) */
  int contiguous;   /* 1: each CTA copies one contiguous run instead of every grid-th box */
} ws_stream_opts;

/* opts may be NULL: the defaults. */
ws_status ws_stream_copy(void *dst, const void *src, size_t bytes, const ws_stream_opts *opts, cudaStream_t stream);

/* The role plan of a mode's kernel at a depth (0: default), for `warpspec plan`. */
ws_status ws_stream_plan(ws_stream_mode mode, int stages, ws_plan *plan);

#ifdef __cplusplus
}
#endif
#endif
