/* ep_protocol.cuh - the dispatch/combine wire protocol, written once: each step a device
 * function taking the threads that run it as an ep_group, driven by the standalone
 * kernels (dispatch.cu, combine.cu: a group is a CTA) and by the whole-layer kernel's
 * work items (layer_items_ep.cuh: a group is the 256 math threads). The drivers decide
 * which threads run which units and keep their epochs; the bytes on the wire, the
 * receive layout and the flags are these functions' (ep_internal.h: the buffers).
 *
 *   route      ep_route_token      each token's entries and its inbox slot per rank
 *   counts     ep_publish_counts   our counts into every rank's counts[rank], then the flag
 *              ep_receive_counts   every rank's counts to us, after its flag
 *   layout     ep_layout           the padded group starts of the local experts
 *   send       ep_send_unit        a chunk of a row to every rank it goes to
 *   flags      ep_raise            a data flag per CTA slot on every rank
 *   receive    ep_book_entry       one entry's layout row: sources, combine's row, index
 *              ep_book_records     the same from the senders' entry records (WARPSPEC_EP_RECORDS)
 *              ep_copy_unit        copy receive: a chunk of a row into its experts' rows
 *              ep_copy_scales      copy receive, FP8: a row's scales, K-block-major
 *   reduce     ep_reduce_unit      a chunk of a token's local sum, pushed to its rank
 *   gather     ep_gather_chunk     a chunk of a token's sum of partials
 *   acks       ep_ack_peers        "done" to every rank; ep_wait_acked: every rank's "done";
 *                                  ep_wait_all_slots: every rank's CTA slots' flags;
 *                                  ep_last_cta: the last CTA of a grid */
#ifndef WARPSPEC_EP_PROTOCOL_CUH
#define WARPSPEC_EP_PROTOCOL_CUH

#include "ep_internal.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/device/fp8.cuh"
#include "moe_sum.cuh"

/* Where a transfer wait happened: what, which peer, this rank, the CTA, the epoch. */
static __device__ __forceinline__ ws_site ep_site(const char *what, int edge, int peer, int rank, int block,
                                                  uint64_t step) {
  ws_site s = ws_site_pipe(what, edge, block, 0);
  s.peer = peer; s.rank = rank; s.step = step;
  return s;
}

/* Thread tid of nthreads: wait until flags[p x sms + b] >= v for every rank p of s0 ..
 * s1 - 1 and every one of its `sms` CTA slots b (the transfers' data flags); the site
 * names peer and slot. ep_wait_all_slots: every rank. */
static __device__ __forceinline__ void ep_wait_slots(const ep_args *a, const uint64_t *flags, uint64_t v, int s0, int s1,
                                                     const char *what, const ws_ctx *c, int tid, int nthreads) {
  for (int f = s0 * a->sms + tid; f < s1 * a->sms; f += nthreads) {
    const ws_site site = ep_site(what, WS_EDGE_PEER_DATA, f / a->sms, a->rank, f % a->sms, v);
    ws_wait_flag_geq(flags + f, v, c, &site);
  }
}
static __device__ __forceinline__ void ep_wait_all_slots(const ep_args *a, const uint64_t *flags, uint64_t v,
                                                         const char *what, const ws_ctx *c, int tid, int nthreads) {
  ep_wait_slots(a, flags, v, 0, a->nranks, what, c, tid, nthreads);
}

/* Thread tid of a group (the ones below nranks wait, the others pass): until rank tid has
 * acknowledged step v (acks[tid] >= v: it has read what we sent it then), so that we may
 * write over it; `what` names the wait in a timeout. The caller syncs its group after. */
static __device__ __forceinline__ void ep_wait_acked(const ep_args *a, const uint64_t *acks, uint64_t v,
                                                     const char *what, const ws_ctx *c, int tid) {
  if (tid < a->nranks) {
    const ws_site site = ep_site(what, WS_EDGE_PEER_CREDIT, tid, a->rank, (int)blockIdx.x, v);
    ws_wait_flag_geq(&acks[tid], v, c, &site);
  }
}

/* 1 in the last CTA of the grid to get here (counted in *counter, which that CTA resets
 * for the next launch), 0 in the others; every CTA's writes before it are visible to the
 * last one. `last` is a __shared__ int of the caller. */
static __device__ __forceinline__ int ep_last_cta(const ws_ctx *ctx, uint64_t *counter, int *last) {
  ws_role_sync(ctx);
  if (threadIdx.x == 0) {
    __threadfence();
    *last = atomicAdd((unsigned long long *)counter, 1ull) == (unsigned long long)gridDim.x - 1;
  }
  ws_role_sync(ctx);
  return *last;
}

/* Tell every rank p (the caller's thread p) that `value` is done: its copy of
 * flags[rank] = value, after a system fence (flags: a symmetric object; delta:
 * ep_args.peer_delta). */
static __device__ __forceinline__ void ep_ack_peers(const uint64_t *flags, const int64_t *delta, int rank, int nranks,
                                                    uint64_t value, int thread) {
  if (thread < nranks) {
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64((uint64_t *)((char *)flags + delta[thread]) + rank, value);
  }
}

/* The threads running a step: thread tid of n, synchronised on named barrier bar (n a
 * multiple of 32; bar the caller's: a role's barrier, or the math warpgroups'). */
typedef struct {
  int tid, n;
  uint32_t bar;
} ep_group;

WS_DEV void ep_sync(const ep_group *g) { ws_named_sync(g->bar, (uint32_t)g->n); }

/* ---- route ------------------------------------------------------------------------- */
/* A whole warp, one token per lane (t; live when t < T): for each top-k slot the
 * destination rank, local expert and the token's position among this rank's tokens for
 * that expert, and per rank its inbox slot (once per rank, however many of its experts
 * live there). cnt: E expert counters then N rank counters (shared or global memory,
 * zero before the call), one atomic per group of lanes that hit the same counter
 * (__match_any_sync / __ballot_sync): a hot expert costs one atomic per warp. Expert ids
 * out of range are skipped like -1 and reported in bad_id. So is, in low-latency mode, an
 * entry past max_tokens for its expert: a block holds max_tokens rows per source, which
 * only a token naming one expert in several slots can exceed (ep_publish_counts clamps
 * those counts, so that no row lands past the block). */
WS_DEV void ep_route_token(const ep_args *a, const int *topk_idx, int T, int t, int *cnt, int lane) {
  const int E = a->experts, N = a->nranks, K = a->topk, L = a->L;
  const unsigned below = (1u << lane) - 1u; /* lanes before this one */
  const int live = t < T;
  uint64_t sent = 0; /* ranks this token already goes to */
  for (int k = 0; k < K; k++) {
    const int e = live ? __ldg(topk_idx + (size_t)t * K + k) : -1;
    const int ok = e >= 0 && e < E;
    if (live && !ok && e != -1) {
      if (atomicAdd(&a->bad_id[0], 1) == 0) { a->bad_id[1] = t; a->bad_id[2] = k; a->bad_id[3] = e; }
    }
    const unsigned same = __match_any_sync(0xffffffffu, ok ? e : -1);
    ep_entry en = {-1, -1, -1, 0};
    if (ok) { /* every lane of `same` is here: they share e */
      const int leader = __ffs(same) - 1;
      int base = 0;
      if (lane == leader) base = atomicAdd(&cnt[e], __popc(same));
      base = __shfl_sync(same, base, leader);
      const int pos = base + __popc(same & below);
      if (a->ll && pos >= a->max_tokens) { /* past the expert's block: skipped, reported */
        if (atomicAdd(&a->bad_id[0], 1) == 0) { a->bad_id[1] = t; a->bad_id[2] = k; a->bad_id[3] = e; }
      } else {
        en.dst = e / L;
        en.local = e % L;
        en.pos = pos;
        sent |= 1ull << en.dst;
      }
    }
    if (live) a->entries[(size_t)t * K + k] = en;
  }
  for (int d = 0; d < N; d++) {
    const int goes = live && ((sent >> d) & 1);
    const unsigned m = __ballot_sync(0xffffffffu, goes);
    int base = 0;
    if (m && lane == __ffs(m) - 1) base = atomicAdd(&cnt[E + d], __popc(m));
    base = __shfl_sync(0xffffffffu, base, m ? __ffs(m) - 1 : 0);
    if (live) a->tok_slot[(size_t)t * N + d] = goes ? base + __popc(m & below) : -1;
  }
}

/* ---- counts ------------------------------------------------------------------------ */
/* Every thread of g: our counts (cnt: E experts then N ranks, as ep_route_token counts)
 * into each rank's counts[rank][L + 1] (per local expert of that rank, then our tokens
 * to it), then, after a system fence, its count flag = n. By every thread, not one per
 * rank: one thread copying its L + 1 counts was a chain of L + 1 dependent round trips
 * (about 10 us at 1 token). */
WS_DEV void ep_publish_counts(const ep_args *a, const int *cnt, uint64_t n, const ep_group *g) {
  const int N = a->nranks, L = a->L, E = a->experts, per = L + 1;
  for (int j = g->tid; j < N * per; j += g->n) {
    const int d = j / per, l = j % per;
    const int v = cnt[l < L ? d * L + l : E + d];
    /* low latency: an expert's entries past its block were skipped (ep_route_token) */
    EP_PEER(int, *a, counts, d)[(size_t)a->rank * per + l] = a->ll && l < L ? min(v, a->max_tokens) : v;
  }
  ep_sync(g); /* every count stored before the flags' system fence */
  ep_ack_peers(a->count_flag, a->peer_delta, a->rank, N, n, g->tid);
}

/* Every thread of g: wait for every rank's counts to us (its flag >= n; the wait names
 * `what` and the peer), then copy them into rc [N][L + 1] (per local expert, then the
 * tokens that rank sends us). */
WS_DEV void ep_receive_counts(const ep_args *a, int *rc, uint64_t n, const char *what, const ws_ctx *c,
                              const ep_group *g) {
  const int N = a->nranks;
  if (g->tid < N) {
    const ws_site site = ep_site(what, WS_EDGE_PEER_DATA, g->tid, a->rank, (int)blockIdx.x, n);
    ws_wait_flag_geq(&a->count_flag[g->tid], n, c, &site);
  }
  ep_sync(g);
  for (int j = g->tid; j < N * (a->L + 1); j += g->n) rc[j] = *(const volatile int *)&a->counts[j];
  ep_sync(g);
}

/* Tokens source s sends us, and the rows local expert l receives from all sources. */
WS_DEV int ep_tokens_from(const ep_args *a, const int *rc, int s) { return rc[s * (a->L + 1) + a->L]; }
WS_DEV int ep_rows_in(const ep_args *a, const int *rc, int l) {
  int rows = 0;
  for (int s = 0; s < a->nranks; s++) rows += rc[s * (a->L + 1) + l];
  return rows;
}
/* The rows expert l's group takes: padded to row_align (normal), or a block of nranks x
 * max_tokens (low latency: ws_gemm's masked layout). */
WS_DEV int ep_group_rows(const ep_args *a, const int *rc, int l) {
  if (a->ll) return a->nranks * a->max_tokens;
  return (ep_rows_in(a, rc, l) + a->row_align - 1) / a->row_align * a->row_align;
}

/* ---- layout ------------------------------------------------------------------------ */
/* Every thread of g (n <= 1024): the group starts off[0 .. L] (off[L]: the total) of the
 * local experts from the counts rc. Thread j sums the padded sizes of its run of experts,
 * a scan over g (shuffles in each warp, then over the warps' sums in warp_start: 32 ints
 * of shared memory) gives each run's start; one warp walking 8 experts per lane was about
 * 2 us of dependent work at 1 token. With `publish` the layout goes to a->offsets,
 * a->expert_counts and a->recv_ntok too. */
WS_DEV void ep_layout(const ep_args *a, const int *rc, int *off, int *warp_start, int publish, const ep_group *g) {
  const int L = a->L, nt = g->n, lane = g->tid % 32, warp = g->tid / 32, per = (L + nt - 1) / nt;
  const int l0 = min(L, g->tid * per), l1 = min(L, l0 + per);
  int sum = 0;
  for (int l = l0; l < l1; l++) sum += ep_group_rows(a, rc, l);
  int incl = sum;
#pragma unroll
  for (int o = 1; o < 32; o *= 2) {
    const int v = __shfl_up_sync(0xffffffffu, incl, o);
    if (lane >= o) incl += v;
  }
  if (lane == 31) warp_start[warp] = incl;
  ep_sync(g);
  if (warp == 0) {
    const int w = lane < nt / 32 ? warp_start[lane] : 0;
    int wincl = w;
#pragma unroll
    for (int o = 1; o < 32; o *= 2) {
      const int v = __shfl_up_sync(0xffffffffu, wincl, o);
      if (lane >= o) wincl += v;
    }
    if (lane < nt / 32) warp_start[lane] = wincl - w;
  }
  ep_sync(g);
  int acc = warp_start[warp] + incl - sum;
  for (int l = l0; l < l1; l++) {
    off[l] = acc;
    if (publish) { a->offsets[l] = acc; a->expert_counts[l] = ep_rows_in(a, rc, l); }
    acc += ep_group_rows(a, rc, l);
  }
  if (g->tid == nt - 1) { /* the last thread's run ends at the total */
    off[L] = acc;
    if (publish) a->offsets[L] = acc;
  }
  if (publish)
    for (int s = g->tid; s < a->nranks; s += nt) a->recv_ntok[s] = ep_tokens_from(a, rc, s);
  ep_sync(g);
}

/* ---- entry records (WARPSPEC_EP_RECORDS) -------------------------------------------- */
/* The one packing of an ep_record (ep_internal.h): one 16-byte store by the sender, one
 * 16-byte load (from L2: written by a peer) by the receiver; se = slot | index << 8 |
 * entries << 16 (slot < 256, index and entries <= top-k). */
WS_DEV void ep_record_store(ep_record *dst, int token, int row, int slot, int index, int entries, float weight) {
  ws_st_global_v4((uint4 *)dst, make_uint4((uint32_t)token, (uint32_t)row, (uint32_t)(slot | index << 8 | entries << 16),
                                           __float_as_uint(weight)));
}
WS_DEV void ep_record_load(const ep_record *src, int *token, int *row, int *slot, int *index, int *entries, float *weight) {
  const int4 v = __ldcg((const int4 *)src);
  *token = v.x;
  *row = v.y;
  *slot = v.z & 0xFF;
  *index = (v.z >> 8) & 0xFF;
  *entries = v.z >> 16;
  *weight = __int_as_float(v.w);
}

/* ---- send -------------------------------------------------------------------------- */
/* 16-byte vectors per lane in flight when a warp copies a row: a row is loaded once per
 * chunk of 32 x EP_COPY_UNROLL vectors and stored to every place it goes. */
#define EP_COPY_UNROLL 8

/* Low latency, FP8 payload: a warp quantises a BF16 row of `hidden` values as
 * ws_fp8_quantize_1x128 does (16 lanes x 8 values per 128-block: the half-warp's |max|,
 * scale = amax / 448, e4m3(x / scale)) and stores the bytes and the block scales into
 * every destination's inbox row (rows: dst_lo / dst_hi of the lanes in lo / hi). One
 * chunk: input vectors base .. base + 32 x EP_QUANT_UNROLL - 1. */
#define EP_QUANT_UNROLL 4
static __device__ __forceinline__ void send_quantized(const ep_args *a, const uint16_t *xrow, size_t pay, uint32_t lo,
                                                      uint32_t hi, uint8_t *dst_lo, uint8_t *dst_hi, int lane, int base) {
  const int nvx = a->hidden / 8; /* 16-byte input vectors; a multiple of 16 (hidden % 128 == 0) */
  {
    uint2 q[EP_QUANT_UNROLL];
    float sc[EP_QUANT_UNROLL];
#pragma unroll
    for (int u = 0; u < EP_QUANT_UNROLL; u++) {
      const int i = base + u * 32 + lane;
      q[u] = ws_quantize_bf16x8_1x128(i < nvx ? ws_ld_global_nc_v4((const uint4 *)xrow + i) : make_uint4(0u, 0u, 0u, 0u),
                                      &sc[u]);
    }
    for (int half = 0; half < 2; half++)
      for (uint32_t m = half ? hi : lo; m; m &= m - 1) {
        uint8_t *row = (uint8_t *)__shfl_sync(0xffffffffu, (unsigned long long)(half ? dst_hi : dst_lo), __ffs(m) - 1);
#pragma unroll
        for (int u = 0; u < EP_QUANT_UNROLL; u++) {
          const int i = base + u * 32 + lane;
          if (i < nvx) {
            *(uint2 *)(row + (size_t)i * 8) = q[u];
            if (lane % 16 == 0) ((float *)(row + pay))[i / 16] = sc[u];
          }
        }
      }
  }
}

/* Vectors (16 bytes of payload, or 8 values to quantise when `quant`: BF16 rows for an
 * FP8 payload) of one send unit, and units per row. */
static __device__ __forceinline__ int ep_send_chunk_vectors(int quant) {
  return 32 * (quant ? EP_QUANT_UNROLL : EP_COPY_UNROLL);
}
static __device__ __forceinline__ int ep_send_chunks(const ep_args *a, int quant) {
  const size_t n = quant ? (size_t)(a->hidden / 8) : ep_payload_bytes(a->hidden, a->fp8) / 16;
  return (int)((n + ep_send_chunk_vectors(quant) - 1) / ep_send_chunk_vectors(quant));
}

/* One send unit of a warp: chunk c of token t's row (32 x EP_COPY_UNROLL 16-byte vectors
 * copied, or with `quant` 32 x EP_QUANT_UNROLL x 8 BF16 values quantised), loaded once
 * and stored into the inbox row of every rank the token goes to (tok_slot); chunk 0 also
 * writes the FP8 scales and the meta block ({token, entries}, then its entries for that
 * rank in slot order). The route's arrays are read from L2: the whole-layer kernel writes
 * them in the same launch. Shared by ep_send and the layer kernel's send items. only >= 0:
 * to that rank alone (the phased send: one destination at a time), -1: to every rank. */
static __device__ __forceinline__ void ep_send_unit(const ep_args *a, const uint8_t *x, const float *x_scale,
                                                    const float *topk_weights, int t, int c, int lane, int quant,
                                                    int only) {
  const int N = a->nranks, K = a->topk, kb = a->hidden / 128;
  const size_t pay = ep_payload_bytes(a->hidden, a->fp8), sc = ep_scale_bytes(a->hidden, a->fp8);
  const size_t meta_off = EP_ALIGN16(pay + sc), nv = pay / 16;
  const int chunk = ep_send_chunk_vectors(quant);
  /* the token's destinations, one per lane (lane d and d + 32), and its entries (lane k) */
  uint8_t *dst_lo = NULL, *dst_hi = NULL;
  int slot_lo = -1, slot_hi = -1; /* the token's inbox row there (the records) */
  if (lane < N && (only < 0 || lane == only)) {
    slot_lo = __ldcg(&a->tok_slot[(size_t)t * N + lane]);
    if (slot_lo >= 0) dst_lo = EP_PEER(uint8_t, *a, inbox, lane) + ((size_t)a->rank * a->max_tokens + slot_lo) * a->inbox_row;
  }
  if (lane + 32 < N && (only < 0 || lane + 32 == only)) {
    slot_hi = __ldcg(&a->tok_slot[(size_t)t * N + lane + 32]);
    if (slot_hi >= 0)
      dst_hi = EP_PEER(uint8_t, *a, inbox, lane + 32) + ((size_t)a->rank * a->max_tokens + slot_hi) * a->inbox_row;
  }
  const uint32_t lo = __ballot_sync(0xffffffffu, dst_lo != NULL), hi = __ballot_sync(0xffffffffu, dst_hi != NULL);
  if (quant) { /* BF16 in, E4M3 + 1 x 128 scales out, quantised here */
    send_quantized(a, (const uint16_t *)x + (size_t)t * a->hidden, pay, lo, hi, dst_lo, dst_hi, lane, c * chunk);
  } else {
    /* the chunk, loaded once and stored to every destination */
    const size_t base = (size_t)c * chunk;
    const uint4 *src = (const uint4 *)(x + (size_t)t * pay);
    uint4 v[EP_COPY_UNROLL];
#pragma unroll
    for (int u = 0; u < EP_COPY_UNROLL; u++) {
      const size_t i = base + (size_t)u * 32 + lane;
      if (i < nv) v[u] = ws_ld_global_nc_v4(src + i);
    }
    for (int half = 0; half < 2; half++)
      for (uint32_t m = half ? hi : lo; m; m &= m - 1) {
        uint4 *d = (uint4 *)__shfl_sync(0xffffffffu, (unsigned long long)(half ? dst_hi : dst_lo), __ffs(m) - 1);
#pragma unroll
        for (int u = 0; u < EP_COPY_UNROLL; u++) {
          const size_t i = base + (size_t)u * 32 + lane;
          if (i < nv) ws_st_global_v4(d + i, v[u]);
        }
      }
  }
  if (c != 0) return;
  ep_entry en = {-1, -1, -1, 0};
  float w = 0.0f;
  if (lane < K) {
    const int4 e4 = __ldcg((const int4 *)&a->entries[(size_t)t * K + lane]);
    en.dst = e4.x; en.local = e4.y; en.pos = e4.z;
    w = topk_weights[(size_t)t * K + lane];
  }
  /* scales, then per destination the meta block: {token, entries}, its entries in slot order */
  for (int half = 0; half < 2; half++)
    for (uint32_t m = half ? hi : lo; m; m &= m - 1) {
      const int d = (__ffs(m) - 1) + 32 * half;
      uint8_t *row = (uint8_t *)__shfl_sync(0xffffffffu, (unsigned long long)(half ? dst_hi : dst_lo), d % 32);
      if (a->fp8 && !quant)
        for (int cb = lane; cb < kb; cb += 32) ((float *)(row + pay))[cb] = x_scale[(size_t)t * kb + cb];
      const uint32_t mine = __ballot_sync(0xffffffffu, en.dst == d);
      const int irow = a->records ? __shfl_sync(0xffffffffu, half ? slot_hi : slot_lo, d % 32) : -1; /* uniform */
      ep_meta *meta = (ep_meta *)(row + meta_off);
      if (en.dst == d) {
        const int j = __popc(mine & ((1u << lane) - 1));
        ep_meta e = {en.local, en.pos, lane, w};
        meta[1 + j] = e;
        /* the entry's record at [us][local][pos] of d's rec (ep_book_records). A token that
         * names one expert in several slots takes several positions, so (us, local) can
         * count past max_tokens: no record there, and the receive books that call from the
         * meta (ep_records_fit) */
        if (a->records && en.pos < a->max_tokens)
          ep_record_store(EP_PEER(ep_record, *a, rec, d) + ((size_t)a->rank * a->L + en.local) * a->max_tokens + en.pos,
                          t, irow, lane, j, __popc(mine), w);
      }
      if (lane == 0) {
        ep_meta h = {t, __popc(mine), 0, 0.0f};
        meta[0] = h;
      }
    }
}

/* ---- flags ------------------------------------------------------------------------- */
/* Every thread of g: flags[rank x sms + b] = v on every rank (ep_raise_on: on rank d0 ..
 * d0 + nd - 1), for the CTA slots b0 .. b0 + nb - 1 (a system fence before each store,
 * per thread). The standalone kernels raise their own CTA's slot; the layer kernel's
 * last item all of them. */
WS_DEV void ep_raise_on(const ep_args *a, const uint64_t *flags, uint64_t v, int d0, int nd, int b0, int nb,
                        const ep_group *g) {
  for (int f = g->tid; f < nd * nb; f += g->n) {
    const int d = d0 + f / nb, b = b0 + f % nb;
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64((uint64_t *)((char *)flags + a->peer_delta[d]) + (size_t)a->rank * a->sms + b, v);
  }
}
WS_DEV void ep_raise(const ep_args *a, const uint64_t *flags, uint64_t v, int b0, int nb, const ep_group *g) {
  ep_raise_on(a, flags, v, 0, a->nranks, b0, nb, g);
}

/* ---- receive ----------------------------------------------------------------------- */
/* The source of received token `row` (the tokens of sources s0 .. s1 - 1 in source
 * order; ep_source_of: of all sources) and its index there. */
WS_DEV int ep_source_in(const ep_args *a, const int *rc, int s0, int s1, int row, int *index) {
  int s = s0;
  while (s < s1 - 1 && row >= ep_tokens_from(a, rc, s)) row -= ep_tokens_from(a, rc, s++);
  *index = row;
  return s;
}
WS_DEV int ep_source_of(const ep_args *a, const int *rc, int row, int *index) {
  return ep_source_in(a, rc, 0, a->nranks, row, index);
}

/* The inbox row i from source s, and its meta block. */
WS_DEV const uint8_t *ep_inbox_row(const ep_args *a, int s, int i) {
  return a->inbox + ((size_t)s * a->max_tokens + i) * a->inbox_row;
}
WS_DEV const ep_meta *ep_meta_of(const ep_args *a, const uint8_t *row) {
  return (const ep_meta *)(row + EP_ALIGN16(ep_payload_bytes(a->hidden, a->fp8) + ep_scale_bytes(a->hidden, a->fp8)));
}

/* The layout row of an entry (local expert `local`, position pos among source s's rows
 * for it): its group start, then the rows of lower sources for that expert, then pos. */
WS_DEV int ep_layout_row(const ep_args *a, const int *rc, const int *off, int s, int local, int pos) {
  int r = off[local] + pos;
  for (int q = 0; q < s; q++) r += rc[q * (a->L + 1) + local];
  return r;
}

/* The bookkeeping's stores for entry j of the token received as source s's inbox row i,
 * whose layout row is r: the row's source, token, top-k slot and weight (and, index
 * receive, its inbox row), and combine's row and weight for entry j. ep_book_none: entry
 * j past the token's entries (combine's row -1). Both receive forms store through these
 * (ep_book_entry from the inbox row's meta, ep_book_records from the entry records). */
WS_DEV void ep_book_row(const ep_args *a, int s, int i, int j, int r, int token, int slot, float w, int index) {
  a->src_rank[r] = s; a->src_token[r] = token; a->src_slot[r] = slot; a->weight[r] = w;
  if (index) a->row_index[r] = s * a->max_tokens + i;
  const size_t c = ((size_t)s * a->max_tokens + i) * a->topk + j;
  a->comb_row[c] = r;
  a->comb_w[c] = w;
}
WS_DEV void ep_book_none(const ep_args *a, int s, int i, int j) {
  const size_t c = ((size_t)s * a->max_tokens + i) * a->topk + j;
  a->comb_row[c] = -1;
  a->comb_w[c] = 0.0f;
}
/* WARPSPEC_EP_RECORDS: whether every record of sources s0 .. s1 - 1 was written: no
 * (source, expert) counts past max_tokens (a token naming one expert twice can make it
 * so). A warp's lanes share the (source, expert) pairs; the whole warp calls it. */
WS_DEV int ep_records_fit(const ep_args *a, const int *rc, int s0, int s1, int lane) {
  const int L = a->L;
  int fit = 1;
  for (int u = lane; u < (s1 - s0) * L; u += 32) fit &= rc[(s0 + u / L) * (L + 1) + u % L] <= a->max_tokens;
  return __all_sync(0xffffffffu, fit);
}

/* WARPSPEC_EP_RECORDS: the same bookkeeping as ep_book_entry by layout row, for the rows
 * of sources s0 .. s1 - 1 (all in) among layout rows r0 .. r1 - 1 (the standalone expand:
 * all of them; the layer kernel: its item's share): thread tid of nthreads takes rows
 * r0 + tid, + nthreads, ..., finds each one's expert l, source s and position p
 * (ep_row_source: a binary search over off, then the sources' counts for l; past them,
 * padding), and reads the record ep_send_unit wrote at rec[s][l][p] -- one load, no load
 * depending on another, and rows spread evenly over the threads whatever the routing.
 * The entry with the last index of its token also marks the token's slots past its
 * entries (ep_book_none), as ep_book_entry does. rc and off: this CTA's copies (shared memory). */
WS_DEV void ep_book_records(const ep_args *a, const int *rc, const int *off, int s0, int s1, int index, long long r0,
                            long long r1, long long tid, long long nthreads) {
  const int L = a->L, K = a->topk, N = a->nranks;
  for (long long rr = r0 + tid; rr < r1; rr += nthreads) {
    const int r = (int)rr;
    int l, p;
    const int s = ep_row_source(rc, off, L, N, r, &l, &p);
    if (s < s0 || s >= s1) continue; /* padding (s == N), or another source's row */
    int token, i, slot, j, entries;
    float w;
    ep_record_load(a->rec + ((size_t)s * L + l) * a->max_tokens + p, &token, &i, &slot, &j, &entries, &w);
    ep_book_row(a, s, i, j, r, token, slot, w, index);
    if (j == entries - 1)
      for (int jj = entries; jj < K; jj++) ep_book_none(a, s, i, jj);
  }
}

/* One thread, the default receive: entry j of source s's inbox row i from the row's meta
 * block -- its head {token, entries}, then the entry where it exists -- stored at its
 * layout row (ep_layout_row), or -1 for combine past the entries. rc and off: this CTA's
 * copies (shared memory). */
WS_DEV void ep_book_entry(const ep_args *a, const int *rc, const int *off, int s, int i, int j, int index) {
  const ep_meta *m = ep_meta_of(a, ep_inbox_row(a, s, i));
  const int2 head = __ldcg((const int2 *)m);
  if (j < head.y) {
    const int4 e = __ldcg((const int4 *)(m + 1 + j)); /* {local, pos, slot, weight} */
    ep_book_row(a, s, i, j, ep_layout_row(a, rc, off, s, e.x, e.y), head.x, e.z, __int_as_float(e.w), index);
  } else {
    ep_book_none(a, s, i, j);
  }
}
/* The layout row of this lane's entry of inbox row (s, i) (lane < entries), else -1; and
 * the row's entries. */
WS_DEV int ep_lane_row(const ep_args *a, const int *rc, const int *off, int s, const ep_meta *m, int lane, int *entries) {
  *entries = __ldcg(&m[0].pos);
  return lane < *entries ? ep_layout_row(a, rc, off, s, __ldcg(&m[1 + lane].local), __ldcg(&m[1 + lane].pos)) : -1;
}

/* Copy receive, a warp: chunk c (32 x EP_COPY_UNROLL 16-byte vectors: 4 KB) of inbox row
 * (s, i), loaded once and stored into the layout row of each of its entries. */
WS_DEV void ep_copy_unit(const ep_args *a, const int *rc, const int *off, int s, int i, int c, int lane) {
  const uint8_t *row = ep_inbox_row(a, s, i);
  int entries;
  const int r = ep_lane_row(a, rc, off, s, ep_meta_of(a, row), lane, &entries);
  const size_t pay = ep_payload_bytes(a->hidden, a->fp8), nv = pay / 16;
  const int chunk = 32 * EP_COPY_UNROLL;
  const uint4 *src = (const uint4 *)row + (size_t)c * chunk + lane;
  const int valid = (int)(nv - (size_t)c * chunk) - lane; /* vectors of the chunk from this lane's on */
  uint4 v[EP_COPY_UNROLL];
#pragma unroll
  for (int u = 0; u < EP_COPY_UNROLL; u++)
    if (u * 32 < valid) v[u] = ws_ld_global_cg_v4(src + u * 32);
  for (int j = 0; j < entries; j++) {
    uint4 *d = (uint4 *)(a->x + (size_t)__shfl_sync(0xffffffffu, r, j) * pay) + (size_t)c * chunk + lane;
#pragma unroll
    for (int u = 0; u < EP_COPY_UNROLL; u++)
      if (u * 32 < valid) ws_st_global_v4(d + u * 32, v[u]);
  }
}

/* Chunks of a row for ep_copy_unit. */
WS_DEV int ep_copy_chunks(const ep_args *a) {
  const int nv = (int)(ep_payload_bytes(a->hidden, a->fp8) / 16), chunk = 32 * EP_COPY_UNROLL;
  return (nv + chunk - 1) / chunk;
}

/* Copy receive, FP8, a warp: inbox row (s, i)'s 1 x 128 scales, K-block-major, into the
 * layout row of each of its entries (lane j: entry j's row). */
WS_DEV void ep_copy_scales(const ep_args *a, const int *rc, const int *off, int s, int i, int lane) {
  const uint8_t *row = ep_inbox_row(a, s, i);
  int entries;
  const int r = ep_lane_row(a, rc, off, s, ep_meta_of(a, row), lane, &entries);
  const int kb = a->hidden / 128;
  const float *sc = (const float *)(row + ep_payload_bytes(a->hidden, 1));
  for (int c0 = 0; c0 < kb; c0 += 32) {
    const float sv = c0 + lane < kb ? __ldcg(sc + c0 + lane) : 0.0f;
    for (int j = 0; j < entries; j++) {
      const int rj = __shfl_sync(0xffffffffu, r, j);
      if (c0 + lane < kb) a->x_scale[(size_t)(c0 + lane) * a->scale_ld + rj] = sv;
    }
  }
}

/* ---- reduce ------------------------------------------------------------------------ */
/* The reduce's walk over its sources: rank r takes source r + 1 first and itself last, so
 * that at any moment the ranks push into different ranks. Walked in source order, every
 * rank pushed into rank 0 first (N - 1 senders sharing its inbound NVLink while the other
 * ranks' inbound links idled), then into rank 1, ... The k-th source of the walk: */
WS_DEV int ep_reduce_source(const ep_args *a, int k) {
  const int s = a->rank + 1 + k;
  return s >= a->nranks ? s - a->nranks : s;
}

/* Received token `row` of that walk (ntok[s]: tokens received from source s; in_kernel:
 * written earlier in this kernel, read past L1): its source, and its index there. */
WS_DEV int ep_reduce_token(const ep_args *a, const int *ntok, int in_kernel, int row, int *index) {
  int k = 0, s = ep_reduce_source(a, 0);
  for (; k < a->nranks - 1; s = ep_reduce_source(a, ++k)) {
    const int nt = in_kernel ? __ldcg(ntok + s) : ntok[s];
    if (row < nt) break;
    row -= nt;
  }
  *index = row;
  return s;
}

/* A warp: the lane vectors v0 + 32 u of received token (s, i)'s sum over its local
 * experts' rows of y (lane j holding slot j's row and weight: my_row, my_w, loaded by the
 * caller from comb_row / comb_w, -1 / 0 past the entries), fp32 in slot order, pushed as
 * BF16 into rank s's comb_inbox[rank][i]. GROUP rows' loads in flight. */
template <int GROUP>
WS_DEV void ep_reduce_unit(const ep_args *a, const uint16_t *y, int s, int i, int v0, int my_row, float my_w,
                           int y_in_kernel) {
  uint4 *dst = (uint4 *)(EP_PEER(uint16_t, *a, comb_inbox, s) + ((size_t)a->rank * a->max_tokens + i) * a->hidden);
  moe_sum_rows_of<GROUP>(my_row, my_w, a->topk, y, a->hidden, v0, a->hidden / 8, dst, y_in_kernel);
}

/* ---- the fused combine's flags -------------------------------------------------------- */
/* The fused combine (combine.cu) runs the reduce and the gather at once: reducer warp w of
 * nw (every rank has the same nw) pushes row r x nw + w of each source in its round r and
 * after each round says how many it has done; a gatherer enters a token once each of its
 * partials' rounds is done there, or that rank's whole reduce (comb_done: the reduce's
 * other forms say only that). The value: (epoch << 32) | rounds, so that every call's
 * values are above the last one's. */
WS_DEV uint64_t ep_comb_prog_value(uint64_t m, int rounds) { return (m << 32) | (uint32_t)rounds; }

/* A warp, after its stores of `rounds` rounds: comb_prog[rank][w] = value on every rank
 * (lane d: rank d's; a system fence first). */
WS_DEV void ep_comb_prog(const ep_args *a, int w, int rounds, uint64_t m, int lane) {
  __syncwarp(); /* every lane's stores before the fences */
  if (lane < a->nranks) {
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64((uint64_t *)((char *)a->comb_prog + a->peer_delta[lane]) +
                              (size_t)a->rank * a->sms * EP_PROG_WARPS + w,
                          ep_comb_prog_value(m, rounds));
  }
}

/* One thread: until rank d has pushed our row `slot` of combine m (nw: its reducer warps). */
WS_DEV void ep_comb_wait(const ep_args *a, int d, int slot, int nw, uint64_t m, const ws_ctx *c) {
  const uint64_t *prog = a->comb_prog + (size_t)d * a->sms * EP_PROG_WARPS + slot % nw;
  const uint64_t need = ep_comb_prog_value(m, slot / nw + 1);
  WS_POLL_BOUNDED(ws_ld_acquire_sys_u64(prog) >= need || ws_ld_acquire_sys_u64(a->comb_done + d) >= m, c,
                  ep_site("combine rows (block: the peer's reducer warp; step: epoch << 32 | its rounds)",
                          WS_EDGE_PEER_DATA, d, a->rank, slot % nw, need));
}

/* 1 in the last CTA of the grid whose group g gets here (counted in *counter, which that
 * CTA resets), 0 in the others; every group's writes before it (its own rank's and its
 * peers') are ordered before what the last one does next. `last`: __shared__. */
WS_DEV int ep_last_group(const ep_group *g, uint64_t *counter, int *last) {
  ep_sync(g);
  if (g->tid == 0) {
    ws_fence_acq_rel_sys();
    *last = atomicAdd((unsigned long long *)counter, 1ull) == (unsigned long long)gridDim.x - 1;
    if (*last) *counter = 0;
  }
  ep_sync(g);
  return *last;
}

/* ---- gather ------------------------------------------------------------------------ */
/* The warp's lane vectors v0 + 32 u (u < MOE_SUM_UNROLL) of token t's output: the partial
 * sums of the ranks it went to (comb_inbox, by tok_slot), added in rank order in fp32,
 * BF16 out (zero for a token without experts). GROUP ranks' loads are in flight before
 * any is added (ep_gather: 2; one at a time, a chunk cost a memory round trip per rank;
 * the layer kernel's gather items keep 1: more spill its math warpgroups' registers). */
template <int GROUP>
static __device__ __forceinline__ void ep_gather_chunk(const ep_args *a, uint16_t *out, int t, int v0) {
  const int nvec = a->hidden / 8;
  float acc[MOE_SUM_UNROLL][8];
  moe_zero_acc(acc);
#pragma unroll 1
  for (int d0 = 0; d0 < a->nranks; d0 += GROUP) {
    int slot[GROUP];
    uint4 p[GROUP][MOE_SUM_UNROLL];
#pragma unroll
    for (int j = 0; j < GROUP; j++) {
      const int d = d0 + j;
      slot[j] = d < a->nranks ? __ldcg(&a->tok_slot[(size_t)t * a->nranks + d]) : -1;
      const uint4 *src = (const uint4 *)(a->comb_inbox + ((size_t)d * a->max_tokens + (slot[j] < 0 ? 0 : slot[j])) * a->hidden);
#pragma unroll
      for (int u = 0; u < MOE_SUM_UNROLL; u++)
        if (slot[j] >= 0 && v0 + 32 * u < nvec) p[j][u] = ws_ld_global_cg_v4(src + v0 + 32 * u);
    }
#pragma unroll
    for (int j = 0; j < GROUP; j++) {
      if (slot[j] < 0) continue; /* a rank the token did not go to: skipped, as before */
#pragma unroll
      for (int u = 0; u < MOE_SUM_UNROLL; u++)
        if (v0 + 32 * u < nvec) moe_fma8(acc[u], p[j][u], 1.0f);
    }
  }
#pragma unroll
  for (int u = 0; u < MOE_SUM_UNROLL; u++)
    if (v0 + 32 * u < nvec) ws_st_global_v4((uint4 *)(out + (size_t)t * a->hidden) + v0 + 32 * u, moe_pack8(acc[u]));
}

#endif
