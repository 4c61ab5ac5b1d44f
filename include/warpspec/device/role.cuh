/* warpspec/device/role.cuh - roles: who am I, register hand-over, role-scoped sync.
 *
 * A kernel declares its roles once, as an X-macro list of
 *     ROLE(NAME, warps, regs, replicas)
 * and WS_DECLARE_ROLES(prefix, LIST) generates from it
 *   - an enum of role ids (NAME = 0, 1, ...) and prefix_NROLES,
 *   - prefix_roles[]      the ws_role table the host planner checks,
 *   - prefix_layout       the layout evaluated at compile time (a static_assert
 *                         rejects a table that cannot fit a CTA),
 *   - prefix_layout_dev   the same layout in constant memory for run-time lookups.
 * WS_DECLARE_ROLE_SET(prefix) adds prefix_set, all of it as a type, for a kernel
 * templated over its role table (WS_KERNEL_T and the other _T forms).
 * WS_KERNEL(prefix) opens the kernel with __launch_bounds__(threads, 1), without
 * which ptxas ignores setmaxnreg (warning C7508). WS_ENTER_ROLE(prefix, NAME) is the
 * first statement of a role's branch: setmaxnreg inc/dec from the table.
 *
 *   #define COPY_ROLES(ROLE) ROLE(LOADER, 1, 40, 1) ROLE(WRITER, 4, 232, 2)
 *   WS_DECLARE_ROLES(copy, COPY_ROLES);
 *   WS_KERNEL(copy) copy_kernel(..., ws_diag diag) {
 *     ws_ctx ctx = WS_SELF(copy, diag);
 *     ... init pipes, ws_init_sync() ...
 *     if (ctx.role == LOADER) { WS_ENTER_ROLE(copy, LOADER); if (ctx.spare) return; ... }
 *     else                    { WS_ENTER_ROLE(copy, WRITER); ... }
 *   }
 * Each role must be one branch: setmaxnreg is executed by whole warpgroups, and the
 * layout gives every register-changing role its own warpgroups; warps that only pad
 * a warpgroup have ctx.spare set and leave after WS_ENTER_ROLE. */
#ifndef WARPSPEC_DEVICE_ROLE_CUH
#define WARPSPEC_DEVICE_ROLE_CUH

#include "../diag.h"
#include "../layout.h"
#include "ptx.cuh"

typedef struct {
  int role;          /* enum value of the role, -1 for warps outside the table         */
  int replica;       /* which copy of the role                                           */
  int warp;          /* warp index inside the replica                                    */
  int lane;
  int spare;         /* pads a warpgroup: enters the role's registers, then leaves       */
  uint32_t bar;      /* named barrier of this replica; 0 for one-warp roles              */
  uint32_t nthreads; /* threads in this replica                                          */
  const ws_layout *layout; /* constant-memory layout, for names in diagnostics          */
  ws_diag diag;
} ws_ctx;

#define WS__ROLE_ENUM(NAME, WARPS, REGS, REPLICAS) NAME,
#define WS__ROLE_ROW(NAME, WARPS, REGS, REPLICAS) {#NAME, WARPS, REGS, REPLICAS},

#define WS_DECLARE_ROLES(P, LIST)                                                         \
  enum { LIST(WS__ROLE_ENUM) P##_NROLES };                                                \
  WS_CX_VAR ws_role P##_roles[] = {LIST(WS__ROLE_ROW)};                                   \
  WS_CX_VAR ws_layout P##_layout = ws_layout_make(P##_roles, P##_NROLES, 0);              \
  static_assert(P##_layout.error == WS_LAYOUT_OK,                                         \
                "role table '" #P "' does not fit one CTA; `warpspec plan` explains why"); \
  static __constant__ ws_layout P##_layout_dev = ws_layout_make(P##_roles, P##_NROLES, 0)

/* WS_DECLARE_ROLE_SET(prefix), after WS_DECLARE_ROLES(prefix, ...) in a .cu file: the table
 * as a type, prefix_set, for a kernel templated over its role table (WS_KERNEL_T and the
 * other _T forms below). */
#define WS_DECLARE_ROLE_SET(P)                                                            \
  struct P##_set {                                                                        \
    static constexpr int threads = P##_layout.threads;                                    \
    static constexpr int entry_regs = P##_layout.entry_regs;                              \
    static constexpr int role_regs(int r) { return ws_layout_role_regs(&P##_layout, r); } \
    static constexpr const ws_role *roles = P##_roles;                                    \
    static constexpr int nroles = P##_NROLES;                                             \
    static __device__ __forceinline__ const ws_layout *dev() { return &P##_layout_dev; }  \
  }

#define WS_KERNEL(P) __global__ void __launch_bounds__(P##_layout.threads, 1)
#define WS_THREADS(P) (P##_layout.threads)
#define WS_SELF(P, DIAG) ws_ctx_make(&P##_layout_dev, (DIAG), 1)
/* WS_SELF for a chained kernel that runs beside the previous one: it does not wait for
 * that kernel's end at its start. Only for kernels that read what the previous one writes
 * through flags of their own (bounded waits), and that call ws_griddepcontrol_wait()
 * before they exit, so that their end still implies the previous kernel's (the kernels
 * after them in the stream count on it). */
#define WS_SELF_BESIDE(P, DIAG) ws_ctx_make(&P##_layout_dev, (DIAG), 0)
/* Threads of one replica of ROLE (pipes count their arrivals with it). */
#define WS_ROLE_THREADS(P, ROLE) ((uint32_t)P##_layout_dev.role_warps[ROLE] * WS_WARP_SIZE)
/* Warps of one replica of ROLE (pipes released once per warp count these). */
#define WS_ROLE_WARPS(P, ROLE) ((uint32_t)P##_layout_dev.role_warps[ROLE])

/* setmaxnreg from the table: inc above the entry cap, dec below, nothing if equal
 * (ENTRY and REGS compile-time constants). */
#define WS_SETMAXNREG_FROM(ENTRY, REGS)                                               \
  do {                                                                                \
    constexpr int ws_entry_ = (ENTRY);                                                \
    constexpr int ws_regs_ = (REGS);                                                  \
    if (ws_regs_ > ws_entry_) WS_SETMAXNREG_INC(ws_regs_ > ws_entry_ ? ws_regs_ : WS_REGS_MAX); \
    else if (ws_regs_ < ws_entry_) WS_SETMAXNREG_DEC(ws_regs_ < ws_entry_ ? ws_regs_ : WS_REGS_MIN); \
  } while (0)
#define WS_ENTER_ROLE(P, ROLE) WS_SETMAXNREG_FROM(P##_layout.entry_regs, ws_layout_role_regs(&P##_layout, ROLE))

/* The same for a kernel templated over its role table: S is a prefix_set type made by
 * WS_DECLARE_ROLE_SET (a kernel with one tile shape per role table, e.g. two or three math
 * replicas), the roles named by their index (the tables list them in the same order). */
#define WS_KERNEL_T(S) __global__ void __launch_bounds__(S::threads, 1)
#define WS_SELF_T(S, DIAG) ws_ctx_make(S::dev(), (DIAG), 1)
#define WS_ROLE_THREADS_T(S, ROLE) ((uint32_t)S::dev()->role_warps[ROLE] * WS_WARP_SIZE)
#define WS_ROLE_WARPS_T(S, ROLE) ((uint32_t)S::dev()->role_warps[ROLE])
#define WS_ENTER_ROLE_T(S, ROLE) WS_SETMAXNREG_FROM(S::entry_regs, S::role_regs(ROLE))

WS_DEV ws_ctx ws_ctx_make(const ws_layout *L, ws_diag diag, int wait_previous) {
  /* Before anything reads memory: when the library launched this kernel chained to the
   * previous one (ws_plan_launch_chained), its CTAs may already run while that one ends;
   * this waits until it has finished. Then the next chained kernel may be scheduled: its
   * launch latency hides behind this one's work instead of following it. Both are no-ops
   * in a plain launch. */
  if (wait_previous) ws_griddepcontrol_wait();
  ws_griddepcontrol_launch_dependents();
  ws_ctx c;
  /* The warp index from lane 0: the same value, but warp-uniform to the compiler, so the
   * role branches are uniform and the values a role's loop derives from them (stage
   * cursors, wgmma descriptors) can live in uniform registers instead of being moved
   * there each iteration (R2UR). WS_SELF is called by whole warps (the kernel's start). */
  const int warp = __shfl_sync(0xffffffffu, (int)(threadIdx.x / WS_WARP_SIZE), 0);
  c.role = -1; c.replica = 0; c.warp = 0; c.spare = 1; c.bar = 0; c.nthreads = WS_WARP_SIZE;
  c.lane = (int)(threadIdx.x % WS_WARP_SIZE);
  c.layout = L;
  c.diag = diag;
  for (int r = 0; r < L->nroles; r++) {
    if (warp < L->role_first_warp[r] || warp >= L->role_end_warp[r]) continue;
    const int rel = warp - L->role_first_warp[r];
    const int per = L->role_warps[r];
    c.role = r;
    c.replica = rel / per;
    c.warp = rel % per;
    c.spare = c.replica >= L->role_replicas[r];
    c.nthreads = (uint32_t)(per * WS_WARP_SIZE);
    c.bar = (per > 1 && !c.spare) ? (uint32_t)(L->role_barrier[r] + c.replica) : 0u;
  }
  return c;
}

/* Synchronise the threads of this role replica only (never barrier 0). */
WS_DEV void ws_role_sync(const ws_ctx *c) {
  if (c->bar) ws_bar_sync(c->bar, c->nthreads);
  else __syncwarp();
}

/* One thread per role replica: lane 0 of its first warp. */
WS_DEV int ws_role_leader(const ws_ctx *c) { return c->warp == 0 && c->lane == 0; }

/* Thread index inside the replica, 0 .. nthreads-1. */
WS_DEV int ws_role_thread(const ws_ctx *c) { return c->warp * WS_WARP_SIZE + c->lane; }

/* Extra named barriers come from the host plan (ws_plan_add_barrier), which numbers
 * them after the roles' own: pass the id it returned. */
WS_DEV void ws_named_sync(uint32_t id, uint32_t threads) { ws_bar_sync(id, threads); }

/* After one thread initialised barriers: make the init visible, then let all start.
 * The last CTA-wide barrier of a warp-specialized kernel; roles never use barrier 0. */
WS_DEV void ws_init_sync(void) {
  ws_fence_mbarrier_init();
  __syncthreads();
}

/* Every thread of every CTA of the cluster passes here (barrier.cluster, release then
 * acquire). A hardware barrier with no bound: a peer stuck in one of its own bounded
 * waits traps there, which ends the grid. */
WS_DEV void ws_cluster_sync(void) {
  ws_barrier_cluster_arrive_release();
  ws_barrier_cluster_wait_acquire();
}

/* ws_init_sync for a kernel launched in clusters whose CTAs use each other's barriers
 * and shared memory. */
WS_DEV void ws_init_sync_cluster(void) {
  ws_fence_mbarrier_init();
  ws_cluster_sync();
}

/* Before a CTA of such a kernel ends: no CTA leaves while a peer may still arrive on its
 * barriers or copy into its shared memory. */
WS_DEV void ws_exit_sync_cluster(void) { ws_cluster_sync(); }

#endif
