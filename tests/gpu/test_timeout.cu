/* test_timeout.cu full|empty - a starved pipe returns WS_ERR_TIMEOUT within the bound,
 * naming role, pipe, stage and phase, instead of hanging.
 *   full:  the writer never commits; the reader times out waiting on stage 0.
 *   empty: the reader never releases; the writer times out on its second lap.
 * A timeout traps the kernel and ends the CUDA context, hence one case per process. */
#include "gpu_test.h"
#include "warpspec/device/warpspec.cuh"

#include <sys/time.h>

typedef struct { uint32_t v[4]; } tiny_slot;
WS_PIPE_STORAGE(tiny_pipe, tiny_slot, 2);

#define STARVE_ROLES(ROLE) ROLE(STARVED_WRITER, 1, WS_REGS_ENTRY, 1) ROLE(STARVED_READER, 4, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(starve, STARVE_ROLES);

WS_KERNEL(starve) starve_kernel(int mode, ws_diag diag) {
  __shared__ tiny_pipe st;
  ws_ctx ctx = WS_SELF(starve, diag);
  ws_pipe p = WS_PIPE_VIEW(&st, "starved", WS_ROLE_THREADS(starve, STARVED_WRITER),
                           WS_ROLE_THREADS(starve, STARVED_READER));
  if (threadIdx.x == 0) ws_pipe_init(&p);
  ws_init_sync();
  if (ctx.role == STARVED_WRITER) {
    if (mode == 0) return;                    /* never commits */
    for (uint32_t i = 0; i < 4; i++) {        /* lap 2 needs releases that never come */
      ws_pipe_acquire(&p, &ctx, i);
      ws_pipe_commit(&p, &ctx, i);
    }
  } else {
    ws_pipe_wait(&p, &ctx, 0);                /* mode 1: gets item 0, never releases */
  }
}

static double now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec + tv.tv_usec * 1e-6;
}

int main(int argc, char **argv) {
  require_hopper();
  const int mode = argc > 1 && strcmp(argv[1], "empty") == 0;
  const unsigned bound_ms = 300;
  WS_OK_OR_DIE(ws_set_timeout_ms(bound_ms));
  ws_plan plan;
  WS_OK_OR_DIE(ws_plan_init(&plan, "starve", starve_roles, starve_NROLES, 0));
  ws_diag diag;
  WS_OK_OR_DIE(ws_diag_get(&diag));
  CHECK(diag.timeout_ns == bound_ms * 1000000ull);
  int m = mode;
  void *args[] = {&m, &diag};
  const double t0 = now();
  ws_status s = ws_plan_launch(&plan, (const void *)starve_kernel, dim3{3, 1, 1}, 0, args);
  if (s == WS_OK) s = ws_sync(0);
  const double dt = now() - t0;
  printf("%s after %.3f s: %s\n", ws_strerror(s), dt, ws_last_error());
  CHECK(s == WS_ERR_TIMEOUT);
  CHECK(dt >= bound_ms * 1e-3 * 0.9);
  CHECK(dt < bound_ms * 1e-3 + 10.0);
  CHECK_MSG("'starved'");
  CHECK_MSG("stage 0");
  if (mode == 0) {
    CHECK_MSG("role STARVED_READER");
    CHECK_MSG("phase 0");
    CHECK_MSG("full barrier");
  } else {
    CHECK_MSG("role STARVED_WRITER");
    CHECK_MSG("phase 0");    /* lap 2 waits for parity 0 of the empty barrier */
    CHECK_MSG("empty barrier");
  }
  return test_finish(mode ? "test_timeout empty" : "test_timeout full");
}
