/* warpspec/moe_layer.h - a whole MoE layer in one call (issue 13's API).
 *
 *   out[t] = sum_k w[t][k] x W2_e (silu(x W1g_e) * (x W1u_e)),  e = topk_idx[t][k]
 *
 * with FP8 E4M3 operands: x with 1 x 128 scales, the weights with 128 x 128 scales, fp32
 * accumulation, the intermediate activation requantised per 1 x 128 block (per 128, never
 * coarser: a block of the intermediate is one row's 128 consecutive columns, exactly the
 * K block L2's scales index, so one scale per block costs no accuracy the GEMM could
 * recover), BF16 out. Expert parallel over the communicator's ranks: rank r holds experts
 * r x E / n .. (r + 1) x E / n - 1.
 *
 * Paths, all stream-ordered and graph-capturable (no host synchronisation), all giving
 * the same bits (WS_MOE_AUTO, the default, picks one per call): WS_MOE_UNFUSED runs
 * dispatch (ws_ep_dispatch), the L1 grouped GEMM (ws_gemm), ws_moe_swiglu_quant, the L2
 * grouped GEMM and combine; WS_MOE_FUSED_EXPERTS runs the experts (both GEMMs and the
 * SwiGLU epilogue) as one persistent kernel between dispatch and combine;
 * WS_MOE_FUSED_LAYER runs the whole layer as that one kernel per rank: routing, the
 * transfer of the tokens into the grouped layout (a local copy on one GPU, pushes to the
 * peers' inboxes with several ranks; BF16 input quantised on the way), the experts, and
 * the weighted sums sent back and added at each token's rank. */
#ifndef WARPSPEC_MOE_LAYER_H
#define WARPSPEC_MOE_LAYER_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "comm.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  WS_MOE_AUTO = 0,          /* per call, from the expected rows per local expert
                             * (config.h: WS_MOE_AUTO_LAYER_ROWS on one GPU, else
                             * WS_MOE_AUTO_EP_LAYER_ROWS and WS_MOE_AUTO_FUSED_ROWS) */
  WS_MOE_UNFUSED = 1,       /* dispatch, L1 ws_gemm, SwiGLU pass, L2 ws_gemm, combine       */
  WS_MOE_FUSED_EXPERTS = 2, /* dispatch, one persistent kernel for L1 + SwiGLU + requant + L2
                             * (L2 tiles start as their rows' L1 tiles finish), combine    */
  WS_MOE_FUSED_LAYER = 3    /* the whole layer in one persistent kernel per rank (route,
                             * token transfer, L1, SwiGLU + requant, L2, weighted sums and
                             * their return); WS_MOE_AUTO takes it on one GPU where it would
                             * take WS_MOE_FUSED_EXPERTS, and with several ranks at decode  */
} ws_moe_path;

typedef struct {
  int hidden;       /* H: a multiple of 128                                              */
  int inter;        /* I: the expert's intermediate size, a multiple of 128               */
  int experts;      /* E: a multiple of the number of ranks                               */
  int topk;         /* K: 1..WS_EP_MAX_TOPK                                               */
  int max_tokens;   /* tokens a rank may pass per call                                    */
  int num_sms;      /* CTAs of the transfer kernels (0: every SM, up to WS_EP_MAX_SMS)    */
  ws_moe_path path; /* WS_MOE_AUTO (0), WS_MOE_UNFUSED, WS_MOE_FUSED_EXPERTS or _FUSED_LAYER  */
} ws_moe_layer_config;

typedef struct ws_moe_layer ws_moe_layer;

/* Collective. Weights of this rank's E / n experts, device memory, used in place (the
 * layer keeps the pointers; they must outlive it):
 *   w1 [E/n][2 I][H] e4m3 (gate rows 0..I-1, then up), w1_scale [E/n][2 I / 128][H / 128]
 *   w2 [E/n][H][I] e4m3, w2_scale [E/n][H / 128][I / 128]   (128 x 128 blocks, fp32). */
ws_status ws_moe_layer_create(ws_moe_layer **layer, ws_comm *comm, const ws_moe_layer_config *cfg, const void *w1,
                              const float *w1_scale, const void *w2, const float *w2_scale);
ws_status ws_moe_layer_destroy(ws_moe_layer *layer); /* collective */

/* Collective, stream-ordered, graph-capturable. x: [tokens][H] e4m3 with x_scale
 * [tokens][H / 128] fp32 (row-major, as ws_fp8_quantize_1x128 writes), or bf16 with
 * x_scale NULL (quantised here first); topk_idx / topk_weights [tokens][K] (-1: no
 * expert); out [tokens][H] bf16. tokens 0..max_tokens; a rank with 0 tokens still takes
 * part (its experts serve the other ranks) and may pass NULL for every tensor. */
ws_status ws_moe_layer_forward(ws_moe_layer *layer, const void *x, const float *x_scale, const int *topk_idx,
                               const float *topk_weights, int tokens, void *out, cudaStream_t stream);

/* The path a call with `tokens` tokens takes (never WS_MOE_AUTO, which decides per call). */
ws_status ws_moe_layer_path_for(const ws_moe_layer *layer, int tokens, ws_moe_path *path);

/* The same call, then waits for the stream and gives each stage's time in ms: [0]
 * dispatch (and the BF16 input's quantiser), [1] L1 GEMM, [2] SwiGLU + requant, [3] L2
 * GEMM, [4] combine (WS_MOE_FUSED_EXPERTS: [1] is the experts kernel, [2] and [3] are
 * 0; WS_MOE_FUSED_LAYER: [1] is the whole layer, the others 0). For benchmarks and users
 * who want to see where the time goes. */
ws_status ws_moe_layer_profile(ws_moe_layer *layer, const void *x, const float *x_scale, const int *topk_idx,
                               const float *topk_weights, int tokens, void *out, cudaStream_t stream, float ms[5]);

#ifdef __cplusplus
}
#endif
#endif
