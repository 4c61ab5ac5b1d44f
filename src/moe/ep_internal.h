/* ep_internal.h - the dispatch/combine handle, the kernels' arguments, shared by ep.cu,
 * dispatch.cu, combine.cu and the layer kernel. The symmetric buffer's objects and their
 * layout: ep_buffers.h. Epochs count calls on the device (no host counters, no resets):
 * graph-replayable. */
#ifndef WARPSPEC_EP_INTERNAL_H
#define WARPSPEC_EP_INTERNAL_H

#include <stdint.h>

#include "../core/internal.h"
#include "ep_buffers.h"
#include "warpspec/config.h" /* WS_COMM_MAX_RANKS: the peer arrays */
#include "warpspec/moe.h"

/* One top-k entry of a token as the sender routes it. */
typedef struct {
  int dst;    /* rank, -1: skipped slot */
  int local;  /* local expert on dst */
  int pos;    /* the token's index among this rank's tokens for (dst, local) */
  int pad;
} ep_entry;

/* Meta entry in an inbox row: 16 bytes. */
typedef struct {
  int local;
  int pos;
  int slot;
  float weight;
} ep_meta;

/* An entry's record (WARPSPEC_EP_RECORDS), written by the sender into the receiver's
 * rec[sender][local][pos] (ep_buffers.h): the token, its inbox row there, its top-k slot,
 * the entry's index among the token's entries for that rank and their number (se: slot |
 * index << 8 | entries << 16), the weight. 16 bytes, one store (ep_record_store /
 * ep_record_load in ep_protocol.cuh: the one packing). */
typedef struct {
  int token;
  int row;
  int se;
  float weight;
} ep_record;

/* What every kernel of a call gets: the handle's geometry and device pointers. */
typedef struct ep_args {
  int rank, nranks, L, topk, hidden, fp8, sms, max_tokens, max_rows, scale_ld, row_align, experts;
  int ll;                  /* low latency: bf16 in (quantised by the sender when fp8), masked layout */
  int records;             /* WARPSPEC_EP_RECORDS: senders write entry records, the expand books from them */
  uint64_t inbox_row;
  uint64_t *epochs;
  int *send_counts;
  ep_entry *entries;
  int *tok_slot;
  int *bad_id;
  int *route_cnt;
  int *num_tokens;
  int *recv_ntok;
  int *comb_row;
  float *comb_w;
  const int *counts;
  const uint64_t *count_flag;
  const uint8_t *inbox;
  const uint64_t *data_flag;
  const uint64_t *ack;
  const uint16_t *comb_inbox;
  const uint64_t *comb_flag;
  const uint64_t *comb_ack;
  const uint64_t *comb_prog;
  const uint64_t *comb_done;
  const ep_record *rec;    /* [nranks][L][max_tokens] (records), else NULL */
  /* Peer p's copy of any of the symmetric objects above is at the same offset in its
   * heap: local address + peer_delta[p] (checked for every object at create). One
   * array instead of one per object keeps the parameters of a launch under 1 KB. */
  int64_t peer_delta[WS_COMM_MAX_RANKS];
  uint8_t *x;
  float *x_scale;
  int *offsets, *expert_counts, *src_rank, *src_token, *src_slot;
  float *weight;
  int *row_index;          /* [max_rows]: index receive: the inbox row (src x max_tokens + i) of each layout row */
  int *ll_marked;          /* low latency, [L]: real rows of each expert at the last call (padding past it marked) */
  int *route_order;        /* [max_tokens / 32 + 1]: the route's 32-token batches in the order they took their
                            * inbox slots (the fused combine's gather walks tokens in it) */
} ep_args;

/* The transfer kernels' plan slots (ws_ep.plans). */
enum { EP_PLAN_LAYOUT = 0, EP_PLAN_SEND, EP_PLAN_EXPAND, EP_PLAN_REDUCE, EP_PLAN_GATHER, EP_PLAN_COMBINE };

struct ws_ep {
  ws_comm *comm;
  ws_ep_config cfg;
  int rank, nranks, local_experts, fp8, sms, max_rows, scale_ld;
  size_t inbox_row;
  /* symmetric */
  int *counts;
  uint64_t *count_flag;
  uint8_t *inbox;
  uint64_t *data_flag;
  uint64_t *ack;
  uint16_t *comb_inbox;
  uint64_t *comb_flag;
  uint64_t *comb_ack;
  uint64_t *comb_prog;
  uint64_t *comb_done;
  ep_record *rec;          /* WARPSPEC_EP_RECORDS: [nranks][L][max_tokens], else NULL */
  int records;             /* the knob's value at create (every rank's the same: compare_configs) */
  /* local device state */
  uint64_t *epochs;        /* [0] dispatch, [1] combine; CTAs finished: [2] expand, [3] gather, [4] route,
                            * [5] the fused combine's reduce; [6] its gather's places claimed */
  int *send_counts;        /* [experts + nranks]: what this rank sends, per expert, then tokens per rank */
  ep_entry *entries;       /* [max_tokens][topk] */
  int *tok_slot;           /* [max_tokens][nranks]: the token's row in peer's inbox, -1 */
  int *bad_id;             /* [4]: count, first token, slot, value of ids out of range */
  int *route_cnt;          /* [experts + nranks + 1]: route's counters (the last: its batches' order), zero
                            * between calls */
  int *route_order;        /* [max_tokens / 32 + 1]: see ep_args */
  int *num_tokens;         /* [1]: tokens of the latest dispatch */
  int host_tokens;         /* the same, as the host called it (-1 before the first): combine's
                            * `out` may be NULL after a dispatch of 0 tokens */
  int *recv_ntok;          /* [nranks]: tokens received from each rank (latest dispatch) */
  int *comb_row;           /* [nranks][max_tokens][topk]: received row of each entry, -1 */
  float *comb_w;           /* [nranks][max_tokens][topk] */
  /* the receive layout */
  void *x;
  float *x_scale;
  int *offsets, *expert_counts, *src_rank, *src_token, *src_slot;
  float *weight;
  int *row_index;          /* [max_rows] (index receive) */
  int *ll_marked;          /* [L], low latency: see ep_args */
  int last_index;          /* the latest dispatch's receive was the index (ws_ep_recv_layout) */
  int *host_buf;           /* pinned: offsets and bad-id report for the host-synced calls */
  void *sym;                /* the one symmetric allocation the objects above live in (ep_buffers) */
  int64_t peer_delta[WS_COMM_MAX_RANKS]; /* peer p's heap minus ours (see ep_args) */
  ep_args args;            /* the kernels' arguments: the same for every call, built at create */
  ws_plan plans[EP_PLAN_COMBINE + 1]; /* one per kernel: EP_PLAN_* */
  int planned[EP_PLAN_COMBINE + 1];
};

/* Peer p's address of the symmetric object `field` of ep_args a (a.field + delta). */
#define EP_PEER(T, a, field, p) ((T *)((char *)(a).field + (a).peer_delta[p]))

#ifdef __cplusplus
extern "C" {
#endif
/* WS_OK if the copy of ep->bad_id says no id was out of range; else WS_ERR_INVALID
 * naming the first, and the count is reset (stream-ordered). */
ws_status ep_report_bad_ids(ws_ep *ep, const int *bad, cudaStream_t stream);
/* ws_ep_dispatch with the receive chosen per call (index: 1 = WS_EP_RECEIVE_INDEX): the
 * MoE layer's unfused path reads the rows in place, its fused paths take the copy. A
 * handle created with WS_EP_RECEIVE_INDEX has no copy to fill (index must be 1). */
ws_status ep_dispatch(ws_ep *ep, const void *x, const float *x_scale, const int *topk_idx, const float *topk_weights,
                      int num_tokens, ws_ep_recv *recv, int *host_offsets, int index, cudaStream_t stream);
/* Launch one of the transfer kernels through its plan (checked once per handle); smem:
 * its dynamic shared memory. */
ws_status ep_launch(ws_ep *ep, int slot, const char *name, const ws_role *roles, int nroles, const void *func, dim3 grid,
                    size_t smem, cudaStream_t stream, void **args);
#ifdef __cplusplus
}
#endif


#endif
