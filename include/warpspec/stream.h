/* warpspec/stream.h - a warp-specialized device-to-device copy.
 *
 * The library's demonstration kernel and the pipe benchmark: a loader role streams
 * 32 KiB boxes from memory into a 4-stage pipe with TMA, and writer roles store
 * them back out, either by TMA stores (one warp) or by two warpgroups of 16-byte
 * stores. Any byte count; the pointers need 16-byte alignment. */
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
  WS_STREAM_STORE_TMA = 0,     /* writer: one warp issuing TMA tensor stores        */
  WS_STREAM_STORE_THREADS = 1  /* writers: 2 warpgroups of 16-byte global stores     */
} ws_stream_mode;

/* ctas: 0 picks one per SM. */
ws_status ws_stream_copy(void *dst, const void *src, size_t bytes, ws_stream_mode mode, int ctas, cudaStream_t stream);

/* The role plan of a mode's kernel, for `warpspec plan --kernel` and the tests. */
ws_status ws_stream_plan(ws_stream_mode mode, ws_plan *plan);

#ifdef __cplusplus
}
#endif
#endif
