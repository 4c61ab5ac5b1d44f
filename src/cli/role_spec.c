/* role_spec.c - role specs on the command line, and plans known by name. */
#include "cli.h"
#include "../core/internal.h"
#include "parse_num.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ws_status bad(const char *spec, const char *why) {
  return ws_fail(WS_ERR_INVALID, "role spec '%s': %s (expected name:warps:regs[xreplicas], regs a number, rest or entry)",
                 spec, why);
}

/* One number of the spec, named in the message as "role spec 'S': FIELD". */
static ws_status spec_number(const char *spec, const char *field, const char *text, long long min, long long max,
                             long long *out) {
  char what[160];
  snprintf(what, sizeof what, "role spec '%.100s': %s", spec, field);
  return cli_parse_int(what, text, min, max, out);
}

ws_status cli_parse_role(const char *spec, ws_role *out, char *name_buf, size_t name_len) {
  WS_REQUIRE(spec && out && name_buf && name_len > 0, "cli_parse_role: spec, out or name_buf is NULL");
  char buf[128];
  const size_t len = strlen(spec);
  if (len >= sizeof buf) return bad(spec, "longer than 127 characters");
  memcpy(buf, spec, len + 1);
  /* name:warps:regs[xreplicas], cut into its fields in place */
  char *warps_s = strchr(buf, ':');
  char *regs_s = warps_s ? strchr(warps_s + 1, ':') : NULL;
  if (!warps_s || !regs_s) return bad(spec, "needs two ':'");
  *warps_s++ = '\0';
  *regs_s++ = '\0';
  char *replicas_s = strchr(regs_s, 'x');
  if (replicas_s) *replicas_s++ = '\0';
  const size_t nlen = strlen(buf);
  if (nlen == 0 || nlen >= name_len) return bad(spec, "name empty or too long");
  long long warps = 0, regs = 0, replicas = 1;
  ws_status s = spec_number(spec, "warps", warps_s, 1, WS_MAX_THREADS / WS_WARP_SIZE, &warps);
  if (s != WS_OK) return s;
  if (strcmp(regs_s, "rest") == 0) regs = WS_REGS_REST;
  else if (strcmp(regs_s, "entry") == 0) regs = WS_REGS_ENTRY;
  else if ((s = spec_number(spec, "regs", regs_s, WS_REGS_MIN, WS_REGS_MAX, &regs)) != WS_OK) return s;
  if (replicas_s && (s = spec_number(spec, "replicas", replicas_s, 1, WS_MAX_THREADS / WS_WARP_SIZE, &replicas)) != WS_OK)
    return s;
  memcpy(name_buf, buf, nlen + 1);
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
  WS_REQUIRE(name != NULL && plan != NULL, "cli_named_plan: name or plan is NULL");
  if (strcmp(name, "stream_tma") == 0) return ws_stream_plan(WS_STREAM_STORE_TMA, 0, plan);
  if (strcmp(name, "stream_threads") == 0) return ws_stream_plan(WS_STREAM_STORE_THREADS, 0, plan);
  if (strcmp(name, "gemm_bf16") == 0) return ws_gemm_plan(WS_GEMM_BF16, plan);
  if (strcmp(name, "gemm_fp8") == 0) return ws_gemm_plan(WS_GEMM_FP8, plan);
  if (strcmp(name, "gemm_fp8_wide") == 0) return ws_gemm_plan_tile(WS_GEMM_FP8, 192, plan);
  if (strcmp(name, "gemm_bf16_skinny") == 0) return ws_gemm_plan_tile(WS_GEMM_BF16, 64, plan);
  if (strcmp(name, "gemm_fp8_skinny") == 0) return ws_gemm_plan_tile(WS_GEMM_FP8, 64, plan);
  if (strcmp(name, "seed") == 0) return ws_plan_init(plan, "seed", seed_roles, 3, 0);
  if (strcmp(name, "seed_twin") == 0) return ws_plan_init(plan, "seed_twin", seed_roles, 3, 240);
  if (strcmp(name, "gemm") == 0) return ws_plan_init(plan, "gemm", gemm_roles, 2, 0);
  return ws_fail(WS_ERR_INVALID, "unknown kernel '%s'; known: stream_tma stream_threads gemm_bf16 gemm_bf16_skinny gemm_fp8 gemm_fp8_wide gemm_fp8_skinny (library), seed seed_twin gemm (examples)", name);
}
