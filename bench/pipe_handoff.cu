/* pipe_handoff.cu - how long a pipe takes to hand one item from writer to reader.
 *
 * One CTA, a writer role and a reader role of equal size; the writer stores the
 * iteration number in the slot and commits, the reader checks it and releases. With
 * one stage every item is a full round trip (commit -> wait -> release -> acquire);
 * with more stages the writer runs ahead and the figure is the hand-off throughput. */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/plan.h"

#include <stdio.h>
#include <stdlib.h>

typedef struct __align__(16) { uint32_t value[4]; } handoff_slot;
WS_PIPE_STORAGE(handoff_pipe, handoff_slot, 8);

#define HANDOFF1_ROLES(ROLE) ROLE(H1_WRITER, 1, WS_REGS_ENTRY, 1) ROLE(H1_READER, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(handoff1, HANDOFF1_ROLES);
#define HANDOFF4_ROLES(ROLE) ROLE(H4_WRITER, 4, WS_REGS_ENTRY, 1) ROLE(H4_READER, 4, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(handoff4, HANDOFF4_ROLES);

static __device__ __forceinline__ void handoff_body(const ws_ctx *c, int is_writer, uint32_t role_threads,
                                                    uint32_t stages, uint32_t fenced, uint32_t items,
                                                    unsigned long long *ns, int *errors) {
  __shared__ handoff_pipe st;
  ws_pipe p = WS_PIPE_VIEW_N(&st, "handoff", role_threads, role_threads, stages);
  if (!fenced) ws_pipe_set_proxies(&p, WS_PROXY_GENERIC, WS_PROXY_GENERIC);
  if (threadIdx.x == 0) ws_pipe_init(&p);
  ws_init_sync();
  const uint64_t t0 = ws_globaltimer();
  ws_cursor k = {0, 0};
  int bad = 0;
  for (uint32_t i = 0; i < items; i++, k = ws_cursor_next(k, stages)) {
    if (is_writer) {
      const uint32_t s = ws_pipe_acquire_at(&p, c, k);
      if (ws_role_leader(c)) st.slot[s].value[0] = i;
      ws_pipe_commit_at(&p, c, k);
    } else {
      ws_pipe_wait_at(&p, c, k);
      bad += st.slot[k.stage].value[0] != i;
      ws_pipe_release_at(&p, c, k);
    }
  }
  if (!is_writer && ws_role_leader(c)) {
    *ns = ws_globaltimer() - t0;
    *errors = bad;
  }
}

WS_KERNEL(handoff1) handoff1_kernel(uint32_t stages, uint32_t fenced, uint32_t items, unsigned long long *ns, int *errors,
                                    ws_diag d) {
  ws_ctx c = WS_SELF(handoff1, d);
  handoff_body(&c, c.role == H1_WRITER, WS_ROLE_THREADS(handoff1, H1_WRITER), stages, fenced, items, ns, errors);
}

WS_KERNEL(handoff4) handoff4_kernel(uint32_t stages, uint32_t fenced, uint32_t items, unsigned long long *ns, int *errors,
                                    ws_diag d) {
  ws_ctx c = WS_SELF(handoff4, d);
  handoff_body(&c, c.role == H4_WRITER, WS_ROLE_THREADS(handoff4, H4_WRITER), stages, fenced, items, ns, errors);
}

extern "C" int bench_pipe_handoff(int stages, int role_warps, int fenced, int items, int reps, double *ns_per_item,
                                  int *errors) {
  if (stages < 1 || stages > 8 || reps < 1 || reps > 64 || items < 1) return -1;
  ws_plan plan;
  const int four = role_warps == 4;
  if (ws_plan_init(&plan, four ? "handoff4" : "handoff1", four ? handoff4_roles : handoff1_roles, 2, 0) != WS_OK) return -1;
  unsigned long long *ns = NULL;
  int *err = NULL;
  if (cudaMalloc(&ns, sizeof *ns) != cudaSuccess || cudaMalloc(&err, sizeof *err) != cudaSuccess) return -1;
  ws_diag d;
  if (ws_diag_get(&d) != WS_OK) return -1;
  float t[64];
  int total_err = 0, rc = 0;
  uint32_t st = (uint32_t)stages, f = (uint32_t)(fenced != 0), n = (uint32_t)items;
  void *args[] = {&st, &f, &n, &ns, &err, &d};
  for (int r = 0; r < reps && rc == 0; r++) {
    unsigned long long h_ns = 0;
    int h_err = 0;
    if (ws_plan_launch(&plan, four ? (const void *)handoff4_kernel : (const void *)handoff1_kernel, dim3{1, 1, 1}, 0, args) != WS_OK ||
        ws_sync(0) != WS_OK || cudaMemcpy(&h_ns, ns, sizeof h_ns, cudaMemcpyDeviceToHost) != cudaSuccess ||
        cudaMemcpy(&h_err, err, sizeof h_err, cudaMemcpyDeviceToHost) != cudaSuccess) {
      fprintf(stderr, "handoff: %s\n", ws_last_error());
      rc = -1;
    }
    t[r] = (float)((double)h_ns / items);
    total_err += h_err;
  }
  cudaFree(ns);
  cudaFree(err);
  if (rc) return rc;
  *ns_per_item = bench_median(t, reps);
  *errors = total_err;
  return 0;
}
