/* warpspec/plan.h - check a role plan against the hardware before any launch.
 *
 * ws_plan_init() lays the roles out and checks everything that depends on the table
 * alone: threads <= 1024, entry registers x threads <= 65536, register counts legal
 * for setmaxnreg, the setmaxnreg totals within the CTA's pool, named barriers 1..15.
 * ws_plan_check_device() adds the device: sm_90, shared memory within the opt-in limit.
 * ws_plan_check_attrs() compares the compiled kernel (cudaFuncGetAttributes) with the
 * plan. ws_plan_launch() does the last two and launches. Each failure names the number
 * that failed, the limit, and a value that fits. */
#ifndef WARPSPEC_PLAN_H
#define WARPSPEC_PLAN_H

#include <stddef.h>
#include <stdio.h>

#include <cuda_runtime_api.h>

#include "diag.h"
#include "layout.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  char kernel[2 * WS_NAME_LEN];
  ws_role roles[WS_MAX_ROLES];
  ws_layout layout;
  size_t smem_bytes;                 /* dynamic shared memory per CTA at launch       */
  size_t local_bytes_allowed;        /* local memory per thread the kernel may use    */
  int nuser_barriers;
  char user_barrier[WS_MAX_USER_BARRIERS][WS_NAME_LEN];
  const void *checked_func;          /* set once a kernel passed ws_plan_check_func   */
  int clusters_width;                /* ws_plan_max_clusters' cached answer: width ... */
  int clusters_max;                  /* ... and clusters resident at once             */
} ws_plan;

/* Device limits the plan is checked against (ws_device_limits_query fills it). */
typedef struct {
  int device;
  char name[256];
  int cc_major, cc_minor;
  int sm_count;
  size_t smem_optin;                 /* sharedMemPerBlockOptin                        */
  int regs_per_block;
  int max_threads;
  size_t l2_bytes;
  size_t global_mem;
} ws_device_limits;

/* What the compiled kernel is (cudaFuncGetAttributes). */
typedef struct {
  int num_regs;
  int max_threads;
  size_t local_bytes;
  size_t static_smem;
} ws_kernel_attrs;

/* Lay out and check a role table. entry_regs: 0 for kernels built with WS_KERNEL
 * (the cap __launch_bounds__(threads, 1) gives), or the cap the kernel was built with.
 * Each role's fields are bounded first (warps and replicas 1..32, regs as in layout.h):
 * out of range is WS_ERR_INVALID naming role, field, value and bound; totals over the
 * CTA (threads, register pool, named barriers) are WS_ERR_BUDGET. The functions below
 * take only a plan this accepted (WS_ERR_INVALID otherwise). */
ws_status ws_plan_init(ws_plan *plan, const char *kernel, const ws_role *roles, int nroles, int entry_regs);

/* Dynamic shared memory the kernel is launched with: at most INT_MAX bytes (the
 * driver's attribute is an int; more is a negative size converted). The device's
 * opt-in limit is checked by ws_plan_check_device / ws_plan_launch. */
ws_status ws_plan_set_smem(ws_plan *plan, size_t bytes);

/* Reserve one more named barrier after the roles' own; *id receives it. Running out
 * of ids 1..15 is WS_ERR_BUDGET, with a message listing the owner of every id. */
ws_status ws_plan_add_barrier(ws_plan *plan, const char *name, int *id);

/* Owner of barrier id (role replica or user barrier name) into buf. */
ws_status ws_plan_barrier_owner(const ws_plan *plan, int id, char *buf, size_t len);

ws_status ws_device_limits_query(int device, ws_device_limits *lim);
ws_status ws_plan_check_limits(const ws_plan *plan, const ws_device_limits *lim);
ws_status ws_plan_check_device(const ws_plan *plan, int device);

ws_status ws_plan_check_attrs(const ws_plan *plan, const ws_kernel_attrs *attrs);
/* Reads the attributes of `func` (a __global__ function pointer) and checks them. */
ws_status ws_plan_check_func(ws_plan *plan, const void *func);

/* Check (once per kernel) and launch func<<<grid, plan threads, plan smem, stream>>>. */
ws_status ws_plan_launch(ws_plan *plan, const void *func, dim3 grid, cudaStream_t stream, void **args);

/* The plan as a table: warps, threads, entry registers, registers per role and per
 * warpgroup, pool use, barrier ids, shared memory. */
ws_status ws_plan_print(const ws_plan *plan, FILE *out);

/* ---- bounded waits: the host side ---------------------------------------------- */
/* Per process; default WS_TIMEOUT_MS_DEFAULT or the WARPSPEC_TIMEOUT_MS variable. */
ws_status ws_set_timeout_ms(unsigned int ms);
unsigned int ws_timeout_ms(void);

/* The diagnostics block of the current device, created on first use. */
ws_status ws_diag_get(ws_diag *out);

/* Synchronise a stream. A device fault becomes WS_ERR_TIMEOUT with its message. */
ws_status ws_sync(cudaStream_t stream);

/* Turn an error from a launch or sync into a status, reading the fault record. */
ws_status ws_check_cuda(cudaError_t err, const char *what);

#ifdef __cplusplus
}
#endif
#endif
