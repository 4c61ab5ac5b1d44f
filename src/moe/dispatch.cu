/* dispatch.cu - MoE dispatch: every token once to each rank hosting one of its experts,
 * laid out there grouped-contiguous by local expert (ws_gemm's layout). The kernels below
 * drive the protocol's steps (ep_protocol.cuh), a CTA as the group of each.
 *
 * Three kernels in stream order, all graph-capturable:
 *   route   (a thread per token, ROUTER role)  the dispatch epoch n = ++epochs[0]; per
 *           token and top-k slot: destination rank, local expert, and the token's
 *           position among this rank's tokens for that (rank, expert) (global counters,
 *           one atomic per warp and counter; shared-memory ones when one CTA holds
 *           every token, as in decode); per destination: the token's inbox slot
 *           (once per rank, however many of its experts live there) and the counts.
 *   send    (sms CTAs, SENDER role)  wait until each destination has read our previous
 *           dispatch (ack >= n - 1); CTA 0 publishes the counts (flag = n); a warp per
 *           (token, 4 KB chunk of its row) loads the chunk once and stores it into every
 *           destination's inbox with 16-byte stores over NVLink (chunk 0 also the scales
 *           and the meta block); each CTA then flags every destination
 *           (data_flag[us][cta] = n, after a system fence). Phased (WARPSPEC_EP_OVERLAP,
 *           normal mode): the same stores one destination at a time (ourselves, then
 *           rank + 1, ...), each destination flagged as soon as its rows are out.
 *   expand  (sms CTAs, RECEIVER role)  wait for every source's counts, compute the
 *           padded expert offsets, wait for every source CTA's data flag; a warp per
 *           inbox row writes each of its entries' layout row (source, weight, combine's
 *           row; lane j holds entry j). Copy receive: then a warp per (inbox row, 4 KB
 *           chunk) loads the chunk once and stores it into the rows of all its local
 *           experts (payload, K-block-major scales). Index receive: the layout row's inbox
 *           row instead, no bytes moved (the GEMM gathers the rows in place). Padding rows
 *           are marked (source -1; their bytes are left); the last CTA acks every source.
 *           Beside a phased send (the overlap) it starts with the send, not after it, and
 *           receives each source as soon as that source's flags are in.
 * Each wait is bounded and names the peer, the role and the CTA. */
#include "ep_protocol.cuh"
#include "ep_overlap.h"
#include "../core/index_check.h"
#include "../core/knobs.h"
#include "warpspec/check.h"

#include <cuda_bf16.h>

#include <string.h>

#define ROUTE_ROLES(ROLE) ROLE(EP_ROUTER, WS_EP_ROUTE_THREADS / 32, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(ep_route, ROUTE_ROLES);
#define SEND_ROLES(ROLE) ROLE(EP_SENDER, WS_EP_WARPS, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(ep_send, SEND_ROLES);
#define EXPAND_ROLES(ROLE) ROLE(EP_RECEIVER, WS_EP_WARPS, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(ep_expand, EXPAND_ROLES);


/* ---- route ------------------------------------------------------------------------- */
/* One thread per token, as many CTAs as the tokens need (ep_route_token). One CTA (up to
 * WS_EP_ROUTE_THREADS tokens: every decode step) counts in shared memory: no global
 * atomics on the K dependent steps, no last-CTA hand-off (7 us at 1 token with them,
 * most of it atomics' round trips). Else global counters (route_cnt), which the last CTA
 * copies to send_counts and zeroes for the next call. */
WS_KERNEL(ep_route) ep_route_kernel(const __grid_constant__ ep_args a, const int *topk_idx, int num_tokens,
                                    ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_route, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  __shared__ int last;
  __shared__ int local_cnt[WS_EP_MAX_EXPERTS + WS_COMM_MAX_RANKS + 1];
  const ep_group g = {(int)threadIdx.x, (int)blockDim.x, ctx.bar};
  const int EN = a.experts + a.nranks;
  const int single = gridDim.x == 1;
  int *cnt = single ? local_cnt : a.route_cnt;
  if (single) {
    for (int i = threadIdx.x; i <= EN; i += blockDim.x) local_cnt[i] = 0;
    ep_sync(&g);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.epochs[0] += 1;
    *a.num_tokens = num_tokens;
  }
  const int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  ep_route_token(&a, topk_idx, num_tokens, t, cnt, ctx.lane);
  /* The warp's 32 tokens took consecutive inbox slots on every rank, at about the same
   * moment: the order of these counts is (nearly) the order of the slots everywhere. The
   * fused combine's gather walks the tokens in it, so that it asks for rows in about the
   * order the reducers push them (a slot's place is random at the tokens' order). */
  if (ctx.lane == 0 && t < num_tokens) a.route_order[atomicAdd(&cnt[EN], 1)] = t / 32;
  if (single) {
    ep_sync(&g);
    for (int i = threadIdx.x; i < EN; i += blockDim.x) a.send_counts[i] = local_cnt[i];
  } else if (ep_last_cta(&ctx, &a.epochs[4], &last)) {
    for (int i = threadIdx.x; i < EN; i += blockDim.x) a.send_counts[i] = __ldcg(&a.route_cnt[i]);
    ep_sync(&g);
    for (int i = threadIdx.x; i <= EN; i += blockDim.x) a.route_cnt[i] = 0;
    if (threadIdx.x == 0) a.epochs[4] = 0;
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- send -------------------------------------------------------------------------- */
WS_KERNEL(ep_send) ep_send_kernel(const __grid_constant__ ep_args a, const uint8_t *x, const float *x_scale,
                                  const float *topk_weights, int phased, ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_send, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  const int T = *a.num_tokens;
  const uint64_t n = a.epochs[0];
  /* every destination has read our previous dispatch out of its inbox */
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  ep_wait_acked(&a, a.ack, n - 1, "dispatch ack", &ctx, (int)threadIdx.x);
  ws_role_sync(&ctx);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  const ep_group g = {(int)threadIdx.x, (int)blockDim.x, ctx.bar};
  if (blockIdx.x == 0) ep_publish_counts(&a, a.send_counts, n, &g);
  const int lane = ctx.lane, warps = (int)(blockDim.x / 32), gw = blockIdx.x * warps + ctx.warp, nw = gridDim.x * warps;
  /* work item: one chunk of one token's row (4 KB copied, or 32 x EP_QUANT_UNROLL x 8
   * values quantised), so that a few tokens still spread over every warp */
  const int quant = a.ll && a.fp8, nchunk = ep_send_chunks(&a, quant);
  if (!phased) { /* a row loaded once and stored to all its ranks; one flag per rank at the end */
    for (int item = gw; item < T * nchunk; item += nw)
      ep_send_unit(&a, x, x_scale, topk_weights, item / nchunk, item % nchunk, lane, quant, -1);
    ep_sync(&g); /* all of this CTA's rows are written */
    ep_raise(&a, a.data_flag, n, (int)blockIdx.x, 1, &g);
  } else { /* one rank after the other, each flagged when done: its expand can start */
    for (int k = 0; k < a.nranks; k++) {
      const int d = (a.rank + k) % a.nranks; /* ourselves first (local stores), then rank + 1, ... */
      for (int item = gw; item < T * nchunk; item += nw) {
        const int t = item / nchunk;
        if (__ldcg(&a.tok_slot[(size_t)t * a.nranks + d]) < 0) continue; /* the warp's token: uniform */
        ep_send_unit(&a, x, x_scale, topk_weights, t, item % nchunk, lane, quant, d);
      }
      ep_sync(&g);
      /* beside the expand this grid has fewer CTAs than the flag slots: CTA b raises
       * slots b, b + grid, ... */
      for (int b = (int)blockIdx.x; b < a.sms; b += (int)gridDim.x) ep_raise_on(&a, a.data_flag, n, d, 1, b, 1, &g);
    }
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- expand ------------------------------------------------------------------------ */
/* The receive of sources s0 .. s1 - 1, whose rows are all in: the bookkeeping, a thread
 * per (inbox row, top-k slot): a row's dependent loads (its header, then its entry) in
 * flight for many rows at once (a warp walking its 21 rows one after another took 31 us
 * at 4096 tokens, EP2, 24 CTAs, H100). Then the copy receive: scales (FP8), then the
 * payload, a warp per (row, 4 KB chunk). */
static __device__ __forceinline__ void expand_sources(const ep_args *a, const int *rc, const int *off, int s0, int s1,
                                                      int index, int lane, int gw, int nw) {
  int total = 0;
  for (int s = s0; s < s1; s++) total += ep_tokens_from(a, rc, s);
  const int K = a->topk;
  if (a->records && ep_records_fit(a, rc, s0, s1, lane)) {
    ep_book_records(a, rc, off, s0, s1, index, 0, off[a->L], blockIdx.x * (long long)blockDim.x + threadIdx.x,
                    (long long)gridDim.x * blockDim.x);
  } else {
    const long long units = (long long)total * K, nt = (long long)gridDim.x * blockDim.x;
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < units; u += nt) {
      int i;
      const int s = ep_source_in(a, rc, s0, s1, (int)(u / K), &i);
      ep_book_entry(a, rc, off, s, i, (int)(u % K), index);
    }
  }
  if (index) return; /* the index receive: no bytes move (the GEMM gathers the rows in place) */
  for (int row = gw; a->fp8 && row < total; row += nw) {
    int i;
    const int s = ep_source_in(a, rc, s0, s1, row, &i);
    ep_copy_scales(a, rc, off, s, i, lane);
  }
  const int nchunk = ep_copy_chunks(a);
  for (int u = gw; u < total * nchunk; u += nw) {
    int i;
    const int s = ep_source_in(a, rc, s0, s1, u / nchunk, &i);
    ep_copy_unit(a, rc, off, s, i, u % nchunk, lane);
  }
}

/* overlap (beside a phased send, WARPSPEC_EP_OVERLAP): launched chained, this kernel does
 * not wait for the send's end (WS_SELF_BESIDE); what it reads of this call comes through
 * the protocol's flags, and the route's epoch was final before the send let it start (the
 * send waited for the route's end). It takes the sources in the order they send to us
 * (ourselves first, then rank - 1, ...: each sends to rank + k in its phase k) and
 * receives each as soon as its CTAs have flagged, so the copies run under the later
 * phases' transfers. Without overlap: every source's flags, then all rows at once. */
WS_KERNEL(ep_expand) ep_expand_kernel(const __grid_constant__ ep_args a, int index, int overlap, ws_diag diag) {
  ws_ctx ctx = overlap ? WS_SELF_BESIDE(ep_expand, diag) : WS_SELF(ep_expand, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  __shared__ int rc[WS_EP_MAX_EXPERTS + WS_COMM_MAX_RANKS]; /* [src][local expert], then its tokens */
  __shared__ int off[WS_EP_MAX_EXPERTS + 1];                /* padded group starts, per local expert */
  __shared__ int warp_start[32];
  __shared__ int last;
  const ep_group g = {(int)threadIdx.x, (int)blockDim.x, ctx.bar};
  const int N = a.nranks, L = a.L;
  const uint64_t n = __ldcg(&a.epochs[0]); /* the route's, in L2 (this kernel may start before the send ends) */
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  ep_receive_counts(&a, rc, n, "dispatch counts", &ctx, &g);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  ep_layout(&a, rc, off, warp_start, blockIdx.x == 0, &g);
  const int lane = ctx.lane, warps = (int)(blockDim.x / 32), gw = blockIdx.x * warps + ctx.warp, nw = gridDim.x * warps;
  /* padding rows: no source. Their payload and scales are left as they are (zero from
   * create, or rows of an earlier call: finite values); the GEMM's outputs for them are
   * never read, combine skips them. Zeroing them cost more than the rows themselves
   * when experts are many and tokens few (256 experts x 127 rows of 7 KB at EP1). They
   * need only the counts: marked before any row is in. */
  for (int l = gw; l < L; l += nw) { /* a warp per expert */
    const int rows = ep_rows_in(&a, rc, l);
    /* low latency: only the rows the previous call had and this one has not (ll_marked[l]:
     * the expert's rows last call; every row past it is still marked, create's value marks
     * all at the first call). Marking the whole block every call was local experts x
     * nranks x max_tokens rows (32768 at EP2, 128 tokens) for a few hundred real ones. */
    const int end = a.ll ? off[l] + max(rows, a.ll_marked[l]) : off[l + 1];
    for (int r = off[l] + rows + lane; r < end; r += 32) {
      a.src_rank[r] = -1; a.src_token[r] = -1; a.src_slot[r] = -1; a.weight[r] = 0.0f;
      if (index) a.row_index[r] = -1;
    }
    __syncwarp(); /* every lane read ll_marked[l] before lane 0 replaces it */
    if (a.ll && lane == 0) a.ll_marked[l] = rows; /* this warp alone touches expert l */
  }
  for (int k = 0; k < (overlap ? N : 1); k++) {
    const int s0 = overlap ? (a.rank - k + N) % N : 0, s1 = overlap ? s0 + 1 : N;
    ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
    ep_wait_slots(&a, a.data_flag, n, s0, s1, "dispatch data", &ctx, (int)threadIdx.x, (int)blockDim.x);
    ep_sync(&g);
    ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
    expand_sources(&a, rc, off, s0, s1, index, lane, gw, nw);
  }
  /* the last CTA out tells every source its inbox is free again */
  if (ep_last_cta(&ctx, &a.epochs[2], &last)) {
    ep_ack_peers(a.ack, a.peer_delta, a.rank, N, n, (int)threadIdx.x);
    if (threadIdx.x == 0) a.epochs[2] = 0;
  }
  /* beside the send: this kernel ends after it, as in stream order (the kernels after us
   * wait for our end only) */
  if (overlap) ws_griddepcontrol_wait();
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- the call ---------------------------------------------------------------------- */
/* The phased send with the expand beside it (ep_overlap.h). Ranks may choose differently
 * (their tokens differ): a receiver overlapped or not reads any sender right, since it
 * waits for each source's flags, raised per rank or all at the end. */
static int ep_overlap_for(const ws_ep *ep, int num_tokens, int index) {
  return ep_overlap_rule(ep->cfg.mode == WS_EP_LOW_LATENCY, ws_knobs_get()->ep_overlap, ep->sms, num_tokens, index,
                         ep->args.nranks);
}

extern "C" ws_status ws_ep_dispatch(ws_ep *ep, const void *x, const float *x_scale, const int *topk_idx,
                                    const float *topk_weights, int num_tokens, ws_ep_recv *recv, int *host_offsets,
                                    cudaStream_t stream) {
  WS_REQUIRE(ep != NULL, "ws_ep_dispatch: ep is NULL");
  return ep_dispatch(ep, x, x_scale, topk_idx, topk_weights, num_tokens, recv, host_offsets,
                     ep->cfg.receive == WS_EP_RECEIVE_INDEX, stream);
}

extern "C" ws_status ep_dispatch(ws_ep *ep, const void *x, const float *x_scale, const int *topk_idx,
                                 const float *topk_weights, int num_tokens, ws_ep_recv *recv, int *host_offsets, int index,
                                 cudaStream_t stream) {
  WS_REQUIRE(ep != NULL, "ws_ep_dispatch: ep is NULL");
  WS_REQUIRE(index || ep->x != NULL, "ws_ep_dispatch: this handle receives by index (WS_EP_RECEIVE_INDEX): no copy");
  WS_REQUIRE(num_tokens >= 0 && num_tokens <= ep->cfg.max_tokens,
             "ws_ep_dispatch: num_tokens %d, must be 0..%d (the handle's max_tokens)", num_tokens, ep->cfg.max_tokens);
  if (num_tokens > 0) {
    WS_REQUIRE(x != NULL && topk_idx != NULL && topk_weights != NULL, "ws_ep_dispatch: x, topk_idx or topk_weights is NULL");
    WS_REQUIRE(((uintptr_t)x & 15u) == 0, "ws_ep_dispatch: x %p is not 16-byte aligned", x);
    WS_REQUIRE(((uintptr_t)topk_idx & 3u) == 0 && ((uintptr_t)topk_weights & 3u) == 0,
               "ws_ep_dispatch: topk_idx / topk_weights must be 4-byte aligned");
    if (ep->cfg.mode == WS_EP_LOW_LATENCY) {
      WS_REQUIRE(x_scale == NULL, "ws_ep_dispatch: low-latency mode takes BF16 rows and quantises them itself; "
                 "x_scale must be NULL");
    } else if (ep->fp8) {
      WS_REQUIRE(x_scale != NULL, "ws_ep_dispatch: FP8 payload needs x_scale [num_tokens][hidden / 128]");
      WS_REQUIRE(((uintptr_t)x_scale & 3u) == 0, "ws_ep_dispatch: x_scale must be 4-byte aligned");
    } else {
      WS_REQUIRE(x_scale == NULL, "ws_ep_dispatch: x_scale is for the FP8 payload; this handle carries BF16");
    }
  }
  ws_status s;
  if (ws_check_mode() && (s = ws_index_check_range("ws_ep_dispatch (validation)", "topk_idx", topk_idx,
                                                     (long long)num_tokens * ep->cfg.topk, 0, ep->cfg.experts, -1,
                                                     stream)) != WS_OK)
    return s;
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  const ep_args *a = &ep->args;
  int overlap = ep_overlap_for(ep, num_tokens, index);
  /* the handle's SMs (num_sms: what the transfers may hold at once) are shared by the two
   * kernels that run together then: send the first half, expand the rest */
  const int send_ctas = overlap && ep->sms > 1 ? (ep->sms + 1) / 2 : ep->sms;
  const int expand_ctas = overlap && ep->sms > 1 ? ep->sms - send_ctas : ep->sms;
  {
    void *args[] = {(void *)a, &topk_idx, &num_tokens, &diag};
    if ((s = ep_launch(ep, EP_PLAN_LAYOUT, "ep_route", ep_route_roles, ep_route_NROLES, (const void *)ep_route_kernel,
                       dim3{(unsigned)(num_tokens > 0 ? (num_tokens + WS_EP_ROUTE_THREADS - 1) / WS_EP_ROUTE_THREADS : 1), 1, 1},
                       0, stream, args)) != WS_OK)
      return s;
  }
  {
    const uint8_t *xb = (const uint8_t *)x;
    void *args[] = {(void *)a, &xb, &x_scale, &topk_weights, &overlap, &diag};
    if ((s = ep_launch(ep, EP_PLAN_SEND, "ep_send", ep_send_roles, ep_send_NROLES, (const void *)ep_send_kernel,
                       dim3{(unsigned)send_ctas, 1, 1}, 0, stream, args)) != WS_OK)
      return s;
  }
  {
    void *args[] = {(void *)a, &index, &overlap, &diag};
    if ((s = ep_launch(ep, EP_PLAN_EXPAND, "ep_expand", ep_expand_roles, ep_expand_NROLES,
                       (const void *)ep_expand_kernel, dim3{(unsigned)expand_ctas, 1, 1}, 0, stream, args)) != WS_OK)
      return s;
  }
  ep->host_tokens = num_tokens;
  ep->last_index = index;
  if (recv) ws_ep_recv_layout(ep, recv);
  if (host_offsets) { /* the offsets and the out-of-range report, one wait for both */
    const int L = ep->local_experts;
    WS_CUDA_TRY(cudaMemcpyAsync(ep->host_buf, ep->offsets, (L + 1) * sizeof(int), cudaMemcpyDeviceToHost, stream));
    WS_CUDA_TRY(cudaMemcpyAsync(ep->host_buf + L + 1, ep->bad_id, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream));
    if ((s = ws_sync(stream)) != WS_OK) return s;
    memcpy(host_offsets, ep->host_buf, (L + 1) * sizeof(int));
    return ep_report_bad_ids(ep, ep->host_buf + L + 1, stream);
  }
  return WS_OK;
}
