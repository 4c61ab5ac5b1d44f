/* role_spec.c - role specs on the command line, and plans known by name. */
#include "cli.h"
#include "../core/internal.h"
#include "../gemm/gemm_args.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ws_status bad(const char *spec, const char *why) {
  return ws_fail(WS_ERR_INVALID, "role spec '%s': %s (expected name:warps:regs[xreplicas], regs a number, rest or entry)",
                 spec, why);
}

ws_status cli_parse_role(const char *spec, ws_role *out, char *name_buf, size_t name_len) {
  if (!spec || !out || !name_buf || name_len == 0) return WS_ERR_INVALID;
  const char *c1 = strchr(spec, ':');
  const char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
  if (!c1 || !c2) return bad(spec, "needs two ':'");
  size_t nlen = (size_t)(c1 - spec);
  if (nlen == 0 || nlen >= name_len) return bad(spec, "name empty or too long");
  memcpy(name_buf, spec, nlen);
  name_buf[nlen] = '\0';
  char *end = NULL;
  errno = 0;
  long warps = strtol(c1 + 1, &end, 10);
  if (end != c2 || warps < 1 || warps > 32) return bad(spec, "warps must be 1..32");
  const char *regs_s = c2 + 1;
  long regs;
  if (strncmp(regs_s, "rest", 4) == 0) { regs = WS_REGS_REST; end = (char *)regs_s + 4; }
  else if (strncmp(regs_s, "entry", 5) == 0) { regs = WS_REGS_ENTRY; end = (char *)regs_s + 5; }
  else {
    errno = 0;
    regs = strtol(regs_s, &end, 10);
    if (end == regs_s) return bad(spec, "regs must be a number, rest or entry");
    /* read whole, before the int the planner takes: 4294967528 must not become 232 */
    if (errno == ERANGE || regs < 1 || regs > 1024) return bad(spec, "regs out of range (24..256, a multiple of 8)");
  }
  long replicas = 1;
  if (*end == 'x') {
    char *e2 = NULL;
    errno = 0;
    replicas = strtol(end + 1, &e2, 10);
    if (e2 == end + 1 || *e2 != '\0' || errno == ERANGE || replicas < 1 || replicas > 32) return bad(spec, "replicas must be 1..32");
  } else if (*end != '\0') {
    return bad(spec, "unexpected text after regs");
  }
  out->name = name_buf;
  out->warps = (int)warps;
  out->regs = (int)regs;
  out->replicas = (int)replicas;
  return WS_OK;
}

/* The seed pair: 3 roles x 4 warps; the twin was built with a 240-register entry cap. */
static const ws_role seed_roles[] = {{"dispatch", 4, WS_REGS_REST, 1}, {"receiver", 4, 80, 1}, {"compute", 4, 184, 1}};
/* CUTLASS / DeepGEMM shape: TMA producer warpgroup, two math warpgroups. */
static const ws_role gemm_roles[] = {{"producer", 1, 40, 1}, {"consumer", 4, 232, 2}};

ws_status cli_named_plan(const char *name, ws_plan *plan) {
  if (strcmp(name, "stream_tma") == 0) return ws_stream_plan(WS_STREAM_STORE_TMA, 0, plan);
  if (strcmp(name, "stream_threads") == 0) return ws_stream_plan(WS_STREAM_STORE_THREADS, 0, plan);
  if (strcmp(name, "gemm_bf16") == 0) return ws_gemm_plan(WS_GEMM_BF16, plan);
  if (strcmp(name, "gemm_fp8") == 0) return ws_gemm_plan(WS_GEMM_FP8, plan);
  if (strcmp(name, "gemm_fp8_wide") == 0) return gemm_plan_of(gemm_fp8_wide_kernel_desc(), plan);
  if (strcmp(name, "seed") == 0) return ws_plan_init(plan, "seed", seed_roles, 3, 0);
  if (strcmp(name, "seed_twin") == 0) return ws_plan_init(plan, "seed_twin", seed_roles, 3, 240);
  if (strcmp(name, "gemm") == 0) return ws_plan_init(plan, "gemm", gemm_roles, 2, 0);
  return ws_fail(WS_ERR_INVALID, "unknown kernel '%s'; known: stream_tma stream_threads gemm_bf16 gemm_fp8 gemm_fp8_wide (library), seed seed_twin gemm (examples)", name);
}
