/* internal.h - helpers shared by the library's own sources; not installed. */
#ifndef WARPSPEC_INTERNAL_H
#define WARPSPEC_INTERNAL_H

#include <cuda_runtime_api.h>

#include "warpspec/warpspec.h"

#define WS_VERSION_STRING "0.1.0"

#ifdef __cplusplus
extern "C" {
#endif

/* Record a message for ws_last_error() and return s. */
ws_status ws_fail(ws_status s, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
ws_status ws_fail_cuda(int err, const char *what);

/* Every later launch on the current device records its roles' timeline into buf (NULL:
 * none), for block `block` (trace.c). */
ws_status ws_diag_set_trace(struct ws_trace_buf *buf, int block);

/* SMs of the current device (persistent grids, split-K and split-KV choices use it). */
ws_status ws_device_sms(int *sms);
ws_status ws_device_l2_bytes(size_t *bytes); /* the current device's L2 */
/* A plain kernel (no role table: a second pass such as a split-K reduce or a split-KV
 * merge) chained to the previous kernel in the stream by programmatic dependent launch
 * unless WARPSPEC_PDL=0; the kernel calls ws_griddepcontrol_wait() before it reads what
 * that one wrote. */
ws_status ws_launch_chained(const void *func, dim3 grid, dim3 block, cudaStream_t stream, void **args);
/* ws_plan_launch with programmatic stream serialisation (plan.c says when). */
ws_status ws_plan_launch_chained(ws_plan *plan, const void *func, dim3 grid, cudaStream_t stream, void **args);
/* The same in clusters of `width` consecutive CTAs along x (1..8, dividing grid.x). */
ws_status ws_plan_launch_cluster_chained(ws_plan *plan, const void *func, dim3 grid, int width, cudaStream_t stream,
                                         void **args);
/* How many clusters of `width` CTAs of func fit on the current device at once with the
 * plan's threads and shared memory (cached for the last width asked). */
ws_status ws_plan_max_clusters(ws_plan *plan, const void *func, int width, int *clusters);

/* The library's own kernels, each with a slot in the per-thread plan cache. */
enum { WS_PLAN_SLOT_STREAM_TMA, WS_PLAN_SLOT_STREAM_THREADS, WS_PLAN_SLOT_GEMM_BF16, WS_PLAN_SLOT_GEMM_FP8, WS_PLAN_SLOT_GEMM_FP8_WIDE, WS_PLAN_SLOT_GEMM_FP8_GATHER,
       WS_PLAN_SLOT_GEMM_FP8_WIDE_PAIR, WS_PLAN_SLOT_GEMM_BF16_SKINNY16, WS_PLAN_SLOT_GEMM_BF16_SKINNY32,
       WS_PLAN_SLOT_GEMM_BF16_SKINNY64, WS_PLAN_SLOT_GEMM_FP8_SKINNY16, WS_PLAN_SLOT_GEMM_FP8_SKINNY32,
       WS_PLAN_SLOT_GEMM_FP8_SKINNY64, WS_PLAN_SLOT_GEMM_BF16_SKINNY128,
       WS_PLAN_SLOT_ATTN_64, WS_PLAN_SLOT_ATTN_128, WS_PLAN_SLOT_ATTN_192, WS_PLAN_SLOT_ATTN_64_PP, WS_PLAN_SLOT_ATTN_128_PP,
       WS_PLAN_SLOT_ATTN_192_PP, WS_PLAN_SLOT_ATTN_64_OV,
       WS_PLAN_SLOT_ATTN_128_OV, WS_PLAN_SLOT_ATTN_64_OVPP, WS_PLAN_SLOT_ATTN_128_OVPP, WS_PLAN_SLOT_ATTN_64_TALL, WS_PLAN_SLOT_ATTN_64_TALL_OWN, WS_PLAN_SLOT_ATTN_64_OWN, WS_PLAN_SLOT_ATTN_128_OWN, WS_PLAN_SLOT_MLA_SPARSE, WS_PLAN_SLOT_MLA_FP8, WS_PLAN_SLOT_MLA_SPLIT, WS_PLAN_SLOT_MLA_SPLIT_FP8,
       WS_PLAN_SLOT_MLA_ROWS, WS_PLAN_SLOT_MLA_ROWS_FP8, WS_PLAN_SLOT_MLA_FP8_F16, WS_PLAN_SLOT_MLA_SPLIT_FP8_F16,
       WS_PLAN_SLOT_MLA_ROWS_FP8_F16, WS_PLAN_SLOT_MLA_FEWHEADS, WS_PLAN_SLOT_MLA_FEWHEADS_FP8,
       WS_PLAN_SLOT_MLA_FEWHEADS32, WS_PLAN_SLOT_MLA_FEWHEADS32_FP8, WS_PLAN_SLOT_MLA_FEWROWS, WS_PLAN_SLOT_MLA_FEWROWS_FP8,
       WS_PLAN_SLOT_MLA_FEWROWS32, WS_PLAN_SLOT_MLA_FEWROWS32_FP8,
       WS_PLAN_SLOT_MOE_EXPERTS, WS_PLAN_SLOT_MOE_EXPERTS_WIDE,
       WS_PLAN_SLOT_MOE_EXPERTS_PAIR,
       WS_PLAN_SLOT_NSA_128, WS_PLAN_SLOT_NSA_192,
       WS_PLAN_SLOTS };
/* The plan of kernel `slot` on the current device: made by make(ctx, plan) the first
 * time this thread asks on this device, then reused (the plan remembers the kernel it
 * was checked against, so cudaFuncGetAttributes runs once, not on every call). */
ws_status ws_plan_cached(int slot, ws_status (*make)(const void *ctx, ws_plan *plan), const void *ctx, ws_plan **plan);

/* Host threads for the float64 references (parallel.c): the online CPUs, at most
 * WS_HOST_THREADS_MAX, or WARPSPEC_HOST_THREADS. */
int ws_host_workers(void);
/* body(ctx, item, worker) for every item in 0 .. n - 1 on up to `workers` threads (this
 * one among them; worker 0 .. workers - 1 indexes per-thread scratch), each taking the
 * next item from a shared counter; returns when all are done, with the number of threads
 * used. Items must be independent; their results then do not depend on the threads. */
int ws_parallel_for(int n, int workers, void (*body)(void *ctx, int item, int worker), void *ctx);

#ifdef __cplusplus
}
#endif

/* Evaluate a CUDA runtime call; on error return WS_ERR_CUDA (with a fault check). */
#define WS_CUDA_TRY(call)                                         \
  do {                                                            \
    cudaError_t ws_e_ = (call);                                   \
    if (ws_e_ != cudaSuccess) return ws_check_cuda(ws_e_, #call); \
  } while (0)

#define WS_REQUIRE(cond, ...)                                       \
  do {                                                              \
    if (!(cond)) return ws_fail(WS_ERR_INVALID, __VA_ARGS__);       \
  } while (0)

#endif
