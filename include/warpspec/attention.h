/* warpspec/attention.h - attention problems, their checks and float64 references.
 *
 * This header defines the problems the attention kernels (issue 14: flash attention
 * forward, DeepSeek sparse MLA prefill and decode) solve, the argument checks they share, the host
 * references the tests compare against, and the flash attention forward kernel
 * (ws_attn_forward; src/attention/flash_fwd.cu) and the sparse MLA prefill kernel
 * (ws_mla_sparse_forward; src/attention/mla_sparse.cu).
 *
 * Flash attention forward, BF16 in and out:
 *   q [tokens_q][heads_q][dim_qk], k [tokens_k][heads_kv][dim_qk], v [tokens_k][heads_kv][dim_v],
 *   o [tokens_q][heads_q][dim_v], lse [heads_q][tokens_q] (fp32, natural log).
 *   Dense batches: tokens = batch x seqlen, sequence b at rows b x seqlen ([batch, seq,
 *   heads, dim], PyTorch's layout). Variable length: cu_seqlens_q / cu_seqlens_k hold
 *   batch + 1 cumulative offsets (0 first), sequence b at rows cu[b] .. cu[b + 1].
 *   GQA / MQA: query head h reads kv head h / (heads_q / heads_kv).
 *   s = softmax_scale x q . k (softmax_scale 0: 1 / sqrt(dim_qk)); o = softmax(s) v;
 *   lse = log sum exp(s). Causal masks: WS_ATTN_CAUSAL_TOP_LEFT keeps key j <= query i
 *   (PyTorch SDPA's is_causal); WS_ATTN_CAUSAL_BOTTOM_RIGHT keeps j <= i + len_k - len_q
 *   (FlashAttention >= 2.1). A query row that sees no key gets o = 0 and lse = -inf.
 *
 * Sparse MLA prefill (DeepSeek-V3.2 DSA), BF16:
 *   q [s_q][heads][dim_qk], kv [s_kv][dim_qk] (one latent head; its first dim_v columns are
 *   also V), indices [s_q][topk] int32: query i attends to the kv rows indices[i][*]; an
 *   entry of -1 or outside 0 .. s_kv - 1 is masked (never read); a duplicate counts as
 *   often as it appears. o [s_q][heads][dim_v], lse [s_q][heads]. DeepSeek-V3.2: dim_qk 576
 *   (512 latent + 64 rope), dim_v 512, heads 64 or 128 (any multiple of 64, or 1, 2, 4, 8, 16
 *   or 32: the heads of one GPU under tensor parallelism). */
#ifndef WARPSPEC_ATTENTION_H
#define WARPSPEC_ATTENTION_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { WS_ATTN_NO_MASK = 0, WS_ATTN_CAUSAL_TOP_LEFT = 1, WS_ATTN_CAUSAL_BOTTOM_RIGHT = 2 } ws_attn_mask;

typedef struct {
  int batch;               /* sequences                                                    */
  int seqlen_q, seqlen_k;  /* dense: every sequence's lengths; varlen: the largest          */
  const int *cu_seqlens_q; /* varlen: [batch + 1] offsets (device for kernels, host for the */
  const int *cu_seqlens_k; /* reference); both NULL for dense batches                      */
  int heads_q, heads_kv;   /* heads_q a multiple of heads_kv                                */
  int dim_qk, dim_v;       /* 64/64, 128/128, 192/128                                        */
  ws_attn_mask mask;
  float softmax_scale;     /* 0: 1 / sqrt(dim_qk)                                            */
  const void *q, *k, *v;   /* bf16                                                          */
  void *o;                 /* bf16                                                          */
  float *lse;              /* [heads_q][tokens_q], may be NULL                              */
  int total_q, total_k;    /* varlen: rows of q / of k and v (the tensors' first extent,    */
                           /* >= cu_seqlens[batch]); dense: ignored (batch x seqlen)         */
} ws_attn_problem;

typedef struct {
  int s_q, heads, s_kv, topk;
  int dim_qk, dim_v;       /* 576, 512 for DeepSeek-V3.2; dim_v <= dim_qk                    */
  float softmax_scale;     /* 0: 1 / sqrt(dim_qk)                                            */
  const void *q, *kv;      /* bf16                                                          */
  const int *indices;      /* [s_q][topk]                                                   */
  void *o;                 /* bf16                                                          */
  float *lse;              /* [s_q][heads], may be NULL                                     */
} ws_mla_sparse_problem;

/* MLA decode (DeepSeek-V3, issue 15), BF16, over a paged latent cache:
 *   q [batch][s_q][heads][dim_qk]; the cache is pages of page_size rows of one latent head,
 *   kv_cache [num_pages][page_size][dim_qk] (its first dim_v columns are also V);
 *   block_table [batch][max_pages] (page ids of each sequence, in order), seqlens [batch]
 *   (cached tokens of each sequence, >= 1 not required: 0 gives o = 0, lse = -inf).
 *   With s_q > 1 (speculative tokens) query i of s_q is the sequence's token
 *   seqlen - s_q + i and sees keys 0 .. seqlen - s_q + i (causal, bottom-right).
 *   o [batch][s_q][heads][dim_v], lse [batch][s_q][heads]. DeepSeek-V3: dim_qk 576, dim_v
 *   512, heads 128 (16 per GPU under tensor parallel), page_size 64. */
typedef struct {
  int batch, s_q, heads;
  int dim_qk, dim_v;       /* 576, 512                                                      */
  int page_size;           /* rows per page (64)                                            */
  int num_pages, max_pages; /* pages in the cache; entries per block_table row              */
  int max_seqlen;          /* an upper bound of seqlens (host-side, so that the split of the */
                           /* keys over CTAs needs no device read); 0: max_pages x page_size */
  float softmax_scale;     /* 0: 1 / sqrt(dim_qk)                                            */
  const void *q;           /* bf16                                                          */
  const void *kv_cache;    /* bf16                                                          */
  const int *block_table;  /* [batch][max_pages]                                            */
  const int *seqlens;      /* [batch]                                                       */
  void *o;                 /* bf16                                                          */
  float *lse;              /* may be NULL                                                   */
  int kv_fp8;              /* 0: kv_cache rows are dim_qk bf16; 1: WS_MLA_FP8_ROW_BYTES rows */
                           /* (below), dequantised to BF16 as they are gathered             */
} ws_mla_decode_problem;

/* Sparse MLA decode (DeepSeek-V3.2 DSA decode, FlashMLA's sparse decode), BF16 or FP8 cache:
 *   q [batch][s_q][heads][dim_qk]; the paged latent cache kv_cache [num_pages][page_size]
 *   [row] (rows of dim_qk bf16, or with kv_fp8 = 1 the WS_MLA_FP8_ROW_BYTES rows below),
 *   read as one flat array of num_pages x page_size rows; indices [batch][s_q][topk] int32:
 *   query token i of sequence b attends to the cache rows indices[b][i][*], each a flat
 *   row page_id x page_size + offset (FlashMLA's "indices in kv cache"; no block table).
 *   -1 is masked (never read); a duplicate counts as often as it appears; a list of only
 *   -1 gives o = 0 and lse = -inf. Other values outside 0 .. rows - 1 are errors: the
 *   kernel masks them (never reads them), the validation mode and the reference reject
 *   them. o [batch][s_q][heads][dim_v], lse [batch][s_q][heads]. DeepSeek-V3.2: dim_qk 576,
 *   dim_v 512, heads 64 or 128 (a multiple of 64, or 1-32 dividing 64), topk 2048 (any topk >= 1 works). */
typedef struct {
  int batch, s_q, heads;
  int dim_qk, dim_v;       /* 576, 512                                                      */
  int page_size, num_pages; /* the cache's geometry: num_pages x page_size rows             */
  int topk;                /* entries per query token's list                                */
  float softmax_scale;     /* 0: 1 / sqrt(dim_qk)                                            */
  const void *q;           /* bf16                                                          */
  const void *kv_cache;    /* bf16 rows, or FP8 rows (kv_fp8)                               */
  const int *indices;      /* [batch][s_q][topk]                                            */
  void *o;                 /* bf16                                                          */
  float *lse;              /* may be NULL                                                   */
  int kv_fp8;              /* 0: rows of dim_qk bf16; 1: WS_MLA_FP8_ROW_BYTES rows           */
} ws_mla_sparse_decode_problem;

/* The FP8 latent cache (kv_fp8 = 1): each row is WS_MLA_FP8_ROW_BYTES = 656 bytes, the
 * row FlashMLA's FP8 decode reads:
 *   bytes   0 .. 511  latent dims 0 .. 511 (also V) as E4M3, four tiles of 128;
 *   bytes 512 .. 527  four fp32 scales: a value of tile t is e4m3 x scale[t]. Each scale is
 *                     a power of two, 2^ceil(log2(amax / 448)) (1 for an all-zero tile),
 *                     so every dequantised value is exact in BF16;
 *   bytes 528 .. 655  the 64 rope dims 512 .. 575 as BF16, not quantised.
 * 1.76x fewer bytes than BF16 rows (1152): decode is bound by reading them. */
#define WS_MLA_FP8_ROW_BYTES 656
#define WS_MLA_FP8_TILES 4

/* Host: BF16 rows [rows][576] into FP8 rows [rows][656], nearest even and saturating (the
 * library's E4M3 conversion), and back (exact). */
ws_status ws_mla_kv_quantize_fp8_host(const uint16_t *kv, size_t rows, uint8_t *out);
/* The same on the GPU (device memory, 16-byte aligned; stream-ordered), bit for bit. */
ws_status ws_mla_kv_quantize_fp8(const void *kv, size_t rows, void *out, cudaStream_t stream);
ws_status ws_mla_kv_dequantize_fp8_host(const uint8_t *in, size_t rows, uint16_t *kv);

/* NSA (native sparse attention) selected-block attention for prefill (issue 15), BF16:
 *   q [tokens][heads_q][dim_qk], k [tokens][heads_kv][dim_qk], v [tokens][heads_kv][dim_v]
 *   (one sequence), block_indices [tokens][heads_kv][topn] int32: query i of kv group g
 *   attends to the keys of the listed blocks (block n = keys n x block .. n x block +
 *   block - 1), only keys j <= i (causal); -1 or a block past the end is skipped; a block
 *   listed twice counts twice (as the sparse MLA's indices do). GQA: query head h is in
 *   group h / (heads_q / heads_kv), and the group shares its selection.
 *   o [tokens][heads_q][dim_v], lse [tokens][heads_q]. NSA: block 64, heads_q / heads_kv
 *   16, dims 128/128 or 192/128. */
typedef struct {
  int tokens, heads_q, heads_kv, dim_qk, dim_v, block, topn;
  float softmax_scale;     /* 0: 1 / sqrt(dim_qk)                                            */
  const void *q, *k, *v;   /* bf16                                                          */
  const int *block_indices;
  void *o;                 /* bf16                                                          */
  float *lse;              /* may be NULL                                                   */
} ws_nsa_problem;

/* Argument checks without a GPU: shapes, head counts, supported dims, pointers. The
 * varlen offsets are checked only by the reference (they are device memory for kernels).
 * Sizes are computed in 64 bits: one extent (seqlen, topk, tokens, keys per sequence or
 * query) is at most 2^30, and the rows the kernels index in int (batch x seqlen, decode's
 * batch x s_q x heads and num_pages x page_size) at most 2^31 - 1 (docs/reliability.md). */
ws_status ws_attn_check(const ws_attn_problem *p);
ws_status ws_mla_sparse_check(const ws_mla_sparse_problem *p);
ws_status ws_mla_decode_check(const ws_mla_decode_problem *p);
ws_status ws_mla_sparse_decode_check(const ws_mla_sparse_decode_problem *p);
ws_status ws_nsa_check(const ws_nsa_problem *p);

/* Tokens of sequence b (host offsets for varlen). */
ws_status ws_attn_sequence(const ws_attn_problem *p, int b, int *q_begin, int *q_len, int *k_begin, int *k_len);

/* Flash attention forward on the GPU (sm_90a): o and lse (if non-NULL) of the problem,
 * whose pointers are device memory (cu_seqlens too). Warp-specialized: a TMA loader
 * warp streams K and V tiles through two pipes, two math warpgroups of 64 query rows each
 * run S = Q K^T and O += P V on wgmma with the online softmax in registers. Dims 64/64,
 * 128/128 and 192/128; GQA; both causal masks; dense or variable-length batches. Checks
 * the problem before any launch (WS_ERR_INVALID / WS_ERR_UNSUPPORTED with a message).
 * Persistent: one CTA per SM walks the tiles of 128 query rows (causal: longest first).
 * Schedules of the math warpgroups: overlap (FA3's intra-warpgroup pipelining: S of the
 * next key block is issued before O += P V of this one and its softmax runs under that
 * PV), ping-pong (the warpgroups take turns issuing their matrix products, FA3's
 * inter-warpgroup schedule; the default at d 64), both at once (overlap-pingpong; the
 * default at d 128) and plain (the warpgroups run freely, one block at a time; the
 * default at 192/128, where the overlap does not fit the registers).
 * WARPSPEC_ATTN_SCHEDULE=plain|pingpong|overlap|overlap-pingpong forces one (the overlapped
 * ones at d 64 and 128 only) and WARPSPEC_ATTN_GRID=tiles launches one CTA per tile
 * instead of the persistent grid, for measurements (read once: docs/knobs.md). The varlen
 * offsets are trusted; the validation mode (warpspec/check.h, WARPSPEC_CHECK=1) scans them
 * first and names a bad entry. */
ws_status ws_attn_forward(const ws_attn_problem *p, cudaStream_t stream);

/* Sparse MLA prefill on the GPU (sm_90a), DeepSeek-V3.2's shape: dim_qk 576, dim_v 512,
 * heads a multiple of 64 or a divisor of 64 (1 .. 32: a token with fewer heads than 64
 * fills one CTA's 64 query rows with padding that is computed and never stored); pointers
 * are device memory. A gather role fetches each query
 * token's selected kv rows by cp.async into a pipe; two math warpgroups share every block
 * (each computes S for half of its keys, they swap row maxima, then each accumulates half
 * of the 512 output columns). Masked indices are never read. */
ws_status ws_mla_sparse_forward(const ws_mla_sparse_problem *p, cudaStream_t stream);

/* MLA decode on the GPU: the sparse kernel's structure with the rows taken from the page
 * table, the keys of a sequence split over CTAs when the batch is too small to fill the
 * GPU, partial results merged by their lse in a second kernel. The split needs a
 * workspace: ws_mla_decode_workspace_size says how much (0: none needed); pass it with
 * its size. Graph-capturable (the split is decided from max_seqlen on the host). Shapes as
 * the sparse kernel: dim 576/512, heads a multiple of 64 or a divisor of it (16 or 32 per
 * GPU under tensor parallelism: the cache is read once per query token either way). kv_fp8 = 1: the gather role
 * dequantises the FP8 rows into the BF16 tiles the math reads (same math, 1.76x fewer
 * cache bytes). kv_cache must be 16-byte aligned. */
/* NSA selected-block attention on the GPU (sm_90a): the flash kernel's roles over a block
 * list. A CTA takes the heads of one kv group for 128 / group tokens; its loader builds
 * the union of those tokens' selections (each block loaded once, masked per token, a
 * block listed twice by a token counted twice) and TMA-loads two blocks per 128-key
 * tile, persistent (the next item's list and Q are prepared while the math finishes the
 * current one). Block 64; heads_q / heads_kv 16, 32, 64 or 128; dims 128/128 (tokens up
 * to 131072) and 192/128 (up to 65536); topn <= 64. Tokens that select the same blocks
 * (NSA's neighbours mostly do) share the work; disjoint selections cost up to
 * 128 / group times the useful work. Pointers are device memory. */
ws_status ws_nsa_forward(const ws_nsa_problem *p, cudaStream_t stream);

ws_status ws_mla_decode_workspace_size(const ws_mla_decode_problem *p, size_t *bytes);
/* seqlens and block_table are trusted; the validation mode (warpspec/check.h) scans them. */
ws_status ws_mla_decode_forward(const ws_mla_decode_problem *p, void *workspace, size_t workspace_bytes,
                                cudaStream_t stream);

/* Sparse MLA decode on the GPU: the sparse prefill kernel over the batch x s_q query
 * tokens, its rows gathered from the cache (FP8 rows dequantised by the gather, as in
 * ws_mla_decode_forward). When those tokens' CTAs do not fill the GPU, each index list is
 * split over several CTAs and the partial results are merged by their lse (the decode's
 * merge kernel); the split needs the workspace ws_mla_sparse_decode_workspace_size says
 * (0: none). Graph-capturable: the split depends on the shapes only. dim 576/512, heads a
 * multiple of 64; kv_cache 16-byte aligned. The indices are trusted (out of range is
 * masked); the validation mode (warpspec/check.h) scans them. */
ws_status ws_mla_sparse_decode_workspace_size(const ws_mla_sparse_decode_problem *p, size_t *bytes);
ws_status ws_mla_sparse_decode_forward(const ws_mla_sparse_decode_problem *p, void *workspace, size_t workspace_bytes,
                                       cudaStream_t stream);

/* float64 references on the host: the problem's pointers are host memory (bf16 as 16-bit
 * patterns); o gets [tokens_q][heads_q][dim_v] doubles and lse [heads_q][tokens_q] (sparse:
 * o [s_q][heads][dim_v], lse [s_q][heads]); lse may be NULL. */
ws_status ws_attn_reference(const ws_attn_problem *host_problem, double *o, double *lse);
ws_status ws_mla_sparse_reference(const ws_mla_sparse_problem *host_problem, double *o, double *lse);
/* MLA decode: o [batch][s_q][heads][dim_v], lse [batch][s_q][heads]; page ids out of
 * range in a sequence's used part of block_table are WS_ERR_INVALID. */
ws_status ws_mla_decode_reference(const ws_mla_decode_problem *host_problem, double *o, double *lse);
/* Sparse MLA decode: o [batch][s_q][heads][dim_v], lse [batch][s_q][heads]; FP8 rows are
 * dequantised as ws_mla_decode_reference does; an index outside -1 .. rows - 1 is
 * WS_ERR_INVALID (naming the sequence, token and position). */
ws_status ws_mla_sparse_decode_reference(const ws_mla_sparse_decode_problem *host_problem, double *o, double *lse);
/* NSA: o [tokens][heads_q][dim_v], lse [tokens][heads_q]. */
ws_status ws_nsa_reference(const ws_nsa_problem *host_problem, double *o, double *lse);

#ifdef __cplusplus
}
#endif
#endif
