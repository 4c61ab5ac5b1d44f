/* test_roles.cu - roles synchronise on their own named barriers at different
 * iteration counts without interfering, with setmaxnreg and spare warps in play.
 *
 * The TLX deadlock pattern is a CTA-wide bar.sync 0 inside a role: roles that loop a
 * different number of times then wait for each other forever. Here A (2 replicas x 4
 * warps), B (4 warps) and C (1 warp, plus 3 spare warps in its warpgroup) loop 1000+,
 * 37 and 501 times, each exchanging values through shared memory between two role
 * syncs; a wrong barrier shows up as a hang (CTest TIMEOUT) or as wrong values. At the
 * end A's replica 0 and B meet once on a user barrier from the plan's allocator. */
#include "gpu_test.h"
#include "warpspec/device/warpspec.cuh"

#define ROLES_LIST(ROLE)               \
  ROLE(ROLE_A, 4, WS_REGS_REST, 2)     \
  ROLE(ROLE_B, 4, 80, 1)               \
  ROLE(ROLE_C, 1, 40, 1)
WS_DECLARE_ROLES(roles_test, ROLES_LIST);

#define SLOTS 4 /* A0, A1, B, C */

WS_KERNEL(roles_test) roles_test_kernel(int *errors, int *iters, uint32_t user_bar, int *met, ws_diag diag) {
  __shared__ uint32_t buf[SLOTS][128];
  ws_ctx ctx = WS_SELF(roles_test, diag);
  ws_init_sync();
  int n, slot;
  if (ctx.role == ROLE_A) {
    WS_ENTER_ROLE(roles_test, ROLE_A);
    n = 1000 + 17 * ctx.replica;
    slot = ctx.replica;
  } else if (ctx.role == ROLE_B) {
    WS_ENTER_ROLE(roles_test, ROLE_B);
    n = 37;
    slot = 2;
  } else {
    WS_ENTER_ROLE(roles_test, ROLE_C);
    if (ctx.spare) return;
    n = 501;
    slot = 3;
  }
  const int t = ws_role_thread(&ctx), nt = (int)ctx.nthreads;
  int bad = 0;
  for (int it = 0; it < n; it++) {
    buf[slot][t] = (uint32_t)(it * 7919 + t);
    ws_role_sync(&ctx);
    const int u = (t + 1) % nt;
    bad += buf[slot][u] != (uint32_t)(it * 7919 + u);
    ws_role_sync(&ctx);
  }
  atomicAdd(&errors[slot], bad);
  if (ws_role_leader(&ctx)) iters[slot] = n;
  if ((ctx.role == ROLE_A && ctx.replica == 0) || ctx.role == ROLE_B) {
    ws_named_sync(user_bar, 256);
    if (ws_role_leader(&ctx)) atomicAdd(met, 1);
  }
}

int main(void) {
  require_hopper();
  ws_plan plan;
  WS_OK_OR_DIE(ws_plan_init(&plan, "roles_test", roles_test_roles, roles_test_NROLES, 0));
  CHECK(plan.layout.threads == 512);
  CHECK(plan.layout.entry_regs == 128);
  CHECK(plan.layout.role_regs[ROLE_A] == 192);
  int user_bar = 0;
  WS_OK_OR_DIE(ws_plan_add_barrier(&plan, "a0_meets_b", &user_bar));
  CHECK(user_bar == 4); /* A: 1, 2; B: 3; C: __syncwarp */
  ws_plan_print(&plan, stdout);
  int *errors, *iters, *met;
  CUDA_OK(cudaMalloc(&errors, SLOTS * sizeof(int)));
  CUDA_OK(cudaMalloc(&iters, SLOTS * sizeof(int)));
  CUDA_OK(cudaMalloc(&met, sizeof(int)));
  ws_diag diag;
  WS_OK_OR_DIE(ws_diag_get(&diag));
  for (int rep = 0; rep < 5; rep++) {
    CUDA_OK(cudaMemset(errors, 0, SLOTS * sizeof(int)));
    CUDA_OK(cudaMemset(iters, 0xFF, SLOTS * sizeof(int)));
    CUDA_OK(cudaMemset(met, 0, sizeof(int)));
    uint32_t ub = (uint32_t)user_bar;
    void *args[] = {&errors, &iters, &ub, &met, &diag};
    WS_OK_OR_DIE(ws_plan_launch(&plan, (const void *)roles_test_kernel, dim3{132, 1, 1}, 0, args));
    WS_OK_OR_DIE(ws_sync(0));
    int h_err[SLOTS], h_it[SLOTS], h_met;
    CUDA_OK(cudaMemcpy(h_err, errors, sizeof h_err, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(h_it, iters, sizeof h_it, cudaMemcpyDeviceToHost));
    CUDA_OK(cudaMemcpy(&h_met, met, sizeof h_met, cudaMemcpyDeviceToHost));
    const int want[SLOTS] = {1000, 1017, 37, 501};
    for (int s = 0; s < SLOTS; s++) {
      CHECK(h_err[s] == 0);
      CHECK(h_it[s] == want[s]);
    }
    CHECK(h_met == 2 * 132);
  }
  return test_finish("test_roles");
}
