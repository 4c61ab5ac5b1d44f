/* test_knobs.c - the environment knobs' one reader (src/core/knobs.c): defaults, accepted
 * and refused values (default kept, one message naming the variable and what it takes),
 * the deprecated WS_* spellings, ws_knobs_reload, and the one knob ws_set_check_mode(-1)
 * reads again. No GPU. */
#include "../test.h"
#include "../../src/core/knobs.h"

#include <pthread.h>
#include <unistd.h>

/* Every variable the table reads, new names and old ones: unset before the defaults. */
static const char *const all_names[] = {
    WS_TIMEOUT_ENV, WS_CHECK_ENV, WS_HOST_THREADS_ENV, WS_PDL_ENV, WS_ATTN_SCHEDULE_ENV, WS_ATTN_GRID_ENV,
    WS_ATTN_HEAD_GROUP_ENV, WS_ATTN_O_STORE_ENV, WS_ATTN_WG_BLOCKS_ENV, WS_ATTN_TILE_ROWS_ENV, WS_MLA_GATHER_AHEAD_ENV, WS_MLA_FP8_F16_ENV, WS_GEMM_SPLITS_ENV, WS_GEMM_FP8_TILE_ENV,
    WS_GEMM_PAIR_ENV, WS_GEMM_SKINNY_ENV, WS_GEMM_FP8_SKINNY_ENV, WS_GEMM_SKINNY_ROWS_ENV, WS_GEMM_CLUSTER_K_ENV, WS_MOE_GATHER_ENV, WS_EP_OVERLAP_ENV, WS_EP_COMBINE_ENV, WS_EP_RECORDS_ENV, WS_MOE_TILE_ENV, WS_MOE_PAIR_ENV, WS_MOE_SCHED_ENV, WS_MOE_SELF_ROUTE_ENV,
    WS_MOE_SLICE_COMBINE_ENV, WS_MOE_FEW_DECODE_ENV, WS_MOE_ROUTE_AT_ONCE_ENV, WS_MOE_W1_GATE_UP_ENV,
    WS_SR_CE_MIN_BYTES_ENV, WS_AG_DIRECT_MAX_BYTES_ENV, WS_AG_ZC_MIN_BYTES_ENV, WS_RENDEZVOUS_TIMEOUT_ENV,
    WS_SHARE_GPU_ENV, WS_DEBUG_NVML_ENV, "WS_GEMM_SPLITS", "WS_GEMM_FP8_TILE", "WS_SR_CE_MIN_BYTES",
    "WS_RENDEZVOUS_TIMEOUT_MS", "WS_DEBUG_NVML"};

static char said[4096]; /* what the last reload_quoting() wrote on stderr */

/* ws_knobs_reload() with stderr caught in `said`. */
static void reload_quoting(void) {
  fflush(stderr);
  FILE *tmp = tmpfile();
  REQUIRE(tmp != NULL);
  const int saved = dup(STDERR_FILENO);
  REQUIRE(saved >= 0 && dup2(fileno(tmp), STDERR_FILENO) >= 0);
  const ws_status s = ws_knobs_reload();
  fflush(stderr);
  REQUIRE(dup2(saved, STDERR_FILENO) >= 0 && close(saved) == 0);
  CHECK(s == WS_OK);
  rewind(tmp);
  const size_t n = fread(said, 1, sizeof said - 1, tmp);
  said[n] = '\0';
  fclose(tmp);
}

static void set(const char *name, const char *value) {
  REQUIRE((value ? setenv(name, value, 1) : unsetenv(name)) == 0);
}

#define CHECK_SAID(text)                                                                  \
  do {                                                                                    \
    if (!strstr(said, (text))) {                                                          \
      fprintf(stderr, "%s:%d: stderr lacks \"%s\": \"%s\"\n", __FILE__, __LINE__, (text), said); \
      test_failures++;                                                                    \
    }                                                                                     \
  } while (0)

/* The first read, from several threads at once: one parse, one struct for all. */
static void *first_read(void *out) {
  *(const ws_knobs **)out = ws_knobs_get();
  return NULL;
}

static void first_read_threads(void) {
  pthread_t t[4];
  const ws_knobs *seen[4] = {NULL, NULL, NULL, NULL};
  for (int i = 0; i < 4; i++) REQUIRE(pthread_create(&t[i], NULL, first_read, &seen[i]) == 0);
  for (int i = 0; i < 4; i++) REQUIRE(pthread_join(t[i], NULL) == 0);
  for (int i = 0; i < 4; i++) CHECK(seen[i] != NULL && seen[i] == ws_knobs_get());
  CHECK(ws_knobs_get()->gemm_splits == 6); /* set by main before any read */
}

static void defaults(void) {
  for (size_t i = 0; i < sizeof all_names / sizeof all_names[0]; i++) set(all_names[i], NULL);
  reload_quoting();
  CHECK(said[0] == '\0');
  const ws_knobs *k = ws_knobs_get();
  CHECK(k->timeout_ms == WS_TIMEOUT_MS_DEFAULT && ws_timeout_ms() == WS_TIMEOUT_MS_DEFAULT);
  CHECK(k->check == 0 && ws_check_mode() == 0);
  CHECK(k->host_threads == 0 && k->pdl == 1);
  CHECK(k->attn_schedule == WS_ATTN_SCHED_AUTO && k->attn_persistent == 1);
  CHECK(k->attn_head_group == 0 && k->attn_o_tma == 1 && k->attn_tile_rows == 0 &&
        k->attn_wg_blocks == 0);
  CHECK(k->gemm_splits == 0 && k->gemm_fp8_tile == 0 && k->gemm_pair == 1);
  CHECK(k->mla_gather_ahead == 1 && k->mla_fp8_f16 == 1);
  CHECK(k->moe_gather == WS_MOE_GATHER_DEFAULT && k->ep_overlap == WS_EP_OVERLAP_DEFAULT && k->ep_combine == -1 &&
        k->moe_tile == 0 && k->moe_pair == -1);
  CHECK(k->moe_static_walk == 0 && k->moe_self_route == 1);
  CHECK(k->moe_slice_combine == 1 && k->moe_few_decode == 1 && k->moe_route_at_once == 1 && k->moe_w1_gate_up == 1);
  CHECK(k->sr_ce_min_bytes == (long long)WS_SR_CE_MIN_BYTES);
  CHECK(k->ag_direct_max_bytes == (long long)WS_AG_DIRECT_MAX_BYTES && k->ag_zc_min_bytes == (long long)WS_AG_ZC_MIN_BYTES);
  CHECK(k->rendezvous_timeout_ms == WS_RENDEZVOUS_TIMEOUT_MS);
  CHECK(k->share_gpu == 0 && k->debug_nvml == 0);
  set(WS_GEMM_SPLITS_ENV, ""); /* empty reads as unset, as before */
  reload_quoting();
  CHECK(said[0] == '\0' && k->gemm_splits == 0);
}

static void accepted(void) {
  const ws_knobs *k = ws_knobs_get();
  set(WS_TIMEOUT_ENV, "1234");
  set(WS_CHECK_ENV, "yes");
  set(WS_PDL_ENV, "OFF");
  set(WS_ATTN_SCHEDULE_ENV, "overlap-pingpong");
  set(WS_ATTN_GRID_ENV, "tiles");
  set(WS_ATTN_HEAD_GROUP_ENV, "1000000");
  set(WS_ATTN_O_STORE_ENV, "rows");
  set(WS_ATTN_TILE_ROWS_ENV, "192");
  set(WS_ATTN_WG_BLOCKS_ENV, "own");
  set(WS_GEMM_SPLITS_ENV, "4194304");
  set(WS_GEMM_FP8_TILE_ENV, "192");
  set(WS_GEMM_PAIR_ENV, "off");
  set(WS_MOE_TILE_ENV, "128");
  set(WS_MOE_PAIR_ENV, "0");
  set(WS_MOE_SCHED_ENV, "static");
  set(WS_EP_OVERLAP_ENV, "no");
  set(WS_EP_COMBINE_ENV, "fused");
  set(WS_SR_CE_MIN_BYTES_ENV, "8589934592"); /* 8 GiB: past 32 bits */
  set(WS_AG_ZC_MIN_BYTES_ENV, "0");
  set(WS_HOST_THREADS_ENV, "1000");          /* taken, then capped by ws_host_workers */
  CHECK(k->timeout_ms == WS_TIMEOUT_MS_DEFAULT); /* read once: nothing changes before the reload */
  reload_quoting();
  CHECK(said[0] == '\0');
  CHECK(k->timeout_ms == 1234 && ws_timeout_ms() == 1234);
  CHECK(k->check == 1 && ws_check_mode() == 1 && k->pdl == 0);
  CHECK(k->attn_schedule == WS_ATTN_SCHED_OVERLAP_PINGPONG && k->attn_persistent == 0);
  CHECK(k->attn_head_group == 1000000 && k->attn_o_tma == 0 && k->attn_tile_rows == 192 &&
        k->attn_wg_blocks == 1);
  CHECK(k->gemm_splits == 4194304 && k->gemm_fp8_tile == 192 && k->gemm_pair == 0);
  CHECK(k->moe_tile == 128 && k->moe_pair == 0 && k->moe_static_walk == 1);
  CHECK(k->ep_overlap == 0 && k->ep_combine == 1);
  CHECK(k->sr_ce_min_bytes == 8589934592ll && k->ag_zc_min_bytes == 0);
  CHECK(k->host_threads == 1000);
  /* an API setting keeps its precedence over the environment */
  CHECK_STATUS(ws_set_timeout_ms(77), WS_OK);
  reload_quoting();
  CHECK(ws_timeout_ms() == 77 && k->timeout_ms == 1234);
}

static void refused(void) {
  const ws_knobs *k = ws_knobs_get();
  set(WS_ATTN_GRID_ENV, "diagonal");
  set(WS_GEMM_SPLITS_ENV, "3x");
  set(WS_TIMEOUT_ENV, "0");
  set(WS_CHECK_ENV, "2");
  set(WS_MOE_SCHED_ENV, "1"); /* a word knob: its words only */
  set(WS_ATTN_HEAD_GROUP_ENV, "0");
  set(WS_ATTN_O_STORE_ENV, "smem");
  set(WS_ATTN_TILE_ROWS_ENV, "256");
  set(WS_ATTN_WG_BLOCKS_ENV, "mine");
  set(WS_EP_COMBINE_ENV, "fused12");
  reload_quoting();
  CHECK(k->attn_persistent == 1 && k->gemm_splits == 0 && k->timeout_ms == WS_TIMEOUT_MS_DEFAULT && k->check == 0);
  CHECK(k->moe_static_walk == 0 && k->attn_head_group == 0 && k->attn_o_tma == 1 && k->attn_tile_rows == 0);
  CHECK(k->attn_wg_blocks == 0 && k->ep_combine == -1);
  CHECK_SAID("WARPSPEC_EP_COMBINE=\"fused12\" is not accepted (kernels or fused); the default, fused from 4 ranks, else kernels");
  CHECK_SAID("WARPSPEC_ATTN_WG_BLOCKS=\"mine\" is not accepted (tile or own); the default, tile");
  CHECK_SAID("WARPSPEC_ATTN_TILE_ROWS=\"256\" is not accepted (128 or 192); the default, chosen per mask and length");
  CHECK_SAID("WARPSPEC_ATTN_O_STORE=\"smem\" is not accepted (tma or rows); the default, tma");
  CHECK_SAID("WARPSPEC_ATTN_HEAD_GROUP=\"0\" is not accepted (a whole number, at least 1); the default, chosen from the L2 size");
  CHECK_SAID("WARPSPEC_MOE_SCHED=\"1\" is not accepted (claimed or static); the default, claimed");
  CHECK_SAID("WARPSPEC_ATTN_GRID=\"diagonal\" is not accepted (persistent or tiles); the default, persistent");
  CHECK_SAID("WARPSPEC_GEMM_SPLITS=\"3x\" is not accepted (a whole number, at least 1); the default, chosen per");
  CHECK_SAID("WARPSPEC_TIMEOUT_MS=\"0\" is not accepted (a whole number from 1 to 3600000); the default, 4000");
  CHECK_SAID("WARPSPEC_CHECK=\"2\" is not accepted (1, on, yes, true or 0, off, no, false)");
  reload_quoting(); /* the same bad values: said once, not at every reload */
  CHECK(said[0] == '\0');
  set(WS_GEMM_SPLITS_ENV, "99999999999"); /* past int */
  set(WS_ATTN_GRID_ENV, "persistent");    /* fixed ... */
  reload_quoting();
  CHECK(k->gemm_splits == 0 && k->attn_persistent == 1);
  CHECK(strstr(said, "WARPSPEC_ATTN_GRID") == NULL);
  set(WS_ATTN_GRID_ENV, "Tiles"); /* ... then wrong again: said again */
  reload_quoting();
  CHECK_SAID("WARPSPEC_ATTN_GRID=\"Tiles\"");
  set(WS_MOE_TILE_ENV, "96");
  set(WS_ATTN_SCHEDULE_ENV, "fast");
  reload_quoting();
  CHECK(k->moe_tile == 0 && k->attn_schedule == WS_ATTN_SCHED_AUTO);
  CHECK_SAID("(64 or 128); the default, chosen per layer");
  CHECK_SAID("(plain, pingpong, overlap or overlap-pingpong); the default, chosen per head dim and length");
  for (size_t i = 0; i < sizeof all_names / sizeof all_names[0]; i++) set(all_names[i], NULL);
  reload_quoting();
}

static void aliases(void) {
  const ws_knobs *k = ws_knobs_get();
  set("WS_GEMM_SPLITS", "5");
  set("WS_RENDEZVOUS_TIMEOUT_MS", "250");
  reload_quoting();
  CHECK(k->gemm_splits == 5 && k->rendezvous_timeout_ms == 250);
  CHECK_SAID("WS_GEMM_SPLITS is deprecated, read as WARPSPEC_GEMM_SPLITS");
  CHECK_SAID("WS_RENDEZVOUS_TIMEOUT_MS is deprecated, read as WARPSPEC_RENDEZVOUS_TIMEOUT_MS");
  reload_quoting(); /* noted once */
  CHECK(said[0] == '\0' && k->gemm_splits == 5);
  set(WS_GEMM_SPLITS_ENV, "2"); /* the new name wins */
  reload_quoting();
  CHECK(k->gemm_splits == 2);
  set(WS_GEMM_SPLITS_ENV, NULL);
  set("WS_GEMM_FP8_TILE", "160"); /* a bad value under the old name: the message names it */
  reload_quoting();
  CHECK(k->gemm_fp8_tile == 0);
  CHECK_SAID("WS_GEMM_FP8_TILE is deprecated");
  CHECK_SAID("WS_GEMM_FP8_TILE=\"160\" is not accepted (auto, 128 or 192)");
  set("WS_GEMM_SPLITS", NULL);
  set("WS_RENDEZVOUS_TIMEOUT_MS", NULL);
  set("WS_GEMM_FP8_TILE", NULL);
  reload_quoting();
  CHECK(k->gemm_splits == 0 && k->rendezvous_timeout_ms == WS_RENDEZVOUS_TIMEOUT_MS && k->gemm_fp8_tile == 0);
}

/* ws_set_check_mode(-1) reads WARPSPEC_CHECK again, and only that knob. */
static void check_mode(void) {
  const ws_knobs *k = ws_knobs_get();
  set(WS_CHECK_ENV, "1");
  set(WS_GEMM_SPLITS_ENV, "7");
  CHECK(ws_check_mode() == 0); /* read once */
  CHECK_STATUS(ws_set_check_mode(-1), WS_OK);
  CHECK(ws_check_mode() == 1 && k->gemm_splits == 0);
  CHECK_STATUS(ws_set_check_mode(0), WS_OK);
  CHECK(ws_check_mode() == 0);
  set(WS_CHECK_ENV, NULL);
  set(WS_GEMM_SPLITS_ENV, NULL);
  CHECK_STATUS(ws_set_check_mode(-1), WS_OK);
  CHECK(ws_check_mode() == 0);
}

int main(void) {
  set(WS_GEMM_SPLITS_ENV, "6");
  first_read_threads();
  defaults();
  accepted();
  refused();
  aliases();
  check_mode();
  return test_finish("test_knobs");
}
