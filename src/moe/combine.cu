/* combine.cu - MoE combine: weighted sums of the expert outputs back at each token's rank,
 * the protocol's reduce and gather steps (ep_protocol.cuh) driven a CTA at a time.
 *
 * Two kernels in stream order, graph-capturable; the combine epoch m = epochs[1] + 1:
 *   reduce  (sms CTAs, REDUCER role, on the experts' side)  wait until each source has
 *           read our previous combine (comb_ack >= m - 1); each received token's sum of
 *           weight x row over its local experts, fp32, pushed as BF16 into the source's
 *           comb_inbox (16-byte stores over NVLink); each CTA then flags every source
 *           (comb_flag[us][cta] = m).
 *   gather  (sms CTAs, GATHERER role, on the tokens' side)  wait for every rank's CTA
 *           flags, add each token's partials from the ranks it went to in fp32, write
 *           BF16 (zero for a token without experts); the last CTA acks every rank and
 *           advances the epoch.
 * From WS_EP_FUSED_MIN_RANKS ranks one kernel runs both at once instead (ep_combine_kernel,
 * below; its flags: ep_protocol.cuh, "the fused combine's flags"). */
#include "ep_protocol.cuh"
#include "ep_stream.cuh"

#include "../core/knobs.h"

#include <cuda_bf16.h>

#define REDUCE_ROLES(ROLE) ROLE(EP_REDUCER, WS_EP_WARPS, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(ep_reduce, REDUCE_ROLES);
#define GATHER_ROLES(ROLE) ROLE(EP_GATHERER, WS_EP_WARPS, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(ep_gather, GATHER_ROLES);

/* With more tokens than warps both kernels stream the rows through each warp's ring of
 * shared memory (ep_stream.cuh: at 4096 tokens per rank, 24 SMs, EP4 combine 1352 ->
 * 1209 us, EP2 the same, H200); with fewer, a warp takes 2 KB chunks of a token
 * (ep_reduce_unit, ep_gather_chunk: 15-18% faster at 128 tokens). */
extern __shared__ __align__(16) uint4 ep_stream_ring[];
#define EP_STREAM_SMEM ((size_t)WS_EP_WARPS * EP_STREAM_WARP_BYTES)

/* The host launches with the ring only when the latest dispatch had as many tokens as the
 * warps (a launch asking for 196 KB of shared memory cost 1-3 us at 128 tokens); the
 * kernel streams only when it has the ring and the tokens outnumber its warps. */
static __device__ __forceinline__ int stream_ok(int tokens, int warps) {
  uint32_t dyn;
  asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(dyn));
  return dyn >= EP_STREAM_SMEM && tokens >= warps;
}
static size_t stream_smem(const ws_ep *ep) {
  return ep->host_tokens >= ep->sms * WS_EP_WARPS ? EP_STREAM_SMEM : 0;
}


/* The reduce with few tokens per warp: per (received token, 2 KB chunk of its row) one
 * warp, through the registers (ep_reduce_unit). The next item's rows and weights are
 * loaded before this one's sum: loaded in turn, each item waited for two memory round
 * trips one after the other. */
static __device__ __forceinline__ void reduce_chunks(const ep_args *a, const uint16_t *y, const int *ntok, int gw,
                                                     int nw, int lane) {
  const int K = a->topk, nchunk = (a->hidden / 8 + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK;
  for (int k = 0; k < a->nranks; k++) {
    const int s = ep_reduce_source(a, k), units = ntok[s] * nchunk;
    const size_t base = (size_t)s * a->max_tokens * K;
    int row = -1;
    float w = 0.0f;
    if (gw < units && lane < K) {
      row = __ldcg(a->comb_row + base + (size_t)(gw / nchunk) * K + lane);
      w = __ldcg(a->comb_w + base + (size_t)(gw / nchunk) * K + lane);
    }
    for (int item = gw; item < units; item += nw) {
      const int i = item / nchunk, v0 = (item % nchunk) * MOE_SUM_CHUNK + lane, next = item + nw;
      const int cur_row = row;
      const float cur_w = w;
      if (next < units && lane < K) {
        row = __ldcg(a->comb_row + base + (size_t)(next / nchunk) * K + lane);
        w = __ldcg(a->comb_w + base + (size_t)(next / nchunk) * K + lane);
      }
      ep_reduce_unit<2>(a, y, s, i, v0, cur_row, cur_w, 0); /* 2 rows in flight: 3 spill with the prefetch */
    }
  }
}

WS_KERNEL(ep_reduce) ep_reduce_kernel(const __grid_constant__ ep_args a, const uint16_t *y, ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_reduce, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  __shared__ int ntok[WS_COMM_MAX_RANKS];
  const int N = a.nranks;
  const uint64_t m = a.epochs[1] + 1;
  if (threadIdx.x < (unsigned)N) ntok[threadIdx.x] = __ldcg(a.recv_ntok + threadIdx.x);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  ep_wait_acked(&a, a.comb_ack, m - 1, "combine ack", &ctx, (int)threadIdx.x);
  ws_role_sync(&ctx);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  int total = 0;
  for (int s = 0; s < N; s++) total += ntok[s];
  const int warps = (int)(blockDim.x / 32), gw = blockIdx.x * warps + ctx.warp, nw = gridDim.x * warps;
  if (stream_ok(total, nw)) { /* many tokens per warp: streamed (ep_stream.cuh) */
    const ep_stream_spec sp = ep_stream_tokens(&a, EP_STREAM_REDUCE, ntok, total, y, NULL);
    ep_stream_sums(&a, &sp, gw, nw, ep_stream_ring + (size_t)ctx.warp * (EP_STREAM_WARP_BYTES / 16), ctx.lane);
  } else {
    reduce_chunks(&a, y, ntok, gw, nw, ctx.lane);
  }
  const ep_group g = {(int)threadIdx.x, (int)blockDim.x, ctx.bar};
  ep_sync(&g);
  ep_raise(&a, a.comb_flag, m, (int)blockIdx.x, 1, &g);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* The gather with few tokens per warp: whole rows when the tokens outnumber the warps,
 * else chunks of a token over several warps, so that a few tokens still reach every warp.
 * WAITS (the fused kernel): each token is entered once its partials are pushed (nwr: every
 * rank's reducer warps); else the caller has waited for every rank's whole reduce. */
template <int WAITS>
static __device__ __forceinline__ void gather_chunks(const ep_args *a, uint16_t *out, int T, int nwr, uint64_t m,
                                                     const ws_ctx *c, int gw, int nw, int lane) {
  const int nchunk = (a->hidden / 8 + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK;
  const int split = T >= nw ? 1 : nchunk, per = (nchunk + split - 1) / split;
  for (int item = gw; item < T * split; item += nw) {
    const int t = item / split;
    if (WAITS) {
      if (lane < a->nranks) {
        const int slot = __ldcg(&a->tok_slot[(size_t)t * a->nranks + lane]);
        if (slot >= 0) ep_comb_wait(a, lane, slot, nwr, m, c);
      }
      __syncwarp();
    }
    for (int ch = (item % split) * per, c1 = min(nchunk, ch + per); ch < c1; ch++)
      ep_gather_chunk<2>(a, out, t, ch * MOE_SUM_CHUNK + lane);
  }
}

WS_KERNEL(ep_gather) ep_gather_kernel(const __grid_constant__ ep_args a, uint16_t *out, ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_gather, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0); /* the kernel, one item of its role (warpspec/trace.h) */
  __shared__ int last;
  const int N = a.nranks, T = *a.num_tokens;
  const uint64_t m = a.epochs[1] + 1;
  ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
  ep_wait_all_slots(&a, a.comb_flag, m, "combine data", &ctx, (int)threadIdx.x, (int)blockDim.x);
  ws_role_sync(&ctx);
  ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
  const int warps = (int)(blockDim.x / 32), gw = blockIdx.x * warps + ctx.warp, nw = gridDim.x * warps;
  if (stream_ok(T, nw) && N <= 32) { /* many tokens per warp, a lane per rank: streamed */
    const ep_stream_spec sp = ep_stream_tokens(&a, EP_STREAM_GATHER, NULL, T, NULL, out);
    ep_stream_sums(&a, &sp, gw, nw, ep_stream_ring + (size_t)ctx.warp * (EP_STREAM_WARP_BYTES / 16), ctx.lane);
  } else {
    gather_chunks<0>(&a, out, T, 0, m, &ctx, gw, nw, ctx.lane);
  }
  if (ep_last_cta(&ctx, &a.epochs[3], &last)) {
    ep_ack_peers(a.comb_ack, a.peer_delta, a.rank, N, m, (int)threadIdx.x);
    ws_role_sync(&ctx); /* every thread has read epochs[1] (m) long before; now advance it */
    if (threadIdx.x == 0) {
      a.epochs[3] = 0;
      a.epochs[1] = m;
    }
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

/* ---- the fused combine ------------------------------------------------------------- */
/* One kernel, the reduce and the gather at once (ws_ep_combine's form from
 * WS_EP_FUSED_MIN_RANKS ranks, WARPSPEC_EP_COMBINE): the two kernels run one after the
 * other because the gather waits for every rank's whole reduce; at EP4, 4096 tokens per
 * rank, 24 SMs, that was reduce 582 + gather 254 us (role timelines, session 33), while the
 * reduce alone is bound by its NVLink pushes (the mix: pushes alone 488 us, with the reads
 * 590 us). Here R of each CTA's warps reduce (REDUCE_ROUNDS: round by round, each round's
 * progress flagged to every rank) and the other WS_EP_WARPS - R gather in the route's order
 * (GATHER_ORDERED), each token as soon as its partials have landed; the reducers, done,
 * join the gather, whose places the warps claim one at a time (a static share left the
 * gatherers 170 us behind the reducers). EP4 24 SMs: combine 899 -> 670 us (R 12; R 14:
 * the same, R 10: 759, R 8: 856); 48 SMs 680 -> 657; EP2 503 -> 562 (its reduce is bound by
 * the reads the gather then shares), so EP2 keeps the two kernels.
 *
 * With few rows (no ring, or fewer received rows than reducer warps) the rounds would not
 * pay: every warp reduces (the chunk form), the last CTA says "done" to every rank, then
 * every warp gathers, each token once its ranks are done. Both forms keep the same flags,
 * so ranks may take different ones. */
/* Names within the trace's 11 characters. */
#define CF_ROLES(ROLE)                                                                   \
  ROLE(CF_REDUCER, WS_EP_FUSED_REDUCERS, WS_REGS_ENTRY, 1)                               \
  ROLE(CF_GATHERER, WS_EP_WARPS - WS_EP_FUSED_REDUCERS, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(ep_combine, CF_ROLES);
static_assert(WS_EP_FUSED_REDUCERS <= EP_PROG_WARPS, "a progress flag per reducer warp");

WS_KERNEL(ep_combine) ep_combine_kernel(const __grid_constant__ ep_args a, const uint16_t *y, uint16_t *out,
                                        ws_diag diag) {
  ws_ctx ctx = WS_SELF(ep_combine, diag);
  ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0);
  __shared__ int ntok[WS_COMM_MAX_RANKS];
  __shared__ unsigned long long epoch;
  __shared__ int last_r, last_all;
  __shared__ int seq[WS_EP_WARPS][EP_STREAM_SEQ];
  const int N = a.nranks, T = *a.num_tokens, W = WS_EP_WARPS, R = WS_EP_FUSED_REDUCERS;
  const int warp = (int)(threadIdx.x / 32), lane = ctx.lane;
  if (threadIdx.x < (unsigned)N) ntok[threadIdx.x] = __ldcg(a.recv_ntok + threadIdx.x);
  if (threadIdx.x == 0) epoch = a.epochs[1] + 1;
  __syncthreads(); /* barrier 0, the whole CTA (roles never use it) */
  const uint64_t m = epoch; /* read by every thread before any gather can finish and advance it */
  int total = 0, most = 0;
  for (int s = 0; s < N; s++) {
    total += ntok[s];
    most = max(most, ntok[s]);
  }
  const int nwr = (int)gridDim.x * R; /* every rank's reducer warps: the rounds' flags */
  /* apart: the reducers and the gatherers at once, by role; else every warp reduces, then
   * gathers. The reducers done, they join the gather (its places are claimed one by one). */
  const int apart = stream_ok(total, nwr);
  const ep_group cta = {(int)threadIdx.x, W * 32, 0u};
  const ep_group rg = apart ? ep_group{(int)threadIdx.x, R * 32, ctx.bar} : cta;
  uint4 *ring = ep_stream_ring + (size_t)warp * (EP_STREAM_WARP_BYTES / 16);
  if (!apart || warp < R) {
    ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_PEER);
    ep_wait_acked(&a, a.comb_ack, m - 1, "combine ack", &ctx, rg.tid);
    ep_sync(&rg);
    ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_PEER);
    if (apart) {
      ep_stream_spec sp = ep_stream_tokens(&a, EP_STREAM_REDUCE_ROUNDS, ntok, 0, y, NULL);
      sp.nw = nwr; sp.m = m; sp.ctx = &ctx;
      sp.total = N * ((most + nwr - 1) / nwr) * nwr;
      ep_stream_sums(&a, &sp, (int)blockIdx.x * R + warp, nwr, ring, lane);
    } else {
      reduce_chunks(&a, y, ntok, (int)blockIdx.x * W + warp, (int)gridDim.x * W, lane);
    }
    /* every row pushed: "done" to every rank, and the per-CTA data flags the whole-layer
     * kernel waits for (a rank whose layer took the fused path runs it in the same call) */
    if (ep_last_group(&rg, &a.epochs[5], &last_r)) {
      ep_ack_peers(a.comb_done, a.peer_delta, a.rank, N, m, rg.tid);
      ep_raise(&a, a.comb_flag, m, 0, a.sms, &rg);
    }
  }
  /* the gather: every warp (the gatherers from the start) */
  if (stream_ok(T, (int)gridDim.x * (apart ? W - R : W)) && N <= 32) {
    ep_stream_spec sp = ep_stream_tokens(&a, EP_STREAM_GATHER_ORDERED, NULL, T, NULL, out);
    sp.nw = nwr; sp.m = m; sp.ctx = &ctx;
    sp.total = (T + 31) / 32 * 32; /* the route's batches of 32 */
    sp.claim = &a.epochs[6];
    sp.seq = seq[warp];
    ep_stream_sums(&a, &sp, 0, 1, ring, lane);
  } else if (!apart || warp >= R) { /* few tokens: a static share, chunks of a token per warp */
    const int gw = apart ? (int)blockIdx.x * (W - R) + warp - R : (int)blockIdx.x * W + warp;
    gather_chunks<1>(&a, out, T, nwr, m, &ctx, gw, (int)gridDim.x * (apart ? W - R : W), lane);
  }
  if (ep_last_group(&cta, &a.epochs[3], &last_all)) {
    ep_ack_peers(a.comb_ack, a.peer_delta, a.rank, N, m, cta.tid);
    if (cta.tid == 0) {
      a.epochs[6] = 0;
      a.epochs[1] = m;
    }
  }
  ws_trace_mark(&ctx, WS_TRACE_ITEM_END, 0);
}

extern "C" ws_status ws_ep_combine(ws_ep *ep, const void *y, void *out, cudaStream_t stream) {
  WS_REQUIRE(ep != NULL, "ws_ep_combine: ep is NULL");
  WS_REQUIRE(ep->host_tokens >= 0, "ws_ep_combine: no dispatch on this handle yet (combine uses the latest one's layout)");
  /* a rank without tokens (an idle data-parallel rank) still serves its experts: y is
   * read; out has no rows to receive and may be NULL (an empty tensor's pointer) */
  WS_REQUIRE(y != NULL && (out != NULL || ep->host_tokens == 0),
             "ws_ep_combine: y or out is NULL (out may be NULL only after a dispatch of 0 tokens; the latest had %d)",
             ep->host_tokens);
  WS_REQUIRE(((uintptr_t)y & 15u) == 0 && ((uintptr_t)out & 15u) == 0, "ws_ep_combine: y %p and out %p must be 16-byte "
             "aligned", y, out);
  ws_diag diag;
  ws_status s;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  const ep_args *a = &ep->args;
  /* the form: the same on every rank (the knob, else the ranks' count) */
  const int form = ws_knobs_get()->ep_combine; /* WARPSPEC_EP_COMBINE; -1: by the ranks */
  if (form < 0 ? ep->nranks >= WS_EP_FUSED_MIN_RANKS : form) {
    const uint16_t *yy = (const uint16_t *)y;
    uint16_t *o = (uint16_t *)out;
    void *args[] = {(void *)a, &yy, &o, &diag};
    return ep_launch(ep, EP_PLAN_COMBINE, "ep_combine", ep_combine_roles, ep_combine_NROLES,
                     (const void *)ep_combine_kernel, dim3{(unsigned)ep->sms, 1, 1}, stream_smem(ep), stream, args);
  }
  {
    const uint16_t *yy = (const uint16_t *)y;
    void *args[] = {(void *)a, &yy, &diag};
    if ((s = ep_launch(ep, EP_PLAN_REDUCE, "ep_reduce", ep_reduce_roles, ep_reduce_NROLES, (const void *)ep_reduce_kernel,
                       dim3{(unsigned)ep->sms, 1, 1}, stream_smem(ep), stream, args)) != WS_OK)
      return s;
  }
  uint16_t *o = (uint16_t *)out;
  void *args[] = {(void *)a, &o, &diag};
  return ep_launch(ep, EP_PLAN_GATHER, "ep_gather", ep_gather_roles, ep_gather_NROLES, (const void *)ep_gather_kernel,
                   dim3{(unsigned)ep->sms, 1, 1}, stream_smem(ep), stream, args);
}
