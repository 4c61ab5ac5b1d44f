/* mla_internal.h - what the MLA kernel (mla_sparse.cu) and its two callers share: the
 * sparse prefill (mla_sparse.cu) and the paged decode (mla_decode.cu). */
#ifndef WARPSPEC_MLA_INTERNAL_H
#define WARPSPEC_MLA_INTERNAL_H

#include <stdint.h>

#include <cuda_runtime_api.h>

#include "warpspec/status.h"

#define MLA_BH 64              /* query rows (heads) per CTA                 */
#define MLA_BN 64              /* kv rows per block (stage)                  */
#define MLA_DQK 576
#define MLA_DV 512

/* Where a CTA's keys come from. Sparse prefill: indices[tok][0 .. topk). Decode (indices
 * NULL): keys kbeg .. kend of sequence b = tok / s_q through its page table, kbeg from the
 * CTA's split; query tok % s_q sees keys up to seqlen - s_q + tok % s_q. */
typedef struct {
  int heads, s_kv, topk, xchg_bar;
  float scale_log2;
  const uint16_t *kv;
  const uint8_t *kv8;                   /* FP8 = 1: WS_MLA_FP8_ROW_BYTES rows instead of kv */
  const int *indices;
  const int *block_table, *seqlens;
  int s_q, page_size, max_pages, chunk; /* decode: queries per sequence, keys per split */
  uint16_t *o;
  float *lse;
  float *o_part, *lse_part;             /* splits > 1: [split][row][512] and [split][row] */
  int rows;                             /* query rows x heads (the partials' stride)      */
} mla_args;

/* Checks shared by both calls, then the tensor map of q ([tokens x heads][576]), the plan
 * and the launch over tokens x head groups x splits; a->kv8 set: the FP8 kernel. */
ws_status mla_launch(const void *q, int tokens, mla_args *a, int splits, float softmax_scale, cudaStream_t stream);

/* WS_ERR_UNSUPPORTED unless the dims are the kernel's (576/512); heads a multiple of MLA_BH
 * or a divisor of it (1, 2, 4, 8, 16, 32: a model's heads shared over 2-128 GPUs). */
ws_status mla_shape_check(const char *what, int dim_qk, int dim_v, int heads);

/* A query token's CTAs: its heads in groups of MLA_BH. Fewer heads than that take one CTA
 * whose other rows are padding: the q tile's rows past the token's heads (the next
 * tokens' heads, or zeros past q) are computed and never stored. The kv rows are what
 * such a decode reads; the tile's idle rows cost tensor time it has to spare (16 heads:
 * 30 FLOP per cache byte, a tenth of the H200's ridge). */
#define MLA_HEAD_GROUPS(heads) (((heads) + MLA_BH - 1) / MLA_BH)

#endif
