/* bench_nvlink.cu - `warpspec bench nvlink`: what GPU 0 <-> GPU 1 can move, one
 * process driving both GPUs, 1 GiB per direction, best of 5:
 *   copy engine   cudaMemcpyPeerAsync
 *   SM push       16-byte loads of local memory, 16-byte stores to the peer
 *   SM pull       16-byte loads from the peer, stores to local memory
 *   TMA push      bulk copy global -> shared (local), bulk copy shared -> peer global
 * one way (GPU 0 -> 1) and both ways at once. These are the ceilings the sendrecv
 * kernel is measured against.
 *
 * With 3 or more GPUs also all-to-all: every GPU pushes 256 MiB into every other one at
 * once (copy engine, or SM stores with the GPU's CTAs split over its peers), reported as
 * what each GPU receives per second, N - 1 blocks over the slowest GPU's time. That is the
 * ceiling of an all-gather's large messages and of EP dispatch/combine on N ranks, where
 * every link into a GPU carries data at the same time. The GPUs' copies are queued one GPU
 * after another from this thread, so they start a few launches apart: the figure may read
 * a few percent high (a start gate per GPU would fix it). */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/device/ptx.cuh"

#include <stdio.h>


#define VEC 8

__global__ void __launch_bounds__(512, 1) sm_copy(uint4 *dst, const uint4 *src, uint64_t nvec) {
  const uint64_t t = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x, nt = (uint64_t)gridDim.x * blockDim.x;
  for (uint64_t base = 0; base < nvec; base += nt * VEC) {
    uint4 v[VEC];
#pragma unroll
    for (int u = 0; u < VEC; u++) {
      const uint64_t i = base + u * nt + t;
      if (i < nvec) v[u] = src[i];
    }
#pragma unroll
    for (int u = 0; u < VEC; u++) {
      const uint64_t i = base + u * nt + t;
      if (i < nvec) ws_st_global_v4(dst + i, v[u]);
    }
  }
}

#define TMA_CHUNK (32 * 1024)
#define TMA_STAGES 4

/* One thread per CTA drives the copy engine of its SM: load a chunk, store it on. */
__global__ void __launch_bounds__(32, 1) tma_copy(uint8_t *dst, const uint8_t *src, uint64_t bytes) {
  extern __shared__ __align__(128) uint8_t buf[];
  __shared__ uint64_t bar[TMA_STAGES];
  if (threadIdx.x != 0) return;
  for (int s = 0; s < TMA_STAGES; s++) ws_mbarrier_init(&bar[s], 1);
  ws_fence_mbarrier_init();
  const uint64_t chunks = bytes / TMA_CHUNK;
  uint32_t k = 0;
  for (uint64_t c = blockIdx.x; c < chunks; c += gridDim.x, k++) {
    const int s = (int)(k % TMA_STAGES);
    if (k >= TMA_STAGES) WS_CP_ASYNC_BULK_WAIT_GROUP_READ(TMA_STAGES - 1); /* slot s free again */
    uint8_t *slot = buf + (size_t)s * TMA_CHUNK;
    ws_mbarrier_arrive_expect_tx(&bar[s], TMA_CHUNK);
    ws_cp_async_bulk_global_to_shared(slot, src + c * TMA_CHUNK, TMA_CHUNK, &bar[s]);
    while (!ws_mbarrier_try_wait_parity(&bar[s], (k / TMA_STAGES) & 1)) {
    }
    ws_cp_async_bulk_shared_to_global(dst + c * TMA_CHUNK, slot, TMA_CHUNK);
    ws_cp_async_bulk_commit_group();
  }
  WS_CP_ASYNC_BULK_WAIT_GROUP(0);
}

enum { M_CE, M_SM_PUSH, M_SM_PULL, M_TMA_PUSH };

/* Launch direction d (0: GPU0 -> GPU1, 1: GPU1 -> GPU0) of method m on its stream. */
static int launch(int m, int d, int ctas, uint8_t *buf[2][2], uint64_t n, cudaStream_t st[2]) {
  const int from = d, to = 1 - d;
  uint8_t *src = buf[from][0], *dst = buf[to][1];
  if (m == M_CE) {
    CK(cudaMemcpyPeerAsync(dst, to, src, from, n, st[from]));
    return 0;
  }
  const int runner = m == M_SM_PULL ? to : from; /* pull: the receiver's SMs read */
  CK(cudaSetDevice(runner));
  if (m == M_TMA_PUSH) tma_copy<<<ctas, 32, TMA_STAGES * TMA_CHUNK, st[runner]>>>(dst, src, n);
  else sm_copy<<<ctas, 512, 0, st[runner]>>>((uint4 *)dst, (const uint4 *)src, n / 16);
  CK(cudaGetLastError());
  return 0;
}

/* One or both directions of method m, queued on both GPUs' streams (bench_gpus_best_ms). */
typedef struct {
  int m, both, ctas;
  uint8_t *(*buf)[2];
  uint64_t n;
  cudaStream_t *st;
} pair_job;

static int pair_launch(void *ctx) {
  const pair_job *j = (const pair_job *)ctx;
  if (launch(j->m, 0, j->ctas, j->buf, j->n, j->st)) return -1;
  return j->both ? launch(j->m, 1, j->ctas, j->buf, j->n, j->st) : 0;
}

static int measure(int m, int both, int ctas, uint8_t *buf[2][2], uint64_t n, cudaStream_t st[2], double *gbs) {
  pair_job j = {m, both, ctas, buf, n, st};
  double ms = 0;
  if (bench_gpus_best_ms(2, st, pair_launch, &j, &ms)) return -1;
  *gbs = n / (ms * 1e-3) / 1e9;
  return 0;
}

#define A2A_MAX BENCH_MAX_GPUS

/* All-to-all, method m (M_CE or M_SM_PUSH), `ctas` CTAs per GPU split over its peers:
 * GPU g's src into slot g of every other GPU's dst (n bytes each), each push on a stream
 * of its own, forked from and joined into the GPU's first stream, which bench_gpus_best_ms
 * times (the slowest GPU's time, best of 5 after a warm-up). */
typedef struct {
  int m, N, ctas;
  uint8_t **src, **dst;
  uint64_t n;
  cudaStream_t (*st)[A2A_MAX];
  cudaEvent_t *fork, (*done)[A2A_MAX];
} a2a_job;

static int a2a_launch(void *ctx) {
  const a2a_job *j = (const a2a_job *)ctx;
  const int N = j->N;
  for (int g = 0; g < N; g++) {
    CK(cudaSetDevice(g));
    CK(cudaEventRecord(j->fork[g], j->st[g][0]));
    for (int k = 1; k < N; k++) {
      const int p = (g + k) % N; /* GPU g's k-th peer, so that the first pushes go to different GPUs */
      cudaStream_t s = j->st[g][k];
      CK(cudaStreamWaitEvent(s, j->fork[g], 0));
      uint8_t *to = j->dst[p] + (size_t)g * j->n;
      if (j->m == M_CE) CK(cudaMemcpyPeerAsync(to, p, j->src[g], g, j->n, s));
      else sm_copy<<<j->ctas / (N - 1), 512, 0, s>>>((uint4 *)to, (const uint4 *)j->src[g], j->n / 16);
      CK(cudaGetLastError());
      CK(cudaEventRecord(j->done[g][k], s));
      CK(cudaStreamWaitEvent(j->st[g][0], j->done[g][k], 0));
    }
  }
  return 0;
}

static int measure_all(int m, int N, int ctas, uint8_t *src[], uint8_t *dst[], uint64_t n,
                       cudaStream_t st[][A2A_MAX], double *gbs) {
  cudaEvent_t fork[A2A_MAX], done[A2A_MAX][A2A_MAX];
  cudaStream_t base[A2A_MAX];
  for (int g = 0; g < N; g++) {
    CK(cudaSetDevice(g));
    CK(cudaEventCreateWithFlags(&fork[g], cudaEventDisableTiming));
    for (int p = 0; p < N; p++) CK(cudaEventCreateWithFlags(&done[g][p], cudaEventDisableTiming));
    base[g] = st[g][0];
  }
  a2a_job j = {m, N, ctas, src, dst, n, st, fork, done};
  double ms = 0;
  const int rc = bench_gpus_best_ms(N, base, a2a_launch, &j, &ms);
  for (int g = 0; g < N; g++) {
    CK(cudaSetDevice(g));
    CK(cudaEventDestroy(fork[g]));
    for (int p = 0; p < N; p++) CK(cudaEventDestroy(done[g][p]));
  }
  if (rc) return -1;
  *gbs = (double)(N - 1) * n / (ms * 1e-3) / 1e9;
  return 0;
}

static int bench_nvlink_all(int N) {
  const uint64_t n = 256ull << 20;
  uint8_t *src[A2A_MAX], *dst[A2A_MAX];
  cudaStream_t st[A2A_MAX][A2A_MAX];
  for (int g = 0; g < N; g++) {
    CK(cudaSetDevice(g));
    for (int p = 0; p < N; p++) {
      if (p == g) continue;
      cudaError_t e = cudaDeviceEnablePeerAccess(p, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
      (void)cudaGetLastError();
    }
    CK(cudaMalloc(&src[g], n));
    CK(cudaMalloc(&dst[g], (size_t)N * n));
    CK(cudaMemset(src[g], 0x5A + g, n));
    for (int k = 0; k < N; k++) CK(cudaStreamCreateWithFlags(&st[g][k], cudaStreamNonBlocking));
  }
  printf("bench nvlink: all-to-all over %d GPUs, 256 MiB from every GPU to every other at once,\n"
         "  GB/s into each GPU ((N - 1) x 256 MiB over the slowest GPU's time)\n", N);
  printf("  %-22s %6s %10s\n", "method", "CTAs", "into a GPU");
  double gbs = 0;
  if (measure_all(M_CE, N, 0, src, dst, n, st, &gbs)) return -1;
  printf("  %-22s %6d %10.1f\n", "copy engine", 0, gbs);
  const int ctas[] = {24, 48, 96, 132};
  for (int i = 0; i < 4; i++) {
    if (measure_all(M_SM_PUSH, N, ctas[i], src, dst, n, st, &gbs)) return -1;
    printf("  %-22s %6d %10.1f\n", "SM push (st.v4)", ctas[i] / (N - 1) * (N - 1), gbs);
  }
  for (int g = 0; g < N; g++) {
    CK(cudaSetDevice(g));
    CK(cudaFree(src[g]));
    CK(cudaFree(dst[g]));
    for (int k = 0; k < N; k++) CK(cudaStreamDestroy(st[g][k]));
  }
  return 0;
}

extern "C" int bench_nvlink(void) {
  int n_dev = 0;
  CK(cudaGetDeviceCount(&n_dev));
  if (n_dev < 2) { fprintf(stderr, "bench nvlink: needs 2 GPUs\n"); return -1; }
  const uint64_t n = 1ull << 30;
  uint8_t *buf[2][2];
  cudaStream_t st[2];
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    cudaError_t e = cudaDeviceEnablePeerAccess(1 - g, 0);
    if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
    (void)cudaGetLastError();
    CK(cudaMalloc(&buf[g][0], n));
    CK(cudaMalloc(&buf[g][1], n));
    CK(cudaMemset(buf[g][0], 0x5A + g, n));
    CK(cudaStreamCreateWithFlags(&st[g], cudaStreamNonBlocking));
    CK(cudaFuncSetAttribute(tma_copy, cudaFuncAttributeMaxDynamicSharedMemorySize, TMA_STAGES * TMA_CHUNK));
  }
  printf("bench nvlink: GPU 0 <-> GPU 1, 1 GiB, GB/s per direction (both ways: the slower direction)\n");
  printf("  %-22s %6s %10s %10s\n", "method", "CTAs", "one way", "both ways");
  const char *names[] = {"copy engine", "SM push (st.v4)", "SM pull (ld.v4)", "TMA push (bulk)"};
  const int ctas[] = {16, 32, 64, 132};
  for (int m = 0; m < 4; m++)
    for (int i = 0; i < (m == M_CE ? 1 : 4); i++) {
      double one = 0, two = 0;
      if (measure(m, 0, ctas[i], buf, n, st, &one) || measure(m, 1, ctas[i], buf, n, st, &two)) return -1;
      printf("  %-22s %6d %10.1f %10.1f\n", names[m], m == M_CE ? 0 : ctas[i], one, two);
    }
  for (int g = 0; g < 2; g++) {
    CK(cudaSetDevice(g));
    CK(cudaFree(buf[g][0]));
    CK(cudaFree(buf[g][1]));
    CK(cudaStreamDestroy(st[g]));
  }
  if (n_dev >= 3) return bench_nvlink_all(n_dev < A2A_MAX ? n_dev : A2A_MAX);
  return 0;
}
