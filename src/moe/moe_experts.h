/* moe_experts.h - a rank's experts in one persistent kernel (moe_experts.cu): the L1
 * grouped FP8 GEMM, SwiGLU + per-128 requant in its epilogue, and the L2 grouped FP8
 * GEMM, on the receive layout of a dispatch. The MoE layer's WS_MOE_FUSED_EXPERTS path. */
#ifndef WARPSPEC_MOE_EXPERTS_H
#define WARPSPEC_MOE_EXPERTS_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "warpspec/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Rows of one tile, and the granule every expert's rows must be padded to (the L2 tiles
 * of a block wait for exactly the L1 tiles of the same rows). */
#define MOE_EXPERTS_BM 64

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
  uint32_t *counters;           /* moe_experts_counter_words(max_rows), zero before the first
                                 * call; every call leaves them zero again                    */
  int sms;                      /* CTAs (0: every SM)                                        */
  int drop_l1_release;          /* tests only: L1 tiles never release their rows, so the
                                 * first L2 tile's bounded wait must time out               */
} moe_experts_problem;

size_t moe_experts_counter_words(int max_rows);
ws_status moe_experts_launch(const moe_experts_problem *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
