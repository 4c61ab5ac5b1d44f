/* layer_items_ep.cuh - the whole MoE layer in the experts kernel on several ranks (EP > 1):
 * dispatch and combine as work items of the same persistent kernel, on the dispatch
 * handle's symmetric buffers (ep_internal.h) and driving the same protocol steps as
 * ws_ep_dispatch / ws_ep_combine (ep_protocol.cuh: the steps exist once), so a rank on
 * this path and one on the unfused path understand each other.
 * The math warpgroups (256 threads) run the items, handed over by the loader in claim
 * order like the tiles:
 *
 *   route   (item 0)  each token's entries (rank, local expert, position) and its inbox
 *                     slot on every rank it goes to, counted in shared memory; wait until
 *                     every rank has read our previous dispatch (ack), push our counts to
 *                     every rank, wait for every rank's counts to us, lay out the local
 *                     experts' groups (padded to 64 rows), release `routed`.
 *   send    (S items) a warp per (token, chunk): the row once to each rank it goes to
 *                     (ep_send_unit: a BF16 row is quantised on the way); the last send
 *                     item raises our data flags on every rank.
 *   expand  (X items) wait for every source's data flags; their share of the entries'
 *                     bookkeeping (a thread per entry: layout row, combine's row and
 *                     weight per slot), then a warp per (received row, chunk) copies it
 *                     into the rows of its local experts (chunk 0 also its scales,
 *                     K-block-major); one release-add on `expanded` each; the last one
 *                     acks every source.
 *   (the L1 and L2 tiles)
 *   reduce  (Y items) wait for every L2 tile's stores and every source's combine ack; a
 *                     warp per (received token, chunk) sums its local experts' rows
 *                     (moe_sum_rows: the unfused combine's bits) into the source's combine
 *                     inbox; the last reduce item raises our combine flags on every rank.
 *   gather  (G items) wait for every rank's combine flags, add each token's partial sums
 *                     in rank order (ep_gather_chunk), BF16 out; the last gather item acks
 *                     every rank and advances both epochs (every other item of the call is
 *                     done by then: each waited, directly or through a peer, on the
 *                     ones before it).
 *
 * The flags are written for every one of the handle's `sms` slots and waited on all of
 * them, as ws_ep_dispatch / ws_ep_combine do, so a rank on this path and a rank on the
 * unfused one understand each other. Every wait is bounded and names the peer; every
 * counter is back to zero at the end of the call. */
#ifndef WARPSPEC_MOE_LAYER_ITEMS_EP_CUH
#define WARPSPEC_MOE_LAYER_ITEMS_EP_CUH

#include "../ep_protocol.cuh"
#include "layer_items.cuh"

/* A CTA's shared state for these items: the call's dispatch and combine epochs, read
 * once when the CTA starts (mxe_read_epochs, before the CTA's loader claims anything),
 * and the "last item" flag of mxe_last. The last gather item advances the epochs in
 * memory; by then every item of the call has been claimed, so every CTA that runs one
 * read the old values first, and an item that starts late (an expand item on a CTA
 * whose math was still busy) cannot see the next call's. */
typedef struct {
  uint64_t epoch[2]; /* [0] dispatch n, [1] combine m */
  int flag;
} mxe_shared;

WS_DEV void mxe_read_epochs(const mx_layer_args *L, mxe_shared *sh) {
  sh->epoch[0] = __ldcg((const unsigned long long *)L->ep.epochs) + 1ull;
  sh->epoch[1] = __ldcg((const unsigned long long *)L->ep.epochs + 1) + 1ull;
}

/* A peer wait's site; `what` fits WS_NAME_LEN (23 characters): the fault record keeps no more. */
WS_DEV ws_site mxe_site(const ep_args *a, const char *what, int edge, int peer, uint64_t step) {
  return ep_site(what, edge, peer, a->rank, (int)blockIdx.x, step);
}

/* All 256 threads: 1 in the item that brings *count to `items` (its stores and every
 * earlier item's ordered before it), 0 elsewhere; with `reset` that item zeroes it. */
WS_DEV int mxe_last(uint32_t *count, uint32_t items, int reset, int i, uint32_t bar, int *flag) {
  ws_named_sync(bar, MX_LAYER_THREADS);
  if (i == 0) {
    __threadfence_system(); /* release: this item's stores before the count */
    const int last = atomicAdd(count, 1u) == items - 1u;
    __threadfence_system(); /* acquire: the other items' stores before what the last one does */
    if (last && reset) *count = 0u;
    *flag = last;
  }
  ws_named_sync(bar, MX_LAYER_THREADS);
  const int last = *flag;
  ws_named_sync(bar, MX_LAYER_THREADS); /* read by all before the flag is reused */
  return last;
}

/* ---- route ------------------------------------------------------------------------- */
/* The protocol's route, counts and layout steps (ep_protocol.cuh) on the 256 math
 * threads. scratch (shared): E + N counters, the N (L + 1) counts we receive, L + 1 group
 * starts and 32 ints for the scan. */
WS_DEV void mxe_route(const mx_layer_args *L, int *scratch, const ws_ctx *c, int i, uint32_t bar, const mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const ep_group g = {i, MX_LAYER_THREADS, bar};
  const int E = a->experts, N = a->nranks, T = L->tokens;
  const uint64_t n = sh->epoch[0];
  int *cnt = scratch, *rc = cnt + E + N, *off = rc + N * (a->L + 1), *warp_start = off + a->L + 1;
  for (int e = i; e < E + N; e += MX_LAYER_THREADS) cnt[e] = 0;
  ep_sync(&g);
  for (int t0 = i / 32 * 32; t0 < T; t0 += MX_LAYER_THREADS) /* whole warps, a token per lane */
    ep_route_token(a, L->topk_idx, T, t0 + i % 32, cnt, i % 32);
  /* every rank has read our previous dispatch out of its counts and inbox */
  ep_wait_acked(a, a->ack, n - 1, "moe layer dispatch ack", c, i);
  ep_sync(&g); /* and every token routed */
  ep_publish_counts(a, cnt, n, &g);
  if (i == 0) *a->num_tokens = T;
  ep_receive_counts(a, rc, n, "moe layer counts", c, &g);
  ep_layout(a, rc, off, warp_start, 1, &g); /* the offsets are L->offsets: the handle's */
  /* every thread's stores ordered before thread 0 by ep_layout's closing barrier; its
   * release is cumulative */
  if (i == 0 && L->drop != MOE_DROP_ROUTED) ws_red_release_gpu_add_u32(L->routed, 1u);
}

/* ---- send -------------------------------------------------------------------------- */
WS_DEV void mxe_send(const mx_layer_args *L, int item, int gw, int lane, int i, uint32_t bar, mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const int t0 = item * L->tokens_per_item, nt = max(0, min(L->tokens_per_item, L->tokens - t0));
  const int nchunk = ep_send_chunks(a, L->x_bf16);
  for (int u = gw; u < nt * nchunk; u += MX_LAYER_THREADS / 32)
    ep_send_unit(a, L->x, L->x_scale, L->topk_weights, t0 + u / nchunk, u % nchunk, lane, L->x_bf16, -1);
  if (mxe_last(L->sent, (uint32_t)L->send_items, 1, i, bar, &sh->flag)) {
    const ep_group g = {i, MX_LAYER_THREADS, bar};
    ep_raise(a, a->data_flag, sh->epoch[0], 0, a->sms, &g);
  }
}

/* ---- expand ------------------------------------------------------------------------ */
/* Tokens received from all sources (recv_ntok, written by the route item). */
WS_DEV int mxe_received(const ep_args *a) {
  int n = 0;
  for (int s = 0; s < a->nranks; s++) n += __ldcg(&a->recv_ntok[s]);
  return n;
}

/* This item's share [u0, u1) of `units` units split over `items` items. */
WS_DEV void mxe_share(long long units, int items, int item, long long *u0, long long *u1) {
  *u0 = units * item / items;
  *u1 = units * (item + 1) / items;
}

/* The protocol's receive steps (ep_protocol.cuh) for this item's share of the received
 * rows: its share of the entries' bookkeeping (a thread per entry), then of the copies (a
 * warp per (row, 4 KB chunk); chunk 0 also the row's scales). The counts and group starts
 * come from the route item (another CTA's) into scratch (shared), read past L1. */
WS_DEV void mxe_expand(const mx_layer_args *L, int *scratch, const ws_ctx *c, int item, int gw, int lane, int i,
                       uint32_t bar, mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const ep_group g = {i, MX_LAYER_THREADS, bar};
  const int N = a->nranks, K = a->topk, per = a->L + 1;
  const uint64_t n = sh->epoch[0];
  ep_wait_all_slots(a, a->data_flag, n, "moe layer rows in", c, i, MX_LAYER_THREADS);
  int *rc = scratch, *off = rc + N * per;
  for (int j = i; j < N * per; j += MX_LAYER_THREADS) rc[j] = __ldcg(&a->counts[j]);
  for (int l = i; l < per; l += MX_LAYER_THREADS) off[l] = __ldcg(&a->offsets[l]);
  ep_sync(&g);
  const int rows = mxe_received(a), nchunk = ep_copy_chunks(a);
  long long u0, u1;
  if (a->records && ep_records_fit(a, rc, 0, N, lane)) { /* WARPSPEC_EP_RECORDS: this item's share of the layout rows */
    mxe_share((long long)off[a->L], L->expand_items, item, &u0, &u1);
    ep_book_records(a, rc, off, 0, N, 0, u0, u1, i, MX_LAYER_THREADS);
  } else {
    mxe_share((long long)rows * K, L->expand_items, item, &u0, &u1);
    for (long long u = u0 + i; u < u1; u += MX_LAYER_THREADS) {
      int idx;
      const int s = ep_source_of(a, rc, (int)(u / K), &idx);
      ep_book_entry(a, rc, off, s, idx, (int)(u % K), 0);
    }
  }
  mxe_share((long long)rows * nchunk, L->expand_items, item, &u0, &u1);
  for (long long u = u0 + gw; u < u1; u += MX_LAYER_THREADS / 32) {
    int idx;
    const int s = ep_source_of(a, rc, (int)(u / nchunk), &idx), ch = (int)(u % nchunk);
    ep_copy_unit(a, rc, off, s, idx, ch, lane);
    if (ch == 0) ep_copy_scales(a, rc, off, s, idx, lane);
  }
  ws_fence_proxy_async_global(); /* the rows are read next by TMA */
  if (L->drop == MOE_DROP_EXPANDED) return;
  /* `expanded` is what the loaders wait for (they reset it): not reset here */
  if (mxe_last(L->expanded, (uint32_t)L->expand_items, 0, i, bar, &sh->flag))
    ep_ack_peers(a->ack, a->peer_delta, a->rank, N, n, i); /* every source's inbox read: it may send again */
}

/* ---- reduce ------------------------------------------------------------------------ */
WS_DEV void mxe_reduce(const mx_layer_args *L, const ws_ctx *c, const uint16_t *y, int item, uint32_t target, int gw,
                       int lane, int i, uint32_t bar, mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const int K = a->topk;
  const uint64_t m = sh->epoch[1];
  if (i == 0) mx_combine_wait(L, c, target, L->reduce_items);
  ep_wait_acked(a, a->comb_ack, m - 1, "moe layer combine ack", c, i);
  ws_named_sync(bar, MX_LAYER_THREADS);
  const int nvec = a->hidden / 8, nchunk = (nvec + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK;
  long long u0, u1;
  mxe_share((long long)mxe_received(a) * nchunk, L->reduce_items, item, &u0, &u1);
  for (long long u = u0 + gw; u < u1; u += MX_LAYER_THREADS / 32) {
    int idx;
    const int s = ep_reduce_token(a, a->recv_ntok, 1, (int)(u / nchunk), &idx);
    const size_t e = ((size_t)s * a->max_tokens + idx) * K;
    /* the rows and weights were written by the expand items, other CTAs: read past L1 */
    ep_reduce_unit<4>(a, y, s, idx, (int)(u % nchunk) * MOE_SUM_CHUNK + lane, lane < K ? __ldcg(a->comb_row + e + lane) : -1,
                      lane < K ? __ldcg(a->comb_w + e + lane) : 0.0f, 1);
  }
  if (mxe_last(L->reduced, (uint32_t)L->reduce_items, 1, i, bar, &sh->flag)) {
    const ep_group g = {i, MX_LAYER_THREADS, bar};
    ep_raise(a, a->comb_flag, m, 0, a->sms, &g);
    /* and "done", which a peer in the fused standalone combine (combine.cu) waits for */
    ep_ack_peers(a->comb_done, a->peer_delta, a->rank, a->nranks, m, i);
  }
}

/* ---- gather ------------------------------------------------------------------------ */
WS_DEV void mxe_gather(const mx_layer_args *L, const ws_ctx *c, int item, int gw, int lane, int i, uint32_t bar,
                       mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const uint64_t n = sh->epoch[0], m = sh->epoch[1];
  ep_wait_all_slots(a, a->comb_flag, m, "moe layer combine data", c, i, MX_LAYER_THREADS);
  ws_named_sync(bar, MX_LAYER_THREADS);
  const int t0 = item * L->tokens_per_item, nt = max(0, min(L->tokens_per_item, L->tokens - t0));
  const int nchunk = (a->hidden / 8 + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK;
  for (int u = gw; u < nt * nchunk; u += MX_LAYER_THREADS / 32)
    ep_gather_chunk<1>(a, L->out, t0 + u / nchunk, (u % nchunk) * MOE_SUM_CHUNK + lane);
  if (mxe_last(L->gathered, (uint32_t)L->gather_items, 1, i, bar, &sh->flag)) {
    ep_ack_peers(a->comb_ack, a->peer_delta, a->rank, a->nranks, m, i); /* every rank's partial sums read: it may combine again */
    if (i == 0) { /* the call's last item: every CTA read the epochs before its first claim */
      a->epochs[0] = n;
      a->epochs[1] = m;
    }
  }
}

#endif
