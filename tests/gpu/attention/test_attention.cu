/* test_attention.cu - the attention kernels against their float64 host references
 * (ws_attn_reference, ws_mla_sparse_reference, ws_mla_decode_reference,
 * ws_mla_sparse_decode_reference, ws_nsa_reference), fresh random data every run (the
 * seed printed), outputs poisoned (NaN) before each launch so an unwritten element fails.
 * Each case: ||o - ref|| / ||ref|| and the same for lse, against 1e-2; every element
 * finite except the -inf lse of rows without keys, which must match exactly. The mode (argv[1]):
 *   test_attention          all cases
 *   test_attention ctest    make test: every schedule on the quick cases, the long cases
 *                           under the default schedules, no batch-128 decode
 *   test_attention quick    the small ones
 *   test_attention fp8      the FP8 MLA cache only (quantiser, decode, sparse decode): for
 *                           compute-sanitizer
 *   test_attention fp8-bf16 the same with WARPSPEC_MLA_FP8_F16=0 (the 64-row kernel's BF16
 *                           dequantisation, the form before session 40's default)
 *   test_attention sparse-decode  sparse MLA decode only (all its cases)
 *   test_attention mla-quick  the quick MLA cases (sparse prefill, decode and sparse decode,
 *                           BF16 and FP8): for compute-sanitizer
 *   test_attention nsa      NSA selected-block attention only
 *   test_attention nsa-quick the small NSA tests (for compute-sanitizer)
 *   test_attention flash-quick the quick flash cases, default and overlap-pingpong schedules (for
 *                           compute-sanitizer)
 *   test_attention flash-tall  the d 64 cases on the tall tile (WARPSPEC_ATTN_TILE_ROWS=192),
 *                           every mask (the default takes it without a mask or at length)
 *   test_attention flash-tall-quick  its quick cases only (for compute-sanitizer)
 *                           Both run the quick d 64 cases and a NaN key again with
 *                           WARPSPEC_ATTN_WG_BLOCKS=own (opt-in, not in the ctest mode)
 * The cases live in one file per area, included here (the random stream and test.h's
 * state are per translation unit, so they are one unit):
 *   attn_common.cuh   random BF16 data, the verdict against a reference
 *   flash.cuh         ws_attn_forward: dense, GQA / MQA, masks, varlen; argument checks
 *   mla_sparse.cuh    sparse MLA prefill (ws_mla_sparse_forward)
 *   mla_decode.cuh    MLA decode (ws_mla_decode_forward), paged, split-KV; page ids past
 *                     the cache
 *   mla_sparse_decode.cuh  sparse MLA decode (ws_mla_sparse_decode_forward), BF16 and FP8
 *                     cache, split lists; argument checks and the validation scan
 *   fp8_cache.cuh     the FP8 MLA cache quantiser, GPU against host
 *   nsa.cuh           NSA selected-block attention (ws_nsa_forward)
 * Their data generators that the benchmark below uses too (q/k/v, NSA selections, MLA ids
 * and page tables) are testdata/attention.h's, drawn from this unit's stream.
 * Timing is not a mode: `warpspec bench attn-kernels` (bench/bench_attn_kernels.cu: every
 * flash schedule and grid, MLA, NSA against the dense kernel) and
 * `warpspec bench attention` (against PyTorch). */
#include "attn_common.cuh"
#include "flash.cuh"
#include "mla_sparse.cuh"
#include "mla_decode.cuh"
#include "mla_sparse_decode.cuh"
#include "fp8_cache.cuh"
#include "nsa.cuh"

/* wall seconds since the first call: the log says where the time goes */
static double elapsed_s(void) {
  static struct timespec t0;
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  if (t0.tv_sec == 0 && t0.tv_nsec == 0) t0 = t;
  return (double)(t.tv_sec - t0.tv_sec) + 1e-9 * (double)(t.tv_nsec - t0.tv_nsec);
}

/* The quick sparse prefill, decode and sparse decode cases; returns the failures. */
static int run_mla_quick(void) {
  int fails = 0;
  printf("mla (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof mla_quick / sizeof mla_quick[0]; i++) fails += run_mla(&mla_quick[i]);
  for (size_t i = 0; i < sizeof dec_quick / sizeof dec_quick[0]; i++) fails += run_decode(&dec_quick[i]);
  for (size_t i = 0; i < sizeof sd_quick / sizeof sd_quick[0]; i++) fails += run_sparse_decode(&sd_quick[i]);
  return fails;
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  setvbuf(stdout, NULL, _IOLBF, 0); /* a line at a time: a log cut by a timeout shows where */
  if (!strcmp(mode, "bench") || !strcmp(mode, "mla-bench") || !strcmp(mode, "flash-bench")) {
    /* were modes of this test until session 19 */
    fprintf(stderr, "test_attention %s: moved to `warpspec bench attn-kernels%s` (bench/bench_attn_kernels.cu)\n", mode,
            !strcmp(mode, "mla-bench") ? " --only mla" : !strcmp(mode, "flash-bench") ? " --only flash,nsa" : "");
    return 2;
  }
  elapsed_s();
  require_hopper();
  rng_seed_from_time();
  flash_ragged_lengths();
  int fails = 0;
  if (!strcmp(mode, "nsa") || !strcmp(mode, "nsa-quick")) { /* NSA alone (its timing: warpspec bench attn-kernels --only nsa) */
    for (size_t i = 0; i < sizeof nsa_quick / sizeof nsa_quick[0]; i++) fails += run_nsa(&nsa_quick[i]);
    if (!strcmp(mode, "nsa"))
      for (size_t i = 0; i < sizeof nsa_full / sizeof nsa_full[0]; i++) fails += run_nsa(&nsa_full[i]);
    printf(fails ? "test_attention nsa: %d FAILED\n" : "test_attention nsa: all checks passed\n", fails);
    return fails ? 1 : 0;
  }
  const int tall_full = !strcmp(mode, "flash-tall"), tall = tall_full || !strcmp(mode, "flash-tall-quick");
  if (!strcmp(mode, "flash-quick") || tall) {
    /* flash-quick: the quick flash cases, default and overlap-pingpong (for compute-sanitizer);
     * flash-tall(-quick): the d 64 ones on the tall tile (WARPSPEC_ATTN_TILE_ROWS=192), then
     * (flash-tall) the full d 64 cases */
    if (tall) test_set_knob(WS_ATTN_TILE_ROWS_ENV, "192");
    for (int sc = 0; sc < 2 - tall; sc++) {
      test_set_knob(WS_ATTN_SCHEDULE_ENV, sc ? "overlap-pingpong" : NULL);
      for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++)
        if (!tall || flash_quick[i].dqk == 64) fails += run_case(&flash_quick[i]);
    }
    if (tall) { /* the opt-in form of the tall kernel: each warpgroup on its own rows' key
                 * blocks (WARPSPEC_ATTN_WG_BLOCKS) */
      test_set_knob(WS_ATTN_WG_BLOCKS_ENV, "own");
      printf("flash tall, warpgroup blocks own\n");
      for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++)
        if (flash_quick[i].dqk == 64) fails += run_case(&flash_quick[i]);
      fails += check_flash_nan_at(64, 61);
      if (tall_full)
        for (size_t i = 0; i < sizeof flash_full / sizeof flash_full[0]; i++)
          if (flash_full[i].dqk == 64) fails += run_case(&flash_full[i]);
    }
    if (tall) { /* own blocks on the 128-row plain kernels (d 64 and 128; 192 / 128 has none) */
      test_set_knob(WS_ATTN_TILE_ROWS_ENV, NULL);
      test_set_knob(WS_ATTN_SCHEDULE_ENV, "plain");
      test_set_knob(WS_ATTN_WG_BLOCKS_ENV, "own");
      printf("flash plain, 128 rows, warpgroup blocks own\n");
      for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++) fails += run_case(&flash_quick[i]);
      for (size_t i = 0; tall_full && i < sizeof flash_full / sizeof flash_full[0]; i++) fails += run_case(&flash_full[i]);
      fails += check_flash_nan_at(128, 5);
      fails += check_flash_nan_at(64, 61);
    }
    test_set_knob(WS_ATTN_WG_BLOCKS_ENV, NULL);
    if (tall_full)
      for (size_t i = 0; i < sizeof flash_full / sizeof flash_full[0]; i++)
        if (flash_full[i].dqk == 64) fails += run_case(&flash_full[i]);
    test_set_knob(WS_ATTN_SCHEDULE_ENV, NULL);
    test_set_knob(WS_ATTN_TILE_ROWS_ENV, NULL);
    printf(fails ? "test_attention %s: %d FAILED\n" : "test_attention %s: all checks passed\n", mode, fails);
    return fails ? 1 : 0;
  }
  if (!strcmp(mode, "fp8") || !strcmp(mode, "fp8-bf16")) { /* the FP8 cache alone: small enough for compute-sanitizer */
    /* fp8-bf16: the 64-row kernel's BF16 form (WARPSPEC_MLA_FP8_F16=0; f16 is the default) */
    if (!strcmp(mode, "fp8-bf16")) test_set_knob(WS_MLA_FP8_F16_ENV, "0");
    fails += check_fp8_cache();
    for (size_t i = 0; i < sizeof dec_quick / sizeof dec_quick[0]; i++)
      if (dec_quick[i].fp8) fails += run_decode(&dec_quick[i]);
    for (size_t i = 0; i < sizeof sd_quick / sizeof sd_quick[0]; i++)
      if (sd_quick[i].fp8) fails += run_sparse_decode(&sd_quick[i]);
    fails += check_decode_nan(1);
    test_set_knob(WS_MLA_FP8_F16_ENV, NULL);
    printf(fails ? "test_attention %s: %d FAILED\n" : "test_attention %s: all checks passed\n", mode, fails);
    return fails ? 1 : 0;
  }
  if (!strcmp(mode, "mla-quick")) { /* the quick MLA cases (for compute-sanitizer) */
    fails += run_mla_quick();
    printf(fails ? "test_attention mla-quick: %d FAILED\n" : "test_attention mla-quick: all checks passed\n", fails);
    return fails ? 1 : 0;
  }
  if (!strcmp(mode, "sparse-decode")) { /* sparse MLA decode alone */
    fails += check_sparse_decode_errors();
    for (size_t i = 0; i < sizeof sd_quick / sizeof sd_quick[0]; i++) fails += run_sparse_decode(&sd_quick[i]);
    for (size_t i = 0; i < sizeof sd_full / sizeof sd_full[0]; i++) fails += run_sparse_decode(&sd_full[i]);
    printf(fails ? "test_attention sparse-decode: %d FAILED\n" : "test_attention sparse-decode: all checks passed\n",
           fails);
    return fails ? 1 : 0;
  }
  fails += check_errors();
  fails += check_sparse_decode_errors();
  fails += check_fp8_cache();
  fails += check_page_wrap();
  fails += check_decode_nan(0);
  fails += check_decode_nan(1);
  fails += check_flash_nan();
  /* ctest: what a user's `make test` runs in under 5 minutes: every schedule on the quick
   * cases, the long cases under the default schedules only, no batch-128 decode */
  const int lean = !strcmp(mode, "ctest"), longer = strcmp(mode, "quick") != 0;
  printf("flash schedule: default (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++) fails += run_case(&flash_quick[i]);
  for (int sc = 0; sc < 4; sc++) { /* each schedule forced, on the same cases (the default is one of them per dim) */
    test_set_knob(WS_ATTN_SCHEDULE_ENV, flash_scheds[sc]);
    printf("flash schedule: %s (%.0f s)\n", flash_scheds[sc], elapsed_s());
    for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++) fails += run_case(&flash_quick[i]);
    if (longer && !lean) fails += run_case(&flash_full[2]);
  }
  test_set_knob(WS_ATTN_SCHEDULE_ENV, NULL);
  for (int g = 0; g < 2; g++) { /* the default schedules on each grid: persistent, one CTA per tile */
    test_set_knob(WS_ATTN_GRID_ENV, flash_grids[g]);
    printf("flash grid: %s (%.0f s)\n", flash_grids[g], elapsed_s());
    for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++) fails += run_case(&flash_quick[i]);
  }
  test_set_knob(WS_ATTN_GRID_ENV, NULL);
  /* the causal order in small groups of (sequence, head) pairs: 3 leaves a short last group
   * and groups that straddle sequences and K / V heads (the L2 rule makes one group of the
   * quick cases) */
  test_set_knob(WS_ATTN_HEAD_GROUP_ENV, "3");
  printf("flash head groups of 3 (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++) fails += run_case(&flash_quick[i]);
  test_set_knob(WS_ATTN_HEAD_GROUP_ENV, NULL);
  test_set_knob(WS_ATTN_O_STORE_ENV, "rows"); /* O by plain stores (the default stages whole warps' rows for TMA) */
  printf("flash O stores: rows (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++) fails += run_case(&flash_quick[i]);
  test_set_knob(WS_ATTN_O_STORE_ENV, NULL);
  for (int r = 0; r < 2; r++) { /* d 64 on either tile, every mask (the default picks by mask and length) */
    test_set_knob(WS_ATTN_TILE_ROWS_ENV, r ? "192" : "128");
    printf("flash tile rows: %s (%.0f s)\n", r ? "192" : "128", elapsed_s());
    for (size_t i = 0; i < sizeof flash_quick / sizeof flash_quick[0]; i++)
      if (flash_quick[i].dqk == 64) fails += run_case(&flash_quick[i]);
  }
  test_set_knob(WS_ATTN_TILE_ROWS_ENV, NULL);
  fails += run_mla_quick();
  if (longer) {
    for (size_t i = 0; i < sizeof sd_full / sizeof sd_full[0]; i++) fails += run_sparse_decode(&sd_full[i]);
    for (size_t i = 0; i < sizeof mla_full / sizeof mla_full[0]; i++) fails += run_mla(&mla_full[i]);
    for (size_t i = 0; i < sizeof dec_full / sizeof dec_full[0]; i++)
      if (dec_full[i].batch <= 32 || !lean) /* batch 128: not under ctest */
        fails += run_decode(&dec_full[i]);
  }
  printf("nsa (%.0f s)\n", elapsed_s());
  for (size_t i = 0; i < sizeof nsa_quick / sizeof nsa_quick[0]; i++) fails += run_nsa(&nsa_quick[i]);
  if (longer) {
    for (size_t i = 0; i < sizeof nsa_full / sizeof nsa_full[0]; i++) fails += run_nsa(&nsa_full[i]);
    printf("long flash cases (%.0f s)\n", elapsed_s());
    for (size_t i = 0; i < sizeof flash_full / sizeof flash_full[0]; i++) fails += run_case(&flash_full[i]);
  }
  printf("(%.0f s) ", elapsed_s());
  printf(fails ? "test_attention: %d FAILED\n" : "test_attention: all checks passed\n", fails);
  return fails ? 1 : 0;
}
