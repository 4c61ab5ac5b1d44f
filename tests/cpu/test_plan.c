/* test_plan.c - the budget check on valid and invalid plans, the layout arithmetic,
 * the barrier allocator, and the compiled-kernel comparison. No GPU needed. */
#include "../test.h"

#include <limits.h>

static void seed_pair(void) {
  /* The seed: dispatch + receiver + compute, 4 warps each = 384 threads. */
  const ws_role roles[] = {{"dispatch", 4, WS_REGS_REST, 1}, {"receiver", 4, 80, 1}, {"compute", 4, 184, 1}};
  ws_plan p;
  CHECK_STATUS(ws_plan_init(&p, "seed", roles, 3, 0), WS_OK);
  CHECK(p.layout.threads == 384);
  CHECK(p.layout.entry_regs == 168);
  CHECK(p.layout.role_regs[0] == 240); /* 3 x 168 - 80 - 184 */
  CHECK(p.layout.pool_used <= p.layout.pool_regs);
  CHECK(p.layout.nbarriers == 3);

  /* Its twin: a 240-register entry cap, which the driver turns into 256 threads. */
  CHECK_STATUS(ws_plan_init(&p, "seed_twin", roles, 3, 240), WS_ERR_BUDGET);
  CHECK_MSG("registers, not threads");
  CHECK_MSG("240 registers x 384 threads");
  CHECK_MSG("256 threads per block");
  CHECK_MSG("<= 168");
}

/* The entry cap ptxas derives from __launch_bounds__(threads, 1): whole 4-warp groups
 * (measured with nvcc 13.0, sm_90a). 288 threads (two warpgroups and a loader warp) get
 * 168, not 65536 / 288 = 224. */
static void entry_cap(void) {
  CHECK(ws_entry_regs_for(256) == 256);
  CHECK(ws_entry_regs_for(288) == 168);
  CHECK(ws_entry_regs_for(384) == 168);
  CHECK(ws_entry_regs_for(416) == 128);
  CHECK(ws_entry_regs_for(640) == 96);
  const ws_role fp8[] = {{"math", 4, WS_REGS_ENTRY, 2}, {"loader", 1, WS_REGS_ENTRY, 1}};
  ws_plan p;
  CHECK_STATUS(ws_plan_init(&p, "gemm_fp8", fp8, 2, 0), WS_OK);
  CHECK(p.layout.threads == 288);
  CHECK(p.layout.entry_regs == 168);
}

static void register_pool(void) {
  const ws_role cutlass[] = {{"producer", 1, 40, 1}, {"consumer", 4, 232, 2}};
  ws_plan p;
  CHECK_STATUS(ws_plan_init(&p, "gemm", cutlass, 2, 0), WS_OK);
  CHECK(p.layout.threads == 384);
  CHECK(p.layout.pool_used == 504 * 128);
  CHECK(p.layout.role_first_warp[1] == 4); /* producer pads its warpgroup */
  CHECK(p.layout.role_end_warp[0] == 4);
  CHECK(p.layout.role_barrier[0] == 0);    /* one warp: __syncwarp */
  CHECK(p.layout.role_barrier[1] == 1);    /* replicas 0, 1 -> ids 1, 2 */
  CHECK(p.layout.nbarriers == 2);

  /* TIRx-kernels#165 shape: 232 + 232 + 96 per warpgroup > 504. */
  const ws_role over[] = {{"a", 4, 232, 1}, {"b", 4, 232, 1}, {"c", 4, 96, 1}};
  CHECK_STATUS(ws_plan_init(&p, "over", over, 3, 0), WS_ERR_BUDGET);
  CHECK_MSG("wait forever");
  CHECK_MSG("560");
  CHECK_MSG("lower role");

  const ws_role rest_small[] = {{"a", 4, 256, 1}, {"b", 4, 240, 1}, {"c", 4, WS_REGS_REST, 1}};
  CHECK_STATUS(ws_plan_init(&p, "rest", rest_small, 3, 0), WS_ERR_BUDGET);
  CHECK_MSG("WS_REGS_REST");

  const ws_role rest_alone[] = {{"a", 4, WS_REGS_REST, 1}, {"b", 4, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "rest_alone", rest_alone, 2, 0), WS_OK);
  CHECK(p.layout.role_regs[0] == 256);      /* 2 x 256 - 256 entry, capped at 256 */

  const ws_role odd[] = {{"a", 4, 180, 1}};
  CHECK_STATUS(ws_plan_init(&p, "odd", odd, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("176 or 184");
  const ws_role low[] = {{"a", 4, 16, 1}};
  CHECK_STATUS(ws_plan_init(&p, "low", low, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("use 24");
}

static void threads_and_packing(void) {
  ws_plan p;
  /* No setmaxnreg: roles pack without padding. */
  const ws_role packed[] = {{"send", 1, WS_REGS_ENTRY, 1}, {"recv", 1, WS_REGS_ENTRY, 1}, {"mid", 2, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "packed", packed, 3, 0), WS_OK);
  CHECK(p.layout.threads == 128);
  CHECK(p.layout.role_first_warp[1] == 1 && p.layout.role_first_warp[2] == 2);
  CHECK(p.layout.setmaxnreg == 0);

  const ws_role big[] = {{"a", 16, WS_REGS_ENTRY, 2}, {"b", 1, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "big", big, 2, 0), WS_ERR_BUDGET);
  CHECK_MSG("1024 threads");

  /* Padding counts: 7 one-warp roles with setmaxnreg each own a warpgroup = 896
   * threads; an 8th would need 1024 + ... fine at 8 (1024), so use 9 via replicas. */
  const ws_role pad[] = {{"a", 1, 40, 1}, {"b", 1, 40, 1}, {"c", 1, 40, 1}, {"d", 1, 40, 1},
                         {"e", 1, 40, 1}, {"f", 1, 40, 1}, {"g", 1, 40, 1}, {"h", 1, 40, 2}};
  CHECK_STATUS(ws_plan_init(&p, "pad", pad, 8, 0), WS_OK);
  CHECK(p.layout.threads == 1024);
  CHECK(p.layout.entry_regs == 64);

  const ws_role none[] = {{"a", 1, 40, 1}};
  CHECK_STATUS(ws_plan_init(&p, "none", none, 0, 0), WS_ERR_INVALID);
  const ws_role zero_w[] = {{"a", 0, 40, 1}};
  CHECK_STATUS(ws_plan_init(&p, "zw", zero_w, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("warps 0");
  const ws_role zero_r[] = {{"a", 1, 40, 0}};
  CHECK_STATUS(ws_plan_init(&p, "zr", zero_r, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("replicas 0");
  const ws_role noname[] = {{"", 1, 40, 1}};
  CHECK_STATUS(ws_plan_init(&p, "nn", noname, 1, 0), WS_ERR_INVALID);
}

static void barrier_allocator(void) {
  ws_plan p;
  /* 7 two-warp roles x 2 replicas = 14 role barriers; one user barrier fits. */
  const ws_role many[] = {{"r0", 2, WS_REGS_ENTRY, 2}, {"r1", 2, WS_REGS_ENTRY, 2}, {"r2", 2, WS_REGS_ENTRY, 2},
                          {"r3", 2, WS_REGS_ENTRY, 2}, {"r4", 2, WS_REGS_ENTRY, 2}, {"r5", 2, WS_REGS_ENTRY, 2},
                          {"r6", 2, WS_REGS_ENTRY, 2}};
  CHECK_STATUS(ws_plan_init(&p, "many", many, 7, 0), WS_OK);
  CHECK(p.layout.nbarriers == 14);
  int id = -1;
  CHECK_STATUS(ws_plan_add_barrier(&p, "handshake", &id), WS_OK);
  CHECK(id == 15);
  CHECK_STATUS(ws_plan_add_barrier(&p, "one_too_many", &id), WS_ERR_BUDGET);
  CHECK_MSG("one_too_many");
  CHECK_MSG("1: role r0 replica 0");
  CHECK_MSG("15: user barrier handshake");
  char owner[96];
  CHECK_STATUS(ws_plan_barrier_owner(&p, 4, owner, sizeof owner), WS_OK);
  CHECK(strstr(owner, "r1 replica 1") != NULL);
  CHECK_STATUS(ws_plan_barrier_owner(&p, 16, owner, sizeof owner), WS_ERR_INVALID);

  const ws_role too_many[] = {{"r0", 2, WS_REGS_ENTRY, 8}, {"r1", 2, WS_REGS_ENTRY, 8}};
  CHECK_STATUS(ws_plan_init(&p, "too_many", too_many, 2, 0), WS_ERR_BUDGET);
  CHECK_MSG("named barriers");

  const ws_role one[] = {{"solo", 1, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "solo", one, 1, 0), WS_OK);
  CHECK_STATUS(ws_plan_add_barrier(&p, "", &id), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_add_barrier(&p, "x", NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_add_barrier(&p, "first", &id), WS_OK);
  CHECK(id == 1);
}

/* Each field of a role is bounded before the layout multiplies or adds it: a replica
 * count near INT_MAX once wrapped the warp total and came back WS_OK with 0 threads. */
static void field_bounds(void) {
  ws_plan p;
  const ws_role huge_rep[] = {{"spin", 1, 40, INT_MAX}};
  CHECK_STATUS(ws_plan_init(&p, "huge_rep", huge_rep, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("role 'spin'");
  CHECK_MSG("replicas 2147483647");
  CHECK_MSG("1..32");
  const ws_role huge_rep_entry[] = {{"a", 4, WS_REGS_ENTRY, 1}, {"b", 2, WS_REGS_ENTRY, INT_MAX / 2 + 1}};
  CHECK_STATUS(ws_plan_init(&p, "huge_rep_entry", huge_rep_entry, 2, 0), WS_ERR_INVALID);
  CHECK_MSG("role 'b'");
  const ws_role neg_rep[] = {{"a", 1, WS_REGS_ENTRY, INT_MIN}};
  CHECK_STATUS(ws_plan_init(&p, "neg_rep", neg_rep, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("replicas -2147483648");
  const ws_role huge_warps[] = {{"a", INT_MAX, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "huge_warps", huge_warps, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("warps 2147483647");
  const ws_role huge_regs[] = {{"a", 4, INT_MAX, 1}, {"b", 4, INT_MIN, 1}};
  CHECK_STATUS(ws_plan_init(&p, "huge_regs", huge_regs, 2, 0), WS_ERR_INVALID);
  CHECK_MSG("2147483647 registers");
  const ws_role one[] = {{"a", 1, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "huge_entry", one, 1, INT_MAX), WS_ERR_INVALID);
  CHECK_MSG("2147483647");
  /* every field in range, the total not: still a budget error, never a wrap */
  const ws_role wide[] = {{"a", 32, WS_REGS_ENTRY, 32}, {"b", 32, 40, 32}};
  CHECK_STATUS(ws_plan_init(&p, "wide", wide, 2, 0), WS_ERR_BUDGET);
  CHECK_MSG("1024 threads");
  /* the largest legal replica count of one-warp roles fills the CTA exactly */
  const ws_role full[] = {{"lane", 1, WS_REGS_ENTRY, 32}};
  CHECK_STATUS(ws_plan_init(&p, "full", full, 1, 0), WS_OK);
  CHECK(p.layout.threads == 1024);
}

/* Setters on a plan that ws_plan_init refused (or never saw), and sizes that can only
 * be a negative number converted to size_t. */
static void setter_bounds(void) {
  ws_plan p;
  const ws_role bad[] = {{"a", 1, 40, 0}};
  CHECK_STATUS(ws_plan_init(&p, "refused", bad, 1, 0), WS_ERR_INVALID);
  int id = -1;
  CHECK_STATUS(ws_plan_add_barrier(&p, "b", &id), WS_ERR_INVALID);
  CHECK_MSG("ws_plan_init");
  char owner[96];
  CHECK_STATUS(ws_plan_barrier_owner(&p, 1, owner, sizeof owner), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_set_smem(&p, 1024), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_print(&p, stdout), WS_ERR_INVALID);
  ws_device_limits h200 = {0, "NVIDIA H200", 9, 0, 132, 232448, 65536, 1024, 60u << 20, 0};
  CHECK_STATUS(ws_plan_check_limits(&p, &h200), WS_ERR_INVALID);
  ws_plan zero;
  memset(&zero, 0, sizeof zero);
  CHECK_STATUS(ws_plan_add_barrier(&zero, "b", &id), WS_ERR_INVALID);
  CHECK_MSG("ws_plan_init");
  /* a plan whose counts were overwritten: refused, not read out of bounds */
  const ws_role ok[] = {{"a", 2, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "ok", ok, 1, 0), WS_OK);
  p.nuser_barriers = -5;
  CHECK_STATUS(ws_plan_add_barrier(&p, "b", &id), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_init(&p, "ok", ok, 1, 0), WS_OK);
  CHECK_STATUS(ws_plan_set_smem(&p, (size_t)-1), WS_ERR_INVALID);
  CHECK_MSG("18446744073709551615");
  CHECK_STATUS(ws_plan_set_smem(&p, (size_t)INT_MAX + 1), WS_ERR_INVALID);
  CHECK(p.smem_bytes == 0); /* a refused size leaves the old one */
  CHECK_STATUS(ws_plan_set_smem(&p, (size_t)INT_MAX), WS_OK); /* the device check judges this one */
}

static void kernel_attrs(void) {
  const ws_role roles[] = {{"dispatch", 4, WS_REGS_REST, 1}, {"receiver", 4, 80, 1}, {"compute", 4, 184, 1}};
  ws_plan p;
  CHECK_STATUS(ws_plan_init(&p, "seed", roles, 3, 0), WS_OK);
  ws_kernel_attrs good = {168, 384, 0, 0};
  CHECK_STATUS(ws_plan_check_attrs(&p, &good), WS_OK);
  /* The twin as the driver reports it: 232 registers -> 256 threads. */
  ws_kernel_attrs twin = {232, 256, 0, 0};
  CHECK_STATUS(ws_plan_check_attrs(&p, &twin), WS_ERR_MISMATCH);
  CHECK_MSG("registers, not threads");
  CHECK_MSG("entry cap of 168");
  /* setmaxnreg dropped (C7508): the kernel has whatever count ptxas liked. */
  ws_kernel_attrs dropped = {64, 1024, 0, 0};
  CHECK_STATUS(ws_plan_check_attrs(&p, &dropped), WS_ERR_MISMATCH);
  CHECK_MSG("C7508");
  ws_kernel_attrs spills = {168, 384, 64, 0};
  CHECK_STATUS(ws_plan_check_attrs(&p, &spills), WS_ERR_MISMATCH);
  CHECK_MSG("local memory");
  CHECK_STATUS(ws_plan_check_attrs(&p, NULL), WS_ERR_INVALID);

  ws_device_limits h200 = {0, "NVIDIA H200", 9, 0, 132, 232448, 65536, 1024, 60u << 20, 0};
  CHECK_STATUS(ws_plan_set_smem(&p, 200000), WS_OK);
  CHECK_STATUS(ws_plan_check_limits(&p, &h200), WS_OK);
  CHECK_STATUS(ws_plan_set_smem(&p, 240000), WS_OK);
  CHECK_STATUS(ws_plan_check_limits(&p, &h200), WS_ERR_BUDGET);
  CHECK_MSG("232448");
  ws_device_limits a100 = h200;
  a100.cc_major = 8;
  CHECK_STATUS(ws_plan_check_limits(&p, &a100), WS_ERR_NO_DEVICE);
  CHECK_MSG("sm_80");
}

static void print_table(void) {
  const ws_role roles[] = {{"producer", 1, 40, 1}, {"consumer", 4, 232, 2}};
  ws_plan p;
  CHECK_STATUS(ws_plan_init(&p, "gemm", roles, 2, 0), WS_OK);
  int id;
  CHECK_STATUS(ws_plan_add_barrier(&p, "epilogue", &id), WS_OK);
  char buf[4096] = "";
  FILE *f = fmemopen(buf, sizeof buf, "w");
  CHECK(f != NULL);
  CHECK_STATUS(ws_plan_print(&p, f), WS_OK);
  fclose(f);
  CHECK(strstr(buf, "384 threads") != NULL);
  CHECK(strstr(buf, "warpgroup registers: 40 232 232") != NULL);
  CHECK(strstr(buf, "3 = user barrier epilogue") != NULL);
  CHECK_STATUS(ws_plan_print(NULL, stdout), WS_ERR_INVALID);
}

int main(void) {
  seed_pair();
  entry_cap();
  register_pool();
  threads_and_packing();
  barrier_allocator();
  field_bounds();
  setter_bounds();
  kernel_attrs();
  print_table();
  return test_finish("test_plan");
}
