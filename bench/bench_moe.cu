/* bench_moe.cu - `warpspec bench moe`: the whole MoE layer (ws_moe_layer_forward) per
 * rank under `warpspec run -n N` (N = 1: EP1 on one GPU), at the issue's two shapes
 * (DeepSeek-V3: H 7168, I 2048, 256 experts, top-8; the Flash shape: H 4096, I 2048, 256
 * experts, top-6) and 1 .. 8192 tokens per rank, with the time split of the stages.
 *
 * Weights are random BF16 quantised by ws_fp8_quantize_128x128 (realistic scales, never
 * zeros), x random BF16 quantised 1 x 128, routing uniform over distinct experts with
 * random weights. The layer time: 10 calls back to back (median of 5 runs); the split
 * of the stages: medians of 10 single calls after 3 warm-ups, a communicator barrier
 * before each; TFLOPS = 2 x (token, expert) pairs received x H x I x 3 / t (the layer's
 * FLOPs: L1 is 2 I x H, L2 H x I). The three paths of the layer in the same run, on the
 * same data: unfused (dispatch, L1 ws_gemm, SwiGLU pass, L2 ws_gemm, combine), fused
 * experts (one persistent kernel between dispatch and combine) and fused layer (the
 * whole layer, dispatch and combine included, in one persistent kernel per rank), and
 * the fused experts kernel in CTA pairs ("pairs", layer_kernel.cu); their outputs are
 * compared bit for bit. The NCCL + cuBLASLt composite is `warpspec bench
 * moe-layer` (python/warpspec/bench_moe_layer.py). */
#include "../testdata/random.h"
#include "bench.h"
#include "bench_check.h"
#include "warpspec/comm.h"
#include "warpspec/fp8.h"
#include "warpspec/moe.h"
#include "warpspec/moe_layer.h"
#include "warpspec/warpspec.h"

#include <cuda_bf16.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

__global__ void moe_fill_bf16(uint16_t *p, size_t n, uint64_t seed, float amp) {
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    uint64_t x = (seed + i) * 0x9E3779B97F4A7C15ull;
    x ^= x >> 29;
    x *= 0xBF58476D1CE4E5B9ull;
    x ^= x >> 32;
    const float v = amp * ((float)((x >> 40) & 0xFFFF) / 32768.0f - 1.0f);
    const __nv_bfloat16 b = __float2bfloat16(v);
    p[i] = *(const uint16_t *)&b;
  }
}

/* Reads n 16-byte words once (the weights' way: each byte from DRAM once); the sum only
 * keeps the loads alive. */
__global__ void moe_read_stream(const uint4 *p, size_t n, unsigned *sink) {
  unsigned acc = 0;
  for (size_t i = blockIdx.x * (size_t)blockDim.x + threadIdx.x; i < n; i += (size_t)gridDim.x * blockDim.x) {
    const uint4 v = __ldcs(p + i);
    acc ^= v.x ^ v.y ^ v.z ^ v.w;
  }
  if (acc == 0x9E3779B9u) *sink = acc;
}

/* The device's read bandwidth in bytes per second over `bytes` of `buf` (median of 5). */
static double bench_read_bandwidth(const void *buf, size_t bytes, int sms) {
  unsigned *sink;
  CK(cudaMalloc((void **)&sink, 4));
  cudaEvent_t e0, e1;
  CK(cudaEventCreate(&e0));
  CK(cudaEventCreate(&e1));
  float t[5];
  for (int r = -1; r < 5; r++) {
    CK(cudaEventRecord(e0, 0));
    moe_read_stream<<<4 * sms, 512>>>((const uint4 *)buf, bytes / 16, sink);
    CK(cudaEventRecord(e1, 0));
    CK(cudaEventSynchronize(e1));
    if (r >= 0) CK(cudaEventElapsedTime(&t[r], e0, e1));
  }
  const float ms = bench_median(t, 5);
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  cudaFree(sink);
  return (double)bytes / (ms * 1e-3);
}

typedef struct {
  const char *name;
  int hidden, inter, experts, topk;
} moe_shape;

/* ", NVLink X GB/s" (several ranks): a static buffer, used once per printf */
static const char *link_note(double gbs) {
  static char buf[48];
  snprintf(buf, sizeof buf, ", NVLink %.1f GB/s", gbs);
  return buf;
}

static int bench_shape(ws_comm *comm, int rank, int n, const moe_shape *sh, const int *tokens, int ntok, FILE *csv,
                       const bench_moe_opts *o) {
  const int H = sh->hidden, I = sh->inter, E = sh->experts, K = sh->topk, L = E / n;
  int tmax = 0;
  for (int i = 0; i < ntok; i++) tmax = tokens[i] > tmax ? tokens[i] : tmax;
  /* weights of this rank's experts, quantised per expert from random BF16 */
  uint8_t *w1, *w2;
  float *w1s, *w2s;
  uint16_t *tmp;
  const size_t n1 = (size_t)2 * I * H, n2 = (size_t)H * I;
  CK(cudaMalloc((void **)&w1, (size_t)L * n1));
  CK(cudaMalloc((void **)&w2, (size_t)L * n2));
  CK(cudaMalloc((void **)&w1s, (size_t)L * (2 * I / 128) * (H / 128) * 4));
  CK(cudaMalloc((void **)&w2s, (size_t)L * (H / 128) * (I / 128) * 4));
  CK(cudaMalloc((void **)&tmp, n1 * 2));
  for (int e = 0; e < L; e++) {
    moe_fill_bf16<<<1024, 256>>>(tmp, n1, 0xA100u + (uint64_t)(rank * L + e) * 7919u, 0.05f);
    WK(ws_fp8_quantize_128x128(tmp, (size_t)2 * I, (size_t)H, (size_t)H, w1 + (size_t)e * n1,
                                w1s + (size_t)e * (2 * I / 128) * (H / 128), 0));
    moe_fill_bf16<<<1024, 256>>>(tmp, n2, 0xB200u + (uint64_t)(rank * L + e) * 7919u, 0.05f);
    WK(ws_fp8_quantize_128x128(tmp, (size_t)H, (size_t)I, (size_t)I, w2 + (size_t)e * n2,
                                w2s + (size_t)e * (H / 128) * (I / 128), 0));
  }
  CK(cudaGetLastError());
  cudaFree(tmp);
  /* input, routing */
  uint16_t *x, *out;
  uint8_t *xq;
  float *xs, *w;
  int *idx;
  CK(cudaMalloc((void **)&x, (size_t)tmax * H * 2));
  CK(cudaMalloc((void **)&out, (size_t)tmax * H * 2));
  CK(cudaMalloc((void **)&xq, (size_t)tmax * H));
  CK(cudaMalloc((void **)&xs, (size_t)tmax * (H / 128) * 4));
  CK(cudaMalloc((void **)&idx, (size_t)tmax * K * 4));
  CK(cudaMalloc((void **)&w, (size_t)tmax * K * 4));
  moe_fill_bf16<<<1024, 256>>>(x, (size_t)tmax * H, 0xC300u + (uint64_t)rank, 2.0f);
  CK(cudaGetLastError());
  WK(ws_fp8_quantize_1x128(x, (size_t)tmax, (size_t)H, (size_t)H, xq, xs, 0));
  int *hidx = (int *)malloc((size_t)tmax * K * sizeof(int));
  float *hw = (float *)malloc((size_t)tmax * K * sizeof(float));
  if (!hidx || !hw) BENCH_FAIL("malloc", "routing");
  uint64_t st = TD_RNG_START ^ (uint64_t)(rank + 1) * 0x9E3779B97F4A7C15ull;
  for (int t = 0; t < tmax; t++)
    for (int k = 0; k < K; k++) {
      const int e = td_draw_distinct(&st, hidx + (size_t)t * K, k, E); /* distinct experts per token */
      hidx[(size_t)t * K + k] = e;
      hw[(size_t)t * K + k] = (float)((st >> 40) & 0xFFFF) / 65536.0f;
    }
  /* the floor: the weights of the local experts the call touches, read once at the
   * device's read bandwidth (measured here on the weights themselves). One rank: the
   * experts its tokens pick; several: the expected count under uniform routing. */
  int sms = 0;
  CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
  const double read_bw = bench_read_bandwidth(w1, (size_t)L * n1, sms);
  const double expert_bytes = 3.0 * H * I + ((2.0 * I / 128) * (H / 128) + (H / 128) * (I / 128)) * 4;
  double *touched = (double *)malloc((size_t)ntok * sizeof(double));
  double *remote = (double *)calloc((size_t)ntok, sizeof(double)); /* (token, other rank) pairs */
  unsigned char *hit = (unsigned char *)calloc((size_t)E, 1);
  if (!touched || !remote || !hit) BENCH_FAIL("malloc", "floor");
  /* NVLink payload of this rank's tokens: each goes once to every other rank that hosts one
   * of its experts (FP8 row and its 1 x 128 scales), and that rank's weighted sum of them
   * comes back (a BF16 row) */
  for (int i = 0; i < ntok && n > 1; i++)
    for (int t = 0; t < tokens[i]; t++) {
      uint64_t ranks = 0;
      for (int k = 0; k < K; k++) {
        const int e = hidx[(size_t)t * K + k];
        if (e >= 0 && e / L != rank) ranks |= 1ull << (e / L);
      }
      remote[i] += __builtin_popcountll(ranks);
    }
  const double pair_bytes = H + H / 128 * 4.0 + 2.0 * H;
  for (int i = 0; i < ntok; i++) {
    if (n == 1) {
      memset(hit, 0, (size_t)E);
      int c = 0;
      for (size_t j = 0; j < (size_t)tokens[i] * K; j++) c += !hit[hidx[j]], hit[hidx[j]] = 1;
      touched[i] = c;
    } else {
      touched[i] = L * (1.0 - pow(1.0 - (double)K / E, (double)tokens[i] * n));
    }
  }
  free(hit);
  if (rank == 0) printf("bench moe: %s, read bandwidth %.0f GB/s (the weights, once); floor = touched local experts x %.1f MB / that\n",
                        sh->name, read_bw / 1e9, expert_bytes / 1e6);
  CK(cudaMemcpy(idx, hidx, (size_t)tmax * K * 4, cudaMemcpyHostToDevice));
  CK(cudaMemcpy(w, hw, (size_t)tmax * K * 4, cudaMemcpyHostToDevice));
  free(hidx);
  free(hw);
  /* the three paths (unfused, the fused experts kernel between dispatch and combine, the
   * whole layer in one kernel) and the fused experts kernel in CTA pairs (WARPSPEC_MOE_PAIR
   * at create: 1 for "pairs", 0 for "fused") */
  static const char *const path_name[4] = {"unfused", "fused", "layer", "pairs"};
  static const ws_moe_path path_of[4] = {WS_MOE_UNFUSED, WS_MOE_FUSED_EXPERTS, WS_MOE_FUSED_LAYER, WS_MOE_FUSED_EXPERTS};
  const int np = 4;
  ws_moe_layer *layer[4] = {NULL, NULL, NULL, NULL};
  for (int p = 0; p < np; p++) {
    ws_moe_layer_config cfg = {H, I, E, K, tmax, o->sms, path_of[p]};
    if (bench_set_knob(WS_MOE_PAIR_ENV, p == 3 ? "1" : "0") != 0) return -1;
    WK(ws_moe_layer_create(&layer[p], comm, &cfg, w1, w1s, w2, w2s));
  }
  if (bench_set_knob(WS_MOE_PAIR_ENV, NULL) != 0) return -1;
  ws_moe_layer *auto_layer = NULL; /* only asked which path it would take */
  {
    ws_moe_layer_config cfg = {H, I, E, K, 1, o->sms, WS_MOE_AUTO};
    WK(ws_moe_layer_create(&auto_layer, comm, &cfg, w1, w1s, w2, w2s));
  }
  uint16_t *host_out[4];
  for (int p = 0; p < np; p++)
    if (!(host_out[p] = (uint16_t *)malloc((size_t)tmax * H * 2))) BENCH_FAIL("malloc", "outputs");
  for (int i = 0; i < ntok; i++) {
    const int T = tokens[i];
    float med[4], alone[4];
    ws_moe_path auto_path = WS_MOE_UNFUSED;
    WK(ws_moe_layer_path_for(auto_layer, T, &auto_path));
    for (int p = 0; p < np; p++) {
      float tot[10], part[10][5];
      for (int it = 0; it < 13; it++) {
        WK(ws_comm_barrier(comm, 0));
        float ms[5];
        WK(ws_moe_layer_profile(layer[p], xq, xs, idx, w, T, out, 0, ms));
        if (it < 3) continue;
        tot[it - 3] = ms[0] + ms[1] + ms[2] + ms[3] + ms[4];
        for (int j = 0; j < 5; j++) part[it - 3][j] = ms[j];
      }
      CK(cudaMemcpy(host_out[p], out, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
      /* medians of the 10 calls, the mean of the two middle ones */
      qsort(tot, 10, sizeof(float), bench_cmp_float_);
      alone[p] = 0.5f * (tot[4] + tot[5]);
      /* the layer time: calls back to back, as a model's layers run (the host ahead of the
       * GPU, each call's first kernel chained to the previous call's last): the median of
       * 5 runs of 10 calls. A single call with the GPU idle before it (the split above) also
       * counts the host's launch work of its first kernel. */
      {
        cudaEvent_t e0, e1;
        CK(cudaEventCreate(&e0));
        CK(cudaEventCreate(&e1));
        float runs[5];
        for (int r = 0; r < 5; r++) {
          WK(ws_comm_barrier(comm, 0));
          CK(cudaStreamSynchronize(0));
          CK(cudaEventRecord(e0, 0));
          for (int c = 0; c < 10; c++) WK(ws_moe_layer_forward(layer[p], xq, xs, idx, w, T, out, 0));
          CK(cudaEventRecord(e1, 0));
          CK(cudaEventSynchronize(e1));
          CK(cudaEventElapsedTime(&runs[r], e0, e1));
          runs[r] /= 10.0f;
        }
        med[p] = bench_median(runs, 5);
        cudaEventDestroy(e0);
        cudaEventDestroy(e1);
      }
      float split[5];
      for (int j = 0; j < 5; j++) {
        float v[10];
        for (int r = 0; r < 10; r++) v[r] = part[r][j];
        qsort(v, 10, sizeof(float), bench_cmp_float_);
        split[j] = 0.5f * (v[4] + v[5]);
      }
      /* (token, expert) pairs this rank computes: at EP1 all T x K; at EP n about T x K on average */
      const double pairs = (double)T * K;
      const double tflops = 2.0 * pairs * H * I * 3 / (med[p] * 1e-3) / 1e12;
      const double floor_us = touched[i] * expert_bytes / read_bw * 1e6;
      const double link_gbs = remote[i] * pair_bytes / (med[p] * 1e-3) / 1e9;
      if (p == 0)
        printf("bench moe rank %d: %-10s T %5d %-7s: layer %9.1f us %6.1f TFLOPS | alone %9.1f: dispatch %8.1f  L1 %8.1f  "
               "swiglu %7.1f  L2 %8.1f  combine %8.1f us%s\n", rank, sh->name, T, path_name[p], med[p] * 1e3, tflops,
               alone[p] * 1e3, split[0] * 1e3,
               split[1] * 1e3, split[2] * 1e3, split[3] * 1e3, split[4] * 1e3, n > 1 ? link_note(link_gbs) : "");
      else
        printf("bench moe rank %d: %-10s T %5d %-7s: layer %9.1f us %6.1f TFLOPS | alone %9.1f: dispatch %8.1f  experts "
               "%8.1f  combine %8.1f us | %.2fx unfused, floor %.1f us (%.0f%%), %s, auto: %s%s\n", rank, sh->name, T,
               path_name[p], med[p] * 1e3, tflops, alone[p] * 1e3, split[0] * 1e3, split[1] * 1e3, split[4] * 1e3,
               med[0] / med[p], floor_us, 100.0 * floor_us / (med[p] * 1e3),
               memcmp(host_out[0], host_out[p], (size_t)T * H * 2) ? "outputs DIFFER" : "same bits",
               path_name[auto_path == WS_MOE_UNFUSED ? 0 : auto_path == WS_MOE_FUSED_EXPERTS ? 1 : 2],
               n > 1 ? link_note(link_gbs) : "");
      fflush(stdout);
      if (csv && rank == 0)
        fprintf(csv, "%s,%s,%d,%d,%d,%d,%d,%d,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.1f,%.0f,%.1f\n", sh->name, path_name[p], n, H,
                I, E, K, T, med[p] * 1e3, tflops, split[0] * 1e3, split[1] * 1e3, split[2] * 1e3, split[3] * 1e3,
                split[4] * 1e3, alone[p] * 1e3, floor_us, read_bw / 1e9, link_gbs);
    }
    for (int p = 1; p < np; p++)
      if (memcmp(host_out[0], host_out[p], (size_t)T * H * 2) != 0) BENCH_FAIL(path_name[p], "output differs from the unfused path");
    if (o->trace) /* one more call of each fused path: rank 0's block trace_block records its roles' timeline */
      for (int p = 1; p < np; p++) {
        if (rank == 0) WK(ws_trace_start(o->trace_block < 0 ? WS_TRACE_ALL_BLOCKS : o->trace_block, (size_t)1 << 20));
        WK(ws_comm_barrier(comm, 0));
        WK(ws_moe_layer_forward(layer[p], xq, xs, idx, w, T, out, 0));
        if (rank == 0) {
          char path[512];
          size_t events = 0;
          snprintf(path, sizeof path, "%s.%s.%d.%s.csv", o->trace, sh->name, T, path_name[p]);
          WK(ws_trace_stop(path, &events));
          printf("bench moe: role timeline of block %d of the %s call, %zu events: %s "
                 "(python3 bench/plot_trace.py %s PNG)\n", o->trace_block, path_name[p], events, path, path);
        }
        CK(cudaDeviceSynchronize());
      }
  }
  free(touched);
  free(remote);
  WK(ws_moe_layer_destroy(auto_layer));
  for (int p = 0; p < np; p++) {
    WK(ws_moe_layer_destroy(layer[p]));
    free(host_out[p]);
  }
  cudaFree(w1); cudaFree(w2); cudaFree(w1s); cudaFree(w2s);
  cudaFree(x); cudaFree(out); cudaFree(xq); cudaFree(xs); cudaFree(idx); cudaFree(w);
  return 0;
}

extern "C" int bench_moe(const bench_moe_opts *o) {
  ws_comm *comm = NULL;
  int rank = 0, n = 1;
  cudaDeviceProp prop;
  if (bench_comm_open(&comm, &rank, &n, &prop) != 0) return -1;
  if (rank == 0) printf("bench moe: %d rank(s) (EP%d), %s, ws_moe_layer_forward, unfused, fused-experts and fused-layer paths\n", n, n, prop.name);
  static const moe_shape shapes[] = {{"DeepSeekV3", 7168, 2048, 256, 8}, {"Flash", 4096, 2048, 256, 6}};
  static const int all_tokens[] = {1, 8, 128, 512, 4096, 8192};
  FILE *csv = NULL;
  if (o->csv && rank == 0) {
    csv = fopen(o->csv, "w");
    if (!csv) BENCH_FAIL("fopen", o->csv);
    fprintf(csv, "shape,path,ranks,hidden,inter,experts,topk,tokens,layer_us,tflops,dispatch_us,l1_us,swiglu_us,l2_us,combine_us,alone_us,floor_us,read_gbs,nvlink_gbs\n");
  }
  int rc = 0;
  for (int s = 0; s < 2 && rc == 0; s++) {
    if (o->shape && strcmp(o->shape, shapes[s].name) != 0) continue;
    if (o->tokens > 0) rc = bench_shape(comm, rank, n, &shapes[s], &o->tokens, 1, csv, o);
    else rc = bench_shape(comm, rank, n, &shapes[s], all_tokens, o->quick ? 3 : 6, csv, o);
  }
  if (csv) fclose(csv);
  ws_comm_destroy(comm);
  return rc;
}
