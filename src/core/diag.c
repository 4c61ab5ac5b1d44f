/* diag.c - the host side of bounded waits: timeout setting, fault record, ws_sync. */
#include "internal.h"
#include "knobs.h"

#include <stdio.h>
#include <string.h>

#define WS_MAX_DEVICES 64

typedef struct {
  ws_fault *host;        /* host view of the mapped record */
  ws_diag dev;           /* what kernels get                */
} diag_slot;

static diag_slot slots[WS_MAX_DEVICES];
static unsigned int timeout_ms_setting; /* 0: not set by ws_set_timeout_ms: WARPSPEC_TIMEOUT_MS */

unsigned int ws_timeout_ms(void) {
  return timeout_ms_setting ? timeout_ms_setting : (unsigned int)ws_knobs_get()->timeout_ms;
}

ws_status ws_set_timeout_ms(unsigned int ms) {
  WS_REQUIRE(ms >= 1 && ms <= WS_TIMEOUT_MS_MAX, "ws_set_timeout_ms: %u ms, must be 1 ms .. 1 hour", ms);
  timeout_ms_setting = ms;
  for (int d = 0; d < WS_MAX_DEVICES; d++) slots[d].dev.timeout_ns = (unsigned long long)ms * 1000000ull;
  return WS_OK;
}

/* The trace every later launch on this device records into (trace.c): kept here, in
 * the ws_diag the kernels get. */
ws_status ws_diag_set_trace(struct ws_trace_buf *buf, int block) {
  ws_diag d;
  ws_status s = ws_diag_get(&d); /* the slot exists */
  if (s != WS_OK) return s;
  int dev = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  slots[dev].dev.trace = buf;
  slots[dev].dev.trace_block = block;
  return WS_OK;
}

ws_status ws_diag_get(ws_diag *out) {
  WS_REQUIRE(out != NULL, "ws_diag_get: out is NULL");
  int d = 0;
  WS_CUDA_TRY(cudaGetDevice(&d));
  WS_REQUIRE(d >= 0 && d < WS_MAX_DEVICES, "ws_diag_get: device %d beyond %d", d, WS_MAX_DEVICES);
  diag_slot *s = &slots[d];
  if (s->host == NULL) {
    void *host = NULL, *dev = NULL, *claim = NULL;
    WS_CUDA_TRY(cudaHostAlloc(&host, sizeof(ws_fault), cudaHostAllocMapped));
    memset(host, 0, sizeof(ws_fault));
    WS_CUDA_TRY(cudaHostGetDevicePointer(&dev, host, 0));
    WS_CUDA_TRY(cudaMalloc(&claim, sizeof(unsigned int)));
    WS_CUDA_TRY(cudaMemset(claim, 0, sizeof(unsigned int)));
    s->host = (ws_fault *)host;
    s->dev.fault = (ws_fault *)dev;
    s->dev.claim = (unsigned int *)claim;
  }
  s->dev.timeout_ns = (unsigned long long)ws_timeout_ms() * 1000000ull;
  *out = s->dev;
  return WS_OK;
}

static const char *edge_text(int edge) {
  switch (edge) {
  case WS_EDGE_FULL: return "for the writer to commit (full barrier)";
  case WS_EDGE_EMPTY: return "for every reader to release (empty barrier)";
  case WS_EDGE_FLAG: return "for a flag";
  case WS_EDGE_PEER_DATA: return "for the peer's data (tail signal): is the peer running the matching call?";
  case WS_EDGE_PEER_CREDIT: return "for the peer to free a staging slot (head signal): is the peer receiving?";
  }
  return "?";
}

/* A recorded fault on any device explains a failed launch or sync. */
static ws_status fault_status(void) {
  for (int d = 0; d < WS_MAX_DEVICES; d++) {
    const ws_fault *f = slots[d].host;
    if (f == NULL || f->code == WS_FAULT_NONE) continue;
    char where[160];
    if (f->peer >= 0)
      snprintf(where, sizeof where, "'%s' with peer %d (this rank %d), block %d, step %llu", f->object, f->peer, f->rank,
               f->stage, (unsigned long long)f->step);
    else
      snprintf(where, sizeof where, "'%s' stage %d phase %d", f->object, f->stage, f->phase);
    if (f->code == WS_FAULT_MISMATCH)
      return ws_fail(WS_ERR_MISMATCH,
                     "mismatch on device %d: block %d, role %s: %s: the peer sends %lld bytes in %lld blocks, this rank "
                     "expects %lld bytes in %lld blocks. The CUDA context is lost; reset the device before further use",
                     d, f->block, f->role_name, where, f->value[0], f->value[1], f->value[2], f->value[3]);
    return ws_fail(WS_ERR_TIMEOUT,
                   "timeout on device %d: block %d thread %d, role %s replica %d waited %.3f s (bound %.3f s) on %s %s. "
                   "The CUDA context is lost; reset the device before further use",
                   d, f->block, f->thread, f->role_name, f->replica, (double)f->waited_ns * 1e-9,
                   (double)f->timeout_ns * 1e-9, where, edge_text(f->edge));
  }
  return WS_OK;
}

ws_status ws_check_cuda(cudaError_t err, const char *what) {
  if (err == cudaSuccess) return WS_OK;
  ws_status s = fault_status();
  if (s != WS_OK) return s;
  return ws_fail_cuda(err, what);
}

ws_status ws_sync(cudaStream_t stream) {
  cudaError_t e = cudaStreamSynchronize(stream);
  if (e == cudaSuccess) e = cudaGetLastError();
  return ws_check_cuda(e, "cudaStreamSynchronize");
}
