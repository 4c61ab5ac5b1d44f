/* warpspec/device/wait.cuh - bounded waits.
 *
 * Every wait of the library polls with a deadline taken from ws_diag.timeout_ns
 * (host default WS_TIMEOUT_MS_DEFAULT). The fast path is one try_wait; the clock is
 * read only every WS_WAIT_POLLS_PER_CLOCK polls. On expiry the first thread records
 * the fault (block, role, replica, object, stage, phase) in host-mapped memory and
 * every expiring thread traps; ws_sync() on the host turns it into WS_ERR_TIMEOUT.
 * No printf: it would give every kernel a local-memory stack frame. */
#ifndef WARPSPEC_DEVICE_WAIT_CUH
#define WARPSPEC_DEVICE_WAIT_CUH

#include "role.cuh"

WS_DEV void ws_copy_name(char *dst, const char *src) {
  int i = 0;
#pragma unroll 1 /* the fault path: short code, few registers (it runs with all of a role's state live) */
  for (; src && i < WS_NAME_LEN - 1 && src[i]; i++) dst[i] = src[i];
  dst[i] = '\0';
}

WS_DEV uint64_t ws_timeout_ns(const ws_ctx *c) {
  return c->diag.timeout_ns ? c->diag.timeout_ns : (uint64_t)WS_TIMEOUT_MS_DEFAULT * 1000000ull;
}

/* Where a wait or check happened, for the fault record. */
typedef struct {
  const char *object; /* pipe name or transfer name                  */
  int edge;           /* WS_EDGE_*                                   */
  int stage;          /* pipe stage, or the transfer's block         */
  int phase;
  int peer;           /* -1 unless communication                     */
  int rank;
  uint64_t step;
} ws_site;

WS_DEV ws_site ws_site_pipe(const char *object, int edge, int stage, int phase) {
  ws_site s;
  s.object = object; s.edge = edge; s.stage = stage; s.phase = phase; s.peer = -1; s.rank = -1; s.step = 0;
  return s;
}

WS_DEV int ws_site_on_peer(const ws_site *s) { return s->edge == WS_EDGE_PEER_DATA || s->edge == WS_EDGE_PEER_CREDIT; }

/* The bound of a wait at `site` (config.h: WS_LOCAL_WAIT_PATIENCE). */
WS_DEV uint64_t ws_site_bound_ns(const ws_ctx *c, const ws_site *s) {
  return ws_timeout_ns(c) * (ws_site_on_peer(s) ? 1u : (unsigned)WS_LOCAL_WAIT_PATIENCE);
}

/* First thread to fault writes the record and marks the claim done (2); the others
 * wait (bounded) for that before they trap, so no trap cuts the record short. */
WS_DEV void ws_fault_raise(const ws_ctx *c, int code, const ws_site *site, uint64_t waited, const long long *values) {
  if (c->diag.fault && c->diag.claim) {
    if (atomicCAS(c->diag.claim, 0u, 1u) == 0u) {
      ws_fault *f = c->diag.fault;
      f->block = (int)(blockIdx.x + gridDim.x * (blockIdx.y + gridDim.y * blockIdx.z));
      f->thread = (int)threadIdx.x;
      f->role = c->role;
      f->replica = c->replica;
      f->edge = site->edge;
      f->stage = site->stage;
      f->phase = site->phase;
      f->peer = site->peer;
      f->rank = site->rank;
      f->step = site->step;
      for (int i = 0; i < 4; i++) f->value[i] = values ? values[i] : 0;
      f->waited_ns = waited;
      f->timeout_ns = code == WS_FAULT_TIMEOUT ? ws_site_bound_ns(c, site) : ws_timeout_ns(c);
      /* The role index through an opaque move: computed here, on the fault path only,
       * instead of hoisted into every kernel's hot path (where it cost registers). */
      int role;
      asm volatile("mov.b32 %0, %1;" : "=r"(role) : "r"(c->role));
      ws_copy_name(f->role_name, role >= 0 ? c->layout->role_name[role] : "none");
      ws_copy_name(f->object, site->object);
      __threadfence_system();
      f->code = code;
      __threadfence_system();
      atomicExch(c->diag.claim, 2u);
    } else {
      const uint64_t start = ws_globaltimer();
      while (*(volatile unsigned int *)c->diag.claim != 2u && ws_globaltimer() - start < WS_FAULT_RECORD_NS) {
      }
    }
  }
  ws_trap();
}

/* The one bounded poll every library wait is made of: evaluate DONE (re-evaluated each
 * poll) until it holds; read the clock every WS_WAIT_POLLS_PER_CLOCK polls and, past the
 * bound (a peer wait's; a local hand-off gets WS_LOCAL_WAIT_PATIENCE times it), raise a
 * timeout fault at SITE (a ws_site expression, built only then). */
#define WS_POLL_BOUNDED(DONE, CTX, SITE)                                                  \
  do {                                                                                    \
    if (DONE) break;                                                                      \
    const uint64_t ws_start_ = ws_globaltimer(), ws_limit_ = ws_timeout_ns(CTX);          \
    int ws_done_ = 0;                                                                     \
    for (;;) {                                                                            \
      _Pragma("unroll 1") for (int ws_k_ = 0; ws_k_ < WS_WAIT_POLLS_PER_CLOCK && !ws_done_; ws_k_++) \
        ws_done_ = (DONE);                                                                \
      if (ws_done_) break;                                                                \
      const uint64_t ws_waited_ = ws_globaltimer() - ws_start_;                           \
      if (ws_waited_ > ws_limit_) {                                                       \
        const ws_site ws_site_ = (SITE);                                                  \
        if (ws_waited_ > ws_site_bound_ns((CTX), &ws_site_))                              \
          ws_fault_raise((CTX), WS_FAULT_TIMEOUT, &ws_site_, ws_waited_, NULL);           \
      }                                                                                   \
    }                                                                                     \
  } while (0)

/* Wait until the mbarrier phase of `parity` completed, or raise a timeout fault. */
WS_DEV void ws_wait_parity(uint64_t *bar, uint32_t parity, const ws_ctx *c, const char *object, int edge, int stage) {
  WS_POLL_BOUNDED(ws_mbarrier_try_wait_parity(bar, parity), c, ws_site_pipe(object, edge, stage, (int)parity));
}

/* Wait until *flag >= target (system-scope acquire loads), or raise a timeout fault. */
WS_DEV void ws_wait_flag_geq(const uint64_t *flag, uint64_t target, const ws_ctx *c, const ws_site *site) {
  WS_POLL_BOUNDED(ws_ld_acquire_sys_u64(flag) >= target, c, *site);
}

/* Wait until *count >= target (GPU-scope acquire loads: another CTA of the same kernel
 * releases it), or raise a timeout fault. */
WS_DEV void ws_wait_count_geq(const uint32_t *count, uint32_t target, const ws_ctx *c, const ws_site *site) {
  WS_POLL_BOUNDED(ws_ld_acquire_gpu_u32(count) >= target, c, *site);
}

#endif
