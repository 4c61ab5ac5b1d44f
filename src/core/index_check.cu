/* index_check.cu - the validation mode (warpspec/check.h): scans of index tensors on the
 * device, one small grid-stride kernel per rule, each keeping the first bad position by
 * atomicMin; the host then reads that entry back and words the error. A debugging mode:
 * simple and synchronous (a cudaMalloc'd record, a wait for the stream) rather than fast. */
#include "internal.h"
#include "index_check.h"
#include "knobs.h"
#include "warpspec/check.h"

#include <limits.h>

#define NONE ULLONG_MAX

static int g_mode = -1; /* -1: WARPSPEC_CHECK decides (the knob, read once: every op asks) */

ws_status ws_set_check_mode(int mode) {
  WS_REQUIRE(mode >= -1 && mode <= 1, "ws_set_check_mode: mode %d, expected 1 (on), 0 (off) or -1 (WARPSPEC_CHECK)", mode);
  g_mode = mode;
  if (mode < 0) ws_knobs_reread(WS_CHECK_ENV); /* back to the environment as it is now */
  return WS_OK;
}

int ws_check_mode(void) { return g_mode >= 0 ? g_mode : ws_knobs_get()->check; }

__global__ void offsets_scan(const int *off, int n, int first, long long total, long long max_step,
                             unsigned long long *bad) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i <= n; i += (long long)gridDim.x * blockDim.x) {
    const long long v = off[i], prev = i > 0 ? off[i - 1] : 0;
    int wrong = i == 0 ? (first >= 0 ? v != first : v < 0) : (v < prev || (max_step >= 0 && v - prev > max_step));
    wrong |= i == n && v > total;
    if (wrong) atomicMin(bad, (unsigned long long)i);
  }
}

__global__ void range_scan(const int *a, long long n, int lo, int hi, int allowed, unsigned long long *bad) {
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const int v = a[i];
    if ((v < lo || v >= hi) && v != allowed) atomicMin(bad, (unsigned long long)i);
  }
}

/* bad[0]: first bad length; bad[1]: first bad page id (b x max_pages + p) of a sequence
 * whose length is valid */
__global__ void paged_scan(const int *lens, const int *table, int batch, int max_pages, int page_size, int num_pages,
                           long long max_len, unsigned long long *bad) {
  const long long n = (long long)batch * max_pages;
  for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
    const int b = (int)(i / max_pages), p = (int)(i % max_pages);
    const long long len = lens[b];
    if (len < 0 || len > max_len) {
      if (p == 0) atomicMin(&bad[0], (unsigned long long)b);
      continue;
    }
    if ((long long)p * page_size >= len) continue; /* past the pages in use: never read */
    const int id = table[i];
    if (id < 0 || id >= num_pages) atomicMin(&bad[1], (unsigned long long)i);
  }
}

/* The record, the launch and the wait shared by the scans: run(grid, bad) launches. */
typedef struct {
  unsigned long long *dev;
  unsigned long long host[2];
} scan_record;

static ws_status scan_begin(const char *fn, scan_record *r, cudaStream_t stream) {
  cudaStreamCaptureStatus cap = cudaStreamCaptureStatusNone;
  WS_CUDA_TRY(cudaStreamIsCapturing(stream, &cap));
  WS_REQUIRE(cap == cudaStreamCaptureStatusNone,
             "%s: the validation mode (%s=1 or ws_set_check_mode) waits for the stream and cannot run inside CUDA "
             "graph capture; capture with it off", fn, WS_CHECK_ENV);
  r->dev = NULL;
  WS_CUDA_TRY(cudaMalloc((void **)&r->dev, sizeof r->host));
  if (cudaMemsetAsync(r->dev, 0xFF, sizeof r->host, stream) != cudaSuccess) {
    cudaFree(r->dev);
    return ws_fail_cuda(cudaGetLastError(), "cudaMemsetAsync");
  }
  return WS_OK;
}

static ws_status scan_end(scan_record *r, cudaStream_t stream) {
  cudaError_t e = cudaGetLastError();
  if (e == cudaSuccess) e = cudaMemcpyAsync(r->host, r->dev, sizeof r->host, cudaMemcpyDeviceToHost, stream);
  if (e == cudaSuccess) e = cudaStreamSynchronize(stream);
  cudaFree(r->dev);
  return e == cudaSuccess ? WS_OK : ws_fail_cuda(e, "validation scan");
}

static unsigned scan_grid(long long n) {
  const long long b = (n + 255) / 256;
  return (unsigned)(b < 1 ? 1 : b > 1024 ? 1024 : b);
}

static int read_int(const int *p) {
  int v = 0;
  if (cudaMemcpy(&v, p, sizeof v, cudaMemcpyDeviceToHost) != cudaSuccess) v = INT_MIN;
  return v;
}

ws_status ws_index_check_offsets(const char *fn, const char *name, const int *off, int n, int first, long long total,
                                 long long max_step, cudaStream_t stream) {
  WS_REQUIRE(off != NULL && n >= 0, "%s: %s is NULL or has %d entries", fn, name, n);
  scan_record r;
  ws_status s = scan_begin(fn, &r, stream);
  if (s != WS_OK) return s;
  offsets_scan<<<scan_grid((long long)n + 1), 256, 0, stream>>>(off, n, first, total, max_step, r.dev);
  if ((s = scan_end(&r, stream)) != WS_OK || r.host[0] == NONE) return s;
  const int i = (int)r.host[0], v = read_int(off + i);
  if (i == 0 && first >= 0 && v != first) return ws_fail(WS_ERR_INVALID, "%s: %s[0] = %d, must be %d", fn, name, v, first);
  if (i == 0 && v < 0) return ws_fail(WS_ERR_INVALID, "%s: %s[0] = %d is negative", fn, name, v);
  const int prev = i > 0 ? read_int(off + i - 1) : 0;
  if (i > 0 && v < prev)
    return ws_fail(WS_ERR_INVALID, "%s: %s[%d] = %d is less than %s[%d] = %d (offsets must not decrease)", fn, name, i, v,
                   name, i - 1, prev);
  if (i == n && v > total)
    return ws_fail(WS_ERR_INVALID, "%s: %s[%d] = %d is past the end of the tensor it indexes (%lld rows)", fn, name, i, v,
                   total);
  if (i > 0 && max_step >= 0 && (long long)v - prev > max_step)
    return ws_fail(WS_ERR_INVALID, "%s: %s[%d] - %s[%d] = %lld, more than the %lld the call was given (max seqlen)", fn,
                   name, i, name, i - 1, (long long)v - prev, max_step);
  return ws_fail(WS_ERR_INVALID, "%s: %s[%d] = %d is invalid", fn, name, i, v);
}

ws_status ws_index_check_range(const char *fn, const char *name, const int *a, long long n, int lo, int hi, int allowed,
                               cudaStream_t stream) {
  WS_REQUIRE(n >= 0 && (a != NULL || n == 0), "%s: %s is NULL", fn, name);
  if (n == 0) return WS_OK;
  scan_record r;
  ws_status s = scan_begin(fn, &r, stream);
  if (s != WS_OK) return s;
  range_scan<<<scan_grid(n), 256, 0, stream>>>(a, n, lo, hi, allowed, r.dev);
  if ((s = scan_end(&r, stream)) != WS_OK || r.host[0] == NONE) return s;
  const long long i = (long long)r.host[0];
  return ws_fail(WS_ERR_INVALID, "%s: %s (flat position %lld) = %d, outside %d .. %d%s", fn, name, i, read_int(a + i), lo,
                 hi - 1, allowed < lo || allowed >= hi ? (allowed == -1 ? " (or -1)" : " (or the marker value)") : "");
}

ws_status ws_index_check_lists(const char *fn, const char *name, const int *a, int batch, int s_q, int n, int hi,
                               cudaStream_t stream) {
  WS_REQUIRE(a != NULL && batch >= 0 && s_q >= 0 && n >= 0, "%s: %s is NULL or has a negative extent", fn, name);
  const long long total = (long long)batch * s_q * n;
  if (total == 0) return WS_OK;
  scan_record r;
  ws_status s = scan_begin(fn, &r, stream);
  if (s != WS_OK) return s;
  range_scan<<<scan_grid(total), 256, 0, stream>>>(a, total, 0, hi, -1, r.dev);
  if ((s = scan_end(&r, stream)) != WS_OK || r.host[0] == NONE) return s;
  const long long i = (long long)r.host[0];
  const int j = (int)(i % n), t = (int)(i / n % s_q), b = (int)(i / n / s_q);
  return ws_fail(WS_ERR_INVALID, "%s: %s[%d][%d][%d] = %d (sequence %d, query token %d, position %d): outside 0 .. %d "
                 "(the cache's rows) and not -1 (masked)", fn, name, b, t, j, read_int(a + i), b, t, j, hi - 1);
}

ws_status ws_index_check_paged(const char *fn, const int *lens, const int *table, int batch, int max_pages, int page_size,
                               int num_pages, long long max_len, cudaStream_t stream) {
  WS_REQUIRE(lens != NULL && table != NULL && batch >= 0 && max_pages >= 1 && page_size >= 1,
             "%s: seqlens or block_table is NULL, or the shape is empty", fn);
  if (batch == 0) return WS_OK;
  scan_record r;
  ws_status s = scan_begin(fn, &r, stream);
  if (s != WS_OK) return s;
  paged_scan<<<scan_grid((long long)batch * max_pages), 256, 0, stream>>>(lens, table, batch, max_pages, page_size,
                                                                          num_pages, max_len, r.dev);
  if ((s = scan_end(&r, stream)) != WS_OK) return s;
  if (r.host[0] != NONE) {
    const int b = (int)r.host[0];
    return ws_fail(WS_ERR_INVALID, "%s: seqlens[%d] = %d, outside 0 .. %lld (max_pages x page_size, or max_seqlen)", fn, b,
                   read_int(lens + b), max_len);
  }
  if (r.host[1] != NONE) {
    const long long i = (long long)r.host[1];
    const int b = (int)(i / max_pages), p = (int)(i % max_pages);
    return ws_fail(WS_ERR_INVALID, "%s: block_table[%d][%d] = %d, outside 0 .. %d (num_pages); sequence %d has %d tokens, "
                   "so its pages 0 .. %d are read", fn, b, p, read_int(table + i), num_pages - 1, b, read_int(lens + b),
                   (read_int(lens + b) + page_size - 1) / page_size - 1);
  }
  return WS_OK;
}
