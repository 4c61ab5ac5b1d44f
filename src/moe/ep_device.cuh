/* ep_device.cuh - device helpers the dispatch and combine kernels share. */
#ifndef WARPSPEC_EP_DEVICE_CUH
#define WARPSPEC_EP_DEVICE_CUH

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

/* Thread tid of nthreads: wait until flags[p x sms + b] >= v for every rank p and every
 * one of its `sms` CTA slots b (the transfers' data flags); the site names peer and slot. */
static __device__ __forceinline__ void ep_wait_all_slots(const ep_args *a, const uint64_t *flags, uint64_t v,
                                                         const char *what, const ws_ctx *c, int tid, int nthreads) {
  for (int f = tid; f < a->nranks * a->sms; f += nthreads) {
    const ws_site site = ep_site(what, WS_EDGE_PEER_DATA, f / a->sms, a->rank, f % a->sms, v);
    ws_wait_flag_geq(flags + f, v, c, &site);
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


/* ---- send (ep_send and the layer kernel's send items) ---------------------------- */
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
 * them in the same launch. Shared by ep_send and the layer kernel's send items. */
static __device__ __forceinline__ void ep_send_unit(const ep_args *a, const uint8_t *x, const float *x_scale,
                                                    const float *topk_weights, int t, int c, int lane, int quant) {
  const int N = a->nranks, K = a->topk, kb = a->hidden / 128;
  const size_t pay = ep_payload_bytes(a->hidden, a->fp8), sc = ep_scale_bytes(a->hidden, a->fp8);
  const size_t meta_off = EP_ALIGN16(pay + sc), nv = pay / 16;
  const int chunk = ep_send_chunk_vectors(quant);
  /* the token's destinations, one per lane (lane d and d + 32), and its entries (lane k) */
  uint8_t *dst_lo = NULL, *dst_hi = NULL;
  if (lane < N) {
    const int slot = __ldcg(&a->tok_slot[(size_t)t * N + lane]);
    if (slot >= 0) dst_lo = EP_PEER(uint8_t, *a, inbox, lane) + ((size_t)a->rank * a->max_tokens + slot) * a->inbox_row;
  }
  if (lane + 32 < N) {
    const int slot = __ldcg(&a->tok_slot[(size_t)t * N + lane + 32]);
    if (slot >= 0) dst_hi = EP_PEER(uint8_t, *a, inbox, lane + 32) + ((size_t)a->rank * a->max_tokens + slot) * a->inbox_row;
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
      ep_meta *meta = (ep_meta *)(row + meta_off);
      if (en.dst == d) {
        ep_meta e = {en.local, en.pos, lane, w};
        meta[1 + __popc(mine & ((1u << lane) - 1))] = e;
      }
      if (lane == 0) {
        ep_meta h = {t, __popc(mine), 0, 0.0f};
        meta[0] = h;
      }
    }
}

/* ---- gather (ep_gather and the layer kernel's gather items) ------------------------ */
/* The warp's lane vectors v0 + 32 u (u < MOE_SUM_UNROLL) of token t's output: the partial
 * sums of the ranks it went to (comb_inbox, by tok_slot), added in rank order in fp32,
 * BF16 out (zero for a token without experts). GROUP ranks' loads are in flight before
 * any is added (ep_gather: 2; one at a time, a chunk cost a memory round trip per rank;
 * the layer kernel's gather items keep 1: more spill its math warpgroups' registers). */
template <int GROUP>
static __device__ __forceinline__ void ep_gather_chunk(const ep_args *a, uint16_t *out, int t, int v0) {
  const int nvec = a->hidden / 8;
  float acc[MOE_SUM_UNROLL][8];
#pragma unroll
  for (int u = 0; u < MOE_SUM_UNROLL; u++)
#pragma unroll
    for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
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
