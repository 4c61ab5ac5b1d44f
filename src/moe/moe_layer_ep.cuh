/* moe_layer_ep.cuh - the whole MoE layer in the experts kernel on several ranks (EP > 1):
 * dispatch and combine as work items of the same persistent kernel, on the dispatch
 * handle's symmetric buffers and with its protocol (ep_internal.h: counts, inbox, flags,
 * acks, epochs), so the buffers and epochs stay those of ws_ep_dispatch / ws_ep_combine.
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
 *   expand  (X items) wait for every source's data flags; a warp per (received row,
 *                     chunk) copies it into the rows of its local experts (and, in chunk
 *                     0, its scales K-block-major and combine's row and weight per slot);
 *                     one release-add on `expanded` each; the last one acks every source.
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
#ifndef WARPSPEC_MOE_LAYER_EP_CUH
#define WARPSPEC_MOE_LAYER_EP_CUH

#include "ep_device.cuh"
#include "moe_layer_items.cuh"

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

/* flags[rank x sms + b] = v on every rank, every b (the system fence first, per thread). */
WS_DEV void mxe_raise(const ep_args *a, const uint64_t *flags, uint64_t v, int i) {
  for (int f = i; f < a->nranks * a->sms; f += MX_LAYER_THREADS) {
    const int d = f / a->sms, b = f % a->sms;
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64((uint64_t *)((char *)flags + a->peer_delta[d]) + (size_t)a->rank * a->sms + b, v);
  }
}


/* The rows local expert l receives from all N ranks (rc: each rank's counts, per apart). */
WS_DEV int mxe_rows_in(const int *rc, int N, int per, int l) {
  int rows = 0;
  for (int s = 0; s < N; s++) rows += rc[s * per + l];
  return rows;
}

/* ---- route ------------------------------------------------------------------------- */
/* scratch: E + N (our counts per expert, then tokens per rank) + N (L + 1) (the counts we
 * receive) + 8 ints of shared memory. */
WS_DEV void mxe_route(const mx_layer_args *L, int *scratch, const ws_ctx *c, int i, uint32_t bar, const mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const int E = a->experts, N = a->nranks, K = a->topk, LE = a->L, T = L->tokens, per = LE + 1;
  const uint64_t n = sh->epoch[0];
  int *cnt = scratch, *rc = scratch + E + N, *warp_sum = rc + N * per;
  for (int e = i; e < E + N; e += MX_LAYER_THREADS) cnt[e] = 0;
  ws_named_sync(bar, MX_LAYER_THREADS);
  for (int t = i; t < T; t += MX_LAYER_THREADS) {
    uint64_t sent = 0;
    for (int k = 0; k < K; k++) {
      const int e = __ldg(L->topk_idx + (size_t)t * K + k);
      int4 en = make_int4(-1, -1, -1, 0);
      if (e >= 0 && e < E) {
        en = make_int4(e / LE, e % LE, atomicAdd(&cnt[e], 1), 0);
        sent |= 1ull << en.x;
      } else if (e != -1 && atomicAdd(&a->bad_id[0], 1) == 0) { /* skipped like -1, reported */
        a->bad_id[1] = t; a->bad_id[2] = k; a->bad_id[3] = e;
      }
      *(int4 *)&a->entries[(size_t)t * K + k] = en;
    }
    for (int d = 0; d < N; d++)
      a->tok_slot[(size_t)t * N + d] = (sent >> d) & 1 ? atomicAdd(&cnt[E + d], 1) : -1;
  }
  /* every rank has read our previous dispatch out of its counts and inbox */
  if (i < N) {
    const ws_site site = mxe_site(a, "moe layer dispatch ack", WS_EDGE_PEER_CREDIT, i, n - 1);
    ws_wait_flag_geq(&a->ack[i], n - 1, c, &site);
  }
  ws_named_sync(bar, MX_LAYER_THREADS);
  for (int j = i; j < N * per; j += MX_LAYER_THREADS) {
    const int d = j / per, l = j % per;
    EP_PEER(int, *a, counts, d)[(size_t)a->rank * per + l] = l < LE ? cnt[d * LE + l] : cnt[E + d];
  }
  ws_named_sync(bar, MX_LAYER_THREADS); /* every count stored before the flags' system fence */
  ep_ack_peers(a->count_flag, a->peer_delta, a->rank, N, n, i);
  if (i == 0) *a->num_tokens = T;
  /* every rank's counts to us */
  if (i < N) {
    const ws_site site = mxe_site(a, "moe layer counts", WS_EDGE_PEER_DATA, i, n);
    ws_wait_flag_geq(&a->count_flag[i], n, c, &site);
  }
  ws_named_sync(bar, MX_LAYER_THREADS);
  for (int j = i; j < N * per; j += MX_LAYER_THREADS) rc[j] = *(const volatile int *)&a->counts[j];
  ws_named_sync(bar, MX_LAYER_THREADS);
  /* padded group starts (mx_padded_start's scan; each thread's rows summed over the
   * ranks twice, in registers: kept in shared memory for the scan they cost 88 more
   * instructions of once-per-call code) */
  int l0, l1, sum = 0;
  mx_run_of(LE, i, MX_LAYER_THREADS, &l0, &l1);
  for (int l = l0; l < l1; l++) sum += mx_pad_rows(mxe_rows_in(rc, N, per, l));
  int start = mx_scan_excl(sum, i, warp_sum, bar);
  for (int l = l0; l < l1; l++) {
    const int rows = mxe_rows_in(rc, N, per, l);
    L->offsets[l] = start;
    a->expert_counts[l] = rows;
    start += mx_pad_rows(rows);
  }
  if (i == MX_LAYER_THREADS - 1) L->offsets[LE] = start;
  for (int s = i; s < N; s += MX_LAYER_THREADS) a->recv_ntok[s] = rc[s * per + LE];
  /* every thread's stores ordered before thread 0 by the barrier; its release is cumulative */
  ws_named_sync(bar, MX_LAYER_THREADS);
  if (i == 0 && L->drop != MOE_DROP_ROUTED) ws_red_release_gpu_add_u32(L->routed, 1u);
}

/* ---- send -------------------------------------------------------------------------- */
WS_DEV void mxe_send(const mx_layer_args *L, int item, int gw, int lane, int i, uint32_t bar, mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const int t0 = item * L->tokens_per_item, nt = max(0, min(L->tokens_per_item, L->tokens - t0));
  const int nchunk = ep_send_chunks(a, L->x_bf16);
  for (int u = gw; u < nt * nchunk; u += MX_LAYER_THREADS / 32)
    ep_send_unit(a, L->x, L->x_scale, L->topk_weights, t0 + u / nchunk, u % nchunk, lane, L->x_bf16);
  if (mxe_last(L->sent, (uint32_t)L->send_items, 1, i, bar, &sh->flag)) mxe_raise(a, a->data_flag, sh->epoch[0], i);
}

/* ---- expand ------------------------------------------------------------------------ */
/* Tokens received from all sources (recv_ntok, written by the route item). */
WS_DEV int mxe_received(const ep_args *a) {
  int n = 0;
  for (int s = 0; s < a->nranks; s++) n += __ldcg(&a->recv_ntok[s]);
  return n;
}

/* The received token `row` (over all sources, in source order): its source and index. */
WS_DEV int mxe_source(const ep_args *a, int row, int *index) {
  int s = 0;
  for (; s < a->nranks - 1; s++) {
    const int nt = __ldcg(&a->recv_ntok[s]);
    if (row < nt) break;
    row -= nt;
  }
  *index = row;
  return s;
}

/* This item's share [u0, u1) of `units` units split over `items` items. */
WS_DEV void mxe_share(long long units, int items, int item, long long *u0, long long *u1) {
  *u0 = units * item / items;
  *u1 = units * (item + 1) / items;
}

WS_DEV void mxe_expand(const mx_layer_args *L, const ws_ctx *c, int item, int gw, int lane, int i, uint32_t bar,
                       mxe_shared *sh) {
  const ep_args *a = &L->ep;
  const int N = a->nranks, LE = a->L, K = a->topk, per = LE + 1, kb = a->hidden / 128;
  const uint64_t n = sh->epoch[0];
  ep_wait_all_slots(a, a->data_flag, n, "moe layer rows in", c, i, MX_LAYER_THREADS);
  ws_named_sync(bar, MX_LAYER_THREADS);
  const size_t pay = ep_payload_bytes(a->hidden, 1), meta_off = EP_ALIGN16(pay + ep_scale_bytes(a->hidden, 1));
  const int nv = (int)(pay / 16), chunk = 32 * EP_COPY_UNROLL, nchunk = (nv + chunk - 1) / chunk;
  long long u0, u1;
  mxe_share((long long)mxe_received(a) * nchunk, L->expand_items, item, &u0, &u1);
  for (long long u = u0 + gw; u < u1; u += MX_LAYER_THREADS / 32) {
    const int ch = (int)(u % nchunk);
    int idx;
    const int s = mxe_source(a, (int)(u / nchunk), &idx);
    const uint8_t *row = a->inbox + ((size_t)s * a->max_tokens + idx) * a->inbox_row;
    const ep_meta *m = (const ep_meta *)(row + meta_off);
    const int entries = __ldcg(&m[0].pos);
    int r = -1;
    if (lane < entries) { /* its local expert's group start, then lower sources' rows, then its position */
      const int local = __ldcg(&m[1 + lane].local);
      r = __ldcg(&L->offsets[local]) + __ldcg(&m[1 + lane].pos);
      for (int q = 0; q < s; q++) r += __ldcg(&a->counts[q * per + local]);
    }
    const uint4 *src = (const uint4 *)row + (size_t)ch * chunk + lane;
    const int valid = nv - ch * chunk - lane;
    uint4 v[EP_COPY_UNROLL];
#pragma unroll
    for (int q = 0; q < EP_COPY_UNROLL; q++)
      if (q * 32 < valid) v[q] = ws_ld_global_cg_v4(src + q * 32);
    for (int j = 0; j < entries; j++) {
      uint4 *d = (uint4 *)(a->x + (size_t)__shfl_sync(0xffffffffu, r, j) * pay) + (size_t)ch * chunk + lane;
#pragma unroll
      for (int q = 0; q < EP_COPY_UNROLL; q++)
        if (q * 32 < valid) ws_st_global_v4(d + q * 32, v[q]);
    }
    if (ch != 0) continue;
    /* chunk 0: combine's row and weight of every slot (-1: not here), the scales */
    if (lane < K) {
      const size_t e = ((size_t)s * a->max_tokens + idx) * K + lane;
      a->comb_row[e] = r;
      a->comb_w[e] = lane < entries ? __ldcg(&m[1 + lane].weight) : 0.0f;
    }
    for (int c0 = 0; c0 < kb; c0 += 32) {
      const float sv = c0 + lane < kb ? __ldcg((const float *)(row + pay) + c0 + lane) : 0.0f;
      for (int j = 0; j < entries; j++) {
        const int rj = __shfl_sync(0xffffffffu, r, j);
        if (c0 + lane < kb) a->x_scale[(size_t)(c0 + lane) * a->scale_ld + rj] = sv;
      }
    }
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
  const int N = a->nranks, K = a->topk;
  const uint64_t m = sh->epoch[1];
  if (i == 0) mx_combine_wait(L, c, target, L->reduce_items);
  if (i < N) {
    const ws_site site = mxe_site(a, "moe layer combine ack", WS_EDGE_PEER_CREDIT, i, m - 1);
    ws_wait_flag_geq(&a->comb_ack[i], m - 1, c, &site);
  }
  ws_named_sync(bar, MX_LAYER_THREADS);
  const int nvec = a->hidden / 8, nchunk = (nvec + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK;
  long long u0, u1;
  mxe_share((long long)mxe_received(a) * nchunk, L->reduce_items, item, &u0, &u1);
  for (long long u = u0 + gw; u < u1; u += MX_LAYER_THREADS / 32) {
    int idx;
    const int s = mxe_source(a, (int)(u / nchunk), &idx);
    const size_t e = ((size_t)s * a->max_tokens + idx) * K;
    uint4 *dst = (uint4 *)(EP_PEER(uint16_t, *a, comb_inbox, s) + ((size_t)a->rank * a->max_tokens + idx) * a->hidden);
    moe_sum_rows<4>(a->comb_row + e, a->comb_w + e, K, y, a->hidden, (int)(u % nchunk) * MOE_SUM_CHUNK + lane, nvec, dst, 1);
  }
  if (mxe_last(L->reduced, (uint32_t)L->reduce_items, 1, i, bar, &sh->flag)) mxe_raise(a, a->comb_flag, m, i);
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
