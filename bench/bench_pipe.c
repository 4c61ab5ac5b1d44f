/* bench_pipe.c - `warpspec bench pipe`: the TMA-fed pipe as a copy engine.
 *
 * Same run, same buffers: cudaMemcpyAsync device-to-device (the copy engine) and
 * ws_stream_copy in both writer modes. Every variant is checked against the source
 * on random data before it is timed. Medians of CUDA-event timings. Bandwidth is
 * reported as bytes copied per second (read + write traffic is twice that). */
#include "bench.h"
#include "warpspec/warpspec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CK(call)                                                                      \
  do {                                                                                \
    cudaError_t e_ = (call);                                                          \
    if (e_ != cudaSuccess) {                                                          \
      fprintf(stderr, "%s:%d %s: %s\n", __FILE__, __LINE__, #call, cudaGetErrorString(e_)); \
      return -1;                                                                      \
    }                                                                                 \
  } while (0)
#define WK(call)                                                                      \
  do {                                                                                \
    ws_status s_ = (call);                                                            \
    if (s_ != WS_OK) {                                                                \
      fprintf(stderr, "%s: %s\n", ws_strerror(s_), ws_last_error());                  \
      return -1;                                                                      \
    }                                                                                 \
  } while (0)

enum { VARIANT_MEMCPY = -1 };

static int run_variant(int v, void *dst, const void *src, size_t bytes, cudaStream_t s) {
  if (v == VARIANT_MEMCPY) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    return 0;
  }
  WK(ws_stream_copy(dst, src, bytes, (ws_stream_mode)v, 0, s));
  return 0;
}

static int cmp_float(const void *a, const void *b) {
  float x = *(const float *)a, y = *(const float *)b;
  return (x > y) - (x < y);
}

static int verify(int v, void *dst, const void *src, size_t bytes, unsigned char *h_src, unsigned char *h_dst) {
  CK(cudaMemset(dst, 0xAB, bytes));
  if (run_variant(v, dst, src, bytes, 0)) return -1;
  WK(ws_sync(0));
  CK(cudaMemcpy(h_dst, dst, bytes, cudaMemcpyDeviceToHost));
  if (memcmp(h_src, h_dst, bytes) != 0) {
    size_t i = 0;
    while (h_src[i] == h_dst[i]) i++;
    fprintf(stderr, "variant %d: copy differs at byte %zu of %zu\n", v, i, bytes);
    return -1;
  }
  return 0;
}

static int time_variant(int v, void *dst, const void *src, size_t bytes, int iters, float *median_ms) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float *ms = (float *)calloc((size_t)iters, sizeof(float));
  if (!ms) return -1;
  for (int w = 0; w < 3; w++)
    if (run_variant(v, dst, src, bytes, 0)) return -1;
  for (int i = 0; i < iters; i++) {
    CK(cudaEventRecord(a, 0));
    if (run_variant(v, dst, src, bytes, 0)) return -1;
    CK(cudaEventRecord(b, 0));
    WK(ws_sync(0));
    CK(cudaEventElapsedTime(&ms[i], a, b));
  }
  qsort(ms, (size_t)iters, sizeof(float), cmp_float);
  *median_ms = ms[iters / 2];
  free(ms);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 0;
}

int bench_pipe(const bench_pipe_opts *o) {
  ws_device_limits lim;
  WK(ws_device_limits_query(0, &lim));
  const size_t bytes = o->bytes;
  void *src = NULL, *dst = NULL;
  CK(cudaMalloc(&src, bytes));
  CK(cudaMalloc(&dst, bytes));
  unsigned char *h_src = (unsigned char *)malloc(bytes), *h_dst = (unsigned char *)malloc(bytes);
  if (!h_src || !h_dst) return -1;
  uint64_t x = 0x9E3779B97F4A7C15ull ^ (uint64_t)bytes;
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    x ^= x << 13; x ^= x >> 7; x ^= x << 17;
    memcpy(h_src + i, &x, 8);
  }
  for (size_t i = bytes & ~(size_t)7; i < bytes; i++) h_src[i] = (unsigned char)i;
  CK(cudaMemcpy(src, h_src, bytes, cudaMemcpyHostToDevice));

  const int variants[] = {VARIANT_MEMCPY, WS_STREAM_STORE_TMA, WS_STREAM_STORE_THREADS};
  const char *names[] = {"cudaMemcpyAsync D2D", "ws_stream_copy tma-store", "ws_stream_copy thread-store"};
  float med[3];
  for (int i = 0; i < 3; i++) {
    if (verify(variants[i], dst, src, bytes, h_src, h_dst)) return -1;
    if (time_variant(variants[i], dst, src, bytes, o->iters, &med[i])) return -1;
  }
  printf("\nbench pipe: device 0 %s, %d SMs, %zu bytes, median of %d\n", lim.name, lim.sm_count, bytes, o->iters);
  printf("  %-28s %10s %12s %16s %9s\n", "variant", "ms", "GB/s copied", "GB/s read+write", "vs memcpy");
  FILE *csv = o->csv ? fopen(o->csv, "w") : NULL;
  if (csv) fprintf(csv, "variant,bytes,ms,gbps_copied,gbps_rw,ratio_vs_memcpy\n");
  for (int i = 0; i < 3; i++) {
    const double gbs = (double)bytes / (med[i] * 1e-3) / 1e9;
    printf("  %-28s %10.3f %12.1f %16.1f %8.3fx\n", names[i], med[i], gbs, 2 * gbs, med[0] / med[i]);
    if (csv) fprintf(csv, "%s,%zu,%.4f,%.1f,%.1f,%.4f\n", names[i], bytes, med[i], gbs, 2 * gbs, med[0] / med[i]);
  }
  printf("\n  pipe hand-off (one CTA, writer role -> reader role), ns per item, median of 9:\n");
  printf("  %-12s %8s %8s %8s %8s\n", "role warps", "1 stage", "2", "4", "8");
  for (int w = 1; w <= 4; w += 3) {
    printf("  %-12d", w);
    for (int s = 1; s <= 8; s *= 2) {
      double ns = 0;
      int errors = 0;
      if (bench_pipe_handoff(s, w, 100000, 9, &ns, &errors)) return -1;
      if (errors) { fprintf(stderr, "hand-off saw %d wrong items\n", errors); return -1; }
      printf(" %8.1f", ns);
      if (csv) fprintf(csv, "handoff_w%d_s%d,0,%.2f,,,\n", w, s, ns);
    }
    printf("\n");
  }
  if (csv) fclose(csv);
  cudaFree(src);
  cudaFree(dst);
  free(h_src);
  free(h_dst);
  return 0;
}
