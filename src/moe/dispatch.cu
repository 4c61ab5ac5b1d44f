/* dispatch.cu - MoE dispatch: every token once to each rank hosting one of its experts,
 * laid out there grouped-contiguous by local expert (ws_gemm's layout).
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
 *           (data_flag[us][cta] = n, after a system fence).
 *   expand  (sms CTAs, RECEIVER role)  wait for every source's counts, compute the
 *           padded expert offsets, wait for every source CTA's data flag; a warp per
 *           inbox row writes each of its entries' layout row (source, weight, combine's
 *           row; lane j holds entry j). Copy receive: then a warp per (inbox row, 4 KB
 *           chunk) loads the chunk once and stores it into the rows of all its local
 *           experts (payload, K-block-major scales). Index receive: the layout row's inbox
 *           row instead, no bytes moved (the GEMM gathers the rows in place). Padding rows
 *           are marked (source -1; their bytes are left); the last CTA acks every source.
 * Each wait is bounded and names the peer, the role and the CTA. */
#include "ep_device.cuh"
#include "../core/index_check.h"
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
/* One thread per token, as many CTAs as the tokens need. A token's position among this
 * rank's tokens for (rank, expert) and its inbox slot per rank come from global counters
 * (route_cnt: E experts, then N ranks), one atomic per group of lanes of a warp that hit
 * the same counter (__match_any_sync / __ballot_sync), so a hot expert costs one atomic
 * per warp, not one per token. The last CTA copies the counters to send_counts and
 * zeroes them for the next call. */
WS_KERNEL(ep_route) ep_route_kernel(const __grid_constant__ ep_args a, const int *topk_idx, int num_tokens,
                                    ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_route, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  __shared__ int last;
  __shared__ int local_cnt[WS_EP_MAX_EXPERTS + WS_COMM_MAX_RANKS];
  const int E = a.experts, N = a.nranks, K = a.topk, L = a.L, lane = ctx.lane;
  /* one CTA (up to WS_EP_ROUTE_THREADS tokens: every decode step) counts in shared
   * memory: no global atomics on the K dependent steps, no last-CTA hand-off (7 us at
   * 1 token with them, most of it atomics' round trips) */
  const int single = gridDim.x == 1;
  int *cnt = single ? local_cnt : a.route_cnt;
  if (single) {
    for (int i = threadIdx.x; i < E + N; i += blockDim.x) local_cnt[i] = 0;
    ws_role_sync(&ctx);
  }
  if (blockIdx.x == 0 && threadIdx.x == 0) {
    a.epochs[0] += 1;
    *a.num_tokens = num_tokens;
  }
  const unsigned below = (1u << lane) - 1u; /* lanes before this one */
  const int t = (int)(blockIdx.x * blockDim.x + threadIdx.x);
  const int live = t < num_tokens;
  uint64_t sent = 0; /* ranks this token already goes to */
  for (int k = 0; k < K; k++) {
    const int e = live ? topk_idx[(size_t)t * K + k] : -1;
    const int ok = e >= 0 && e < E;
    if (live && !ok && e != -1) {
      if (atomicAdd(&a.bad_id[0], 1) == 0) { a.bad_id[1] = t; a.bad_id[2] = k; a.bad_id[3] = e; }
    }
    const unsigned same = __match_any_sync(0xffffffffu, ok ? e : -1);
    ep_entry en = {-1, -1, -1, 0};
    if (ok) { /* every lane of `same` is here: they share e */
      const int leader = __ffs(same) - 1;
      int base = 0;
      if (lane == leader) base = atomicAdd(&cnt[e], __popc(same));
      base = __shfl_sync(same, base, leader);
      en.dst = e / L;
      en.local = e % L;
      en.pos = base + __popc(same & below);
      sent |= 1ull << en.dst;
    }
    if (live) a.entries[(size_t)t * K + k] = en;
  }
  for (int d = 0; d < N; d++) {
    const int goes = live && ((sent >> d) & 1);
    const unsigned m = __ballot_sync(0xffffffffu, goes);
    int base = 0;
    if (m && lane == __ffs(m) - 1) base = atomicAdd(&cnt[E + d], __popc(m));
    base = __shfl_sync(0xffffffffu, base, m ? __ffs(m) - 1 : 0);
    if (live) a.tok_slot[(size_t)t * N + d] = goes ? base + __popc(m & below) : -1;
  }
  if (single) {
    ws_role_sync(&ctx);
    for (int i = threadIdx.x; i < N * (L + 1); i += blockDim.x) {
      const int d = i / (L + 1), l = i % (L + 1);
      a.send_counts[i] = local_cnt[l < L ? d * L + l : E + d];
    }
  } else if (ep_last_cta(&ctx, &a.epochs[4], &last)) {
    for (int i = threadIdx.x; i < N * (L + 1); i += blockDim.x) {
      const int d = i / (L + 1), l = i % (L + 1);
      a.send_counts[i] = __ldcg(&a.route_cnt[l < L ? d * L + l : E + d]);
    }
    ws_role_sync(&ctx);
    for (int i = threadIdx.x; i < E + N; i += blockDim.x) a.route_cnt[i] = 0;
    if (threadIdx.x == 0) a.epochs[4] = 0;
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- send -------------------------------------------------------------------------- */
WS_KERNEL(ep_send) ep_send_kernel(const __grid_constant__ ep_args a, const uint8_t *x, const float *x_scale,
                                  const float *topk_weights, ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_send, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  const int N = a.nranks, T = *a.num_tokens;
  const uint64_t n = a.epochs[0];
  /* every destination has read our previous dispatch out of its inbox */
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  if (threadIdx.x < (unsigned)N) {
    const int d = threadIdx.x;
    const ws_site site = ep_site("dispatch ack", WS_EDGE_PEER_CREDIT, d, a.rank, blockIdx.x, n - 1);
    ws_wait_flag_geq(&a.ack[d], n - 1, &ctx, &site);
  }
  ws_role_sync(&ctx);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  if (blockIdx.x == 0) {
    /* the counts by every thread of the CTA, then a flag per destination: one thread per
     * destination copying its L + 1 counts was a chain of L + 1 load-store round trips (a
     * store may alias the next load), about 10 us of the 15 us this kernel took at 1 token */
    const int per = a.L + 1;
    for (int i = threadIdx.x; i < N * per; i += blockDim.x) {
      const int d = i / per, l = i % per;
      EP_PEER(int, a, counts, d)[(size_t)a.rank * per + l] = a.send_counts[i];
    }
    ws_role_sync(&ctx); /* every count stored before the flags' system fence */
    if (threadIdx.x < (unsigned)N) {
      ws_fence_acq_rel_sys();
      ws_st_relaxed_sys_u64(EP_PEER(uint64_t, a, count_flag, threadIdx.x) + a.rank, n);
    }
  }
  const int lane = ctx.lane, warps = (int)(blockDim.x / 32), gw = blockIdx.x * warps + ctx.warp, nw = gridDim.x * warps;
  /* work item: one chunk of one token's row (4 KB copied, or 32 x EP_QUANT_UNROLL x 8
   * values quantised), so that a few tokens still spread over every warp */
  const int quant = a.ll && a.fp8, nchunk = ep_send_chunks(&a, quant);
  for (int item = gw; item < T * nchunk; item += nw)
    ep_send_unit(&a, x, x_scale, topk_weights, item / nchunk, item % nchunk, lane, quant);
  ws_role_sync(&ctx); /* all of this CTA's rows are written */
  if (threadIdx.x < (unsigned)N) {
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64(EP_PEER(uint64_t, a, data_flag, threadIdx.x) + (size_t)a.rank * a.sms + blockIdx.x, n);
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- expand ------------------------------------------------------------------------ */
/* Rows expert l receives from all sources, and the rows its group takes: padded to
 * row_align (normal), or a block of nranks x max_tokens (low latency: ws_gemm's masked
 * layout). */
static __device__ __forceinline__ int expand_size(const ep_args *a, const int *cnt, int l) {
  int size = 0;
  for (int s = 0; s < a->nranks; s++) size += cnt[s * a->L + l];
  return size;
}
static __device__ __forceinline__ int expand_padded(const ep_args *a, const int *cnt, int l) {
  if (a->ll) return a->nranks * a->max_tokens;
  const int size = expand_size(a, cnt, l);
  return (size + a->row_align - 1) / a->row_align * a->row_align;
}

/* The layout row of an inbox entry from source s: its expert's group start, then the
 * rows of lower sources for that expert, then its position among source s's rows. */
static __device__ __forceinline__ int expand_row(const ep_args *a, const int *cnt, const int *off, int s,
                                                 const ep_meta *e) {
  const int local = __ldcg(&e->local);
  int base = off[local] + __ldcg(&e->pos);
  for (int q = 0; q < s; q++) base += cnt[q * a->L + local];
  return base;
}

WS_KERNEL(ep_expand) ep_expand_kernel(const __grid_constant__ ep_args a, int index, ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_expand, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  __shared__ int cnt[WS_EP_MAX_EXPERTS + WS_COMM_MAX_RANKS]; /* [src][local], then tokens per src */
  __shared__ int off[WS_EP_MAX_EXPERTS + 1];                 /* padded group starts, per local expert */
  __shared__ int last;
  const int N = a.nranks, L = a.L, K = a.topk;
  const uint64_t n = a.epochs[0];
  /* every source's counts (their flag, then the counts, read past L1) */
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  if (threadIdx.x < (unsigned)N) {
    const int s = threadIdx.x;
    const ws_site site = ep_site("dispatch counts", WS_EDGE_PEER_DATA, s, a.rank, blockIdx.x, n);
    ws_wait_flag_geq(&a.count_flag[s], n, &ctx, &site);
  }
  ws_role_sync(&ctx);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  for (int i = threadIdx.x; i < N * (L + 1); i += blockDim.x) {
    const int s = i / (L + 1), l = i % (L + 1);
    const int v = *(const volatile int *)&a.counts[i];
    if (l < L) cnt[s * L + l] = v;
    else cnt[N * L + s] = v;
  }
  ws_role_sync(&ctx);
  /* the padded group starts, by every thread: thread j sums the padded sizes of its run
   * of experts, a block-wide scan (shuffles in each warp, then over the warps' sums)
   * gives each run's start. One warp walking 8 experts per lane was about 2 us of
   * dependent integer work at 1 token, with the other 15 warps waiting on it. */
  {
    __shared__ int warp_start[32];
    const int nt = (int)blockDim.x, per = (L + nt - 1) / nt;
    const int l0 = min(L, (int)threadIdx.x * per), l1 = min(L, l0 + per);
    int sum = 0;
    for (int l = l0; l < l1; l++) sum += expand_padded(&a, cnt, l);
    int incl = sum;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, incl, o);
      if (ctx.lane >= o) incl += v;
    }
    if (ctx.lane == 31) warp_start[ctx.warp] = incl;
    ws_role_sync(&ctx);
    if (ctx.warp == 0) {
      const int w = ctx.lane < nt / 32 ? warp_start[ctx.lane] : 0;
      int wincl = w;
#pragma unroll
      for (int o = 1; o < 32; o *= 2) {
        const int v = __shfl_up_sync(0xffffffffu, wincl, o);
        if (ctx.lane >= o) wincl += v;
      }
      if (ctx.lane < nt / 32) warp_start[ctx.lane] = wincl - w;
    }
    ws_role_sync(&ctx);
    int acc = warp_start[ctx.warp] + incl - sum;
    for (int l = l0; l < l1; l++) {
      off[l] = acc;
      if (blockIdx.x == 0) a.expert_counts[l] = expand_size(&a, cnt, l);
      acc += expand_padded(&a, cnt, l);
    }
    if ((int)threadIdx.x == nt - 1) off[L] = acc; /* the last thread's run ends at the total */
  }
  ws_role_sync(&ctx);
  if (blockIdx.x == 0) {
    for (int l = threadIdx.x; l <= L; l += blockDim.x) a.offsets[l] = off[l];
    for (int s = threadIdx.x; s < N; s += blockDim.x) a.recv_ntok[s] = cnt[N * L + s];
  }
  /* every source CTA's rows are in */
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  ep_wait_all_slots(&a, a.data_flag, n, "dispatch data", &ctx, (int)threadIdx.x, (int)blockDim.x);
  ws_role_sync(&ctx);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  const size_t pay = ep_payload_bytes(a.hidden, a.fp8), meta_off = EP_ALIGN16(pay + ep_scale_bytes(a.hidden, a.fp8));
  const size_t nv = pay / 16;
  const int kb = a.hidden / 128, lane = ctx.lane;
  const int warps = (int)(blockDim.x / 32), gw = blockIdx.x * warps + ctx.warp, nw = gridDim.x * warps;
  /* first the bookkeeping, a thread per (inbox row, top-k slot j): entry j's layout row r
   * (source arrays; the index receive's inbox row) and combine's row and weight for slot j
   * (entries in slot order, -1 past them). Threads, not a warp per row: a row's dependent
   * loads (its header, then its entry) are in flight for many rows at once. A warp walking
   * its 21 rows one after another took 31 us at 4096 tokens (EP2, 24 CTAs, H100). */
  {
    int total = 0;
    for (int s = 0; s < N; s++) total += cnt[N * L + s];
    const long long units = (long long)total * K, nt = (long long)gridDim.x * blockDim.x;
    for (long long u = blockIdx.x * (long long)blockDim.x + threadIdx.x; u < units; u += nt) {
      const int j = (int)(u % K);
      int i = (int)(u / K), s = 0;
      while (s < N - 1 && i >= cnt[N * L + s]) i -= cnt[N * L + s++];
      const ep_meta *m = (const ep_meta *)(a.inbox + ((size_t)s * a.max_tokens + i) * a.inbox_row + meta_off);
      const int2 head = __ldcg((const int2 *)m); /* {token, entries} */
      int r = -1;
      float w = 0.0f;
      if (j < head.y) {
        const int4 e = __ldcg((const int4 *)(m + 1 + j)); /* {local, pos, slot, weight} */
        r = off[e.x] + e.y;
        for (int q = 0; q < s; q++) r += cnt[q * L + e.x];
        w = __int_as_float(e.w);
        a.src_rank[r] = s; a.src_token[r] = head.x; a.src_slot[r] = e.z; a.weight[r] = w;
        if (index) a.row_index[r] = s * a.max_tokens + i;
      }
      a.comb_row[((size_t)s * a.max_tokens + i) * K + j] = r;
      a.comb_w[((size_t)s * a.max_tokens + i) * K + j] = w;
    }
  }
  /* copy receive, FP8: a warp per inbox row puts its scales K-block-major into each of
   * its rows (lane j: entry j's row) */
  for (int s = 0; s < N && !index && a.fp8; s++) {
    const int ntok = cnt[N * L + s];
    for (int i = gw; i < ntok; i += nw) {
      const uint8_t *row = a.inbox + ((size_t)s * a.max_tokens + i) * a.inbox_row;
      const ep_meta *m = (const ep_meta *)(row + meta_off);
      const int entries = __ldcg(&m[0].pos);
      const int r = lane < entries ? expand_row(&a, cnt, off, s, m + 1 + lane) : -1;
      for (int c0 = 0; c0 < kb; c0 += 32) {
        const float sv = c0 + lane < kb ? __ldcg((const float *)(row + pay) + c0 + lane) : 0.0f;
        for (int j = 0; j < entries; j++) {
          const int rj = __shfl_sync(0xffffffffu, r, j);
          if (c0 + lane < kb) a.x_scale[(size_t)(c0 + lane) * a.scale_ld + rj] = sv;
        }
      }
    }
  }
  /* then the payload, a warp per (inbox row, chunk of 32 x EP_COPY_UNROLL vectors: 4 KB)
   * so that a few tokens still spread over every warp: loaded once, stored into the row
   * of every entry */
  const int chunk = 32 * EP_COPY_UNROLL, nchunk = (int)((nv + chunk - 1) / chunk);
  for (int s = 0; s < N && !index; s++) { /* the index receive reads the rows in the inbox */
    const int ntok = cnt[N * L + s];
    for (int item = gw; item < ntok * nchunk; item += nw) {
      const int i = item / nchunk, c = item % nchunk;
      const uint8_t *row = a.inbox + ((size_t)s * a.max_tokens + i) * a.inbox_row;
      const ep_meta *m = (const ep_meta *)(row + meta_off);
      const int entries = __ldcg(&m[0].pos);
      const int r = lane < entries ? expand_row(&a, cnt, off, s, m + 1 + lane) : 0;
      const uint4 *src = (const uint4 *)row + (size_t)c * chunk + lane;
      const int valid = (int)(nv - (size_t)c * chunk) - lane; /* vectors of the chunk from this lane's on */
      uint4 v[EP_COPY_UNROLL];
#pragma unroll
      for (int u = 0; u < EP_COPY_UNROLL; u++)
        if (u * 32 < valid) v[u] = ws_ld_global_cg_v4(src + u * 32);
      for (int j = 0; j < entries; j++) {
        uint4 *d = (uint4 *)(a.x + (size_t)__shfl_sync(0xffffffffu, r, j) * pay) + (size_t)c * chunk + lane;
#pragma unroll
        for (int u = 0; u < EP_COPY_UNROLL; u++)
          if (u * 32 < valid) ws_st_global_v4(d + u * 32, v[u]);
      }

    }
  }
  /* padding rows: no source. Their payload and scales are left as they are (zero from
   * create, or rows of an earlier call: finite values); the GEMM's outputs for them are
   * never read, combine skips them. Zeroing them cost more than the rows themselves
   * when experts are many and tokens few (256 experts x 127 rows of 7 KB at EP1). */
  for (int l = gw; l < L; l += nw) /* a warp per expert */
    for (int r = off[l] + expand_size(&a, cnt, l) + lane; r < off[l + 1]; r += 32) {
      a.src_rank[r] = -1; a.src_token[r] = -1; a.src_slot[r] = -1; a.weight[r] = 0.0f;
      if (index) a.row_index[r] = -1;
    }
  /* the last CTA out tells every source its inbox is free again */
  if (ep_last_cta(&ctx, &a.epochs[2], &last)) {
    ep_ack_peers(a.ack, a.peer_delta, a.rank, N, n, (int)threadIdx.x);
    if (threadIdx.x == 0) a.epochs[2] = 0;
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- the call ---------------------------------------------------------------------- */
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
  {
    void *args[] = {(void *)a, &topk_idx, &num_tokens, &diag};
    if ((s = ep_launch(ep, EP_PLAN_LAYOUT, "ep_route", ep_route_roles, ep_route_NROLES, (const void *)ep_route_kernel,
                       dim3{(unsigned)(num_tokens > 0 ? (num_tokens + WS_EP_ROUTE_THREADS - 1) / WS_EP_ROUTE_THREADS : 1), 1, 1},
                       stream, args)) != WS_OK)
      return s;
  }
  {
    const uint8_t *xb = (const uint8_t *)x;
    void *args[] = {(void *)a, &xb, &x_scale, &topk_weights, &diag};
    if ((s = ep_launch(ep, EP_PLAN_SEND, "ep_send", ep_send_roles, ep_send_NROLES, (const void *)ep_send_kernel,
                       dim3{(unsigned)ep->sms, 1, 1}, stream, args)) != WS_OK)
      return s;
  }
  {
    void *args[] = {(void *)a, &index, &diag};
    if ((s = ep_launch(ep, EP_PLAN_EXPAND, "ep_expand", ep_expand_roles, ep_expand_NROLES,
                       (const void *)ep_expand_kernel, dim3{(unsigned)ep->sms, 1, 1}, stream, args)) != WS_OK)
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
