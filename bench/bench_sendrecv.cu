/* bench_sendrecv.cu - `warpspec run -n 2 -- warpspec bench sendrecv`.
 *
 * One process per GPU; every rank sends to rank+1 and receives from rank-1 (with two
 * ranks: a bidirectional exchange). Same run, same buffers, per size:
 *   ws eager / ws graph          ws_sendrecv, tuned CTA count (and a CTA sweep)
 *   nccl eager / graph / reg     ncclSend+ncclRecv in one group; captured in a graph;
 *                                on ncclMemAlloc buffers registered with ncclCommRegister
 *   copy engine                  cudaMemcpyAsync into the peer's (symmetric) buffer
 * Every variant's output is checked on random data before it is timed. Time per
 * operation: CUDA events around K back-to-back operations (graphs: K captured
 * operations per replay), after warm-up and a barrier; latency is the max over ranks;
 * bandwidth is bytes per direction / latency. */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/comm.h"
#include "warpspec/sendrecv_geometry.h"
#include "warpspec/warpspec.h"

#include <cuda.h>
#include <nccl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* An NCCL call. */
#define NK(call)                                                                \
  do {                                                                          \
    ncclResult_t r_ = (call);                                                   \
    if (r_ != ncclSuccess) BENCH_FAIL(#call, ncclGetErrorString(r_));           \
  } while (0)

enum { V_WS, V_WS_GRAPH, V_WS_ZC, V_WS_ZC_CE, V_NCCL, V_NCCL_GRAPH, V_NCCL_REG, V_CE, NV };
static const char *vname[NV] = {"ws eager", "ws graph", "ws zero-copy", "ws zero-copy CE", "nccl eager", "nccl graph",
                                "nccl registered", "copy engine"};

typedef struct {
  ws_comm *ws;
  ncclComm_t nccl;
  int rank, nranks, right, left;
  uint8_t *sbuf, *rbuf;        /* cudaMalloc */
  uint8_t *sreg, *rreg;        /* ncclMemAlloc + registered */
  uint8_t *rsym, *peer_rsym;   /* symmetric receive buffer, and the right peer's, for the copy engine */
  float *d_val;
  unsigned long long *d_bad;
  cudaStream_t s;
  uint64_t seed;
} ctx;

static __device__ __host__ inline uint8_t pat(uint64_t seed, int rank, uint64_t i) {
  uint64_t x = seed ^ ((uint64_t)rank << 56) ^ (i >> 3);
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return (uint8_t)((x ^ (x >> 31)) >> (8 * (i & 7)));
}

__global__ void fill_k(uint8_t *p, uint64_t n, uint64_t seed, int rank) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = pat(seed, rank, i);
}

__global__ void check_k(const uint8_t *p, uint64_t n, uint64_t seed, int rank, unsigned long long *bad) {
  unsigned long long b = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    b += p[i] != pat(seed, rank, i);
  if (b) atomicAdd(bad, b);
}

/* One operation of variant v on n bytes (ctas for ws). */
static int op(ctx *c, int v, uint64_t n, int ctas) {
  switch (v) {
  case V_WS: case V_WS_GRAPH: {
    ws_sendrecv_opts o = {ctas, 0, 0};
    WK(ws_sendrecv(c->ws, c->sbuf, n, c->right, c->rbuf, n, c->left, &o, c->s));
    return 0;
  }
  case V_WS_ZC: case V_WS_ZC_CE: {
    ws_sendrecv_opts o = {ctas, 1, v == V_WS_ZC_CE ? 1 : -1};
    WK(ws_sendrecv(c->ws, c->sbuf, n, c->right, c->rsym, n, c->left, &o, c->s));
    return 0;
  }
  case V_NCCL: case V_NCCL_GRAPH: case V_NCCL_REG: {
    const int reg = v == V_NCCL_REG;
    NK(ncclGroupStart());
    NK(ncclSend(reg ? c->sreg : c->sbuf, n, ncclChar, c->right, c->nccl, c->s));
    NK(ncclRecv(reg ? c->rreg : c->rbuf, n, ncclChar, c->left, c->nccl, c->s));
    NK(ncclGroupEnd());
    return 0;
  }
  case V_CE:
    CK(cudaMemcpyAsync(c->peer_rsym, c->sbuf, n, cudaMemcpyDeviceToDevice, c->s));
    return 0;
  }
  return -1;
}

static uint8_t *out_buf(ctx *c, int v) { return v == V_NCCL_REG ? c->rreg : (v == V_CE || v == V_WS_ZC || v == V_WS_ZC_CE) ? c->rsym : c->rbuf; }
static uint8_t *in_buf(ctx *c, int v) { return v == V_NCCL_REG ? c->sreg : c->sbuf; }

static int barrier(ctx *c) {
  WK(ws_comm_barrier(c->ws, c->s));
  WK(ws_sync(c->s));
  return 0;
}

/* Check variant v at n bytes on fresh data: 0 ok, 1 wrong, -1 error. */
static int verify(ctx *c, int v, uint64_t n, int ctas) {
  if (n == 0) return 0;
  c->seed = c->seed * 6364136223846793005ull + 1442695040888963407ull;
  fill_k<<<264, 256, 0, c->s>>>(in_buf(c, v), n, c->seed, c->rank);
  CK(cudaMemsetAsync(out_buf(c, v), 0xCD, n, c->s));
  if (barrier(c)) return -1;
  if (op(c, v, n, ctas)) return -1;
  if (barrier(c)) return -1; /* the copy engine writes into the peer: wait for it too */
  CK(cudaMemsetAsync(c->d_bad, 0, sizeof(unsigned long long), c->s));
  check_k<<<264, 256, 0, c->s>>>(out_buf(c, v), n, c->seed, c->left, c->d_bad);
  unsigned long long bad = 0;
  WK(ws_sync(c->s));
  CK(cudaMemcpy(&bad, c->d_bad, sizeof bad, cudaMemcpyDeviceToHost));
  if (bad) fprintf(stderr, "rank %d: %s, %llu bytes, ctas %d: %llu wrong bytes\n", c->rank, vname[v], (unsigned long long)n,
                   ctas, bad);
  return bad ? 1 : 0;
}

static int iters_for(uint64_t n) { return n <= (64u << 10) ? 400 : n <= (8u << 20) ? 100 : n <= (128u << 20) ? 20 : 6; }

/* Microseconds per operation, max over ranks. */
static int time_op(ctx *c, int v, uint64_t n, int ctas, double *us) {
  const int k = iters_for(n);
  const int graph = v == V_WS_GRAPH || v == V_NCCL_GRAPH;
  cudaGraphExec_t ge = NULL;
  if (graph) {
    cudaGraph_t g;
    CK(cudaStreamBeginCapture(c->s, cudaStreamCaptureModeThreadLocal));
    for (int i = 0; i < k; i++)
      if (op(c, v, n, ctas)) return -1;
    CK(cudaStreamEndCapture(c->s, &g));
    CK(cudaGraphInstantiate(&ge, g, 0));
    CK(cudaGraphDestroy(g));
    CK(cudaGraphLaunch(ge, c->s)); /* warm-up */
  } else {
    for (int i = 0; i < 5; i++)
      if (op(c, v, n, ctas)) return -1;
  }
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  float best = 1e30f;
  for (int rep = 0; rep < 3; rep++) { /* best of 3 windows, each a mean over k operations */
    if (barrier(c)) return -1;
    CK(cudaEventRecord(a, c->s));
    if (graph) CK(cudaGraphLaunch(ge, c->s));
    else
      for (int i = 0; i < k; i++)
        if (op(c, v, n, ctas)) return -1;
    CK(cudaEventRecord(b, c->s));
    WK(ws_sync(c->s));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    if (ms < best) best = ms;
  }
  float mine = best * 1000.0f / k;
  CK(cudaMemcpy(c->d_val, &mine, sizeof mine, cudaMemcpyHostToDevice));
  NK(ncclAllReduce(c->d_val, c->d_val, 1, ncclFloat, ncclMax, c->nccl, c->s));
  WK(ws_sync(c->s));
  CK(cudaMemcpy(&mine, c->d_val, sizeof mine, cudaMemcpyDeviceToHost));
  *us = mine;
  if (ge) cudaGraphExecDestroy(ge);
  cudaEventDestroy(a);
  cudaEventDestroy(b);
  return 0;
}

static int setup(ctx *c, uint64_t max) {
  memset(c, 0, sizeof *c);
  setenv("NVSHMEM_SYMMETRIC_SIZE", "3G", 0); /* staging + a max-size buffer for the copy engine */
  WK(ws_comm_init_from_env(&c->ws));
  WK(ws_comm_rank(c->ws, &c->rank));
  WK(ws_comm_size(c->ws, &c->nranks));
  c->right = (c->rank + 1) % c->nranks;
  c->left = (c->rank + c->nranks - 1) % c->nranks;
  ncclUniqueId id;
  if (c->rank == 0) {
    NK(ncclGetUniqueId(&id));
    WK(ws_rendezvous_put(NULL, "nccl.id", &id, sizeof id));
  } else {
    WK(ws_rendezvous_get(NULL, "nccl.id", &id, sizeof id));
  }
  NK(ncclCommInitRank(&c->nccl, c->nranks, id, c->rank));
  if (c->rank == 0) WK(ws_rendezvous_cleanup(NULL, "nccl.id")); /* every rank is in: the id file can go */
  CK(cudaStreamCreateWithFlags(&c->s, cudaStreamNonBlocking));
  CK(cudaMalloc(&c->sbuf, max));
  CK(cudaMalloc(&c->rbuf, max));
  NK(ncclMemAlloc((void **)&c->sreg, max));
  NK(ncclMemAlloc((void **)&c->rreg, max));
  void *h1, *h2;
  NK(ncclCommRegister(c->nccl, c->sreg, max, &h1));
  NK(ncclCommRegister(c->nccl, c->rreg, max, &h2));
  WK(ws_comm_alloc(c->ws, max, (void **)&c->rsym));
  WK(ws_comm_peer_ptr(c->ws, c->rsym, c->right, (void **)&c->peer_rsym));
  CK(cudaMalloc(&c->d_val, sizeof(float)));
  CK(cudaMalloc(&c->d_bad, sizeof(unsigned long long)));
  c->seed = 0x1234567ull ^ (uint64_t)time(NULL);
  return 0;
}

extern "C" int bench_sendrecv(const bench_sr_opts *o) {
  if (ws_comm_available() != WS_OK) { fprintf(stderr, "bench sendrecv: %s\n", ws_last_error()); return -1; }
  ctx c;
  const uint64_t max = o->max_bytes;
  if (setup(&c, max)) return -1;
  if (o->nccl_probe) {
    /* NCCL's grid per size, read from the kernel node of a captured exchange (no profiler:
     * Nsight Compute cannot replay a kernel that waits for another process). */
    typedef CUresult (*get_params_fn)(CUgraphNode, CUDA_KERNEL_NODE_PARAMS *);
    get_params_fn get_params = NULL;
    cudaDriverEntryPointQueryResult found;
    CK(cudaGetDriverEntryPointByVersion("cuGraphKernelNodeGetParams", (void **)&get_params, 12000, cudaEnableDefault,
                                        &found));
    if (found != cudaDriverEntryPointSuccess || !get_params) BENCH_FAIL("cuGraphKernelNodeGetParams", "not found");
    if (c.rank == 0) printf("bytes,nccl_ctas,nccl_threads\n");
    for (uint64_t n = 32; n <= max; n *= 4) {
      if (op(&c, V_NCCL, n, 0)) return -1; /* connections are set up outside the capture */
      WK(ws_sync(c.s));
      cudaGraph_t g;
      CK(cudaStreamBeginCapture(c.s, cudaStreamCaptureModeThreadLocal));
      if (op(&c, V_NCCL, n, 0)) return -1;
      CK(cudaStreamEndCapture(c.s, &g));
      size_t count = 0;
      CK(cudaGraphGetNodes(g, NULL, &count));
      cudaGraphNode_t nodes[64];
      if (count > 64) count = 64;
      CK(cudaGraphGetNodes(g, nodes, &count));
      unsigned ctas = 0, threads = 0;
      for (size_t i = 0; i < count; i++) {
        cudaGraphNodeType t;
        CK(cudaGraphNodeGetType(nodes[i], &t));
        if (t != cudaGraphNodeTypeKernel) continue;
        /* the driver's call: the runtime's cannot name a kernel NCCL loaded itself */
        CUDA_KERNEL_NODE_PARAMS kp;
        if (get_params(nodes[i], &kp) != CUDA_SUCCESS) BENCH_FAIL("cuGraphKernelNodeGetParams", "failed");
        ctas = kp.gridDimX * kp.gridDimY * kp.gridDimZ;
        threads = kp.blockDimX;
      }
      if (c.rank == 0) printf("%llu,%u,%u\n", (unsigned long long)n, ctas, threads);
      CK(cudaGraphDestroy(g));
    }
    ncclCommDestroy(c.nccl);
    WK(ws_comm_destroy(c.ws));
    return 0;
  }
  /* the same seed on every rank, so each can check what the other sent */
  if (c.rank == 0) WK(ws_rendezvous_put(NULL, "bench.seed", &c.seed, sizeof c.seed));
  else WK(ws_rendezvous_get(NULL, "bench.seed", &c.seed, sizeof c.seed));
  FILE *csv = (c.rank == 0 && o->csv) ? fopen(o->csv, "w") : NULL;
  if (csv) fprintf(csv, "bytes,variant,ctas,us,gbps_per_direction\n");
  if (c.rank == 0) {
    ws_device_limits lim;
    ws_device_limits_query(0, &lim);
    int nv = 0;
    ncclGetVersion(&nv);
    printf("bench sendrecv: %d ranks, %s, NCCL %d, one process per GPU, bidirectional (send to rank+1, receive from "
           "rank-1); us = max over ranks; GB/s per direction\n", c.nranks, lim.name, nv);
    printf("%10s %9s %9s %9s %9s %9s %10s %10s %9s | %8s %5s %8s %8s\n", "bytes", "ws eager", "ws graph", "ws best",
           "ws zc st", "ws zc CE", "nccl eager", "nccl graph", "nccl reg", "CE", "ctas", "ws/nccl", "GB/s ws");
  }
  const int sweep_ctas[] = {1, 2, 4, 8, 16, 32, 48, 64};
  int failures = 0;
  const uint64_t sizes[] = {32, 256, 1 << 10, 4 << 10, 16 << 10, 64 << 10, 256 << 10, 512 << 10, 1 << 20, 2 << 20,
                            8 << 20, 32 << 20, 128 << 20, 512 << 20, 1ull << 30};
  for (unsigned si = 0; si < sizeof sizes / sizeof sizes[0] && sizes[si] <= max; si++) {
    const uint64_t n = sizes[si];
    double us[NV] = {0};
    for (int v = 0; v < NV; v++) {
      if ((v == V_CE || v == V_WS_ZC_CE) && n < 4096) continue;
      const int r = verify(&c, v, n, 0);
      if (r < 0) return -1;
      failures += r;
      if (time_op(&c, v, n, 0, &us[v])) return -1;
      if (csv) fprintf(csv, "%llu,%s,%d,%.3f,%.2f\n", (unsigned long long)n, vname[v], 0, us[v], n / us[v] / 1e3);
    }
    /* CTA sweep of the eager kernel: the best count for this size */
    double best = us[V_WS];
    int best_ctas = (int)ws_sr_default_blocks(n);
    for (unsigned i = 0; i < sizeof sweep_ctas / sizeof sweep_ctas[0]; i++) {
      const int k = sweep_ctas[i];
      if (n < (uint64_t)k * 1024 && k > 1) continue;
      const int r = verify(&c, V_WS, n, k);
      if (r < 0) return -1;
      failures += r;
      double t;
      if (time_op(&c, V_WS, n, k, &t)) return -1;
      if (csv) fprintf(csv, "%llu,ws eager ctas,%d,%.3f,%.2f\n", (unsigned long long)n, k, t, n / t / 1e3);
      if (t < best) { best = t; best_ctas = k; }
    }
    if (c.rank == 0) {
      double nccl_best = us[V_NCCL];
      if (us[V_NCCL_GRAPH] < nccl_best) nccl_best = us[V_NCCL_GRAPH];
      if (us[V_NCCL_REG] < nccl_best) nccl_best = us[V_NCCL_REG];
      double ws_best = best < us[V_WS_GRAPH] ? best : us[V_WS_GRAPH];
      if (us[V_WS_ZC] < ws_best) ws_best = us[V_WS_ZC];
      if (us[V_WS_ZC_CE] > 0 && us[V_WS_ZC_CE] < ws_best) ws_best = us[V_WS_ZC_CE];
      printf("%10llu %9.2f %9.2f %9.2f %9.2f %9.2f %10.2f %10.2f %9.2f | %8.2f %5d %7.2fx %8.1f\n", (unsigned long long)n,
             us[V_WS], us[V_WS_GRAPH], best, us[V_WS_ZC], us[V_WS_ZC_CE], us[V_NCCL], us[V_NCCL_GRAPH], us[V_NCCL_REG],
             us[V_CE], best_ctas, nccl_best / ws_best, n / ws_best / 1e3);
      fflush(stdout);
    }
  }
  if (csv) fclose(csv);
  if (failures) fprintf(stderr, "rank %d: %d variant checks FAILED\n", c.rank, failures);
  ncclCommDestroy(c.nccl);
  WK(ws_comm_free(c.ws, c.rsym));
  WK(ws_comm_destroy(c.ws));
  return failures ? -1 : 0;
}

/* ---- ring all-gather against ncclAllGather (any number of ranks) -------------------- */
__global__ void check_gather_k(const uint8_t *p, uint64_t n, int nranks, uint64_t seed, unsigned long long *bad) {
  unsigned long long b = 0;
  const uint64_t total = n * (uint64_t)nranks;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < total; i += (uint64_t)gridDim.x * blockDim.x)
    b += p[i] != pat(seed, (int)(i / n), i % n);
  if (b) atomicAdd(bad, b);
}

/* The all-gather variants, each into its own receive buffer: ws and NCCL into plain
 * cudaMalloc memory; ws into a symmetric buffer (ws_comm_alloc: its zero-copy path from
 * WARPSPEC_AG_ZC_MIN_BYTES); NCCL from and into buffers registered with it (ncclMemAlloc +
 * ncclCommRegister: its zero-copy counterpart). */
enum { AG_WS, AG_NCCL, AG_WS_SYM, AG_NCCL_REG, AG_VARIANTS };
static const char *const ag_names[AG_VARIANTS] = {"ws", "nccl", "ws_sym", "nccl_reg"};
static uint8_t *ag_in(ctx *c, int v) { return v == AG_NCCL_REG ? c->sreg : c->sbuf; }
static uint8_t *ag_out(ctx *c, int v) { return v == AG_WS_SYM ? c->rsym : v == AG_NCCL_REG ? c->rreg : c->rbuf; }

static int gather_op(ctx *c, int v, uint64_t n) {
  if (v == AG_NCCL || v == AG_NCCL_REG) NK(ncclAllGather(ag_in(c, v), ag_out(c, v), n, ncclChar, c->nccl, c->s));
  else WK(ws_allgather(c->ws, ag_in(c, v), n, ag_out(c, v), c->s));
  return 0;
}

extern "C" int bench_allgather(const bench_sr_opts *o) {
  if (ws_comm_available() != WS_OK) { fprintf(stderr, "bench allgather: %s\n", ws_last_error()); return -1; }
  ctx c;
  if (setup(&c, o->max_bytes)) return -1;
  if (c.rank == 0) WK(ws_rendezvous_put(NULL, "bench.seed", &c.seed, sizeof c.seed));
  else WK(ws_rendezvous_get(NULL, "bench.seed", &c.seed, sizeof c.seed));
  FILE *csv = (c.rank == 0 && o->csv) ? fopen(o->csv, "w") : NULL;
  if (csv) fprintf(csv, "bytes_per_rank,variant,us,algbw_gbps\n");
  if (c.rank == 0)
    printf("bench allgather: %d ranks, bytes per rank; us = max over ranks; ws_sym: recvbuf from ws_comm_alloc, "
           "nccl_reg: buffers registered with NCCL; ratio: NCCL's faster over ours\n"
           "%12s %7s %10s %10s %10s %10s %9s %9s\n", c.nranks, "bytes/rank", "path", "ws", "ws_sym", "nccl", "nccl_reg",
           "ws/nccl", "best");
  int failures = 0;
  for (uint64_t n = 32; n * (uint64_t)c.nranks <= o->max_bytes; n *= 4) {
    double us[AG_VARIANTS];
    /* ws_allgather's choice (allgather.c): every block at once on 2-8 ranks up to
     * WARPSPEC_AG_DIRECT_MAX_BYTES (default WS_AG_DIRECT_MAX_BYTES), else the ring */
    const char *env = getenv(WS_AG_DIRECT_MAX_BYTES_ENV);
    const unsigned long long direct_max = env && *env ? strtoull(env, NULL, 10) : WS_AG_DIRECT_MAX_BYTES;
    const char *path = c.nranks > 1 && c.nranks - 1 <= WS_SR_MAX_PAIRS && n <= direct_max ? "direct" : "ring";
    for (int v = 0; v < AG_VARIANTS; v++) {
      fill_k<<<264, 256, 0, c.s>>>(ag_in(&c, v), n, c.seed, c.rank);
      CK(cudaMemsetAsync(ag_out(&c, v), 0xCD, n * c.nranks, c.s));
      if (barrier(&c) || gather_op(&c, v, n)) return -1;
      CK(cudaMemsetAsync(c.d_bad, 0, sizeof(unsigned long long), c.s));
      check_gather_k<<<264, 256, 0, c.s>>>(ag_out(&c, v), n, c.nranks, c.seed, c.d_bad);
      unsigned long long bad = 0;
      WK(ws_sync(c.s));
      CK(cudaMemcpy(&bad, c.d_bad, sizeof bad, cudaMemcpyDeviceToHost));
      if (bad) { fprintf(stderr, "rank %d: %s all-gather %llu B/rank: %llu wrong bytes\n", c.rank, ag_names[v],
                         (unsigned long long)n, bad); failures++; }
      const int k = iters_for(n * c.nranks);
      cudaEvent_t a, b;
      CK(cudaEventCreate(&a));
      CK(cudaEventCreate(&b));
      for (int i = 0; i < 3; i++)
        if (gather_op(&c, v, n)) return -1;
      if (barrier(&c)) return -1;
      CK(cudaEventRecord(a, c.s));
      for (int i = 0; i < k; i++)
        if (gather_op(&c, v, n)) return -1;
      CK(cudaEventRecord(b, c.s));
      WK(ws_sync(c.s));
      float ms;
      CK(cudaEventElapsedTime(&ms, a, b));
      float mine = ms * 1000.0f / k;
      CK(cudaMemcpy(c.d_val, &mine, sizeof mine, cudaMemcpyHostToDevice));
      NK(ncclAllReduce(c.d_val, c.d_val, 1, ncclFloat, ncclMax, c.nccl, c.s));
      WK(ws_sync(c.s));
      CK(cudaMemcpy(&mine, c.d_val, sizeof mine, cudaMemcpyDeviceToHost));
      us[v] = mine;
      cudaEventDestroy(a);
      cudaEventDestroy(b);
      if (csv) fprintf(csv, "%llu,%s,%.3f,%.2f\n", (unsigned long long)n, v == AG_WS ? path : ag_names[v], us[v],
                       (double)n * c.nranks / us[v] / 1e3);
    }
    const double ws_best = us[AG_WS] < us[AG_WS_SYM] ? us[AG_WS] : us[AG_WS_SYM];
    const double nccl_best = us[AG_NCCL] < us[AG_NCCL_REG] ? us[AG_NCCL] : us[AG_NCCL_REG];
    if (c.rank == 0)
      printf("%12llu %7s %10.2f %10.2f %10.2f %10.2f %8.2fx %8.2fx\n", (unsigned long long)n, path, us[AG_WS],
             us[AG_WS_SYM], us[AG_NCCL], us[AG_NCCL_REG], us[AG_NCCL] / us[AG_WS], nccl_best / ws_best);
  }
  if (csv) fclose(csv);
  ncclCommDestroy(c.nccl);
  WK(ws_comm_free(c.ws, c.rsym));
  WK(ws_comm_destroy(c.ws));
  return failures ? -1 : 0;
}
