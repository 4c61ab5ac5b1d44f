/* warpspec/moe.h - MoE expert-parallel dispatch and combine on a communicator.
 *
 * E experts are spread over the ranks, E / nranks each (rank r hosts experts
 * r * L .. r * L + L - 1, L = local experts). Dispatch sends every token once to each
 * rank that hosts at least one of its top-k experts (not once per expert) and lays the
 * received rows out grouped-contiguous by local expert, ready for ws_gemm's
 * WS_GEMM_GROUPED_CONTIGUOUS layout: a token that hit two local experts appears in both
 * groups, each group is padded to cfg.row_align rows, and the group offsets live in
 * device memory (ws_gemm reads them there, so dispatch -> ws_gemm -> combine captures in
 * one CUDA graph). FP8 rows arrive with their 1 x 128 scales K-block-major, the layout
 * ws_gemm reads fastest (a_scale_ld = recv.scale_ld).
 *
 * Combine takes one BF16 row per received row (the expert outputs, same layout) and
 * gives each source token sum_k weight_k * y_k: the expert side sums the rows of the
 * token's local experts in fp32 and sends one BF16 partial per (token, rank) back; the
 * source adds the partials of its ranks in fp32 and writes BF16.
 *
 * Every call is collective: all ranks call dispatch (and then combine) the same number
 * of times, in the same order, each with its own tokens (0 is fine). Waits are bounded:
 * a rank that does not take part shows as WS_ERR_TIMEOUT at ws_sync naming the peer,
 * role and block. Buffers are sized for the worst case at ws_ep_create (max_tokens per
 * rank from every rank), so no call allocates. One stream per handle; combine uses the
 * layout of the handle's latest dispatch. */
#ifndef WARPSPEC_MOE_H
#define WARPSPEC_MOE_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "comm.h"
#include "gemm.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_EP_MAX_TOPK 16
#define WS_EP_MAX_EXPERTS 1024
#define WS_EP_MAX_SMS 128

typedef enum { WS_EP_BF16 = 0, WS_EP_FP8 = 1 } ws_ep_payload;

/* WS_EP_NORMAL: the receive layout is grouped-contiguous (ws_gemm's
 * WS_GEMM_GROUPED_CONTIGUOUS), each expert padded to row_align, FP8 rows arrive with the
 * scales the sender gave. WS_EP_LOW_LATENCY (decode): x is always BF16; with the FP8
 * payload the sender quantises each row to E4M3 with 1 x 128 scales on the fly (the same
 * bits as ws_fp8_quantize_1x128: every received row's bytes and scales are compared with
 * it, fresh Gaussian rows on every call, in tests/gpu/test_moe_idle.cu ll_bytes); the receive layout is grouped-masked
 * (WS_GEMM_GROUPED_MASKED): expert l owns rows l x m .. l x m + expert_counts[l] - 1 of
 * [local experts][m = nranks x max_tokens][hidden]; row_align is ignored. */
typedef enum { WS_EP_NORMAL = 0, WS_EP_LOW_LATENCY = 1 } ws_ep_mode;

/* Where the received rows are read from.
 * WS_EP_RECEIVE_COPY: each row is copied into x, once per local expert it goes to (the
 * layout above, for any GEMM that takes contiguous rows: torch, cuBLAS).
 * WS_EP_RECEIVE_INDEX: a row crosses NVLink once and stays in the receive buffer where
 * the sender wrote it; the layout is an index (row_index: the buffer row of each layout
 * row), which ws_gemm reads in place (ws_ep_recv_gemm fills its problem). No copy on the
 * receiver: at 4096 tokens per rank (DeepSeek-V3, EP2) the copy moved 235 MB per rank
 * against 29 MB over NVLink. The handle allocates no copy (x and x_scale are NULL). */
typedef enum { WS_EP_RECEIVE_COPY = 0, WS_EP_RECEIVE_INDEX = 1 } ws_ep_receive;

typedef struct {
  int hidden;        /* H: a multiple of 128 for FP8, of 8 for BF16                        */
  int experts;       /* E: a multiple of the number of ranks, <= WS_EP_MAX_EXPERTS           */
  int topk;          /* K: 1..WS_EP_MAX_TOPK                                                 */
  int max_tokens;    /* tokens a rank may dispatch per call                                 */
  ws_ep_payload payload;
  int row_align;     /* pad each expert's rows to a multiple of this (1: none; e.g. 128 = ws_gemm's tile) */
  int num_sms;       /* CTAs of each transfer kernel, 1..WS_EP_MAX_SMS; 0: ws_ep_config_sms (24, or 64
                      * for a decode handle). The same on every rank. Fewer leave more SMs to
                      * compute running beside it; all of them must be resident at once on
                      * every rank (they wait for each other: docs/reliability.md). */
  ws_ep_mode mode;   /* WS_EP_NORMAL (0) or WS_EP_LOW_LATENCY                                */
  ws_ep_receive receive; /* WS_EP_RECEIVE_COPY (0) or WS_EP_RECEIVE_INDEX                     */
} ws_ep_config;

typedef struct ws_ep ws_ep;

/* What a dispatch delivered to this rank, all in device memory owned by the handle and
 * valid until the next dispatch. Rows beyond expert_offsets[local_experts] are unused. */
typedef struct {
  void *x;                    /* [max_rows][hidden] e4m3 or bf16 (low latency: [local_experts]
                               * [max_rows / local_experts][hidden])                            */
  float *x_scale;             /* FP8: [hidden / 128][scale_ld], K-block-major; BF16: NULL       */
  int scale_ld;               /* >= max_rows, a multiple of 4 (ws_gemm's a_scale_ld)            */
  int max_rows;               /* rows allocated: ws_gemm's m for this layout                    */
  int local_experts;          /* ws_gemm's groups                                               */
  const int *expert_offsets;  /* [local_experts + 1]: ws_gemm's group_offsets (low latency:
                               * l x m, the start of each expert's block)                       */
  const int *expert_counts;   /* [local_experts]: rows received per expert, before padding
                               * (ws_gemm's group_rows: the tile choice may skip the padding)  */
  const int *src_rank;        /* [max_rows]: where each row came from (-1: padding; dispatch
                               * does not write a padding row's payload or scales: they keep
                               * what was there, zero after create. The GEMM's outputs for
                               * them are ignored by combine)                                   */
  const int *src_token;       /* [max_rows]: the token's index on its rank                      */
  const int *src_slot;        /* [max_rows]: its top-k slot                                     */
  const float *weight;        /* [max_rows]: its top-k weight                                   */
  /* WS_EP_RECEIVE_INDEX (else NULL / 0): layout row r is row row_index[r] (-1: padding) of
   * the receive buffer `rows` (rows_total rows, row_bytes apart; FP8: its 1 x 128 scales
   * at row_scales + row x row_bytes / 4). What ws_gemm's gathered A takes. */
  const int *row_index;
  const void *rows;
  const float *row_scales;
  size_t row_bytes;
  int rows_total;
  int fp8;                    /* the payload is e4m3 (scales present)                          */
  int masked;                 /* low latency: the masked layout (m = max_rows / local_experts)   */
  int expected_rows;          /* this rank's tokens x topk: what arrives when every rank passes
                               * about as many tokens and routing is about uniform (ws_gemm's
                               * rows_hint; the counts themselves stay on the device)            */
} ws_ep_recv;

/* Check a config for `nranks` ranks without a GPU (also done by ws_ep_create). */
ws_status ws_ep_config_check(const ws_ep_config *cfg, int nranks);

/* CTAs of each transfer kernel for this config: num_sms, or for 0 WS_EP_DEFAULT_SMS (24:
 * room for compute beside the transfers), WS_EP_DECODE_SMS (64) when max_tokens <=
 * WS_EP_DECODE_MAX_TOKENS. A decode call is a chain of each warp's few rows, which more
 * CTAs shorten (combine at 128 tokens, EP4: 57 -> 41 us on 4 x H200). */
int ws_ep_config_sms(const ws_ep_config *cfg);

/* Rows the receive layout holds for this config: every rank's max_tokens, each token in
 * topk entries (a repeated expert is a further entry), plus the padding of every expert
 * (low latency: local experts x nranks x max_tokens). */
size_t ws_ep_max_rows(const ws_ep_config *cfg, int nranks);

/* Collective: a handle on `comm` (buffers from its symmetric heap; every rank must pass
 * the same config, else WS_ERR_MISMATCH naming the field). */
ws_status ws_ep_create(ws_ep **ep, ws_comm *comm, const ws_ep_config *cfg);
ws_status ws_ep_destroy(ws_ep *ep); /* collective */

/* Collective: dispatch `num_tokens` tokens (0..max_tokens). x: [num_tokens][hidden] bf16,
 * or (normal mode, FP8 payload) e4m3 with x_scale [num_tokens][hidden / 128] fp32
 * (row-major, as ws_fp8_quantize_1x128 writes them; low latency: NULL, x is bf16); topk_idx [num_tokens][topk] int32 expert ids
 * (-1: no expert, the slot is skipped; a token names each expert once -- in normal mode a
 * repeat is dispatched as a further entry, in low-latency mode entries past max_tokens for
 * one expert are skipped and reported as below), topk_weights [num_tokens][topk] fp32; all device
 * memory. recv (may be NULL) gets the layout. host_offsets: NULL for the graph-capturable
 * call; else the call waits for the stream and copies the exact expert offsets
 * (local_experts + 1 ints) there, and reports expert ids out of range as WS_ERR_INVALID.
 * In the validation mode (warpspec/check.h) out-of-range ids are refused before any launch
 * (a rank that refuses leaves its peers waiting into their bounded timeout). */
ws_status ws_ep_dispatch(ws_ep *ep, const void *x, const float *x_scale, const int *topk_idx, const float *topk_weights,
                         int num_tokens, ws_ep_recv *recv, int *host_offsets, cudaStream_t stream);

/* Collective: y [max_rows][hidden] bf16 in the latest dispatch's layout (rows of padding
 * are ignored); out [num_tokens][hidden] bf16 of that dispatch gets
 * sum_k topk_weights[t][k] * y[row of (t, k)], zero for a token without experts. After a
 * dispatch of 0 tokens out may be NULL (x, x_scale, topk_idx and topk_weights of such a
 * dispatch too). */
ws_status ws_ep_combine(ws_ep *ep, const void *y, void *out, cudaStream_t stream);

/* The layout of the latest dispatch (the same as its recv). */
ws_status ws_ep_recv_layout(const ws_ep *ep, ws_ep_recv *recv);

/* The A side of the expert GEMM over a received layout, for either receive mode: p's
 * layout (grouped contiguous, or masked in low-latency mode), m, groups, group offsets /
 * rows, a and its scales (copied rows, or gathered in place), rows_hint (contiguous:
 * expected_rows, so that the tile fits the rows routed, not m's room). The caller sets type
 * (WS_GEMM_FP8 for the FP8 payload), n, k (= hidden), b, b_scale and d. */
ws_status ws_ep_recv_gemm(const ws_ep_recv *recv, ws_gemm_problem *p);

/* Expert ids out of range seen by dispatches since the last call (they were skipped):
 * waits for the stream; WS_ERR_INVALID naming the first one, else WS_OK. */
ws_status ws_ep_check(ws_ep *ep, cudaStream_t stream);

/* ---- the expert MLP around the transfers (the unfused MoE path) ------------------------
 * An expert is L1 = gate and up [2 x inter][hidden] and L2 = down [hidden][inter], FP8 with
 * 128 x 128 scales. Between them, the L1 epilogue: h [rows][2 x inter] bf16 (gate =
 * columns 0 .. inter - 1, up = inter .. 2 inter - 1), a = silu(gate) x up in fp32, then
 * E4M3 with one scale per 1 x 128 block of a row (what L2's ws_gemm reads; a coarser block
 * would let one large activation flatten the 127 beside it). */

/* The L1 epilogue on the GPU: q [rows][inter] e4m3, scale [rows][inter / 128] (scale_ld 0)
 * or K-block-major [inter / 128][scale_ld]. inter a multiple of 128. Stream-ordered.
 * silu and the requant run on the fast units (ex2/rcp.approx, times 1 / scale): the same
 * bits as the fused MoE kernel's epilogue, a few fp32 ulp from the host's before e4m3. */
ws_status ws_moe_swiglu_quant(const void *h_bf16, size_t rows, size_t inter, uint8_t *q, float *scale, size_t scale_ld,
                              cudaStream_t stream);

/* The same on the host (silu in double, then the 1 x 128 quantiser), scale row-major. */
ws_status ws_moe_swiglu_quant_host(const uint16_t *h_bf16, size_t rows, size_t inter, uint8_t *q, float *scale);

/* A whole MoE layer on the host, in float64 with the unfused path's rounding points:
 * h = bf16(x W1^T), a = quantised swiglu(h), y = bf16(a W2^T), out[t] = sum_k w[t][k] y.
 * x: xq [tokens][hidden] e4m3 with xs [tokens][hidden / 128]; idx / w [tokens][topk] (-1:
 * no expert); w1 [experts][2 inter][hidden], w1s [experts][2 inter / 128][hidden / 128];
 * w2 [experts][hidden][inter], w2s [experts][hidden / 128][inter / 128]; out [tokens][hidden]. */
typedef struct {
  int hidden, inter, experts, topk;
} ws_moe_shape;
ws_status ws_moe_reference(const ws_moe_shape *shape, int tokens, const uint8_t *xq, const float *xs, const int *idx,
                           const float *w, const uint8_t *w1, const float *w1s, const uint8_t *w2, const float *w2s,
                           double *out);

/* ---- host reference (tests) ----------------------------------------------------------- */
/* What rank `me` receives, from every rank's routing (host memory): topk_idx[r] is rank
 * r's [num_tokens[r]][topk] ids. counts[local_experts] and offsets[local_experts + 1]
 * (padded as the config says) are filled. If rows is non-NULL it gets, per local expert
 * in order, the (src_rank, src_token, src_slot) triples of its rows ordered by source
 * rank then token: 3 ints per row, offsets[] indexing them (padding rows: -1). */
ws_status ws_ep_reference_layout(const ws_ep_config *cfg, int nranks, int me, const int *const *topk_idx,
                                 const int *num_tokens, int *counts, int *offsets, int *rows);

#ifdef __cplusplus
}
#endif
#endif
