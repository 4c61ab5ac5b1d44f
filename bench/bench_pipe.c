/* bench_pipe.c - `warpspec bench pipe`: the TMA-fed pipe as a copy engine.
 *
 * Same run, same buffers: cudaMemcpyAsync device-to-device (the copy engine) and
 * ws_stream_copy in both writer modes. Every variant is checked against the source
 * on random data before it is timed. Medians of CUDA-event timings. Bandwidth is
 * reported as bytes copied per second (read + write traffic is twice that). */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/warpspec.h"

#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>


/* A variant: the copy engine (memcpy = 1), or ws_stream_copy with these options. */
typedef struct {
  int memcpy;
  ws_stream_opts opts;
  char name[64];
  float ms;
} variant;

static int run_variant(const variant *v, void *dst, const void *src, size_t bytes, cudaStream_t s) {
  if (v->memcpy) {
    CK(cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDeviceToDevice, s));
    return 0;
  }
  WK(ws_stream_copy(dst, src, bytes, &v->opts, s));
  return 0;
}

static int verify(const variant *v, void *dst, const void *src, size_t bytes, unsigned char *h_src, unsigned char *h_dst) {
  CK(cudaMemset(dst, 0xAB, bytes));
  if (run_variant(v, dst, src, bytes, 0)) return -1;
  WK(ws_sync(0));
  CK(cudaMemcpy(h_dst, dst, bytes, cudaMemcpyDeviceToHost));
  if (memcmp(h_src, h_dst, bytes) != 0) {
    size_t i = 0;
    while (h_src[i] == h_dst[i]) i++;
    fprintf(stderr, "%s: copy differs at byte %zu of %zu\n", v->name, i, bytes);
    return -1;
  }
  return 0;
}

static int time_variant(const variant *v, void *dst, const void *src, size_t bytes, int iters, float *median_ms) {
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  if (iters < 1) return -1;
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
  *median_ms = bench_median(ms, iters);
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

  /* The copy engine, then both writer modes over pipe depths and CTAs per SM. */
  variant v[48];
  int nv = 0;
  memset(v, 0, sizeof v);
  v[nv].memcpy = 1;
  snprintf(v[nv++].name, sizeof v[0].name, "cudaMemcpyAsync D2D");
  const int depths[] = {2, 3, 4, 6};
  for (int hint = 0; hint < (o->sweep ? 3 : 1); hint++) /* 0 plain, 1 evict-first, 2 contiguous runs */
    for (int mode = 0; mode < 2; mode++)
      for (int d = 0; d < 4; d++)
        for (int cpsm = 1; cpsm <= 2; cpsm++) {
          if (cpsm == 2 && depths[d] > 3) continue; /* two CTAs of that depth do not fit one SM */
          v[nv].opts.mode = (ws_stream_mode)mode;
          v[nv].opts.stages = depths[d];
          v[nv].opts.ctas_per_sm = cpsm;
          v[nv].opts.l2_evict_first = hint == 1;
          v[nv].opts.contiguous = hint == 2;
          snprintf(v[nv++].name, sizeof v[0].name, "ws %s-store %d stages %d/SM%s", mode == WS_STREAM_STORE_THREADS ? "thread" : "tma", depths[d],
                   cpsm, hint == 1 ? " evict-first" : hint == 2 ? " contiguous" : "");
        }
  int best = 1;
  for (int i = 0; i < nv; i++) {
    if (verify(&v[i], dst, src, bytes, h_src, h_dst)) return -1;
    if (time_variant(&v[i], dst, src, bytes, o->iters, &v[i].ms)) return -1;
    if (i > 0 && v[i].ms < v[best].ms) best = i;
  }
  /* The copy engine once more at the end: clocks drift over a run. */
  float memcpy_again;
  if (time_variant(&v[0], dst, src, bytes, o->iters, &memcpy_again)) return -1;
  printf("\nbench pipe: device 0 %s, %d SMs, %zu bytes, median of %d (memcpy first %.3f ms, last %.3f ms)\n", lim.name,
         lim.sm_count, bytes, o->iters, v[0].ms, memcpy_again);
  if (memcpy_again < v[0].ms) v[0].ms = memcpy_again;
  printf("  %-34s %9s %12s %16s %10s\n", "variant", "ms", "GB/s copied", "GB/s read+write", "vs memcpy");
  FILE *csv = o->csv ? fopen(o->csv, "w") : NULL;
  if (csv) fprintf(csv, "variant,bytes,ms,gbps_copied,gbps_rw,ratio_vs_memcpy\n");
  for (int i = 0; i < nv; i++) {
    const double gbs = (double)bytes / (v[i].ms * 1e-3) / 1e9;
    printf("  %-34s %9.3f %12.1f %16.1f %9.3fx%s\n", v[i].name, v[i].ms, gbs, 2 * gbs, v[0].ms / v[i].ms,
           i == best ? "  <- best" : "");
    if (csv) fprintf(csv, "%s,%zu,%.4f,%.1f,%.1f,%.4f\n", v[i].name, bytes, v[i].ms, gbs, 2 * gbs, v[0].ms / v[i].ms);
  }
  bench_headline("streaming copy of %zu MiB: %.3fx cudaMemcpy at best (%s)", bytes >> 20, v[0].ms / v[best].ms, v[best].name);
  printf("\n  pipe hand-off (one CTA, writer role -> reader role, 4-byte items), ns per item, median of 9:\n");
  printf("  %-26s %8s %8s %8s %8s\n", "roles", "1 stage", "2", "4", "8");
  for (int row = 0; row < 4; row++) {
    const int w = row & 1 ? 4 : 1, fenced = row >= 2;
    printf("  %d warp%s each%-13s", w, w > 1 ? "s" : " ", fenced ? ", fenced" : "");
    for (int s = 1; s <= 8; s *= 2) {
      double ns = 0;
      int errors = 0;
      if (bench_pipe_handoff(s, w, fenced, 100000, 9, &ns, &errors)) return -1;
      if (errors) { fprintf(stderr, "hand-off saw %d wrong items\n", errors); return -1; }
      printf(" %8.1f", ns);
      if (csv) fprintf(csv, "handoff_w%d_s%d%s,0,%.2f,,,\n", w, s, fenced ? "_fenced" : "", ns);
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
