/* plan.c - role plans: layout, budget messages, barrier allocator, kernel checks. */
#include "internal.h"
#include "knobs.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *role_name(const ws_plan *p, int r) {
  return (r >= 0 && r < p->layout.nroles && p->roles[r].name) ? p->roles[r].name : "?";
}

static int role_wgs(const ws_layout *L, int r) {
  return (L->role_end_warp[r] - L->role_first_warp[r]) / WS_WARPGROUP_WARPS;
}

/* The nearest legal setmaxnreg values around a bad request, for the message. */
static void regs_neighbours(int regs, int *lo, int *hi) {
  int l = regs / WS_REGS_GRANULE * WS_REGS_GRANULE;
  if (l < WS_REGS_MIN) l = WS_REGS_MIN;
  if (l > WS_REGS_MAX) l = WS_REGS_MAX;
  int h = l + (l < regs ? WS_REGS_GRANULE : 0);
  if (h > WS_REGS_MAX) h = WS_REGS_MAX;
  *lo = l; *hi = h;
}

/* Largest register count the role with the most warpgroups among the explicit ones
 * could have for the pool to fit; -1 if lowering it alone cannot help. */
static int pool_fix(const ws_plan *p, int *role_out) {
  const ws_layout *L = &p->layout;
  int best = -1, best_r = -1;
  for (int r = 0; r < L->nroles; r++)
    if (p->roles[r].regs > 0 && (best_r < 0 || L->role_regs[r] * role_wgs(L, r) > L->role_regs[best_r] * role_wgs(L, best_r)))
      best_r = r;
  if (best_r >= 0) {
    int others = L->pool_used / (WS_WARPGROUP_WARPS * WS_WARP_SIZE) - L->role_regs[best_r] * role_wgs(L, best_r);
    int avail = (L->pool_regs / (WS_WARPGROUP_WARPS * WS_WARP_SIZE) - others) / role_wgs(L, best_r);
    best = avail / WS_REGS_GRANULE * WS_REGS_GRANULE;
    if (best < WS_REGS_MIN) best = -1;
  }
  *role_out = best_r;
  return best;
}

static ws_status layout_failure(const ws_plan *p) {
  const ws_layout *L = &p->layout;
  const int r = L->err_role;
  const char *k = p->kernel;
  switch (L->error) {
  case WS_LAYOUT_NO_ROLES:
    return ws_fail(WS_ERR_INVALID, "kernel '%s': nroles %d, a plan needs at least one role", k, L->nroles);
  case WS_LAYOUT_TOO_MANY_ROLES:
    return ws_fail(WS_ERR_INVALID, "kernel '%s': nroles %d exceeds WS_MAX_ROLES %d", k, L->nroles, WS_MAX_ROLES);
  case WS_LAYOUT_BAD_WARPS:
    return ws_fail(WS_ERR_INVALID, "kernel '%s': role '%s' has warps %d, must be 1..%d", k, role_name(p, r),
                   p->roles[r].warps, WS_MAX_CTA_WARPS);
  case WS_LAYOUT_BAD_REPLICAS:
    return ws_fail(WS_ERR_INVALID, "kernel '%s': role '%s' has replicas %d, must be 1..%d (a CTA has %d warps)", k,
                   role_name(p, r), p->roles[r].replicas, WS_MAX_CTA_WARPS, WS_MAX_CTA_WARPS);
  case WS_LAYOUT_BAD_REGS: {
    int lo, hi;
    char fit[32];
    regs_neighbours(p->roles[r].regs, &lo, &hi);
    if (hi != lo) snprintf(fit, sizeof fit, "%d or %d", lo, hi);
    else snprintf(fit, sizeof fit, "%d", lo);
    return ws_fail(WS_ERR_INVALID,
                   "kernel '%s': role '%s' asks for %d registers; setmaxnreg takes multiples of 8 in 24..256 "
                   "(or WS_REGS_REST / WS_REGS_ENTRY): use %s",
                   k, role_name(p, r), p->roles[r].regs, fit);
  }
  case WS_LAYOUT_THREADS: {
    int w = 0;
    for (int i = 0; i < L->nroles; i++) w += p->roles[i].warps * p->roles[i].replicas;
    return ws_fail(WS_ERR_BUDGET,
                   "kernel '%s': threads: the roles need %d warps (%d with warpgroup padding up to role '%s') "
                   "> 32 warps = 1024 threads per block",
                   k, w, L->role_end_warp[r] > 0 ? L->role_end_warp[r] : w, role_name(p, r));
  }
  case WS_LAYOUT_BAD_ENTRY:
    return ws_fail(WS_ERR_INVALID, "kernel '%s': entry registers %d, must be 24..255", k, L->entry_regs);
  case WS_LAYOUT_ENTRY_REGS: {
    const int max_t = ws_max_threads_for_regs(L->entry_regs);
    const int fit = ws_entry_regs_for(L->threads);
    return ws_fail(WS_ERR_BUDGET,
                   "kernel '%s': registers, not threads: entry cap %d registers x %d threads = %d > %d registers "
                   "per CTA, so the driver limits this kernel to %d threads per block (the 'Required: %d, "
                   "Hardware limit: %d' launch error). Compile with an entry cap <= %d (65536 / %d threads, "
                   "rounded down to 8; WS_KERNEL does this) and raise the roles that need more with setmaxnreg",
                   k, L->entry_regs, L->threads, ws_align_up(L->entry_regs, WS_REGS_GRANULE) * L->threads,
                   WS_REGS_PER_CTA, max_t, L->threads, max_t, fit, L->threads);
  }
  case WS_LAYOUT_POOL: {
    char parts[256] = "";
    size_t n = 0;
    for (int i = 0; i < L->nroles && n < sizeof parts; i++)
      n += (size_t)snprintf(parts + n, sizeof parts - n, "%s%s %d x %d", i ? " + " : "", role_name(p, i), role_wgs(L, i), L->role_regs[i]);
    int fix_r, fix = pool_fix(p, &fix_r);
    char hint[160] = "";
    if (fix > 0 && fix_r >= 0)
      snprintf(hint, sizeof hint, "; lower role '%s' to %d registers", role_name(p, fix_r), fix);
    return ws_fail(WS_ERR_BUDGET,
                   "kernel '%s': registers: after setmaxnreg the warpgroups need %d registers per thread-slot "
                   "(%s; warpgroups x registers) but the CTA owns only %d x %d threads = %d registers "
                   "(%d per warpgroup-slot); setmaxnreg.inc would wait forever%s",
                   k, L->pool_used / (WS_WARPGROUP_WARPS * WS_WARP_SIZE), parts, L->entry_regs, L->threads,
                   L->pool_regs, L->pool_regs / (WS_WARPGROUP_WARPS * WS_WARP_SIZE), hint);
  }
  case WS_LAYOUT_REST_TOO_SMALL:
    return ws_fail(WS_ERR_BUDGET,
                   "kernel '%s': registers: role '%s' is WS_REGS_REST but the explicit roles leave it fewer than "
                   "24 registers of the %d-register pool; lower the explicit roles",
                   k, role_name(p, r), L->pool_regs);
  case WS_LAYOUT_REST_NO_REGS:
    return ws_fail(WS_ERR_INVALID, "kernel '%s': WS_REGS_REST needs at least one role with an explicit register count", k);
  case WS_LAYOUT_BARRIERS:
    return ws_fail(WS_ERR_BUDGET,
                   "kernel '%s': named barriers: role replicas of more than one warp need one id each, up to role "
                   "'%s' that makes more than 15 (ids 1..15; 0 is __syncthreads)", k, role_name(p, r));
  }
  return ws_fail(WS_ERR_INVALID, "kernel '%s': layout error %d", k, L->error);
}

/* The setters and readers index arrays by the plan's counts: take only a plan that
 * ws_plan_init accepted and whose counts are still in range. */
static ws_status plan_ready(const char *fn, const ws_plan *plan) {
  const ws_layout *L = &plan->layout;
  WS_REQUIRE(L->error == WS_LAYOUT_OK && L->nroles >= 1 && L->nroles <= WS_MAX_ROLES && L->threads >= WS_WARP_SIZE &&
                 L->threads <= WS_MAX_THREADS && L->nbarriers >= 0 && L->nbarriers < WS_NAMED_BARRIERS &&
                 plan->nuser_barriers >= 0 && plan->nuser_barriers <= WS_MAX_USER_BARRIERS,
             "%s: kernel '%.*s': the plan did not pass ws_plan_init (layout error %d, %d roles, %d threads, %d user "
             "barriers)", fn, (int)sizeof plan->kernel, plan->kernel, L->error, L->nroles, L->threads,
             plan->nuser_barriers);
  return WS_OK;
}

ws_status ws_plan_init(ws_plan *plan, const char *kernel, const ws_role *roles, int nroles, int entry_regs) {
  WS_REQUIRE(plan != NULL, "ws_plan_init: plan is NULL");
  memset(plan, 0, sizeof *plan);
  snprintf(plan->kernel, sizeof plan->kernel, "%s", kernel ? kernel : "kernel");
  WS_REQUIRE(roles != NULL, "ws_plan_init: kernel '%s': roles is NULL", plan->kernel);
  WS_REQUIRE(nroles >= 1 && nroles <= WS_MAX_ROLES, "ws_plan_init: kernel '%s': nroles %d, must be 1..%d",
             plan->kernel, nroles, WS_MAX_ROLES);
  WS_REQUIRE(entry_regs >= 0, "ws_plan_init: kernel '%s': entry_regs %d, must be 0 (derive) or 24..255",
             plan->kernel, entry_regs);
  for (int r = 0; r < nroles; r++) {
    WS_REQUIRE(roles[r].name != NULL && roles[r].name[0] != '\0', "ws_plan_init: kernel '%s': role %d has no name", plan->kernel, r);
    WS_REQUIRE(strlen(roles[r].name) < WS_NAME_LEN, "ws_plan_init: kernel '%s': role name '%s' longer than %d characters",
               plan->kernel, roles[r].name, WS_NAME_LEN - 1);
    plan->roles[r] = roles[r];
  }
  plan->layout = ws_layout_make(plan->roles, nroles, entry_regs);
  if (plan->layout.error != WS_LAYOUT_OK) return layout_failure(plan);
  return WS_OK;
}

ws_status ws_plan_set_smem(ws_plan *plan, size_t bytes) {
  WS_REQUIRE(plan != NULL, "ws_plan_set_smem: plan is NULL");
  ws_status s = plan_ready("ws_plan_set_smem", plan);
  if (s != WS_OK) return s;
  /* The driver's attribute is an int; above it, the size is almost surely a negative
   * count converted. Sizes below it are the device check's to judge (opt-in limit). */
  WS_REQUIRE(bytes <= (size_t)INT_MAX, "ws_plan_set_smem: kernel '%s': bytes %zu, must be at most %d (a negative size?)",
             plan->kernel, bytes, INT_MAX);
  if (plan->smem_bytes != bytes) plan->checked_func = NULL; /* check the new size once */
  plan->smem_bytes = bytes;
  return WS_OK;
}

ws_status ws_plan_barrier_owner(const ws_plan *plan, int id, char *buf, size_t len) {
  WS_REQUIRE(plan != NULL && buf != NULL && len > 0, "ws_plan_barrier_owner: plan or buf is NULL");
  const ws_status s = plan_ready("ws_plan_barrier_owner", plan);
  if (s != WS_OK) return s;
  const ws_layout *L = &plan->layout;
  WS_REQUIRE(id >= 0 && id < WS_NAMED_BARRIERS, "ws_plan_barrier_owner: id %d, must be 0..15", id);
  if (id == 0) { snprintf(buf, len, "CTA (__syncthreads, init only)"); return WS_OK; }
  for (int r = 0; r < L->nroles; r++)
    if (L->role_barrier[r] && id >= L->role_barrier[r] && id < L->role_barrier[r] + L->role_replicas[r]) {
      snprintf(buf, len, "role %s replica %d (%d threads)", role_name(plan, r), id - L->role_barrier[r],
               L->role_warps[r] * WS_WARP_SIZE);
      return WS_OK;
    }
  const int u = id - L->nbarriers - 1;
  if (u >= 0 && u < plan->nuser_barriers) { snprintf(buf, len, "user barrier %s", plan->user_barrier[u]); return WS_OK; }
  snprintf(buf, len, "free");
  return WS_OK;
}

ws_status ws_plan_add_barrier(ws_plan *plan, const char *name, int *id) {
  WS_REQUIRE(plan != NULL && name != NULL && id != NULL, "ws_plan_add_barrier: plan, name or id is NULL");
  WS_REQUIRE(name[0] != '\0' && strlen(name) < WS_NAME_LEN, "ws_plan_add_barrier: name '%s' must be 1..%d characters",
             name, WS_NAME_LEN - 1);
  const ws_status s = plan_ready("ws_plan_add_barrier", plan);
  if (s != WS_OK) return s;
  const int next = plan->layout.nbarriers + plan->nuser_barriers + 1;
  if (next > WS_NAMED_BARRIERS - 1 || plan->nuser_barriers >= WS_MAX_USER_BARRIERS) {
    char table[1024];
    size_t n = 0;
    for (int b = 1; b < WS_NAMED_BARRIERS && n < sizeof table; b++) {
      char owner[96];
      ws_plan_barrier_owner(plan, b, owner, sizeof owner);
      n += (size_t)snprintf(table + n, sizeof table - n, "%s%d: %s", b > 1 ? ", " : "", b, owner);
    }
    return ws_fail(WS_ERR_BUDGET, "kernel '%s': no named barrier left for '%s' (%s); ids in use: %s", plan->kernel, name,
                   next > WS_NAMED_BARRIERS - 1 ? "ids 1..15 taken" : "WS_MAX_USER_BARRIERS reached", table);
  }
  snprintf(plan->user_barrier[plan->nuser_barriers], WS_NAME_LEN, "%s", name);
  plan->nuser_barriers++;
  *id = next;
  return WS_OK;
}

ws_status ws_plan_check_limits(const ws_plan *plan, const ws_device_limits *lim) {
  WS_REQUIRE(plan != NULL && lim != NULL, "ws_plan_check_limits: plan or limits is NULL");
  const ws_status s = plan_ready("ws_plan_check_limits", plan);
  if (s != WS_OK) return s;
  const ws_layout *L = &plan->layout;
  if (lim->cc_major != 9)
    return ws_fail(WS_ERR_NO_DEVICE, "kernel '%s': device %d (%s) is sm_%d%d; warpspec kernels are built for sm_90a",
                   plan->kernel, lim->device, lim->name, lim->cc_major, lim->cc_minor);
  if (L->threads > lim->max_threads)
    return ws_fail(WS_ERR_BUDGET, "kernel '%s': threads %d > device limit %d", plan->kernel, L->threads, lim->max_threads);
  if (plan->smem_bytes > lim->smem_optin)
    return ws_fail(WS_ERR_BUDGET,
                   "kernel '%s': shared memory %zu bytes > opt-in limit %zu bytes of device %d (%s); use fewer "
                   "stages or smaller slots",
                   plan->kernel, plan->smem_bytes, lim->smem_optin, lim->device, lim->name);
  return WS_OK;
}

ws_status ws_plan_check_attrs(const ws_plan *plan, const ws_kernel_attrs *a) {
  WS_REQUIRE(plan != NULL && a != NULL, "ws_plan_check_attrs: plan or attrs is NULL");
  const ws_status s = plan_ready("ws_plan_check_attrs", plan);
  if (s != WS_OK) return s;
  const ws_layout *L = &plan->layout;
  const char *k = plan->kernel;
  /* what cudaFuncGetAttributes can report; bounded before the register arithmetic below */
  WS_REQUIRE(a->num_regs >= 0 && a->num_regs <= 1024 && a->max_threads >= 0 && a->max_threads <= 4096,
             "ws_plan_check_attrs: %d registers, %d threads: not a compiled kernel's attributes", a->num_regs,
             a->max_threads);
  if (a->max_threads < L->threads)
    return ws_fail(WS_ERR_MISMATCH,
                   "kernel '%s': registers, not threads: it was compiled with %d registers per thread, so the driver "
                   "allows %d threads per block and the plan needs %d (the 'Required: %d, Hardware limit: %d' "
                   "error). Compile it with an entry cap of %d registers: __launch_bounds__(%d, 1), which WS_KERNEL emits",
                   k, a->num_regs, a->max_threads, L->threads, L->threads, a->max_threads, ws_entry_regs_for(L->threads),
                   L->threads);
  if (L->setmaxnreg) {
    const int have = ws_align_up(a->num_regs, WS_REGS_GRANULE);
    if (have != L->entry_regs)
      return ws_fail(WS_ERR_MISMATCH,
                     "kernel '%s': registers: compiled with %d registers per thread but the plan's setmaxnreg budget "
                     "assumes an entry cap of %d (pool %d x %d threads = %d, setmaxnreg totals %d). Either ptxas dropped "
                     "setmaxnreg (warning C7508/C7504: missing __launch_bounds__(%d, 1) or -rdc) or the kernel does not "
                     "match this role table",
                     k, a->num_regs, L->entry_regs, have, L->threads, have * L->threads, L->pool_used, L->threads);
  } else if (a->num_regs > L->entry_regs) {
    return ws_fail(WS_ERR_MISMATCH, "kernel '%s': compiled with %d registers per thread, above the plan's entry cap %d",
                   k, a->num_regs, L->entry_regs);
  }
  if (a->local_bytes > plan->local_bytes_allowed)
    return ws_fail(WS_ERR_MISMATCH,
                   "kernel '%s': uses %zu bytes of local memory per thread (register spills or an array indexed at "
                   "run time); the plan allows %zu. Check `ptxas -v` and the role's register count",
                   k, a->local_bytes, plan->local_bytes_allowed);
  return WS_OK;
}

ws_status ws_plan_check_device(const ws_plan *plan, int device) {
  WS_REQUIRE(plan != NULL, "ws_plan_check_device: plan is NULL");
  ws_device_limits lim;
  ws_status s = ws_device_limits_query(device, &lim);
  if (s != WS_OK) return s;
  return ws_plan_check_limits(plan, &lim);
}

ws_status ws_plan_check_func(ws_plan *plan, const void *func) {
  WS_REQUIRE(plan != NULL && func != NULL, "ws_plan_check_func: plan or func is NULL");
  if (plan->checked_func == func) return WS_OK;
  int device = 0;
  WS_CUDA_TRY(cudaGetDevice(&device));
  ws_device_limits lim;
  ws_status s = ws_device_limits_query(device, &lim);
  if (s != WS_OK) return s;
  if ((s = ws_plan_check_limits(plan, &lim)) != WS_OK) return s;
  struct cudaFuncAttributes fa;
  WS_CUDA_TRY(cudaFuncGetAttributes(&fa, func));
  ws_kernel_attrs a = {fa.numRegs, fa.maxThreadsPerBlock, fa.localSizeBytes, fa.sharedSizeBytes};
  if ((s = ws_plan_check_attrs(plan, &a)) != WS_OK) return s;
  if (fa.sharedSizeBytes + plan->smem_bytes > lim.smem_optin)
    return ws_fail(WS_ERR_BUDGET, "kernel '%s': static %zu + dynamic %zu bytes of shared memory > opt-in limit %zu",
                   plan->kernel, fa.sharedSizeBytes, plan->smem_bytes, lim.smem_optin);
  WS_CUDA_TRY(cudaFuncSetAttribute(func, cudaFuncAttributeMaxDynamicSharedMemorySize, (int)plan->smem_bytes));
  plan->checked_func = func;
  return WS_OK;
}

/* The library's own kernels, which all call WS_SELF (griddepcontrol.wait) before they
 * read memory, are launched chained: with programmatic stream serialisation, so that the
 * next kernel's launch overlaps the end of the previous one, a few microseconds per
 * kernel boundary where a call is made of short kernels. WARPSPEC_PDL=0 launches them
 * plainly (for measurements). Not ws_plan_launch's default: a user's kernel may read
 * memory before its WS_SELF. */
static int plan_pdl_enabled(void) { return ws_knobs_get()->pdl; }

/* A launch's configuration: chained (programmatic stream serialisation, unless
 * WARPSPEC_PDL=0) and in clusters of `width` CTAs along x when width > 1. */
static cudaLaunchConfig_t launch_config(dim3 grid, dim3 block, size_t smem, cudaStream_t stream, int chained, int width,
                                        cudaLaunchAttribute attr[2]) {
  memset(attr, 0, 2 * sizeof attr[0]);
  cudaLaunchConfig_t cfg;
  memset(&cfg, 0, sizeof cfg);
  cfg.gridDim = grid;
  cfg.blockDim = block;
  cfg.dynamicSmemBytes = smem;
  cfg.stream = stream;
  cfg.attrs = attr;
  if (chained && plan_pdl_enabled()) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeProgrammaticStreamSerialization;
    attr[cfg.numAttrs++].val.programmaticStreamSerializationAllowed = 1;
  }
  if (width > 1) {
    attr[cfg.numAttrs].id = cudaLaunchAttributeClusterDimension;
    attr[cfg.numAttrs].val.clusterDim.x = (unsigned)width;
    attr[cfg.numAttrs].val.clusterDim.y = 1;
    attr[cfg.numAttrs++].val.clusterDim.z = 1;
  }
  return cfg;
}

/* A plan's launch: its threads and dynamic shared memory. */
static cudaLaunchConfig_t plan_config(const ws_plan *plan, dim3 grid, cudaStream_t stream, int chained, int width,
                                      cudaLaunchAttribute attr[2]) {
  return launch_config(grid, (dim3){(unsigned)plan->layout.threads, 1, 1}, plan->smem_bytes, stream, chained, width, attr);
}

static ws_status plan_launch(ws_plan *plan, const void *func, dim3 grid, cudaStream_t stream, void **args, int chained,
                             int width) {
  WS_REQUIRE(plan != NULL && func != NULL, "ws_plan_launch: plan or func is NULL");
  WS_REQUIRE(grid.x >= 1 && grid.y >= 1 && grid.z >= 1, "ws_plan_launch: kernel '%s': grid %ux%ux%u has an empty dimension",
             plan->kernel, grid.x, grid.y, grid.z);
  WS_REQUIRE(width >= 1 && width <= 8 && grid.x % (unsigned)width == 0,
             "ws_plan_launch: kernel '%s': clusters of %d CTAs (1..8) must divide grid.x %u", plan->kernel, width, grid.x);
  ws_status s = ws_plan_check_func(plan, func);
  if (s != WS_OK) return s;
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = plan_config(plan, grid, stream, chained, width, attr);
  WS_CUDA_TRY(cudaLaunchKernelExC(&cfg, func, args));
  return WS_OK;
}

ws_status ws_launch_chained(const void *func, dim3 grid, dim3 block, cudaStream_t stream, void **args) {
  cudaLaunchAttribute attr[2];
  const cudaLaunchConfig_t cfg = launch_config(grid, block, 0, stream, 1, 1, attr);
  WS_CUDA_TRY(cudaLaunchKernelExC(&cfg, func, args));
  return WS_OK;
}

ws_status ws_plan_launch(ws_plan *plan, const void *func, dim3 grid, cudaStream_t stream, void **args) {
  return plan_launch(plan, func, grid, stream, args, 0, 1);
}

ws_status ws_plan_launch_chained(ws_plan *plan, const void *func, dim3 grid, cudaStream_t stream, void **args) {
  return plan_launch(plan, func, grid, stream, args, 1, 1);
}

ws_status ws_plan_launch_cluster_chained(ws_plan *plan, const void *func, dim3 grid, int width, cudaStream_t stream,
                                         void **args) {
  return plan_launch(plan, func, grid, stream, args, 1, width);
}

ws_status ws_plan_max_clusters(ws_plan *plan, const void *func, int width, int *clusters) {
  WS_REQUIRE(plan != NULL && func != NULL && clusters != NULL, "ws_plan_max_clusters: plan, func or clusters is NULL");
  WS_REQUIRE(width >= 1 && width <= 8, "ws_plan_max_clusters: kernel '%s': clusters of %d CTAs, must be 1..8",
             plan->kernel, width);
  if (plan->clusters_width != width || plan->checked_func != func) {
    ws_status s = ws_plan_check_func(plan, func);
    if (s != WS_OK) return s;
    cudaLaunchAttribute attr[2];
    const cudaLaunchConfig_t cfg = plan_config(plan, (dim3){(unsigned)width, 1, 1}, 0, 0, width, attr);
    int n = 0;
    WS_CUDA_TRY(cudaOccupancyMaxActiveClusters(&n, func, &cfg));
    plan->clusters_width = width;
    plan->clusters_max = n;
  }
  *clusters = plan->clusters_max;
  return WS_OK;
}

ws_status ws_plan_print(const ws_plan *plan, FILE *out) {
  WS_REQUIRE(plan != NULL && out != NULL, "ws_plan_print: plan or out is NULL");
  const ws_status s = plan_ready("ws_plan_print", plan);
  if (s != WS_OK) return s;
  const ws_layout *L = &plan->layout;
  fprintf(out, "plan '%s': %d warps = %d threads, %d warpgroups, entry cap %d registers/thread\n", plan->kernel, L->warps,
          L->threads, L->nwarpgroups, L->entry_regs);
  fprintf(out, "  %-16s %6s %8s %6s %8s %8s %10s\n", "role", "warps", "replicas", "regs", "warps@", "barrier", "setmaxnreg");
  for (int r = 0; r < L->nroles; r++) {
    char bar[32] = "syncwarp";
    if (L->role_barrier[r])
      snprintf(bar, sizeof bar, L->role_replicas[r] > 1 ? "%d..%d" : "%d", L->role_barrier[r],
               L->role_barrier[r] + L->role_replicas[r] - 1);
    const char *op = !L->setmaxnreg || L->role_regs[r] == L->entry_regs ? "-" : L->role_regs[r] > L->entry_regs ? "inc" : "dec";
    char at[32];
    snprintf(at, sizeof at, "%d-%d", L->role_first_warp[r], L->role_end_warp[r] - 1);
    fprintf(out, "  %-16s %6d %8d %6d %8s %8s %10s\n", role_name(plan, r), L->role_warps[r], L->role_replicas[r],
            L->role_regs[r], at, bar, op);
  }
  fprintf(out, "  warpgroup registers:");
  for (int g = 0; g < L->nwarpgroups; g++) {
    int regs = L->entry_regs;
    for (int r = 0; r < L->nroles; r++)
      if (g * WS_WARPGROUP_WARPS >= L->role_first_warp[r] && g * WS_WARPGROUP_WARPS < L->role_end_warp[r]) regs = L->role_regs[r];
    fprintf(out, " %d", regs);
  }
  fprintf(out, "\n  register pool: %d of %d used (%d registers x %d threads)%s\n", L->pool_used, L->pool_regs, L->entry_regs,
          L->threads, L->setmaxnreg ? "" : ", no setmaxnreg");
  fprintf(out, "  named barriers: 0 = CTA init");
  for (int b = 1; b <= L->nbarriers + plan->nuser_barriers; b++) {
    char owner[96];
    ws_plan_barrier_owner(plan, b, owner, sizeof owner);
    fprintf(out, ", %d = %s", b, owner);
  }
  fprintf(out, "\n  shared memory: %zu bytes dynamic\n", plan->smem_bytes);
  return WS_OK;
}

#define WS_PLAN_DEVICES 16

ws_status ws_plan_cached(int slot, ws_status (*make)(const void *ctx, ws_plan *plan), const void *ctx, ws_plan **plan) {
  static _Thread_local ws_plan cache[WS_PLAN_DEVICES][WS_PLAN_SLOTS];
  static _Thread_local unsigned char made[WS_PLAN_DEVICES][WS_PLAN_SLOTS];
  WS_REQUIRE(slot >= 0 && slot < WS_PLAN_SLOTS && make != NULL && plan != NULL, "ws_plan_cached: bad arguments");
  int dev = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_REQUIRE(dev >= 0 && dev < WS_PLAN_DEVICES, "device %d: the plan cache covers devices 0..%d", dev, WS_PLAN_DEVICES - 1);
  if (!made[dev][slot]) {
    const ws_status s = make(ctx, &cache[dev][slot]);
    if (s != WS_OK) return s;
    made[dev][slot] = 1;
  }
  *plan = &cache[dev][slot];
  return WS_OK;
}
