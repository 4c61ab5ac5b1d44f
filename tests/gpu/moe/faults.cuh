/* faults.cuh - test_moe: fault injection. A rank that never comes (modes missing,
 * missing_layer) and a hand-off inside the fused kernel left out (experts_timeout,
 * layer_timeout_route / rows / combine): the bounded waits must end in WS_ERR_TIMEOUT
 * within the bound, naming what they waited for, never hang. The CUDA context is lost
 * after a timeout, so each of these is one case per process and ends it (_exit with the
 * test's verdict). */
#ifndef WARPSPEC_TEST_MOE_FAULTS_CUH
#define WARPSPEC_TEST_MOE_FAULTS_CUH

#include "moe_common.cuh"
#include "warpspec/moe_layer.h"
#include "../../../src/moe/layer/layer_kernel.h"

/* The fused experts kernel (and, for the layer's hand-offs, the whole layer in it) with
 * one hand-off left out (moe_experts_problem.drop): the bounded wait on it must end in
 * WS_ERR_TIMEOUT within the bound, never a hang. The wait on the dropped hand-off and
 * the waits behind it (the math warpgroups' on the pipe; in the layer, the later items'
 * on the hand-offs after it: with a CTA per item in this tiny layer they all run) start
 * about together, so the first to reach the bound names any of them; the combine wait is
 * the only one left running when L2's counts are dropped, so it names itself. The CUDA
 * context is lost after a timeout: one case per process. */
static void experts_timeout(int drop, const char *what, int tokens) {
  /* 16 tokens for the L2 counts: from 8 down the L2 epilogues combine and nothing waits for
   * them (a dropped count leaves a slice unsummed, no wait); 8 for the others, so that
   * the route and rows hand-offs are also dropped with the epilogues combining; `tokens`
   * (2: the route item expands them itself, one hand-off for both) where given */
  const int H = 256, I = 128, R = 64, T = tokens ? tokens : drop == MOE_DROP_L2_STORED ? 16 : 8, K = 2,
            layer = drop != MOE_DROP_L1_RELEASE;
  moe_experts_problem p;
  memset(&p, 0, sizeof p);
  p.hidden = H; p.inter = I; p.groups = 1; p.max_rows = R;
  void *buf[10];
  const size_t bytes[10] = {2 * 4, (size_t)R * H, (size_t)(H / 128) * R * 4, (size_t)2 * I * H, (size_t)(2 * I / 128) * (H / 128) * 4,
                            (size_t)H * I, (size_t)(H / 128) * (I / 128) * 4, (size_t)R * I, (size_t)(I / 128) * R * 4,
                            (size_t)R * H * 2};
  for (int i = 0; i < 10; i++) {
    CUDA_OK(cudaMalloc(&buf[i], bytes[i]));
    CUDA_OK(cudaMemset(buf[i], 0x11, bytes[i])); /* small finite FP8 values and scales */
  }
  const int offs[2] = {0, R};
  CUDA_OK(cudaMemcpy(buf[0], offs, sizeof offs, cudaMemcpyHostToDevice));
  uint32_t *counters;
  CUDA_OK(cudaMalloc((void **)&counters, moe_experts_counter_words(R, H) * 4));
  CUDA_OK(cudaMemset(counters, 0, moe_experts_counter_words(R, H) * 4));
  p.offsets = (const int *)buf[0]; p.x = buf[1]; p.x_scale = (const float *)buf[2]; p.x_scale_ld = R;
  p.w1 = buf[3]; p.w1_scale = (const float *)buf[4]; p.w2 = buf[5]; p.w2_scale = (const float *)buf[6];
  p.act = (uint8_t *)buf[7]; p.act_scale = (float *)buf[8]; p.act_ld = R; p.y = buf[9]; p.counters = counters;
  moe_layer_io io;
  memset(&io, 0, sizeof io);
  if (layer) { /* T tokens, K slots each, all on the one expert: the kernel routes and expands them */
    void *lb[6];
    const size_t lbytes[6] = {(size_t)T * K * 4, (size_t)T * K * 4, (size_t)T * H, (size_t)T * (H / 128) * 4,
                              (size_t)T * H * 2, (size_t)T * K * 4 + 16};
    for (int i = 0; i < 6; i++) {
      CUDA_OK(cudaMalloc(&lb[i], lbytes[i]));
      CUDA_OK(cudaMemset(lb[i], i == 0 ? 0 : 0x11, lbytes[i])); /* expert ids 0; small weights, rows, scales */
    }
    io.tokens = T; io.topk = K; io.topk_idx = (const int *)lb[0]; io.topk_weights = (const float *)lb[1];
    io.x = lb[2]; io.x_scale = (const float *)lb[3]; io.out = lb[4];
    io.entry_row = (int *)lb[5]; io.bad_id = (int *)((char *)lb[5] + (size_t)T * K * 4);
    CUDA_OK(cudaMemset(io.bad_id, 0, 16));
    p.layer = &io;
  }
  WS_OK_OR_DIE(moe_experts_launch(&p, 0)); /* first as it should run */
  WS_OK_OR_DIE(ws_sync(0));
  WS_OK_OR_DIE(ws_set_timeout_ms(500));
  p.drop = drop;
  const double t0 = now_s();
  ws_status s = moe_experts_launch(&p, 0);
  if (s == WS_OK) s = ws_sync(0);
  const double waited = now_s() - t0;
  printf("rank %d: fused experts%s, hand-off %d dropped: %s after %.2f s: %s\n", rank, layer ? " (whole layer)" : "",
         drop, ws_strerror(s), waited, ws_last_error());
  CHECK(s == WS_ERR_TIMEOUT);
  /* the dropped hand-off's own wait, or one of the waits behind it: the math's on the pipe,
   * the loader's on the scheduler's items ('moe experts items'), or (tiny layer: a CTA per
   * item) a combine item's on the L2 stores */
  const char *e = ws_last_error();
  CHECK(strstr(e, what) || strstr(e, "'moe experts") || strstr(e, "'moe layer "));
  if (drop == MOE_DROP_L2_STORED) CHECK_MSG(what);
  CHECK(waited < 10.0);
  fflush(stdout);
  _exit(test_finish("test_moe experts/layer timeout") ? 1 : 0);
}

/* mode "missing": rank 1 never dispatches, rank 0 gets WS_ERR_TIMEOUT within the bound. */
static void missing_rank(ws_comm *comm) {
  const ws_ep_config cfg = {256, 4 * nranks, 2, 64, WS_EP_BF16, 1, 4, WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
  ws_ep *ep = NULL;
  WS_OK_OR_DIE(ws_ep_create(&ep, comm, &cfg));
  WS_OK_OR_DIE(ws_set_timeout_ms(500));
  int *idx; float *w; void *x;
  CUDA_OK(cudaMalloc((void **)&idx, 64 * 2 * 4));
  CUDA_OK(cudaMalloc((void **)&w, 64 * 2 * 4));
  CUDA_OK(cudaMalloc(&x, 64 * 256 * 2));
  CUDA_OK(cudaMemset(idx, 0, 64 * 2 * 4));
  ws_status s = WS_OK;
  if (rank == 0) {
    const double t0 = (double)clock() / CLOCKS_PER_SEC;
    s = ws_ep_dispatch(ep, x, NULL, idx, w, 64, NULL, NULL, 0);
    if (s == WS_OK) s = ws_sync(0);
    printf("rank 0: %s after %.2f s CPU: %s\n", ws_strerror(s), (double)clock() / CLOCKS_PER_SEC - t0, ws_last_error());
    CHECK(s == WS_ERR_TIMEOUT);
    CHECK_MSG("dispatch");
  } else {
    usleep(3000000); /* never dispatches */
  }
  fflush(stdout);
  _exit(test_finish("test_moe missing") ? 1 : 0);
}

/* mode "missing_layer": the same with the whole layer in one kernel per rank
 * (WS_MOE_FUSED_LAYER) on 2 ranks. */
static void missing_rank_layer(ws_comm *comm) {
  const int H = 256, I = 128, E = 2 * nranks, K = 2, T = 8;
  void *b[8];
  const size_t bytes[8] = {(size_t)(E / nranks) * 2 * I * H, (size_t)(E / nranks) * (2 * I / 128) * (H / 128) * 4,
                           (size_t)(E / nranks) * H * I, (size_t)(E / nranks) * (H / 128) * (I / 128) * 4,
                           (size_t)T * K * 4, (size_t)T * K * 4, (size_t)T * H * 2, (size_t)T * H * 2};
  for (int i = 0; i < 8; i++) {
    CUDA_OK(cudaMalloc(&b[i], bytes[i]));
    CUDA_OK(cudaMemset(b[i], i == 4 ? 0 : 0x11, bytes[i])); /* expert ids 0 (rank 0's); small finite values */
  }
  const ws_moe_layer_config lc = {H, I, E, K, T, 4, WS_MOE_FUSED_LAYER};
  ws_moe_layer *layer = NULL;
  WS_OK_OR_DIE(ws_moe_layer_create(&layer, comm, &lc, b[0], (const float *)b[1], b[2], (const float *)b[3]));
  WS_OK_OR_DIE(ws_set_timeout_ms(500));
  if (rank == 0) {
    const double t0 = now_s();
    ws_status s = ws_moe_layer_forward(layer, b[6], NULL, (const int *)b[4], (const float *)b[5], T, b[7], 0);
    if (s == WS_OK) s = ws_sync(0);
    const double waited = now_s() - t0;
    printf("rank 0: fused layer, rank 1 missing: %s after %.2f s: %s\n", ws_strerror(s), waited, ws_last_error());
    CHECK(s == WS_ERR_TIMEOUT);
    /* the route's wait on rank 1's counts, not a local wait queued behind it */
    CHECK_MSG("'moe layer counts' with peer 1");
    CHECK(waited < 10.0);
  } else {
    usleep(3000000); /* never calls the layer */
  }
  fflush(stdout);
  _exit(test_finish("test_moe missing_layer") ? 1 : 0);
}

#endif
