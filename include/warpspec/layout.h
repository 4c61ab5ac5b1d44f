/* warpspec/layout.h - where each role's warps sit, and what the register budget is.
 *
 * A kernel is a table of roles (ws_role). ws_layout_make() turns that table into a
 * layout: first warp of every role, padding so that roles that change their register
 * count own whole warpgroups, the entry register cap, each role's register count after
 * setmaxnreg, and one named barrier per multi-warp role replica.
 *
 * This one function serves three callers, which is why it is written in the common
 * subset of C and C++14 constexpr: the host planner (C), the CLI (C), and kernels,
 * which evaluate it at compile time to get __launch_bounds__ and the setmaxnreg
 * immediates. One implementation, so host checks and device code cannot disagree. */
#ifndef WARPSPEC_LAYOUT_H
#define WARPSPEC_LAYOUT_H

#include "config.h"

#if defined(__CUDACC__)
#define WS_CX static constexpr __host__ __device__ inline
#define WS_CX_VAR static constexpr
#elif defined(__cplusplus)
#define WS_CX static constexpr inline
#define WS_CX_VAR static constexpr
#else
#define WS_CX static inline
#define WS_CX_VAR static const
#endif

/* Warps of one CTA: the bound of every per-role count, so no product of two wraps. */
#define WS_MAX_CTA_WARPS (WS_MAX_THREADS / WS_WARP_SIZE)

/* An all-zero aggregate initializer that neither C11 nor C++ -Wextra complains about. */
#ifdef __cplusplus
#define WS_ZERO_INIT {}
#else
#define WS_ZERO_INIT {0}
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Register requests of a role besides an explicit count (multiple of 8 in 24..256). */
enum {
  WS_REGS_ENTRY = 0,  /* keep the kernel's entry cap; no setmaxnreg for this role     */
  WS_REGS_REST = -1   /* share what the explicit roles leave of the CTA's pool        */
};

/* One role: `warps` warps per replica, `replicas` copies, registers per thread.
 * Bounds, checked before any of them enters a product or a sum: warps and replicas
 * 1..WS_MAX_CTA_WARPS (32) each, regs as above; the totals then cannot wrap, and are
 * checked against the CTA (warps x replicas summed, padding included, <= 32 warps;
 * named barriers <= 15). */
typedef struct {
  const char *name;
  int warps;
  int regs;
  int replicas;
} ws_role;

typedef enum {
  WS_LAYOUT_OK = 0,
  WS_LAYOUT_NO_ROLES,        /* nroles < 1                                          */
  WS_LAYOUT_TOO_MANY_ROLES,  /* nroles > WS_MAX_ROLES                               */
  WS_LAYOUT_BAD_WARPS,       /* warps < 1 or > 32                                   */
  WS_LAYOUT_BAD_REPLICAS,    /* replicas < 1 or > 32                                */
  WS_LAYOUT_BAD_REGS,        /* regs not REST/ENTRY and not a multiple of 8 in 24..256 */
  WS_LAYOUT_THREADS,         /* more than 1024 threads                              */
  WS_LAYOUT_BAD_ENTRY,       /* requested entry cap not in 24..255                  */
  WS_LAYOUT_ENTRY_REGS,      /* entry regs x threads > 65536: launch would fail     */
  WS_LAYOUT_POOL,            /* setmaxnreg totals exceed the CTA's pool: .inc hangs */
  WS_LAYOUT_REST_TOO_SMALL,  /* REST roles would get fewer than 24 registers        */
  WS_LAYOUT_REST_NO_REGS,    /* REST without any setmaxnreg role: nothing to share  */
  WS_LAYOUT_BARRIERS         /* more than 15 named barriers                         */
} ws_layout_error;

typedef struct {
  int error;      /* ws_layout_error                                                */
  int err_role;   /* offending role, or -1                                           */
  int nroles;
  int warps;      /* warps in the CTA, padding included                              */
  int threads;
  int nwarpgroups;
  int setmaxnreg; /* 1 if some role changes its register count                       */
  int entry_regs; /* register cap per thread at kernel entry                         */
  int pool_regs;  /* registers the CTA owns: entry_regs x threads                    */
  int pool_used;  /* sum over warpgroups of (registers after setmaxnreg) x 128       */
  int nbarriers;  /* named barrier ids 1..nbarriers are taken by roles               */
  int role_first_warp[WS_MAX_ROLES]; /* first warp of replica 0                       */
  int role_end_warp[WS_MAX_ROLES];   /* one past the role's last warp, padding incl.  */
  int role_warps[WS_MAX_ROLES];      /* warps per replica                              */
  int role_replicas[WS_MAX_ROLES];
  int role_regs[WS_MAX_ROLES];       /* registers after entering the role             */
  int role_barrier[WS_MAX_ROLES];    /* barrier of replica 0 (replica k: +k); 0: 1 warp */
  char role_name[WS_MAX_ROLES][WS_NAME_LEN];
} ws_layout;

WS_CX int ws_align_up(int x, int a) { return (x + a - 1) / a * a; }

WS_CX int ws_regs_valid(int regs) {
  return regs >= WS_REGS_MIN && regs <= WS_REGS_MAX && regs % WS_REGS_GRANULE == 0;
}

/* Entry cap the compiler is given by __launch_bounds__(threads, 1): ptxas divides the
 * register file by the threads rounded up to whole groups of WS_REGS_ALLOC_WARPS warps
 * (measured with nvcc 13.0 for sm_90a: 256 -> 255 used, 288 and 384 -> 168, 416 -> 128,
 * 640 -> 96). */
WS_CX int ws_entry_regs_for(int threads) {
  const int granule = WS_REGS_ALLOC_WARPS * WS_WARP_SIZE;
  int r = threads > 0 ? WS_REGS_PER_CTA / ws_align_up(threads, granule) / WS_REGS_GRANULE * WS_REGS_GRANULE : 0;
  return r > WS_REGS_MAX ? WS_REGS_MAX : r;
}

/* Largest block the driver accepts for a kernel compiled with `regs` per thread. */
WS_CX int ws_max_threads_for_regs(int regs) {
  int per_warp = ws_align_up(regs, WS_REGS_GRANULE) * WS_WARP_SIZE;
  int warps = per_warp > 0 ? WS_REGS_PER_CTA / per_warp : 0;
  int t = warps * WS_WARP_SIZE;
  return t > WS_MAX_THREADS ? WS_MAX_THREADS : t;
}

/* entry_override: 0 derives the entry cap from the thread count (what the library's
 * kernel macro compiles); a positive value models a kernel built with that cap
 * (-maxrregcount, __maxnreg__, Triton's maxnreg) and is checked against the threads. */
WS_CX ws_layout ws_layout_make(const ws_role *roles, int nroles, int entry_override) {
  ws_layout L = WS_ZERO_INIT;
  L.err_role = -1;
  L.nroles = nroles;
  if (nroles < 1) { L.error = WS_LAYOUT_NO_ROLES; return L; }
  if (nroles > WS_MAX_ROLES) { L.error = WS_LAYOUT_TOO_MANY_ROLES; return L; }
  for (int r = 0; r < nroles; r++) {
    const ws_role *ro = &roles[r];
    L.err_role = r;
    if (ro->warps < 1 || ro->warps > WS_MAX_CTA_WARPS) { L.error = WS_LAYOUT_BAD_WARPS; return L; }
    if (ro->replicas < 1 || ro->replicas > WS_MAX_CTA_WARPS) { L.error = WS_LAYOUT_BAD_REPLICAS; return L; }
    if (ro->regs != WS_REGS_ENTRY && ro->regs != WS_REGS_REST && !ws_regs_valid(ro->regs)) {
      L.error = WS_LAYOUT_BAD_REGS; return L;
    }
    if (ro->regs != WS_REGS_ENTRY) L.setmaxnreg = 1;
    for (int c = 0; c < WS_NAME_LEN - 1 && ro->name && ro->name[c]; c++) L.role_name[r][c] = ro->name[c];
  }
  L.err_role = -1;

  /* Warp placement. With setmaxnreg, every role starts on a warpgroup boundary and owns
   * its warpgroups: setmaxnreg.sync.aligned must be executed by all 4 warps of a group
   * at the same instruction, i.e. in the same role branch. Without it, roles pack. */
  int w = 0;
  for (int r = 0; r < nroles; r++) {
    if (L.setmaxnreg) w = ws_align_up(w, WS_WARPGROUP_WARPS);
    L.role_first_warp[r] = w;
    L.role_warps[r] = roles[r].warps;
    L.role_replicas[r] = roles[r].replicas;
    w += roles[r].warps * roles[r].replicas;
    if (L.setmaxnreg) w = ws_align_up(w, WS_WARPGROUP_WARPS);
    L.role_end_warp[r] = w;
    if (w * WS_WARP_SIZE > WS_MAX_THREADS) { L.error = WS_LAYOUT_THREADS; L.err_role = r; return L; }
  }
  L.warps = w;
  L.threads = w * WS_WARP_SIZE;
  L.nwarpgroups = (w + WS_WARPGROUP_WARPS - 1) / WS_WARPGROUP_WARPS;

  /* Entry cap and the pool that setmaxnreg redistributes. */
  if (entry_override > 0) {
    L.entry_regs = entry_override; /* kept on failure too: the message names it */
    if (entry_override < WS_REGS_MIN || entry_override > 255) { L.error = WS_LAYOUT_BAD_ENTRY; return L; }
  } else {
    L.entry_regs = ws_entry_regs_for(L.threads);
  }
  if (ws_align_up(L.entry_regs, WS_REGS_GRANULE) * L.threads > WS_REGS_PER_CTA) { L.error = WS_LAYOUT_ENTRY_REGS; return L; }
  L.pool_regs = ws_align_up(L.entry_regs, WS_REGS_GRANULE) * L.threads;

  /* Register counts: explicit and ENTRY roles first, REST shares the remainder. */
  int fixed = 0, rest_wgs = 0;
  for (int r = 0; r < nroles; r++) {
    int wgs = (L.role_end_warp[r] - L.role_first_warp[r]) / WS_WARPGROUP_WARPS;
    if (roles[r].regs == WS_REGS_REST) { rest_wgs += wgs; continue; }
    L.role_regs[r] = roles[r].regs == WS_REGS_ENTRY ? L.entry_regs : roles[r].regs;
    fixed += L.role_regs[r] * wgs;
  }
  if (rest_wgs > 0) {
    if (!L.setmaxnreg) { L.error = WS_LAYOUT_REST_NO_REGS; return L; }
    int share = (L.pool_regs / (WS_WARPGROUP_WARPS * WS_WARP_SIZE) - fixed) / rest_wgs;
    share = share / WS_REGS_GRANULE * WS_REGS_GRANULE;
    if (share > WS_REGS_MAX) share = WS_REGS_MAX;
    for (int r = 0; r < nroles; r++)
      if (roles[r].regs == WS_REGS_REST) {
        if (share < WS_REGS_MIN) { L.error = WS_LAYOUT_REST_TOO_SMALL; L.err_role = r; return L; }
        L.role_regs[r] = share;
        fixed += share * (L.role_end_warp[r] - L.role_first_warp[r]) / WS_WARPGROUP_WARPS;
      }
  }
  L.pool_used = L.setmaxnreg ? fixed * WS_WARPGROUP_WARPS * WS_WARP_SIZE : L.pool_regs;
  if (L.pool_used > L.pool_regs) { L.error = WS_LAYOUT_POOL; return L; }

  /* Named barriers: 0 is the CTA's; each replica of a multi-warp role gets its own id.
   * One-warp roles synchronise with __syncwarp and need none. */
  int next = 1;
  for (int r = 0; r < nroles; r++) {
    if (roles[r].warps > 1) { L.role_barrier[r] = next; next += roles[r].replicas; }
    if (next - 1 > WS_NAMED_BARRIERS - 1) { L.error = WS_LAYOUT_BARRIERS; L.err_role = r; return L; }
  }
  L.nbarriers = next - 1;
  return L;
}

/* Constant-expression accessors (kernels call these on the constexpr layout). */
WS_CX int ws_layout_role_regs(const ws_layout *L, int role) { return L->role_regs[role]; }
WS_CX int ws_layout_threads(const ws_layout *L) { return L->threads; }

#ifdef __cplusplus
}
#endif
#endif
