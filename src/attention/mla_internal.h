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
  int gather_ahead;                     /* few-head decode: stages land by mbarrier (WARPSPEC_MLA_GATHER_AHEAD) */
} mla_args;

/* Checks shared by both calls, then the tensor map of q ([tokens x heads][576]), the plan
 * and the launch over row tiles (MLA_ROW_TILES) x splits; a->kv8 set: the FP8 kernel. */
ws_status mla_launch(const void *q, int tokens, mla_args *a, int splits, float softmax_scale, cudaStream_t stream);

/* Paged decode (BF16 or FP8 cache) with s_q x heads = 16 or 32 query rows per sequence,
 * keys on wgmma's M side (mla_fewheads.cu). */
ws_status mla_fewheads_launch(const void *q, int tokens, mla_args *a, int splits, cudaStream_t stream);

/* WS_ERR_UNSUPPORTED unless the dims are the kernel's (576/512); heads a multiple of MLA_BH
 * or a divisor of it (1, 2, 4, 8, 16, 32: a model's heads shared over 2-128 GPUs). */
ws_status mla_shape_check(const char *what, int dim_qk, int dim_v, int heads);

/* The CTAs of `pack` query tokens that read the same keys: their pack x heads rows,
 * [token][head] as in q and o, in tiles of MLA_BH. pack is a sequence's s_q in paged decode
 * with fewer heads than MLA_BH (the ROWS kernels: 16 heads at s_q 4, 32 at s_q 2, one CTA
 * reads the keys once for every token, each row masked at its own token's causal limit;
 * 16 or 32 rows go to mla_fewheads.cu), else 1 (a token's
 * heads in tiles of their own: 128 heads, two per token). The tile's rows past
 * the last token are padding (the next rows of q, or zeros past it), computed and never
 * stored. Such a decode is bound by its cache reads; the idle rows cost tensor time it
 * has to spare (16 heads: 30 FLOP per cache byte, a seventh of the H200's ridge). */
#define MLA_ROW_TILES(pack, heads) (((pack) * (heads) + MLA_BH - 1) / MLA_BH)

#endif
