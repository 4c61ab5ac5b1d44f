/* layer_kernel.h - a rank's experts in one persistent kernel (layer_kernel.cu): the L1
 * grouped FP8 GEMM, SwiGLU + per-128 requant in its epilogue, and the L2 grouped FP8
 * GEMM, on the receive layout of a dispatch. The MoE layer's WS_MOE_FUSED_EXPERTS path. */
#ifndef WARPSPEC_MOE_LAYER_KERNEL_H
#define WARPSPEC_MOE_LAYER_KERNEL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "warpspec/moe.h"
#include "warpspec/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The whole layer in the same kernel (layer_items.cuh), one GPU (EP1): with `layer`
 * set, the kernel first routes the tokens (offsets, each entry's row) and copies them
 * into x / x_scale (the grouped layout: quantising BF16 rows on the way), and after the
 * experts sums each token's rows into `out`. offsets, x and x_scale of the problem are
 * then written by the kernel itself. */
struct ep_args; /* the dispatch handle's kernel arguments: ep_internal.h */

typedef struct {
  int tokens, topk;             /* T (0..max_tokens), K                                     */
  const int *topk_idx;          /* [T][K]: expert ids, -1 skips a slot                       */
  const float *topk_weights;    /* [T][K]                                                    */
  const void *x;                /* [T][H]: e4m3 with x_scale [T][H / 128], or bf16 (x_scale NULL) */
  const float *x_scale;
  void *out;                    /* [T][H] bf16                                               */
  int *entry_row;               /* [max_tokens][K]: each entry's row in the grouped layout, -1 */
  int *bad_id;                  /* [4]: count, first token, slot, value of ids out of range  */
  /* several ranks (layer_items_ep.cuh): the dispatch handle's kernel arguments
   * (ep_kernel_args); x, x_scale and offsets of the problem are then its receive layout,
   * and entry_row and bad_id are not used (the handle has its own) */
  const struct ep_args *ep;
} moe_layer_io;

/* The granule every expert's rows must be padded to, and the rows of the small tile
 * (the L2 tiles of a 64-row block wait for exactly the L1 tiles of the same rows). */
#define MOE_EXPERTS_BM 64
/* The large tile: 128 rows, each math warpgroup 64 of them against the same weights,
 * for the batches where the 64-row tile's weight traffic through L2 is the bound. */
#define MOE_EXPERTS_BM_WIDE 128

typedef struct {
  int hidden, inter;            /* H, I: multiples of 128                                    */
  int groups;                   /* local experts                                             */
  int max_rows;                 /* rows of x, act and y                                      */
  const int *offsets;           /* [groups + 1] on the device, each a multiple of 64         */
  const void *x;                /* [max_rows][H] e4m3                                        */
  const float *x_scale;         /* [H / 128][x_scale_ld], K-block-major                       */
  int x_scale_ld;               /* >= max_rows, a multiple of 4                               */
  const void *w1;               /* [groups][2 I][H] e4m3: gate rows, then up                  */
  const float *w1_scale;        /* [groups][2 I / 128][H / 128]                               */
  const void *w2;               /* [groups][H][I] e4m3                                        */
  const float *w2_scale;        /* [groups][H / 128][I / 128]                                 */
  uint8_t *act;                 /* [max_rows][I] e4m3: silu(gate) x up, requantised           */
  float *act_scale;             /* [I / 128][act_ld]                                          */
  int act_ld;                   /* >= max_rows, a multiple of 4                               */
  void *y;                      /* [max_rows][H] bf16 out                                     */
  uint32_t *counters;           /* moe_experts_counter_words(max_rows, hidden), zero before the first
                                 * call; every call leaves them zero again                    */
  const moe_layer_io *layer;    /* NULL: the experts only (offsets, x, x_scale given)         */
  int sms;                      /* CTAs (0: every SM)                                        */
  int tile_rows;                /* MOE_EXPERTS_BM or MOE_EXPERTS_BM_WIDE (0: the small one)  */
  int pair;                     /* 1: CTA pairs on 128-row blocks, each CTA 64 rows, the
                                 * weights read once per pair (64-row tile, no layer)       */
  int drop;                     /* tests only, MOE_DROP_*: one hand-off never signalled, so
                                 * the bounded wait on it must time out                     */
} moe_experts_problem;

/* moe_experts_problem.drop: the hand-off a test leaves out (and the wait that times out) */
enum {
  MOE_DROP_NONE = 0,
  MOE_DROP_L1_RELEASE, /* L1 tiles' releases of their rows   ("moe experts L1 rows")  */
  MOE_DROP_ROUTED,     /* the layer's route item's release     ("moe layer route")      */
  MOE_DROP_EXPANDED,   /* the layer's expand items' releases   ("moe layer x rows")     */
  MOE_DROP_L2_STORED   /* the layer's L2 tiles' store counts   ("moe layer L2 rows"; at 1-8 tokens on
                        * one GPU nothing waits for them: the output is left unsummed) */
};

size_t moe_experts_counter_words(int max_rows, int hidden); /* with or without a layer */
struct ws_ep;
const struct ep_args *ep_kernel_args(const struct ws_ep *ep); /* ep.cu: the kernels' ep_args of a handle */
/* dispatch.cu: ws_ep_dispatch with the receive chosen per call (ep_internal.h) */
ws_status ep_dispatch(struct ws_ep *ep, const void *x, const float *x_scale, const int *topk_idx,
                      const float *topk_weights, int num_tokens, ws_ep_recv *recv, int *host_offsets, int index,
                      cudaStream_t stream);
ws_status moe_experts_launch(const moe_experts_problem *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
