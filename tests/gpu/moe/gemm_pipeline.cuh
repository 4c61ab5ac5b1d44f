/* gemm_pipeline.cuh - test_moe: dispatch -> ws_gemm on the received layout -> combine
 * against the float64 MoE, eager and as one replayed CUDA graph, with the copy receive
 * and then the index receive (which must give the same bits): the layouts exist for this
 * pipeline, so it is checked end to end (modes gemm and all). */
#ifndef WARPSPEC_TEST_MOE_GEMM_PIPELINE_CUH
#define WARPSPEC_TEST_MOE_GEMM_PIPELINE_CUH

#include "moe_common.cuh"
#include "warpspec/gemm.h"

/* "gemm": the MoE pipeline the layouts exist for. Dispatch FP8 tokens, ws_gemm over the
 * received layout as it stands (grouped contiguous, K-block-major scales, offsets on the
 * device) with each expert's FP8 weights, combine; against the float64 MoE on the same
 * quantised inputs and weights: out[t] = sum_k w_k (x_t W_{e_k}^T). Then the same three
 * calls captured in one CUDA graph and replayed. */
static int moe_gemm_case(ws_comm *comm, int H, int E, int K, int T, int row_align) {
  ws_ep_config cfg = {H, E, K, T, WS_EP_FP8, row_align, 8, WS_EP_NORMAL, WS_EP_RECEIVE_COPY};
  const int L = E / nranks, kb = H / 128;
  /* this rank's tokens, quantised with the host definition */
  int *idx = (int *)host_alloc((size_t)T * K, sizeof(int), 0);
  float *w = (float *)host_alloc((size_t)T * K, sizeof(float), 0);
  make_routing(&cfg, rank, T, ROUTE_HOLES, idx, w, 0x77);
  float *xf = (float *)host_alloc((size_t)T * H, sizeof(float), 0);
  for (size_t i = 0; i < (size_t)T * H; i++) xf[i] = unit(seed ^ 0x1234ull ^ ((uint64_t)rank << 40) ^ i) * 2.0f;
  uint8_t *xq = (uint8_t *)host_alloc((size_t)T * H, 1, 0);
  float *xs = (float *)host_alloc((size_t)T * kb, sizeof(float), 0);
  WS_OK_OR_DIE(ws_fp8_quantize_1x128_host(xf, (size_t)T, (size_t)H, (size_t)H, xq, xs));
  /* every expert's weights [H][H] with 128 x 128 scales, from the shared seed */
  uint8_t *wq = (uint8_t *)host_alloc((size_t)E * H * H, 1, 0);
  float *ws = (float *)host_alloc((size_t)E * kb * kb, sizeof(float), 0);
  float *wf = (float *)host_alloc((size_t)H * H, sizeof(float), 0);
  for (int e = 0; e < E; e++) {
    for (size_t i = 0; i < (size_t)H * H; i++) wf[i] = unit(seed ^ 0xBEEFull ^ ((uint64_t)e << 40) ^ i) * 0.1f;
    WS_OK_OR_DIE(ws_fp8_quantize_128x128_host(wf, (size_t)H, (size_t)H, (size_t)H, wq + (size_t)e * H * H,
                                              ws + (size_t)e * kb * kb));
  }
  void *dx, *dxs, *di, *dw, *dW, *dWs, *dy, *dout;
  const size_t R = ws_ep_max_rows(&cfg, nranks);
  CUDA_OK(cudaMalloc(&dx, (size_t)T * H));
  CUDA_OK(cudaMalloc(&dxs, (size_t)T * kb * 4));
  CUDA_OK(cudaMalloc(&di, (size_t)T * K * 4));
  CUDA_OK(cudaMalloc(&dw, (size_t)T * K * 4));
  CUDA_OK(cudaMalloc(&dW, (size_t)L * H * H));
  CUDA_OK(cudaMalloc(&dWs, (size_t)L * kb * kb * 4));
  CUDA_OK(cudaMalloc(&dy, R * H * 2 + 256));
  CUDA_OK(cudaMalloc(&dout, (size_t)T * H * 2));
  CUDA_OK(cudaMemcpy(dx, xq, (size_t)T * H, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dxs, xs, (size_t)T * kb * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(di, idx, (size_t)T * K * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dw, w, (size_t)T * K * 4, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dW, wq + (size_t)rank * L * H * H, (size_t)L * H * H, cudaMemcpyHostToDevice));
  CUDA_OK(cudaMemcpy(dWs, ws + (size_t)rank * L * kb * kb, (size_t)L * kb * kb * 4, cudaMemcpyHostToDevice));
  /* the reference */
  double *ref = (double *)host_alloc((size_t)T * H, sizeof(double), 0);
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      const int e = idx[t * K + k];
      if (e < 0) continue;
      for (int j = 0; j < H; j++) {
        double acc = 0;
        for (int c = 0; c < H; c++)
          acc += ws_fp8_e4m3_decode(xq[(size_t)t * H + c]) * xs[t * kb + c / 128] *
                 ws_fp8_e4m3_decode(wq[((size_t)e * H + j) * H + c]) * ws[((size_t)e * kb + j / 128) * kb + c / 128];
        ref[(size_t)t * H + j] += w[t * K + k] * acc;
      }
    }
  uint16_t *hout = (uint16_t *)host_alloc((size_t)T * H, 2, 0), *copy_out = (uint16_t *)host_alloc((size_t)T * H, 2, 0);
  int ok = 1;
  /* the copy receive (ws_gemm over contiguous rows), then the index receive (ws_gemm
   * gathering the rows in the inbox): the same bits */
  for (int index = 0; index < 2; index++) {
  cfg.receive = index ? WS_EP_RECEIVE_INDEX : WS_EP_RECEIVE_COPY;
  ws_ep *ep = NULL;
  WS_OK_OR_DIE(ws_ep_create(&ep, comm, &cfg));
  for (int pass = 0; pass < 2; pass++) { /* eager, then a replayed graph */
    cudaStream_t s;
    CUDA_OK(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking));
    CUDA_OK(cudaMemset(dout, 0xFF, (size_t)T * H * 2));
    cudaGraph_t g = NULL;
    cudaGraphExec_t ge = NULL;
    if (pass == 1) CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeThreadLocal));
    ws_ep_recv rv;
    WS_OK_OR_DIE(ws_ep_dispatch(ep, dx, (const float *)dxs, (const int *)di, (const float *)dw, T, &rv, NULL, s));
    ws_gemm_problem p;
    memset(&p, 0, sizeof p);
    p.type = WS_GEMM_FP8;
    WS_OK_OR_DIE(ws_ep_recv_gemm(&rv, &p));
    p.n = H; p.k = H; p.b = dW; p.b_scale = (const float *)dWs; p.d = dy;
    CHECK(index ? p.a_rows != NULL && p.a == rv.rows : p.a_rows == NULL && p.a == rv.x);
    WS_OK_OR_DIE(ws_gemm(&p, s));
    WS_OK_OR_DIE(ws_ep_combine(ep, dy, dout, s));
    if (pass == 1) {
      CUDA_OK(cudaStreamEndCapture(s, &g));
      CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
      for (int i = 0; i < 5; i++) CUDA_OK(cudaGraphLaunch(ge, s));
    }
    WS_OK_OR_DIE(ws_sync(s));
    CUDA_OK(cudaMemcpy(hout, dout, (size_t)T * H * 2, cudaMemcpyDeviceToHost));
    long nan_count = 0;
    const double rel = rel_err_bf16(hout, ref, (size_t)T * H, &nan_count);
    long differ = 0;
    if (index)
      for (size_t i = 0; i < (size_t)T * H; i++) differ += hout[i] != copy_out[i];
    else if (pass == 0)
      memcpy(copy_out, hout, (size_t)T * H * 2);
    printf("rank %d: dispatch -> ws_gemm -> combine, %s receive, H %d E %d K %d T %d align %d%s: rel err %.2e, %ld unwritten%s",
           rank, index ? "index" : "copy ", H, E, K, T, row_align, pass ? " (graph x5)" : "", rel, nan_count,
           index ? "" : "\n");
    if (index) printf(", %ld outputs differ from the copy receive's\n", differ);
    ok &= rel < 2e-2 && nan_count == 0 && differ == 0;
    if (ge) cudaGraphExecDestroy(ge);
    if (g) cudaGraphDestroy(g);
    cudaStreamDestroy(s);
  }
  WS_OK_OR_DIE(ws_ep_destroy(ep));
  }
  cudaFree(dx); cudaFree(dxs); cudaFree(di); cudaFree(dw); cudaFree(dW); cudaFree(dWs); cudaFree(dy); cudaFree(dout);
  free(idx); free(w); free(xf); free(xq); free(xs); free(wq); free(ws); free(wf); free(ref); free(hout); free(copy_out);
  return ok;
}

#endif
