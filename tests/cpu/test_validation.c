/* test_validation.c - every public function rejects bad input with a clear status
 * and message before it touches the GPU; status strings; the error slot. */
#include "../test.h"
#include "../../src/comm/comm_internal.h"

#include <stdint.h>

static void status_strings(void) {
  const ws_status all[] = {WS_OK, WS_ERR_INVALID, WS_ERR_BUDGET, WS_ERR_MISMATCH, WS_ERR_NO_DEVICE,
                           WS_ERR_CUDA, WS_ERR_TIMEOUT, WS_ERR_NOMEM, WS_ERR_UNSUPPORTED};
  for (unsigned i = 0; i < sizeof all / sizeof all[0]; i++) {
    const char *s = ws_strerror(all[i]);
    CHECK(s != NULL && strncmp(s, "WS_", 3) == 0);
    for (unsigned j = 0; j < i; j++) CHECK(strcmp(s, ws_strerror(all[j])) != 0);
  }
  CHECK(strcmp(ws_strerror(WS_ERR_TIMEOUT), "WS_ERR_TIMEOUT") == 0);
  CHECK(strcmp(ws_strerror((ws_status)1234), "WS_ERR_UNKNOWN") == 0);
  CHECK(ws_version() != NULL && ws_version()[0] != '\0');
  ws_plan p;
  CHECK_STATUS(ws_plan_init(NULL, "x", NULL, 0, 0), WS_ERR_INVALID);
  CHECK(ws_last_error()[0] != '\0');
  ws_clear_error();
  CHECK(ws_last_error()[0] == '\0');
  (void)p;
}

static void plan_arguments(void) {
  const ws_role r[] = {{"a", 1, WS_REGS_ENTRY, 1}};
  ws_plan p;
  CHECK_STATUS(ws_plan_init(NULL, "k", r, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("plan is NULL");
  CHECK_STATUS(ws_plan_init(&p, "k", NULL, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("roles is NULL");
  CHECK_STATUS(ws_plan_init(&p, "k", r, 0, 0), WS_ERR_INVALID);
  CHECK_MSG("nroles 0");
  CHECK_STATUS(ws_plan_init(&p, "k", r, WS_MAX_ROLES + 1, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_init(&p, "k", r, 1, -8), WS_ERR_INVALID);
  CHECK_MSG("entry_regs -8");
  CHECK_STATUS(ws_plan_init(&p, "k", r, 1, 300), WS_ERR_INVALID);
  CHECK_MSG("24..255");
  const ws_role long_name[] = {{"a_role_name_that_is_far_too_long", 1, WS_REGS_ENTRY, 1}};
  CHECK_STATUS(ws_plan_init(&p, "k", long_name, 1, 0), WS_ERR_INVALID);
  CHECK_MSG("longer than");
  CHECK_STATUS(ws_plan_init(&p, NULL, r, 1, 0), WS_OK); /* a NULL kernel name is allowed */
  CHECK_STATUS(ws_plan_set_smem(NULL, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_add_barrier(NULL, "b", NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_barrier_owner(NULL, 1, NULL, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_check_limits(NULL, NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_check_device(NULL, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_check_func(NULL, NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_check_func(&p, NULL), WS_ERR_INVALID);
  dim3 g0 = {0, 1, 1};
  CHECK_STATUS(ws_plan_launch(&p, (const void *)&p, g0, 0, NULL), WS_ERR_INVALID);
  CHECK_MSG("empty dimension");
  dim3 g1 = {1, 1, 1};
  CHECK_STATUS(ws_plan_launch(NULL, (const void *)&p, g1, 0, NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_plan_print(&p, NULL), WS_ERR_INVALID);
  ws_device_limits lim;
  CHECK_STATUS(ws_device_limits_query(0, NULL), WS_ERR_INVALID);
  ws_status s = ws_device_limits_query(0, &lim);
  CHECK(s == WS_OK || s == WS_ERR_NO_DEVICE);
  CHECK_STATUS(ws_device_limits_query(-1, &lim), s == WS_OK ? WS_ERR_INVALID : WS_ERR_NO_DEVICE);
}

static void timeouts(void) {
  CHECK_STATUS(ws_set_timeout_ms(0), WS_ERR_INVALID);
  CHECK_MSG("0 ms");
  CHECK_STATUS(ws_set_timeout_ms(4000u * 1000u), WS_ERR_INVALID);
  CHECK_STATUS(ws_set_timeout_ms(1500), WS_OK);
  CHECK(ws_timeout_ms() == 1500);
  CHECK_STATUS(ws_diag_get(NULL), WS_ERR_INVALID);
}

static void tensor_maps(void) {
  ws_tmap t;
  const void *ok = (const void *)(uintptr_t)0x10000; /* never dereferenced: checks come first */
  const void *odd = (const void *)(uintptr_t)0x10008;
  CHECK_STATUS(ws_tmap_2d(NULL, ok, WS_DTYPE_U32, 4, 4, 16, 1, 4), WS_ERR_INVALID);
  CHECK_STATUS(ws_tmap_2d(&t, NULL, WS_DTYPE_U32, 4, 4, 16, 1, 4), WS_ERR_INVALID);
  CHECK_STATUS(ws_tmap_2d(&t, odd, WS_DTYPE_U32, 4, 4, 16, 1, 4), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  CHECK_STATUS(ws_tmap_2d(&t, ok, (ws_dtype)99, 4, 4, 16, 1, 4), WS_ERR_INVALID);
  CHECK_MSG("dtype 99");
  CHECK_STATUS(ws_tmap_2d(&t, ok, WS_DTYPE_U32, 0, 4, 16, 1, 4), WS_ERR_INVALID);
  CHECK_STATUS(ws_tmap_2d(&t, ok, WS_DTYPE_U32, 4, 4, 24, 1, 4), WS_ERR_INVALID);
  CHECK_MSG("multiple of 16");
  CHECK_STATUS(ws_tmap_2d(&t, ok, WS_DTYPE_U32, 4, 8, 16, 1, 4), WS_ERR_INVALID);
  CHECK_MSG("at least cols");
  CHECK_STATUS(ws_tmap_2d(&t, ok, WS_DTYPE_U32, 4, 4, 16, 300, 4), WS_ERR_INVALID);
  CHECK_MSG("1..256");
  CHECK_STATUS(ws_tmap_2d(&t, ok, WS_DTYPE_U32, 4, 4, 16, 1, 3), WS_ERR_INVALID);
  CHECK_MSG("3 x 4 bytes");
  CHECK(ws_dtype_bytes(WS_DTYPE_BF16) == 2 && ws_dtype_bytes((ws_dtype)0) == 0);
  /* the 128-byte swizzle needs 128-byte box rows */
  CHECK_STATUS(ws_tmap_2d_swizzled(&t, ok, WS_DTYPE_BF16, 256, 128, 256, 64, 32, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_MSG("128-byte box rows");
  CHECK_STATUS(ws_tmap_2d_swizzled(&t, ok, WS_DTYPE_BF16, 256, 128, 256, 64, 64, (ws_swizzle)7), WS_ERR_INVALID);
  CHECK_MSG("swizzle 7");
  /* rank 2..5, each dimension nested in the next: the MoE W1 view [E][2][I][H] (H 7168,
   * I 2048, 4 experts) and its box of 64 rows x gate / up */
  const uint64_t dims[4] = {7168, 2048, 2, 4}, strides[3] = {7168, 7168ull * 2048, 7168ull * 4096};
  const uint32_t box[4] = {128, 64, 2, 1};
  CHECK_STATUS(ws_tmap_nd_swizzled(NULL, ok, WS_DTYPE_U8, 4, dims, strides, box, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_STATUS(ws_tmap_nd_swizzled(&t, ok, WS_DTYPE_U8, 6, dims, strides, box, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_MSG("rank 6");
  CHECK_STATUS(ws_tmap_nd_swizzled(&t, odd, WS_DTYPE_U8, 4, dims, strides, box, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  const uint64_t not_nested[3] = {7168, 7168ull * 64, 7168ull * 4096}; /* gate / up 64 rows apart: overlaps */
  CHECK_STATUS(ws_tmap_nd_swizzled(&t, ok, WS_DTYPE_U8, 4, dims, not_nested, box, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_MSG("nested");
  const uint32_t wide_box[4] = {128, 300, 2, 1};
  CHECK_STATUS(ws_tmap_nd_swizzled(&t, ok, WS_DTYPE_U8, 4, dims, strides, wide_box, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_MSG("box[1] = 300");
  const uint32_t short_rows[4] = {64, 64, 2, 1};
  CHECK_STATUS(ws_tmap_nd_swizzled(&t, ok, WS_DTYPE_U8, 4, dims, strides, short_rows, WS_SWIZZLE_128B), WS_ERR_INVALID);
  CHECK_MSG("128-byte box rows");
}

static void stream_copy(void) {
  char *base = (char *)(uintptr_t)0x100000;
  ws_stream_opts o = {WS_STREAM_STORE_THREADS, 0, 0, 0, 0, 0};
  CHECK_STATUS(ws_stream_copy(base, base + 4096, 0, NULL, 0), WS_OK); /* nothing to do */
  o.mode = (ws_stream_mode)7;
  CHECK_STATUS(ws_stream_copy(base, base + 4096, 16, &o, 0), WS_ERR_INVALID);
  CHECK_MSG("mode 7");
  o.mode = WS_STREAM_STORE_THREADS;
  o.ctas = -1;
  CHECK_STATUS(ws_stream_copy(base, base + 4096, 16, &o, 0), WS_ERR_INVALID);
  CHECK_MSG("ctas -1");
  o.ctas = 0;
  o.stages = WS_STREAM_MAX_STAGES + 1;
  CHECK_STATUS(ws_stream_copy(base, base + 4096, 16, &o, 0), WS_ERR_INVALID);
  CHECK_MSG("stages 7");
  o.stages = 0;
  o.ctas_per_sm = 5;
  CHECK_STATUS(ws_stream_copy(base, base + 4096, 16, &o, 0), WS_ERR_INVALID);
  CHECK_MSG("ctas_per_sm 5");
  CHECK_STATUS(ws_stream_copy(NULL, base, 16, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("NULL");
  CHECK_STATUS(ws_stream_copy(base + 4, base + 4096, 16, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  CHECK_STATUS(ws_stream_copy(base, base + 16, 64, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("overlap");
  /* sizes are checked before the GPU is asked anything: 2^45 bytes is past 2 TiB */
  CHECK_STATUS(ws_stream_copy(base, base + ((size_t)1 << 46), (size_t)1 << 45, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("2 TiB");
  /* a span past the end of the address space wrapped around and hid the overlap */
  CHECK_STATUS(ws_stream_copy((char *)(uintptr_t)32, (char *)(uintptr_t)16, SIZE_MAX - 15, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("address space");
  ws_plan p;
  CHECK_STATUS(ws_stream_plan((ws_stream_mode)3, 0, &p), WS_ERR_INVALID);
  CHECK_STATUS(ws_stream_plan(WS_STREAM_STORE_TMA, 0, NULL), WS_ERR_INVALID);
  CHECK_STATUS(ws_stream_plan(WS_STREAM_STORE_TMA, 9, &p), WS_ERR_INVALID);
  CHECK_STATUS(ws_stream_plan(WS_STREAM_STORE_THREADS, 0, &p), WS_OK);
  CHECK(p.layout.threads == 384 && p.layout.role_regs[1] == 232);
  CHECK_STATUS(ws_stream_plan(WS_STREAM_STORE_TMA, 2, &p), WS_OK);
  CHECK(p.layout.threads == 64 && p.layout.setmaxnreg == 0);
  CHECK(p.smem_bytes > 2 * 32768 && p.smem_bytes < 3 * 32768);
}

/* Role timelines: arguments are checked before any CUDA call. */
static void trace_arguments(void) {
  CHECK_STATUS(ws_trace_stop(NULL, NULL), WS_ERR_INVALID);
  CHECK_MSG("no trace is running");
  CHECK_STATUS(ws_trace_start(-2, 100), WS_ERR_INVALID);
  CHECK_MSG("block -2");
  CHECK_STATUS(ws_trace_start(0, 0), WS_ERR_INVALID);
  CHECK_MSG("max_events 0");
  CHECK_STATUS(ws_trace_start(0, (size_t)1 << 30), WS_ERR_INVALID);
  CHECK_MSG("2^24");
}

/* Products of shape fields are taken in 64 bits and bounded by the kernels' 32-bit
 * indices: 2^26 pages of 64 rows used to wrap to 0 as an int and pass. */
static void size_products(void) {
  static char buf[256] __attribute__((aligned(16)));
  ws_mla_decode_problem d;
  memset(&d, 0, sizeof d);
  d.batch = 1; d.s_q = 1; d.heads = 64; d.dim_qk = 576; d.dim_v = 512; d.page_size = 64; d.num_pages = 1;
  d.max_pages = 1 << 26;
  d.q = d.kv_cache = d.o = buf;
  d.block_table = d.seqlens = (const int *)buf;
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("max_pages");
  d.max_pages = 4;
  CHECK_STATUS(ws_mla_decode_check(&d), WS_OK);
  d.num_pages = 1 << 26;
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("cache rows");
  d.num_pages = 1;
  d.batch = 1 << 20; d.s_q = 1 << 6; d.heads = 1 << 6; /* 2^32 query rows */
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("query rows");
  d.batch = 1 << 30; d.s_q = 1; d.heads = 1; d.max_pages = 4; /* 2^32 block_table entries */
  CHECK_STATUS(ws_mla_decode_check(&d), WS_ERR_INVALID);
  CHECK_MSG("block_table entries");
  /* the MoE layer's extents, bounded before any weight size is computed (the check runs
   * before the communicator is used: a placeholder handle never gets touched) */
  const ws_moe_layer_config lc = {7168, 1 << 30, 256, 8, 128, 0, WS_MOE_AUTO};
  ws_moe_layer *layer = NULL;
  CHECK_STATUS(ws_moe_layer_create(&layer, (ws_comm *)buf, &lc, buf, (const float *)buf, buf, (const float *)buf),
               WS_ERR_INVALID);
  CHECK_MSG("inter");
  CHECK(layer == NULL);
}

/* The communicator's size checks (a communicator made up here: they come before any
 * of its buffers is used): a span past the end of the address space wrapped around and
 * hid an overlap; allgather's receive buffer of nranks x bytes wrapped. */
static void comm_sizes(void) {
  static struct ws_comm c;
  c.rank = 0;
  c.nranks = 2;
  char *base = (char *)(uintptr_t)0x100000;
  const size_t past_end = SIZE_MAX - (size_t)0x100000 + 0x1001; /* base + it is 0x1000 once wrapped */
  CHECK_STATUS(ws_sendrecv(&c, base, past_end, 1, base + 0x10000, 16, 1, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("address space");
  CHECK_STATUS(ws_allgather(&c, base, (size_t)1 << 63, base + 4096, 0), WS_ERR_INVALID);
  CHECK_MSG("2 ranks x 9223372036854775808 bytes");
}

int main(void) {
  size_products();
  status_strings();
  trace_arguments();
  plan_arguments();
  timeouts();
  tensor_maps();
  stream_copy();
  comm_sizes();
  return test_finish("test_validation");
}
