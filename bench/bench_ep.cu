/* bench_ep.cu - `warpspec bench ep`: MoE dispatch and combine alone (ws_ep_dispatch /
 * ws_ep_combine), each rank timing its own calls, on uniform random routing.
 *
 * Per case (shape, tokens per rank, SMs, receive): median of 20 pairs after 5 warm-ups,
 * on --sms N CTAs or the library's default for the case's tokens (ws_ep_config_sms),
 * a barrier before each pair; FP8 rows with 1 x 128 scales. NVLink out = bytes of the rows
 * this rank sends to other ranks, over the time; logical = bytes of every row a rank
 * receives, its own included (how DeepEP counts), over the time. With --trace DIR one more
 * pair runs under a role timeline of every CTA, written to DIR/ep_r<rank>_T<tokens>_s<sms>_
 * <receive>.csv (bench/trace_ep.py prints each kernel's span and waits). --profile: few
 * calls, for Nsight Compute (3 timed pairs after the warm-ups, at 128 and 4096 tokens
 * unless --tokens), so that a profiler that serialises every kernel finishes soon. The
 * PyTorch and NCCL composites: `warpspec bench moe-a2a` (Python). */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/comm.h"
#include "warpspec/moe.h"
#include "warpspec/trace.h"
#include "warpspec/warpspec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define EP_BENCH_ITERS 20 /* timed pairs (at most) */
#define EP_BENCH_PROFILE_ITERS 3
#define EP_BENCH_WARMUP 5

static uint64_t ep_mix(uint64_t x) {
  x ^= x >> 33; x *= 0xff51afd7ed558ccdull; x ^= x >> 33; x *= 0xc4ceb9fe1a85ec53ull; x ^= x >> 33;
  return x;
}

static int cmp_float(const void *a, const void *b) {
  const float x = *(const float *)a, y = *(const float *)b;
  return x < y ? -1 : x > y;
}

/* Uniform routing: each token's K distinct experts from a hash of (rank, token, salt). */
static void ep_routing(int E, int K, int rank, int T, int *idx, float *w) {
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      int e;
      uint64_t h = ep_mix(((uint64_t)rank << 40) ^ ((uint64_t)t << 8) ^ (uint64_t)k ^ 0x5151);
      for (;;) {
        e = (int)(h % (uint64_t)E);
        int dup = 0;
        for (int j = 0; j < k; j++) dup |= idx[t * K + j] == e;
        if (!dup) break;
        h = ep_mix(h + 1);
      }
      idx[t * K + k] = e;
      w[t * K + k] = 1.0f / (float)K;
    }
}

static int ep_case(ws_comm *comm, int rank, int n, int H, int E, int K, int T, int sms, ws_ep_receive receive,
                   int iters, const char *trace_dir, FILE *csv) {
  const ws_ep_config cfg = {H, E, K, T, WS_EP_FP8, 1, sms, WS_EP_NORMAL, receive};
  sms = ws_ep_config_sms(&cfg); /* 0 asked for the library's default: print what it took */
  const int L = E / n;
  const size_t kb = (size_t)H / 128;
  ws_ep *ep = NULL;
  WK(ws_ep_create(&ep, comm, &cfg));
  int *idx = (int *)malloc((size_t)T * K * sizeof(int));
  float *w = (float *)malloc((size_t)T * K * sizeof(float));
  if (!idx || !w) BENCH_FAIL("malloc", "routing");
  ep_routing(E, K, rank, T, idx, w);
  long rows_out = 0, rows_self = 0; /* rows this rank sends to others, and to itself */
  for (int t = 0; t < T; t++) {
    uint64_t mask = 0;
    for (int k = 0; k < K; k++) mask |= 1ull << (idx[t * K + k] / L);
    rows_out += __builtin_popcountll(mask & ~(1ull << rank));
    rows_self += (mask >> rank) & 1;
  }
  void *x, *sc, *di, *dw, *y, *out;
  const size_t R = ws_ep_max_rows(&cfg, n);
  CK(cudaMalloc(&x, (size_t)T * H));
  CK(cudaMalloc(&sc, (size_t)T * kb * 4 + 16));
  CK(cudaMalloc(&di, (size_t)T * K * 4));
  CK(cudaMalloc(&dw, (size_t)T * K * 4));
  CK(cudaMalloc(&y, R * H * 2));
  CK(cudaMalloc(&out, (size_t)T * H * 2));
  CK(cudaMemset(x, 0x3C, (size_t)T * H));
  CK(cudaMemset(sc, 0x3F, (size_t)T * kb * 4));
  CK(cudaMemset(y, 0x3F, R * H * 2));
  CK(cudaMemcpy(di, idx, (size_t)T * K * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(dw, w, (size_t)T * K * 4, cudaMemcpyHostToDevice));
  cudaEvent_t ev[3];
  for (int i = 0; i < 3; i++) CK(cudaEventCreate(&ev[i]));
  float td[EP_BENCH_ITERS], tc[EP_BENCH_ITERS];
  for (int it = -EP_BENCH_WARMUP; it < iters; it++) {
    WK(ws_comm_barrier(comm, 0));
    CK(cudaEventRecord(ev[0], 0));
    WK(ws_ep_dispatch(ep, x, (const float *)sc, (const int *)di, (const float *)dw, T, NULL, NULL, 0));
    CK(cudaEventRecord(ev[1], 0));
    WK(ws_ep_combine(ep, y, out, 0));
    CK(cudaEventRecord(ev[2], 0));
    WK(ws_sync(0));
    if (it >= 0) {
      CK(cudaEventElapsedTime(&td[it], ev[0], ev[1]));
      CK(cudaEventElapsedTime(&tc[it], ev[1], ev[2]));
    }
  }
  WK(ws_ep_check(ep, 0)); /* no expert id was out of range */
  const char *rname = receive == WS_EP_RECEIVE_INDEX ? "index" : "copy";
  if (trace_dir) {
    char path[512];
    snprintf(path, sizeof path, "%s/ep_r%d_T%d_s%d_%s.csv", trace_dir, rank, T, sms, rname);
    WK(ws_comm_barrier(comm, 0));
    WK(ws_trace_start(WS_TRACE_ALL_BLOCKS, 1u << 18));
    WK(ws_ep_dispatch(ep, x, (const float *)sc, (const int *)di, (const float *)dw, T, NULL, NULL, 0));
    WK(ws_ep_combine(ep, y, out, 0));
    WK(ws_trace_stop(path, NULL));
  }
  qsort(td, (size_t)iters, sizeof(float), cmp_float);
  qsort(tc, (size_t)iters, sizeof(float), cmp_float);
  const double d_us = td[iters / 2] * 1e3, c_us = tc[iters / 2] * 1e3;
  const double row_d = (double)H + (double)kb * 4.0, row_c = (double)H * 2;
  const double out_d = rows_out * row_d / d_us * 1e-3, out_c = rows_out * row_c / c_us * 1e-3;
  const double log_d = (rows_out + rows_self) * row_d / d_us * 1e-3, log_c = (rows_out + rows_self) * row_c / c_us * 1e-3;
  printf("  rank %d  %-5s T %5d H %5d E %3d K %d sms %3d: dispatch %8.1f us (NVLink out %6.1f GB/s, logical %6.1f), "
         "combine %8.1f us (NVLink out %6.1f GB/s, logical %6.1f)\n", rank, rname, T, H, E, K, sms, d_us, out_d, log_d,
         c_us, out_c, log_c);
  if (csv)
    fprintf(csv, "%d,%s,%d,%d,%d,%d,%d,%d,%.2f,%.2f,%.2f,%.2f,%.2f,%.2f\n", n, rname, rank, T, H, E, K, sms, d_us, c_us,
            out_d, out_c, log_d, log_c);
  WK(ws_ep_destroy(ep));
  for (int i = 0; i < 3; i++) cudaEventDestroy(ev[i]);
  cudaFree(x); cudaFree(sc); cudaFree(di); cudaFree(dw); cudaFree(y); cudaFree(out);
  free(idx); free(w);
  return 0;
}

extern "C" int bench_ep(const bench_ep_opts *o) {
  ws_comm *comm = NULL;
  int rank = 0, n = 1;
  cudaDeviceProp prop;
  if (bench_comm_open(&comm, &rank, &n, &prop) != 0) return -1;
  const int E = 256 % n ? 8 * n : 256;
  const int iters = o->profile ? EP_BENCH_PROFILE_ITERS : EP_BENCH_ITERS;
  if (rank == 0)
    printf("bench ep: %d rank(s) (EP%d), %s: ws_ep_dispatch + ws_ep_combine, FP8 rows, uniform top-8 routing, median "
           "of %d pairs\n", n, n, prop.name, iters);
  FILE *csv = NULL;
  if (o->csv && rank == 0) {
    csv = fopen(o->csv, "w");
    if (!csv) BENCH_FAIL("fopen", o->csv);
    fprintf(csv, "ranks,receive,rank,tokens,hidden,experts,topk,sms,dispatch_us,combine_us,nvlink_dispatch_GBs,"
            "nvlink_combine_GBs,logical_dispatch_GBs,logical_combine_GBs\n");
  }
  static const int all_tokens[] = {128, 512, 1024, 2048, 4096}, profile_tokens[] = {128, 4096};
  const int *tokens = o->tokens > 0 ? &o->tokens : o->profile ? profile_tokens : all_tokens;
  const int ntok = o->tokens > 0 ? 1
                   : o->profile  ? (int)(sizeof profile_tokens / sizeof profile_tokens[0])
                                 : (int)(sizeof all_tokens / sizeof all_tokens[0]);
  const int sms = o->sms > 0 ? o->sms : 0; /* 0: the library's default (ws_ep_config_sms) */
  int rc = 0;
  for (int r = 0; r < 2 && rc == 0; r++) {
    const ws_ep_receive receive = r ? WS_EP_RECEIVE_INDEX : WS_EP_RECEIVE_COPY;
    if (o->receive >= 0 && o->receive != (int)receive) continue;
    for (int i = 0; i < ntok && rc == 0; i++) rc = ep_case(comm, rank, n, 7168, E, 8, tokens[i], sms, receive, iters, o->trace, csv);
  }
  if (csv) fclose(csv);
  ws_comm_destroy(comm);
  return rc;
}
