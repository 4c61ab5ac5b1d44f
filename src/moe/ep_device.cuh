/* ep_device.cuh - device helpers the dispatch and combine kernels share. */
#ifndef WARPSPEC_EP_DEVICE_CUH
#define WARPSPEC_EP_DEVICE_CUH

#include "ep_internal.h"
#include "warpspec/device/warpspec.cuh"

/* Where a transfer wait happened: what, which peer, this rank, the CTA, the epoch. */
static __device__ __forceinline__ ws_site ep_site(const char *what, int edge, int peer, int rank, int block,
                                                  uint64_t step) {
  ws_site s = ws_site_pipe(what, edge, block, 0);
  s.peer = peer; s.rank = rank; s.step = step;
  return s;
}

/* 1 in the last CTA of the grid to get here (counted in *counter, which that CTA resets
 * for the next launch), 0 in the others; every CTA's writes before it are visible to the
 * last one. `last` is a __shared__ int of the caller. */
static __device__ __forceinline__ int ep_last_cta(const ws_ctx *ctx, uint64_t *counter, int *last) {
  ws_role_sync(ctx);
  if (threadIdx.x == 0) {
    __threadfence();
    *last = atomicAdd((unsigned long long *)counter, 1ull) == (unsigned long long)gridDim.x - 1;
  }
  ws_role_sync(ctx);
  return *last;
}

/* Tell every rank p (thread p) that `value` is done: its copy of flags[rank] = value,
 * after a system fence (flags: a symmetric object; delta: ep_args.peer_delta). */
static __device__ __forceinline__ void ep_ack_peers(const uint64_t *flags, const int64_t *delta, int rank, int nranks,
                                                    uint64_t value) {
  if (threadIdx.x < (unsigned)nranks) {
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64((uint64_t *)((char *)flags + delta[threadIdx.x]) + rank, value);
  }
}

#endif
