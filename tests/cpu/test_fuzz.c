/* test_fuzz.c - the host-side argument checkers and the command line's parsers fed random
 * and boundary values (0, +-1, INT_MIN, INT_MAX, powers of two around the 32-bit edge,
 * NULL): each must return a status, never crash or overflow. Most useful in the
 * sanitizer build (WS_SANITIZE=ON: AddressSanitizer and UndefinedBehaviorSanitizer, the
 * CTest label "sanitize"), where a signed overflow or an out-of-bounds read inside a check
 * stops the test. Deterministic: the seed is fixed, so a failure repeats. No GPU. */
#include "../test.h"
#include "../../src/cli/cli.h"
#include "../../src/cli/parse_num.h"
#include "warpspec/check.h"

#include <limits.h>
#include <stdint.h>
#include <stdio.h>

static uint64_t state = 0x9E3779B97F4A7C15ull;
static uint64_t next(void) {
  state ^= state << 13;
  state ^= state >> 7;
  state ^= state << 17;
  return state;
}

/* Mostly edge values, sometimes anything, sometimes small valid-looking ones. */
static int pick(void) {
  static const int edge[] = {0, 1, -1, 2, 7, 8, 16, 24, 32, 33, 64, 127, 128, 129, 255, 256, 512, 576, 1024, 4096,
                             65535, 65536, 1 << 20, 1 << 26, (1 << 30) + 1, INT_MAX, INT_MAX - 1, INT_MIN, INT_MIN + 1};
  const uint64_t r = next();
  switch (r % 4) {
  case 0: return (int)(uint32_t)(r >> 8);
  case 1: return (int)((r >> 8) % 300);
  default: return edge[(r >> 8) % (sizeof edge / sizeof edge[0])];
  }
}

/* A 16-byte aligned address that is never dereferenced by a check, or NULL. */
static char arena[256] __attribute__((aligned(16)));
static void *ptr(void) {
  const uint64_t r = next() % 8;
  return r == 0 ? NULL : r == 1 ? arena + 4 : arena;
}

static long calls;
#define FUZZ(call) do { const ws_status s_ = (call); calls++; CHECK(s_ >= WS_OK && s_ <= WS_ERR_UNSUPPORTED); } while (0)

static void fuzz_parsers(int n) {
  static const char *texts[] = {"", " ", "0", "1", "-1", "+3", "2abc", "4294967298", "-4294967298", "9223372036854775807",
                                "9223372036854775808", "1e23", "nan", "inf", "-inf", "0x10", "1.5", "abc", "64", "65",
                                "  7", "7 ", "1e-400", "0.001", "-0"};
  FILE *keep = stderr;
  stderr = fopen("/dev/null", "w"); /* the parsers explain every refusal there */
  for (int i = 0; i < n; i++) {
    const char *t = texts[next() % (sizeof texts / sizeof texts[0])];
    long long l = 0;
    int v = 0;
    double d = 0;
    const long long lo = pick(), hi = pick();
    if (cli_parse_long("fuzz", t, lo, hi, &l)) CHECK(l >= lo && l <= hi);
    if (cli_parse_int("fuzz", t, lo < hi ? (int)lo : (int)hi, lo < hi ? (int)hi : (int)lo, &v)) CHECK(1);
    if (cli_parse_double("fuzz", t, -1e6, 1e6, &d)) CHECK(d >= -1e6 && d <= 1e6);
    calls += 3;
    /* role specs: the parts in random order and size */
    char spec[96];
    snprintf(spec, sizeof spec, "%s:%s:%s%s%s", (next() & 1) ? "r" : "", texts[next() % 25], (next() & 3) ? texts[next() % 25] : "rest",
             (next() & 1) ? "x" : "", (next() & 1) ? texts[next() % 25] : "");
    ws_role role;
    char name[WS_NAME_LEN];
    if (cli_parse_role(spec, &role, name, sizeof name) == WS_OK) CHECK(role.warps >= 1 && role.warps <= 32 && role.replicas >= 1);
    calls++;
  }
  fclose(stderr);
  stderr = keep;
}

static void fuzz_plans(int n) {
  for (int i = 0; i < n; i++) {
    ws_role roles[WS_MAX_ROLES + 1];
    const int nroles = (int)(next() % (WS_MAX_ROLES + 2)) - (int)(next() % 2);
    for (int r = 0; r < WS_MAX_ROLES + 1; r++) {
      roles[r].name = (next() % 9) ? "role" : NULL;
      roles[r].warps = pick();
      roles[r].regs = (next() & 1) ? pick() : (int)(next() % 3) - 1;
      roles[r].replicas = pick();
    }
    ws_plan p;
    const ws_status s = ws_plan_init(&p, (next() % 7) ? "fuzz" : NULL, roles, nroles, (next() & 1) ? pick() : 0);
    calls++;
    CHECK(s >= WS_OK && s <= WS_ERR_UNSUPPORTED);
    if (s == WS_OK) {
      CHECK(p.layout.threads >= 32 && p.layout.threads <= 1024 && p.layout.pool_used <= p.layout.pool_regs);
      FUZZ(ws_plan_set_smem(&p, (size_t)(uint32_t)pick()));
      int id;
      FUZZ(ws_plan_add_barrier(&p, (next() & 1) ? "b" : "", (next() % 5) ? &id : NULL));
      char owner[64];
      FUZZ(ws_plan_barrier_owner(&p, pick(), owner, sizeof owner));
      ws_kernel_attrs a = {pick(), pick(), (size_t)(uint32_t)pick(), (size_t)(uint32_t)pick()};
      FUZZ(ws_plan_check_attrs(&p, &a));
      ws_device_limits lim = {0, "fuzz", pick(), pick(), pick(), pick(), pick(), pick(), (size_t)(uint32_t)pick(), 0};
      FUZZ(ws_plan_check_limits(&p, &lim));
    }
  }
}

static void fuzz_problems(int n) {
  for (int i = 0; i < n; i++) {
    ws_gemm_problem g = {(ws_gemm_type)(next() % 3), (ws_gemm_layout)(next() % 4), pick(), pick(), pick(), pick(), ptr(),
                         ptr(), ptr(), (const float *)ptr(), (const float *)ptr(), (const int *)ptr(), (const int *)ptr(),
                         ptr(), (size_t)(uint32_t)pick(), pick()};
    FUZZ(ws_gemm_check(&g));
    ws_attn_problem a;
    a.batch = pick(); a.seqlen_q = pick(); a.seqlen_k = pick();
    a.cu_seqlens_q = (const int *)ptr(); a.cu_seqlens_k = (next() & 1) ? a.cu_seqlens_q : (const int *)ptr();
    a.heads_q = pick(); a.heads_kv = pick(); a.dim_qk = pick(); a.dim_v = pick(); a.mask = (ws_attn_mask)(next() % 4);
    a.softmax_scale = (float)pick(); a.q = ptr(); a.k = ptr(); a.v = ptr(); a.o = ptr(); a.lse = (float *)ptr();
    a.total_q = pick(); a.total_k = pick();
    FUZZ(ws_attn_check(&a));
    ws_mla_sparse_problem m = {pick(), pick(), pick(), pick(), pick(), pick(), (float)pick(), ptr(), ptr(),
                               (const int *)ptr(), ptr(), (float *)ptr()};
    FUZZ(ws_mla_sparse_check(&m));
    ws_mla_decode_problem d;
    d.batch = pick(); d.s_q = pick(); d.heads = pick(); d.dim_qk = (next() & 1) ? 576 : pick(); d.dim_v = (next() & 1) ? 512 : pick();
    d.page_size = pick(); d.num_pages = pick(); d.max_pages = pick(); d.max_seqlen = pick(); d.softmax_scale = 0.0f;
    d.q = ptr(); d.kv_cache = ptr(); d.block_table = (const int *)ptr(); d.seqlens = (const int *)ptr(); d.o = ptr();
    d.lse = (float *)ptr(); d.kv_fp8 = (int)(next() % 3);
    FUZZ(ws_mla_decode_check(&d));
    ws_nsa_problem ns = {pick(), pick(), pick(), pick(), pick(), pick(), pick(), 0.0f, ptr(), ptr(), ptr(),
                         (const int *)ptr(), ptr(), (float *)ptr()};
    FUZZ(ws_nsa_check(&ns));
    ws_ep_config e = {pick(), pick(), pick(), pick(), (ws_ep_payload)(next() % 3), pick(), pick(), (ws_ep_mode)(next() % 3)};
    const int nranks = pick();
    FUZZ(ws_ep_config_check(&e, nranks));
    (void)ws_ep_max_rows(&e, nranks); /* any value; only no overflow trap */
    calls++;
    FUZZ(ws_set_check_mode(pick()));
  }
  ws_set_check_mode(-1);
}

int main(void) {
  fuzz_parsers(20000);
  fuzz_plans(20000);
  fuzz_problems(20000);
  printf("test_fuzz: %ld calls\n", calls);
  return test_finish("test_fuzz");
}
