/* trace.c - the host side of role timelines (warpspec/trace.h): a device buffer the
 * kernels append to (through ws_diag), copied back and written as CSV. */
#include "internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static struct ws_trace_buf *trace_dev; /* device memory while a trace runs */
static int trace_device = -1;
static size_t trace_cap;

ws_status ws_trace_start(int block, size_t max_events) {
  WS_REQUIRE(trace_dev == NULL, "ws_trace_start: a trace is already running (ws_trace_stop ends it)");
  WS_REQUIRE(block >= 0 || block == WS_TRACE_ALL_BLOCKS, "ws_trace_start: block %d (0 .. grid - 1, or "
             "WS_TRACE_ALL_BLOCKS)", block);
  WS_REQUIRE(max_events >= 1 && max_events <= (1u << 24), "ws_trace_start: max_events %zu, must be 1 .. 2^24",
             max_events);
  int dev = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  const size_t bytes = sizeof(struct ws_trace_buf) + (max_events - 1) * sizeof(ws_trace_event);
  void *p = NULL;
  WS_CUDA_TRY(cudaMalloc(&p, bytes));
  struct ws_trace_buf head;
  memset(&head, 0, sizeof head);
  head.capacity = (unsigned int)max_events;
  cudaError_t e = cudaMemcpy(p, &head, sizeof head, cudaMemcpyHostToDevice);
  if (e != cudaSuccess) {
    cudaFree(p);
    return ws_fail_cuda(e, "ws_trace_start: cudaMemcpy");
  }
  ws_status s = ws_diag_set_trace((struct ws_trace_buf *)p, block);
  if (s != WS_OK) {
    cudaFree(p);
    return s;
  }
  trace_dev = (struct ws_trace_buf *)p;
  trace_device = dev;
  trace_cap = max_events;
  return WS_OK;
}

static const char *kind_name(int k) {
  switch (k) {
  case WS_TRACE_ITEM_BEGIN: return "item_begin";
  case WS_TRACE_ITEM_END: return "item_end";
  case WS_TRACE_WAIT_BEGIN: return "wait_begin";
  case WS_TRACE_WAIT_END: return "wait_end";
  case WS_TRACE_PROBE: return "probe";
  }
  return "?";
}

static const char *on_name(int a) {
  switch (a) {
  case WS_TRACE_ON_STAGE: return "stage";
  case WS_TRACE_ON_SLOT: return "slot";
  case WS_TRACE_ON_ROWS: return "rows";
  case WS_TRACE_ON_PEER: return "peer";
  case WS_TRACE_ON_SCHEDULE: return "schedule";
  case WS_TRACE_ON_EPILOGUE: return "epilogue";
  }
  return "?";
}

static int by_time(const void *a, const void *b) {
  const unsigned long long x = ((const ws_trace_event *)a)->t_ns, y = ((const ws_trace_event *)b)->t_ns;
  return x < y ? -1 : x > y;
}

ws_status ws_trace_stop(const char *csv_path, size_t *events) {
  WS_REQUIRE(trace_dev != NULL, "ws_trace_stop: no trace is running (ws_trace_start)");
  int dev = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_REQUIRE(dev == trace_device, "ws_trace_stop: the trace runs on device %d, the current device is %d", trace_device,
             dev);
  struct ws_trace_buf *buf = trace_dev;
  ws_status s = ws_diag_set_trace(NULL, 0); /* later launches record nothing */
  trace_dev = NULL;
  ws_trace_event *ev = NULL;
  unsigned int count = 0;
  if (s == WS_OK && cudaDeviceSynchronize() != cudaSuccess) s = ws_fail_cuda(cudaGetLastError(), "ws_trace_stop: sync");
  if (s == WS_OK && cudaMemcpy(&count, &buf->count, sizeof count, cudaMemcpyDeviceToHost) != cudaSuccess)
    s = ws_fail_cuda(cudaGetLastError(), "ws_trace_stop: cudaMemcpy");
  const size_t n = count < trace_cap ? count : trace_cap;
  if (s == WS_OK && n > 0) {
    ev = (ws_trace_event *)malloc(n * sizeof *ev);
    if (!ev) s = ws_fail(WS_ERR_NOMEM, "ws_trace_stop: %zu events", n);
    else if (cudaMemcpy(ev, buf->ev, n * sizeof *ev, cudaMemcpyDeviceToHost) != cudaSuccess)
      s = ws_fail_cuda(cudaGetLastError(), "ws_trace_stop: cudaMemcpy");
  }
  cudaFree(buf);
  if (s == WS_OK && csv_path) {
    FILE *f = fopen(csv_path, "w");
    if (!f) s = ws_fail(WS_ERR_INVALID, "ws_trace_stop: cannot write '%s'", csv_path);
    else {
      if (n > 1) qsort(ev, n, sizeof *ev, by_time);
      fprintf(f, "t_ns,role_name,role,replica,event,arg,what,sm\n");
      for (size_t i = 0; i < n; i++) {
        const int wait = ev[i].kind == WS_TRACE_WAIT_BEGIN || ev[i].kind == WS_TRACE_WAIT_END;
        ev[i].name[WS_TRACE_NAME_LEN - 1] = 0;
        fprintf(f, "%llu,%s,%d,%d,%s,%d,%s,%d\n", ev[i].t_ns - ev[0].t_ns, ev[i].name, ev[i].role, ev[i].replica,
                kind_name(ev[i].kind), ev[i].arg,
                wait ? on_name(ev[i].arg) : ev[i].kind == WS_TRACE_PROBE ? "point" : "item", ev[i].sm);
      }
      if (fclose(f) != 0) s = ws_fail(WS_ERR_INVALID, "ws_trace_stop: writing '%s' failed", csv_path);
      if (s == WS_OK && count > trace_cap)
        fprintf(stderr, "warpspec: trace kept %zu of %u events (ws_trace_start's max_events)\n", trace_cap, count);
    }
  }
  if (events) *events = n;
  free(ev);
  return s;
}
