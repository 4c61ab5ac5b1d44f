/* test_moe.cu - MoE dispatch, combine and the MoE layer on N ranks (one process per GPU,
 * `warpspec run -n N`; N = 1 works too), against host references, fresh random data
 * each run (one seed shared by all ranks, printed), outputs poisoned. One binary, the
 * mode (argv[1]) picks what runs:
 *   all (default)   gemm's cases, then every dispatch / combine case
 *   quick           the dispatch / combine cases but the two big DeepSeek-V3 ones
 *   gemm            dispatch -> ws_gemm -> combine, and the MoE layer on every path
 *   layer           the layer cases small enough for compute-sanitizer, no 1000-call runs
 *   missing         rank 1 never dispatches: rank 0 gets WS_ERR_TIMEOUT within the bound
 *   missing_layer   the same with the fused layer (WS_MOE_FUSED_LAYER) on 2 ranks
 *   experts_timeout, layer_timeout_route, layer_timeout_rows, layer_timeout_combine
 *                   one hand-off inside the fused kernel left out: a bounded wait ends it
 * The cases live in one file per area, included here (test.h counts failures per
 * translation unit, so they are one unit):
 *   moe_common.cuh     the shared seed, routings and input rows
 *   ep_cases.cuh       dispatch and combine, every layout and mode, exact
 *   gemm_pipeline.cuh  dispatch -> ws_gemm -> combine against the float64 MoE
 *   layer.cuh          the whole layer: the parts against ws_moe_reference, every path
 *                      of ws_moe_layer_forward equal to the parts
 *   faults.cuh         a missing rank, a dropped hand-off: WS_ERR_TIMEOUT, no hang
 * Timing is not a mode: `warpspec bench ep` (dispatch and combine; --trace DIR for role
 * timelines, --profile for a few calls under Nsight Compute) and `warpspec bench moe`
 * (the layer). */
#include "moe_common.cuh"
#include "ep_cases.cuh"
#include "gemm_pipeline.cuh"
#include "layer.cuh"
#include "faults.cuh"

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  if (!strcmp(mode, "bench") || !strcmp(mode, "profile")) { /* were modes of this test until session 19 */
    fprintf(stderr, "test_moe %s: moved to `warpspec bench ep%s` (bench/bench_ep.cu)\n", mode,
            strcmp(mode, "profile") ? "" : " --profile");
    return 2;
  }
  ws_comm *comm = comm_test_start("moe.seed", &rank, &nranks, &seed);
  printf("rank %d of %d: seed %llu, mode %s\n", rank, nranks, (unsigned long long)seed, mode);
  if (!strcmp(mode, "missing")) missing_rank(comm);
  if (!strcmp(mode, "missing_layer")) missing_rank_layer(comm);
  if (!strcmp(mode, "experts_timeout")) experts_timeout(MOE_DROP_L1_RELEASE, "moe experts", 0);
  if (!strcmp(mode, "layer_timeout_route")) experts_timeout(MOE_DROP_ROUTED, "moe layer route", 0);
  if (!strcmp(mode, "layer_timeout_rows")) experts_timeout(MOE_DROP_EXPANDED, "moe layer x rows", 0);
  if (!strcmp(mode, "layer_timeout_combine")) experts_timeout(MOE_DROP_L2_STORED, "moe layer L2 rows", 0);
  /* 2 tokens: the route item expands them (mx_route_few), its one release dropped */
  if (!strcmp(mode, "layer_timeout_route_few")) experts_timeout(MOE_DROP_ROUTED, "moe layer x rows", 2);
  if (!strcmp(mode, "layer_timeout_rows_few")) experts_timeout(MOE_DROP_EXPANDED, "moe layer x rows", 2);
  if (!strcmp(mode, "layer")) { /* small: both layer paths under compute-sanitizer */
    layer_long = 0;
    CHECK(moe_layer_case(comm, 512, 256, 8 * nranks, 4, 48, ROUTE_HOLES));
    if (2 % nranks == 0) CHECK(moe_layer_case(comm, 128, 128, 2, 1, 2, ROUTE_HOLES));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 16, 8, 3, ROUTE_NONE));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 1152, 384, 16, 4, 5, ROUTE_HOLES));
    /* 1 token, and a token naming each of its experts in two slots (two rows of one block) */
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 16, 8, 1, ROUTE_HOLES));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 512, 128, 16, 8, 1, ROUTE_HOLES));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 512, 128, 16, 8, 1, ROUTE_REPEATS));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 1152, 384, 16, 4, 1, ROUTE_UNIFORM));
    WS_OK_OR_DIE(ws_comm_destroy(comm));
    return test_finish("test_moe layer");
  }
  if (!strcmp(mode, "gemm") || !strcmp(mode, "all")) {
    CHECK(moe_gemm_case(comm, 512, 8 * nranks, 4, 64, 128));
    CHECK(moe_gemm_case(comm, 256, 4 * nranks, 2, 33, 1));
    CHECK(moe_layer_case(comm, 512, 256, 8 * nranks, 4, 48, ROUTE_HOLES));
    /* the seeds' toy shapes (H 128, I 128, 2 experts, top-1, 2 tokens; H 256, 16 experts,
     * top-8, 1 token), then one with many rows per expert and an odd H / 128 */
    if (2 % nranks == 0) CHECK(moe_layer_case(comm, 128, 128, 2, 1, 2, ROUTE_HOLES));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 16, 8, 1, ROUTE_HOLES));
    /* few tokens, every slot -1: no tile at all, and still a zero output from each path;
     * at 16 tokens with combine items (no slice combine), which then wait for no tile */
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 16, 8, 3, ROUTE_NONE));
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 16, 8, 16, ROUTE_NONE));
    /* exactly 32 (token, slot) entries at 2 tokens: the scheduler's lanes full, the route
     * item expanding (one GPU) */
    if (32 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 32, 16, 2, ROUTE_HOLES));
    if (32 % nranks == 0) CHECK(moe_layer_case(comm, 256, 128, 32, 16, 2, ROUTE_UNIFORM));
    /* few tokens over several 256-column slices of the output (one GPU: the L2 epilogues
     * sum them): 5 slices, the last half past H; 64 slices (the mask's last bit); 65, which
     * falls back to combine items */
    if (16 % nranks == 0) CHECK(moe_layer_case(comm, 1152, 384, 16, 4, 5, ROUTE_HOLES));
    if (4 % nranks == 0) CHECK(moe_layer_case(comm, 16384, 128, 4, 2, 3, ROUTE_UNIFORM));
    if (4 % nranks == 0) CHECK(moe_layer_case(comm, 16512, 128, 4, 2, 3, ROUTE_UNIFORM));
    CHECK(moe_layer_case(comm, 1152, 384, 4 * nranks, 2, 300, ROUTE_HOLES));
    /* skewed: every token's first slot on expert 0 (a hot expert, most others empty) */
    CHECK(moe_layer_case(comm, 512, 256, 32 * nranks, 8, 130, ROUTE_ONE_EXPERT));
    if (!strcmp(mode, "gemm")) {
      WS_OK_OR_DIE(ws_comm_destroy(comm));
      return test_finish("test_moe gemm");
    }
  }
  ep_cases_run(comm, !strcmp(mode, "quick"));
  WS_OK_OR_DIE(ws_comm_destroy(comm));
  return test_finish("test_moe");
}
