/* ep_stream.cuh - combine's two sums (reduce: a received token's local expert rows,
 * weighted; gather: a token's partials from the ranks it went to) as one warp loop that
 * streams the rows through the warp's own ring of shared memory, for the standalone
 * kernels (combine.cu).
 *
 * Why: loaded into registers (ep_reduce_unit, ep_gather_chunk) a lane holds 2 rows x 4
 * vectors, 64 KB per SM with 16 warps. 16-byte cp.async into shared memory holds no
 * registers: EP_STREAM_AHEAD row chunks (2 KB each) per warp stay in flight while the
 * warp adds the oldest one, 160 KB per SM. Measured (H200, 24 SMs, 4096 tokens per rank):
 * EP4 combine 1352 -> 1209 us, EP2 unchanged (567 / 581 us); reading alone was not the
 * limit (24 SMs read 2.4-2.9 TB/s alone, docs/benchmarks.md), reading and writing together
 * is. Handing the sums to the TMA engine as bulk stores from a shared-memory slot, so that
 * no store holds the warp, measured slower (EP4 883 -> 949 us, EP2 508 -> 578, session 21);
 * so did loading each chunk with one bulk copy by lane 0 on a per-slot mbarrier (EP2, 24
 * SMs: 505 -> 581 us, session 32; docs/benchmarks.md).
 *
 * Each lane copies, waits for and reads back only its own 16-byte vectors, so the warp
 * needs no barrier and no mbarrier: cp.async.wait_group is the whole protocol. One
 * commit group per row chunk (empty ones too) keeps "AHEAD groups younger than the one
 * needed" true at every step.
 *
 * The sums are the same as the register forms' (and the layer kernel's items): fp32,
 * slots in order, a slot without a row skipped, BF16 out; a token with no rows is zeros.
 * A warp walks its tokens g = first, first + stride, ... (below `total`), or with claims
 * (the fused combine's gather) the places it claims one at a time, each row chunk by chunk
 * (2 KB), the token's slots in order within a chunk. It is for many tokens per warp:
 * with fewer tokens than warps the chunk-per-warp forms (ep_protocol.cuh) spread a token
 * over several warps and finish sooner (at 128 tokens per rank this loop was 15-18%
 * slower). */
#ifndef WARPSPEC_EP_STREAM_CUH
#define WARPSPEC_EP_STREAM_CUH

#include "ep_protocol.cuh"
#include "moe_sum.cuh"
#include "warpspec/device/ptx.cuh"

#ifndef EP_STREAM_AHEAD
#define EP_STREAM_AHEAD 5 /* row chunks in flight per warp (-D to measure others: 16 warps x 7 fit) */
#endif
#define EP_STREAM_RING (EP_STREAM_AHEAD + 1)                     /* ring slots per warp            */
#define EP_STREAM_SLOT_VECS MOE_SUM_CHUNK                        /* 16-byte vectors per slot: 2 KB */
#define EP_STREAM_WARP_BYTES (EP_STREAM_RING * EP_STREAM_SLOT_VECS * 16)

/* REDUCE, GATHER: the two kernels' walks (tokens in the reduce's source order; our
 * tokens in order). The fused combine's (combine.cu): REDUCE_ROUNDS: round k of a warp is
 * row k x nw + w of every source, and after each round the warp says so to every rank
 * (ep_comb_prog); GATHER_ORDERED: our tokens in the route's order (route_order), each
 * entered once its partials are pushed (ep_comb_wait). */
enum { EP_STREAM_REDUCE = 0, EP_STREAM_GATHER = 1, EP_STREAM_REDUCE_ROUNDS = 2, EP_STREAM_GATHER_ORDERED = 3 };

/* One token of the stream. Per lane (slot = lane): the row it adds (NULL: none) and its
 * weight; warp-wide: which slots have rows (set when the token becomes current, so the
 * loads of a prefetched token do not stall the warp), and where the sum goes. */
typedef struct {
  const uint16_t *row;
  float w;
  unsigned mask;
  uint16_t *dst; /* NULL: an empty place of the walk (no sum, no store) */
  int slot;      /* GATHER_ORDERED: this lane's row's slot on rank lane (for its wait), else -1 */
} ep_stream_tok;

/* The stream: `total` tokens, each row in `nchunk` chunks of 2 KB. The fused modes: nw
 * warps walk it (REDUCE_ROUNDS: this rank's reducers; GATHER_ORDERED: every rank's
 * reducers, for the waits), m the combine epoch, ctx the waits' bound. */
typedef struct {
  int mode, nchunk, total, nw, tokens;
  const int *ntok;
  const uint16_t *y;
  uint16_t *out;
  uint64_t m;
  const ws_ctx *ctx;
  uint64_t *claim;       /* non-NULL: the warps claim places one at a time here (ep_stream_after) */
  volatile int *seq;     /* with claim: the warp's EP_STREAM_SEQ claimed places (shared memory) */
} ep_stream_spec;

#define EP_STREAM_SEQ 8 /* claimed places a warp remembers: the adding position is at most 4 behind */

static __device__ __forceinline__ ep_stream_spec ep_stream_tokens(const ep_args *a, int mode, const int *ntok,
                                                                  int tokens, const uint16_t *y, uint16_t *out) {
  ep_stream_spec sp;
  sp.mode = mode; sp.ntok = ntok; sp.y = y; sp.out = out;
  sp.nchunk = (a->hidden / 8 + MOE_SUM_CHUNK - 1) / MOE_SUM_CHUNK;
  sp.total = tokens; sp.tokens = tokens; sp.nw = 0; sp.m = 0; sp.ctx = NULL; sp.claim = NULL; sp.seq = NULL;
  return sp;
}

/* Token g of the stream: reduce: the g-th received token of the reduce's walk over its
 * sources (ep_reduce_token; ntok: a copy in shared memory), its local rows of y and
 * weights, the sum pushed into the source's comb_inbox; gather: our token g, the partials
 * of the ranks it went to (weight 1; rank = lane, so at most 32 ranks), the sum into out.
 * Past the last token: none. */
static __device__ __forceinline__ ep_stream_tok ep_stream_load(const ep_args *a, const ep_stream_spec *sp, int g,
                                                               int lane) {
  ep_stream_tok k = {NULL, 0.0f, 0u, NULL, -1};
  if (g >= sp->total) return k;
  const size_t H = (size_t)a->hidden;
  if (sp->mode == EP_STREAM_REDUCE || sp->mode == EP_STREAM_REDUCE_ROUNDS) {
    int i, s;
    if (sp->mode == EP_STREAM_REDUCE) {
      s = ep_reduce_token(a, sp->ntok, 0, g, &i);
    } else { /* place g = (round x nranks + q) x nw + w: row round x nw + w of the q-th source */
      const int kq = g / sp->nw;
      s = ep_reduce_source(a, kq % a->nranks);
      i = (kq / a->nranks) * sp->nw + g % sp->nw;
      if (i >= sp->ntok[s]) return k; /* that source sent fewer rows */
    }
    const size_t e = ((size_t)s * a->max_tokens + i) * a->topk + lane;
    if (lane < a->topk) {
      const int r = __ldcg(a->comb_row + e);
      k.w = __ldcg(a->comb_w + e);
      if (r >= 0) k.row = sp->y + (size_t)r * H;
    }
    k.dst = EP_PEER(uint16_t, *a, comb_inbox, s) + ((size_t)a->rank * a->max_tokens + i) * H;
  } else {
    int t = g;
    if (sp->mode == EP_STREAM_GATHER_ORDERED) {
      t = __ldcg(a->route_order + g / 32) * 32 + g % 32;
      if (t >= sp->tokens) return k; /* past the last token, in the last batch */
    }
    if (lane < a->nranks) {
      const int slot = __ldcg(&a->tok_slot[(size_t)t * a->nranks + lane]);
      k.w = 1.0f;
      if (slot >= 0) k.row = a->comb_inbox + ((size_t)lane * a->max_tokens + slot) * H;
      if (sp->mode == EP_STREAM_GATHER_ORDERED) k.slot = slot;
    }
    k.dst = sp->out + (size_t)t * H;
  }
  return k;
}

/* A position in the stream: token g (cur; nxt is the warp's next one, loading), chunk c,
 * the current slot (-1: a token without rows, one step per chunk) and the slots after it
 * in this chunk (left). */
typedef struct {
  int g, c, slot;
  unsigned left;
  int gn, jn;  /* nxt's place, and its index in the warp's claimed sequence */
  int waits;   /* the copying position: enters a GATHER_ORDERED token after its partials' flags */
  int claims;  /* the copying position, with sp->claim: claims the places */
  ep_stream_tok cur, nxt;
} ep_stream_pos;

/* The place after nxt's: gn + stride; with claims (sp->claim) the warp's next claimed place:
 * the copying position claims it (lane 0, one atomic, into the warp's sequence), the adding
 * position, behind it, reads it there. Past the last place: sp->total. */
static __device__ __forceinline__ int ep_stream_after(ep_stream_pos *p, const ep_stream_spec *sp, int stride,
                                                      int lane) {
  if (sp->claim == NULL) return p->gn + stride;
  const int j = ++p->jn & (EP_STREAM_SEQ - 1);
  if (p->claims) {
    if (lane == 0) sp->seq[j] = (int)min((unsigned long long)atomicAdd((unsigned long long *)sp->claim, 1ull),
                                         (unsigned long long)sp->total);
    __syncwarp();
  }
  return sp->seq[j];
}

static __device__ __forceinline__ void ep_stream_enter(ep_stream_pos *p, const ep_args *a, const ep_stream_spec *sp) {
  if (p->waits && p->cur.slot >= 0) ep_comb_wait(a, (int)(threadIdx.x % 32), p->cur.slot, sp->nw, sp->m, sp->ctx);
  if (p->waits) __syncwarp(); /* the waiting lanes' acquire before every lane's loads of those rows */
  p->cur.mask = __ballot_sync(0xffffffffu, p->cur.row != NULL);
  p->c = 0;
  p->slot = p->cur.mask ? __ffs(p->cur.mask) - 1 : -1;
  p->left = p->cur.mask ? p->cur.mask & (p->cur.mask - 1) : 0u;
}

/* The next step; returns 1 at the chunk's last step (its sum is complete). */
static __device__ __forceinline__ int ep_stream_last(const ep_stream_pos *p) { return p->left == 0u; }

static __device__ __forceinline__ void ep_stream_next(ep_stream_pos *p, const ep_args *a, const ep_stream_spec *sp,
                                                      int stride, int lane) {
  if (p->left) {
    p->slot = __ffs(p->left) - 1;
    p->left &= p->left - 1;
  } else if (++p->c < sp->nchunk) {
    p->slot = p->cur.mask ? __ffs(p->cur.mask) - 1 : -1;
    p->left = p->cur.mask ? p->cur.mask & (p->cur.mask - 1) : 0u;
  } else {
    p->g = p->gn;
    p->cur = p->nxt;
    p->gn = ep_stream_after(p, sp, stride, lane);
    p->nxt = ep_stream_load(a, sp, p->gn, lane);
    ep_stream_enter(p, a, sp);
  }
}

/* Copy step *in into ring slot *slot (nothing past the end or for a token without rows),
 * one commit group either way; then both move on by one step. */
static __device__ __forceinline__ void ep_stream_copy(const ep_args *a, const ep_stream_spec *sp, ep_stream_pos *in,
                                                      int *slot, uint32_t ring_addr, int stride, int lane) {
  const int nvec = a->hidden / 8;
  if (in->g < sp->total && in->slot >= 0) {
    const uint16_t *row = (const uint16_t *)__shfl_sync(0xffffffffu, (unsigned long long)in->cur.row, in->slot);
    const uint4 *src = (const uint4 *)row + (size_t)in->c * MOE_SUM_CHUNK + lane;
#pragma unroll
    for (int u = 0; u < MOE_SUM_UNROLL; u++)
      if (in->c * MOE_SUM_CHUNK + lane + 32 * u < nvec)
        ws_cp_async_cg_16_to(ring_addr + (uint32_t)((*slot * EP_STREAM_SLOT_VECS + 32 * u + lane) * 16), src + 32 * u,
                             16);
  }
  ws_cp_async_commit_group();
  *slot = *slot + 1 == EP_STREAM_RING ? 0 : *slot + 1;
  if (in->g < sp->total) ep_stream_next(in, a, sp, stride, lane);
}

/* The whole warp: every token of its stream (first, first + stride, ... < sp->total),
 * ring: the warp's EP_STREAM_WARP_BYTES of shared memory (16-byte aligned). */
static __device__ __forceinline__ void ep_stream_sums(const ep_args *a, const ep_stream_spec *sp, int first, int stride,
                                                      uint4 *ring, int lane) {
  const int total = sp->total;
  ep_stream_pos in, out_pos; /* in: the next step to copy; out_pos: the next step to add */
  in.waits = sp->mode == EP_STREAM_GATHER_ORDERED;
  in.claims = sp->claim != NULL;
  in.jn = -1;
  in.gn = first - stride;
  in.g = ep_stream_after(&in, sp, stride, lane); /* first, or the first claimed place */
  if (in.g >= total) return;
  in.gn = in.g;
  in.gn = ep_stream_after(&in, sp, stride, lane);
  const int nvec = a->hidden / 8;
  const uint32_t ring_addr = ws_smem_addr(ring);
  in.cur = ep_stream_load(a, sp, in.g, lane);
  in.nxt = ep_stream_load(a, sp, in.gn, lane);
  ep_stream_enter(&in, a, sp);
  out_pos = in;
  out_pos.waits = 0;
  out_pos.claims = 0;
  int in_slot = 0, out_slot = 0;
  float acc[MOE_SUM_UNROLL][8];
  moe_zero_acc(acc);
#pragma unroll 1
  for (int k = 0; k < EP_STREAM_AHEAD; k++) ep_stream_copy(a, sp, &in, &in_slot, ring_addr, stride, lane);
#pragma unroll 1
  while (out_pos.g < total) {
    ep_stream_copy(a, sp, &in, &in_slot, ring_addr, stride, lane);
    WS_CP_ASYNC_WAIT_GROUP(EP_STREAM_AHEAD); /* this lane's copies of step out_pos landed */
    const int v0 = out_pos.c * MOE_SUM_CHUNK + lane;
    if (out_pos.slot >= 0) {
      const float w = __shfl_sync(0xffffffffu, out_pos.cur.w, out_pos.slot);
      const uint4 *s = ring + out_slot * EP_STREAM_SLOT_VECS + lane;
#pragma unroll
      for (int u = 0; u < MOE_SUM_UNROLL; u++)
        if (v0 + 32 * u < nvec) moe_fma8(acc[u], s[32 * u], w);
    }
    out_slot = out_slot + 1 == EP_STREAM_RING ? 0 : out_slot + 1;
    if (ep_stream_last(&out_pos)) {
      uint4 *d = (uint4 *)out_pos.cur.dst + v0;
#pragma unroll
      for (int u = 0; u < MOE_SUM_UNROLL; u++) {
        if (out_pos.cur.dst != NULL && v0 + 32 * u < nvec) ws_st_global_v4(d + 32 * u, moe_pack8(acc[u]));
#pragma unroll
        for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
      }
      /* a round's last row (the last source's) complete: tell every rank */
      if (sp->mode == EP_STREAM_REDUCE_ROUNDS && out_pos.c == sp->nchunk - 1) {
        const int kq = out_pos.g / sp->nw;
        if (kq % a->nranks == a->nranks - 1) ep_comb_prog(a, first, kq / a->nranks + 1, sp->m, lane);
      }
    }
    ep_stream_next(&out_pos, a, sp, stride, lane);
  }
  WS_CP_ASYNC_WAIT_GROUP(0);
}

#endif
