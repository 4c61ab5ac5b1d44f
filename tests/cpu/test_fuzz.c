/* test_fuzz.c - random and boundary arguments for the command line's parsers (numbers,
 * role specs, kernel names) and the library's host-side argument checks. What is
 * claimed: every call returns, with a status or a size; under WS_SANITIZE=ON (CI's
 * build-asan) also without a memory error or undefined behaviour, which abort the run.
 * A few properties of the parsers' results ride along. Deterministic:
 *   test_fuzz [SEED [AREA...]]   AREA: numbers roles plans gemm attention moe sendrecv
 * (a failure under the sanitizers names the call; the seed and area reproduce it). */
#include "../test.h"
#include "../../src/cli/cli.h"
#include "../../src/cli/parse_num.h"
#include "../../src/moe/layer/layer_auto.h"
#include "warpspec/sendrecv_geometry.h"

#include <float.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>

/* ---- deterministic values: xorshift64*, boundaries first ----------------------------- */
static uint64_t rng = 0x9e3779b97f4a7c15ull;

static uint64_t next_u64(void) {
  rng ^= rng >> 12;
  rng ^= rng << 25;
  rng ^= rng >> 27;
  return rng * 0x2545f4914f6cdd1dull;
}

static unsigned below(unsigned n) { return (unsigned)(next_u64() % n); }
#define PICK(table) ((table)[below((unsigned)(sizeof(table) / sizeof((table)[0])))])

static const int edge_ints[] = {0, 1, -1, 2, 3, 4, 7, 8, 16, 23, 24, 31, 32, 33, 40, 64, 100, 128, 184, 232, 240,
                                255, 256, 257, 512, 576, 1024, 4096, 46341, 65536, 65537, 1 << 20, (1 << 20) + 1,
                                1 << 30, INT_MAX - 1, INT_MAX, INT_MIN, INT_MIN + 1, -8, -128};

static int fuzz_int(void) {
  switch (below(4)) {
  case 0: return PICK(edge_ints);
  case 1: return (int)(int32_t)(uint32_t)next_u64();
  case 2: return (int)below(1025);
  default: return (int)below(64) * 64;
  }
}

static long long fuzz_ll(void) {
  static const long long edge[] = {0, 1, -1, 64, 255, INT_MAX, INT_MIN, (long long)INT_MAX + 1, LLONG_MAX, LLONG_MIN,
                                   LLONG_MAX - 1, LLONG_MIN + 1, 1ll << 40};
  return below(3) ? PICK(edge) : (long long)next_u64();
}

static uint64_t fuzz_u64(void) {
  static const uint64_t edge[] = {0, 1, 15, 16, 17, 4096, 8192, 65536, 1u << 20, 1ull << 31, 1ull << 32, 1ull << 40,
                                  UINT64_MAX, UINT64_MAX / 2, UINT64_MAX - 15};
  switch (below(3)) {
  case 0: return PICK(edge);
  case 1: return next_u64();
  default: return next_u64() % (1u << 24);
  }
}

static size_t fuzz_size(void) { return (size_t)fuzz_u64(); }

static float fuzz_float(void) {
  static const float edge[] = {0.0f, -0.0f, 1.0f, -1.0f, 0.125f, 1e-30f, FLT_MIN, FLT_MAX, -FLT_MAX, INFINITY, -INFINITY};
  if (below(8) == 0) return NAN;
  if (below(2)) return PICK(edge);
  const uint32_t bits = (uint32_t)next_u64();
  float f;
  memcpy(&f, &bits, sizeof f);
  return f;
}

static double fuzz_double(void) {
  static const double edge[] = {0.0, -0.0, 1.0, -1.0, 64.0, 1e6, 1e-300, DBL_MAX, -DBL_MAX, INFINITY, -INFINITY};
  if (below(10) == 0) return NAN;
  if (below(2)) return PICK(edge);
  const uint64_t bits = next_u64();
  double d;
  memcpy(&d, &bits, sizeof d);
  return d;
}

/* Pointers the checks only test (NULL, alignment): never device memory, but real host
 * memory, so that a check that does read one stays inside what the sanitizer allows. */
static _Alignas(16) unsigned char arena[4096];
static void *fuzz_ptr(void) {
  switch (below(5)) {
  case 0: return NULL;
  case 1: return arena + 1;
  case 2: return arena + 8;
  default: return arena + 16 * below(8);
  }
}

/* Text for the number parsers: boundaries, numbers printed at random, random characters. */
static const char *const edge_texts[] = {
    "", "0", "-0", "+1", "1", "-1", " 1", "1 ", "\t1", "2abc", "abc", "4294967298", "4294967528", "2147483648",
    "9223372036854775807", "9223372036854775808", "-9223372036854775808", "-9223372036854775809",
    "99999999999999999999999999", "1e23", "1e400", "-1e400", "1e-400", "nan", "NAN", "inf", "-inf", "infinity",
    "0x10", "0x1p3", "1.5", ".", "-", "+", "e", "1e", "1e+", "0.0000001", "007", "1,000", "64", "255", "256"};

static void fuzz_text(char *buf, size_t cap) {
  static const char chars[] = "0123456789+-.eExXabinf :\t";
  switch (below(4)) {
  case 0: snprintf(buf, cap, "%s", PICK(edge_texts)); return;
  case 1: snprintf(buf, cap, "%lld", fuzz_ll()); return;
  case 2: snprintf(buf, cap, "%.17g", fuzz_double()); return;
  default: {
    const size_t n = below((unsigned)cap);
    for (size_t i = 0; i < n; i++) buf[i] = chars[below(sizeof chars - 1)];
    buf[n] = '\0';
  }
  }
}

/* ---- the command line's parsers -------------------------------------------------------- */
/* Calls a parser accepted: a fuzz that never reaches the accepting paths tests little. */
static int accepted_numbers, accepted_roles, accepted_plans;

static void fuzz_numbers(int iters) {
  char text[48], again[48];
  for (int i = 0; i < iters; i++) {
    fuzz_text(text, sizeof text);
    const char *t = below(64) ? text : NULL;
    const char *opt = below(16) ? "--opt" : NULL;
    long long v = 0, min = fuzz_ll(), max = below(4) || min > LLONG_MAX - 1000 ? fuzz_ll() : min + (long long)below(1000);
    if (max < min && below(2)) max = LLONG_MAX;
    const int with_out = below(64) != 0;
    if (cli_parse_int(opt, t, min, max, with_out ? &v : NULL) == WS_OK) {
      accepted_numbers++;
      CHECK(t && with_out && v >= min && v <= max);
      snprintf(again, sizeof again, "%lld", v);
      long long w = 0;
      CHECK(cli_parse_int("again", again, v, v, &w) == WS_OK && w == v);
    } else {
      CHECK(ws_last_error()[0] != '\0');
    }
    double d = 0, lo = fuzz_double(), hi = below(4) ? fuzz_double() : INFINITY;
    if (cli_parse_real(opt, t, lo, hi, with_out ? &d : NULL) == WS_OK) CHECK(isfinite(d) && d >= lo && d <= hi);
    else CHECK(ws_last_error()[0] != '\0');
  }
}

static void fuzz_roles(int iters) {
  static const char *const parts[] = {"a", "producer", "", ":", "::", "x", "x2", "rest", "entry", "restx2", "0", "1",
                                      "4", "32", "33", "-1", "24", "256", "232", "4294967528", "99999999999999999999",
                                      " 8", "8 ", "+8", "1e2", "x0", "x33", "xx", "a_role_name_that_is_far_too_long"};
  static const char *const kernels[] = {"stream_tma", "stream_threads", "gemm_bf16", "gemm_fp8", "gemm_fp8_wide",
                                        "seed", "seed_twin", "gemm", "", "gemm_fp8x", "SEED"};
  char spec[320], piece[48], name[WS_NAME_LEN];
  for (int i = 0; i < iters; i++) {
    spec[0] = '\0';
    if (below(2)) { /* name:warps:regs[xreplicas], each field plausible or not */
      static const char *const warps[] = {"1", "4", "8", "32", "0", "33", "-1", "4294967297"};
      static const char *const regs[] = {"rest", "entry", "24", "80", "232", "256", "0", "264", "4294967528"};
      static const char *const replicas[] = {"", "x1", "x2", "x32", "x0", "x33", "x", "x4294967298"};
      char w[48], r[48], x[48];
      if (below(4)) snprintf(w, sizeof w, "%s", PICK(warps)); else fuzz_text(w, sizeof w);
      if (below(4)) snprintf(r, sizeof r, "%s", PICK(regs)); else fuzz_text(r, sizeof r);
      if (below(4)) snprintf(x, sizeof x, "%s", PICK(replicas)); else fuzz_text(x, sizeof x);
      snprintf(spec, sizeof spec, "%s:%s:%s%s", below(8) ? "role" : PICK(parts), w, r, x);
    } else {
      const int n = 1 + (int)below(8);
      for (int p = 0; p < n; p++) {
        if (below(4) == 0) fuzz_text(piece, sizeof piece);
        else snprintf(piece, sizeof piece, "%s", PICK(parts));
        strncat(spec, piece, sizeof spec - strlen(spec) - 1);
      }
    }
    if (below(64) == 0) { /* longer than the parser's buffer */
      memset(spec, 'a', 300);
      memcpy(spec + 290, ":4:rest", 8);
    }
    ws_role r;
    memset(&r, 0, sizeof r);
    const size_t len = below(8) ? sizeof name : below(3);
    const ws_status s = cli_parse_role(below(64) ? spec : NULL, below(64) ? &r : NULL, below(64) ? name : NULL, len);
    if (s == WS_OK) {
      accepted_roles++;
      CHECK(r.name == name && strlen(r.name) < len && r.warps >= 1 && r.warps <= 32 && r.replicas >= 1 &&
            r.replicas <= 32 &&
            (r.regs == WS_REGS_REST || r.regs == WS_REGS_ENTRY || (r.regs >= WS_REGS_MIN && r.regs <= WS_REGS_MAX)));
    }
    ws_plan plan;
    const char *kname = below(4) ? PICK(kernels) : below(16) ? spec : NULL;
    (void)cli_named_plan(kname, below(16) ? &plan : NULL);
  }
}

/* ---- the plan: roles, shared memory, barriers, limits -------------------------------- */
static void fuzz_plans(int iters, FILE *sink) {
  static const char *const names[] = {"producer", "consumer", "a", "", "a_role_name_that_is_far_too_long", NULL};
  static const int regs[] = {WS_REGS_REST, WS_REGS_ENTRY, 24, 40, 80, 168, 184, 232, 240, 256, 264, 100, 16};
  ws_role roles[WS_MAX_ROLES + 2];
  char owner[96];
  for (int i = 0; i < iters; i++) {
    /* a plausible table (1..3 roles of 1 or 4 warps), then a few fields at random */
    int nroles = 1 + (int)below(3);
    for (int r = 0; r < WS_MAX_ROLES + 2; r++) {
      roles[r].name = "role";
      roles[r].warps = below(2) ? 1 : 4;
      roles[r].regs = PICK(regs);
      roles[r].replicas = 1 + (int)below(2);
    }
    for (int m = (int)below(4); m > 0; m--) {
      ws_role *ro = &roles[below(WS_MAX_ROLES + 2)];
      switch (below(5)) {
      case 0: ro->name = PICK(names); break;
      case 1: ro->warps = fuzz_int(); break;
      case 2: ro->regs = fuzz_int(); break;
      case 3: ro->replicas = fuzz_int(); break;
      default: nroles = below(2) ? 1 + (int)below(WS_MAX_ROLES + 2) : fuzz_int();
      }
    }
    const int entry = below(2) ? 0 : below(2) ? PICK(regs) : fuzz_int();
    ws_plan plan;
    const int with_plan = below(64) != 0;
    if (ws_plan_init(with_plan ? &plan : NULL, below(8) ? "fuzz" : NULL, below(64) ? roles : NULL, nroles, entry) != WS_OK)
      continue;
    accepted_plans++;
    CHECK(with_plan);
    (void)ws_plan_set_smem(&plan, fuzz_size());
    for (int b = (int)below(20); b > 0; b--) {
      int id = -1;
      (void)ws_plan_add_barrier(&plan, below(16) ? PICK(names) : "bar", below(16) ? &id : NULL);
    }
    const size_t olen = below(4) ? sizeof owner : below(4);
    (void)ws_plan_barrier_owner(&plan, below(2) ? (int)below(18) - 1 : fuzz_int(), below(16) ? owner : NULL, olen);
    ws_device_limits lim;
    memset(&lim, 0, sizeof lim);
    snprintf(lim.name, sizeof lim.name, "fuzz device");
    lim.device = fuzz_int();
    lim.cc_major = below(4) ? 9 : fuzz_int();
    lim.cc_minor = fuzz_int();
    lim.sm_count = fuzz_int();
    lim.smem_optin = below(2) ? 232448 : fuzz_size();
    lim.regs_per_block = below(2) ? 65536 : fuzz_int();
    lim.max_threads = below(2) ? 1024 : fuzz_int();
    (void)ws_plan_check_limits(&plan, below(32) ? &lim : NULL);
    /* mostly counts cudaFuncGetAttributes can report, sometimes any int: the check bounds
     * them before its register arithmetic (INT_MAX registers overflowed it) */
    ws_kernel_attrs a = {below(2) ? (int)below(256) : fuzz_int(), below(2) ? (int)below(1025) : fuzz_int(), fuzz_size(), fuzz_size()};
    (void)ws_plan_check_attrs(&plan, below(32) ? &a : NULL);
    if (below(16) == 0) (void)ws_plan_print(&plan, sink);
  }
  for (int i = 0; i < iters / 10; i++) {
    ws_plan plan;
    (void)ws_stream_plan((ws_stream_mode)fuzz_int(), below(2) ? (int)below(WS_STREAM_MAX_STAGES + 2) : fuzz_int(),
                         below(16) ? &plan : NULL);
    (void)ws_gemm_plan((ws_gemm_type)(below(2) ? (int)below(3) : fuzz_int()), below(16) ? &plan : NULL);
    const int tile_rows = below(2) ? (int)below(257) : fuzz_int();
    (void)ws_gemm_plan_tile((ws_gemm_type)(below(2) ? (int)below(3) : fuzz_int()), tile_rows, below(16) ? &plan : NULL);
  }
}

/* ---- problem checks: GEMM, attention, MoE, sendrecv geometry ------------------------- */
static int small_or_any(int small) { return below(2) ? (int)below((unsigned)small + 1) : fuzz_int(); }

static void fuzz_gemm(int iters) {
  static int offsets[18];
  for (int i = 0; i < iters; i++) {
    ws_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.type = (ws_gemm_type)(below(2) ? (int)below(3) : fuzz_int());
    p.layout = (ws_gemm_layout)(below(2) ? (int)below(4) : fuzz_int());
    p.m = fuzz_int();
    p.n = fuzz_int();
    p.k = fuzz_int();
    p.groups = below(2) ? 1 : fuzz_int();
    p.a = fuzz_ptr();
    p.b = fuzz_ptr();
    p.d = fuzz_ptr();
    p.a_scale = (const float *)fuzz_ptr();
    p.b_scale = (const float *)fuzz_ptr();
    p.group_offsets = (const int *)fuzz_ptr();
    p.group_rows = (const int *)fuzz_ptr();
    p.workspace = below(2) ? NULL : fuzz_ptr();
    p.workspace_bytes = fuzz_size();
    p.a_scale_ld = below(2) ? 0 : fuzz_int();
    const ws_gemm_problem *pp = below(64) ? &p : NULL;
    (void)ws_gemm_check(pp);
    (void)ws_gemm_rows(pp);
    int rows = 0, cols = 0;
    (void)ws_gemm_tile(pp, 1 + (int)below(264), below(16) ? &rows : NULL, &cols);
    /* host offsets: groups + 1 ascending values from 0 */
    const int groups = (int)below(17);
    offsets[0] = 0;
    for (int g = 1; g <= groups; g++) offsets[g] = offsets[g - 1] + (int)below(300);
    (void)ws_gemm_group_of_row(below(32) ? offsets : NULL, groups, small_or_any(5000));
  }
}

static void fuzz_attention(int iters) {
  static const int dims[] = {64, 128, 192, 512, 576, 0, -64, 63};
  for (int i = 0; i < iters; i++) {
    ws_attn_problem a;
    memset(&a, 0, sizeof a);
    a.batch = fuzz_int();
    a.seqlen_q = fuzz_int();
    a.seqlen_k = fuzz_int();
    a.cu_seqlens_q = below(2) ? NULL : (const int *)fuzz_ptr();
    a.cu_seqlens_k = below(2) ? NULL : (const int *)fuzz_ptr();
    a.heads_q = small_or_any(128);
    a.heads_kv = small_or_any(16);
    a.dim_qk = below(2) ? PICK(dims) : fuzz_int();
    a.dim_v = below(2) ? PICK(dims) : fuzz_int();
    a.mask = (ws_attn_mask)(below(2) ? (int)below(4) : fuzz_int());
    a.softmax_scale = fuzz_float();
    a.q = fuzz_ptr(); a.k = fuzz_ptr(); a.v = fuzz_ptr(); a.o = fuzz_ptr();
    a.lse = (float *)fuzz_ptr();
    a.total_q = fuzz_int();
    a.total_k = fuzz_int();
    (void)ws_attn_check(below(64) ? &a : NULL);

    ws_mla_sparse_problem s;
    memset(&s, 0, sizeof s);
    s.s_q = fuzz_int(); s.heads = small_or_any(128); s.s_kv = fuzz_int(); s.topk = fuzz_int();
    s.dim_qk = below(2) ? PICK(dims) : fuzz_int();
    s.dim_v = below(2) ? PICK(dims) : fuzz_int();
    s.softmax_scale = fuzz_float();
    s.q = fuzz_ptr(); s.kv = fuzz_ptr(); s.indices = (const int *)fuzz_ptr(); s.o = fuzz_ptr();
    (void)ws_mla_sparse_check(below(64) ? &s : NULL);

    ws_mla_decode_problem d;
    memset(&d, 0, sizeof d);
    d.batch = fuzz_int(); d.s_q = small_or_any(4); d.heads = small_or_any(128);
    d.dim_qk = below(2) ? 576 : fuzz_int();
    d.dim_v = below(2) ? 512 : fuzz_int();
    d.page_size = below(2) ? 64 : fuzz_int();
    d.num_pages = fuzz_int(); d.max_pages = fuzz_int(); d.max_seqlen = fuzz_int();
    d.softmax_scale = fuzz_float();
    d.q = fuzz_ptr(); d.kv_cache = fuzz_ptr(); d.block_table = (const int *)fuzz_ptr();
    d.seqlens = (const int *)fuzz_ptr(); d.o = fuzz_ptr();
    d.kv_fp8 = below(2) ? (int)below(2) : fuzz_int();
    (void)ws_mla_decode_check(below(64) ? &d : NULL);

    ws_nsa_problem n;
    memset(&n, 0, sizeof n);
    n.tokens = fuzz_int(); n.heads_q = small_or_any(128); n.heads_kv = small_or_any(8);
    n.dim_qk = below(2) ? PICK(dims) : fuzz_int();
    n.dim_v = below(2) ? PICK(dims) : fuzz_int();
    n.block = below(2) ? 64 : fuzz_int(); n.topn = fuzz_int();
    n.softmax_scale = fuzz_float();
    n.q = fuzz_ptr(); n.k = fuzz_ptr(); n.v = fuzz_ptr(); n.block_indices = (const int *)fuzz_ptr(); n.o = fuzz_ptr();
    (void)ws_nsa_check(below(64) ? &n : NULL);

    /* the host quantisers with a NULL buffer: refused whatever the sizes */
    (void)ws_mla_kv_quantize_fp8_host(NULL, fuzz_size(), NULL);
    (void)ws_mla_kv_dequantize_fp8_host(NULL, fuzz_size(), NULL);
  }
}

static void fuzz_moe(int iters) {
  for (int i = 0; i < iters; i++) {
    ws_ep_config c;
    memset(&c, 0, sizeof c);
    c.hidden = below(2) ? 128 * (int)below(64) : fuzz_int();
    c.experts = below(2) ? (int)below(WS_EP_MAX_EXPERTS + 2) : fuzz_int();
    c.topk = small_or_any(WS_EP_MAX_TOPK + 1);
    c.max_tokens = fuzz_int();
    c.payload = (ws_ep_payload)(below(2) ? (int)below(3) : fuzz_int());
    c.row_align = below(2) ? 1 + (int)below(128) : fuzz_int();
    c.num_sms = small_or_any(WS_EP_MAX_SMS + 1);
    c.mode = (ws_ep_mode)(below(2) ? (int)below(3) : fuzz_int());
    const int nranks = below(2) ? 1 + (int)below(9) : fuzz_int();
    const ws_ep_config *cp = below(64) ? &c : NULL;
    (void)ws_ep_config_check(cp, nranks);
    (void)ws_ep_max_rows(cp, nranks);
    (void)ws_ep_reference_layout(cp, nranks, small_or_any(8), NULL, NULL, NULL, NULL, NULL);

    ws_moe_layer_config lc = {fuzz_int(), fuzz_int(), fuzz_int(), fuzz_int(), fuzz_int(), fuzz_int(),
                              (ws_moe_path)fuzz_int()};
    ws_moe_layer *layer = NULL;
    (void)ws_moe_layer_create(below(16) ? &layer : NULL, NULL, below(16) ? &lc : NULL, fuzz_ptr(), (const float *)fuzz_ptr(),
                              fuzz_ptr(), (const float *)fuzz_ptr());
    CHECK(layer == NULL);
    ws_moe_path path;
    (void)ws_moe_layer_path_for(NULL, fuzz_int(), below(2) ? &path : NULL);
    (void)moe_layer_auto_path(fuzz_int(), fuzz_double());
    (void)ws_moe_swiglu_quant_host(NULL, fuzz_size(), fuzz_size(), NULL, NULL);
    (void)ws_fp8_quantize_1x128_host(NULL, fuzz_size(), fuzz_size(), fuzz_size(), NULL, NULL);
    (void)ws_fp8_quantize_128x128_host(NULL, fuzz_size(), fuzz_size(), fuzz_size(), NULL, NULL);
  }
}

static void fuzz_sendrecv(int iters) {
  for (int i = 0; i < iters; i++) {
    const uint32_t blocks = below(WS_SR_MAX_BLOCKS + 1); /* 0: the default */
    const uint64_t bytes = fuzz_u64();
    const ws_sr_geometry g = ws_sr_geometry_make(bytes, blocks);
    CHECK(g.blocks >= 1 && g.blocks <= WS_SR_MAX_BLOCKS && g.stride >= 16 && g.stride <= WS_SR_MAX_STRIDE);
    /* within 16 bytes of 2^64 the rounding wraps (unsigned, defined); no message is that
     * large, so the step count is claimed only below 2^48 */
    const int sized = bytes < (1ull << 48);
    for (int k = 0; k < 4; k++) {
      const uint32_t b = below(g.blocks);
      (void)ws_sr_block_begin(&g, b);
      (void)ws_sr_block_bytes(&g, b);
      const uint64_t steps = ws_sr_block_steps(&g, b);
      CHECK(!sized || steps >= 1);
    }
  }
}

/* ---- areas, about 10^5 calls in all -------------------------------------------------- */
static int wanted(int argc, char **argv, const char *area) {
  if (argc <= 2) return 1;
  for (int i = 2; i < argc; i++)
    if (strcmp(argv[i], area) == 0) return 1;
  return 0;
}

int main(int argc, char **argv) {
  unsigned long long seed = 20251126;
  if (argc > 1) {
    long long s = 0;
    if (cli_parse_int("SEED", argv[1], 1, LLONG_MAX, &s) != WS_OK) {
      fprintf(stderr, "%s\nusage: test_fuzz [SEED [numbers|roles|plans|gemm|attention|moe|sendrecv...]]\n", ws_last_error());
      return 2;
    }
    seed = (unsigned long long)s;
  }
  rng ^= seed * 0xbf58476d1ce4e5b9ull;
  if (rng == 0) rng = 1; /* the one state xorshift never leaves */
  printf("test_fuzz: seed %llu\n", seed);
  fflush(stdout);
  FILE *sink = fopen("/dev/null", "w");
  REQUIRE(sink != NULL);
  if (wanted(argc, argv, "numbers")) fuzz_numbers(30000);
  if (wanted(argc, argv, "roles")) fuzz_roles(20000);
  if (wanted(argc, argv, "plans")) fuzz_plans(15000, sink);
  if (wanted(argc, argv, "gemm")) fuzz_gemm(10000);
  if (wanted(argc, argv, "attention")) fuzz_attention(10000);
  if (wanted(argc, argv, "moe")) fuzz_moe(10000);
  if (wanted(argc, argv, "sendrecv")) fuzz_sendrecv(10000);
  fclose(sink);
  printf("test_fuzz: accepted %d numbers, %d role specs, %d plans\n", accepted_numbers, accepted_roles, accepted_plans);
  return test_finish("test_fuzz");
}
