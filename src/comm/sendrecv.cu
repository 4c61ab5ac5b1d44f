/* sendrecv.cu - bidirectional point-to-point copy over NVLink, one kernel.
 *
 * Each CTA b runs two roles at once, each synchronising on its own named barrier:
 *   SENDER   (8 warps)  block b of the outgoing message: for each step, wait for a
 *                       credit (head) from the receiver, push up to `stride` bytes with
 *                       16-byte stores into the peer's staging slot, role sync, then the
 *                       leader fences (system scope) and publishes the step (tail).
 *   RECEIVER (8 warps)  block b of the incoming message: the leader waits for the
 *                       peer's tail, checks the slot header, the role copies the slot
 *                       into the destination, role sync, the leader returns a credit.
 * Staging, tails and heads live in symmetric memory (ws_sr_state, sendrecv_internal.h:
 * this operation's, made with the communicator); all polling is of local memory,
 * all remote traffic is stores. Step counters are monotonic per (peer, block) and kept
 * in device memory across launches: no reset kernels, CUDA-graph replayable. Every
 * slot carries a header (magic, step, total bytes, blocks): a receiver that expects a
 * different message faults with WS_ERR_MISMATCH instead of reading garbage. */
#include "sendrecv_internal.h"
#include "../core/knobs.h"
#include "../core/size_check.h"
#include "warpspec/device/warpspec.cuh"
#include "warpspec/sendrecv_geometry.h"

#include <stdlib.h>
#include <string.h>

#define SR_ROLES(ROLE) ROLE(SR_SENDER, WS_SR_SEND_WARPS, WS_REGS_ENTRY, 1) ROLE(SR_RECEIVER, WS_SR_RECV_WARPS, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(sr, SR_ROLES);

#define SR_MAGIC 0x52535357u /* "WSSR" */

/* The staging slot of block b at `step` (WS_SR_DEPTH slots per block, used in turn),
 * as a byte offset into a staging buffer: the sender's copy of the peer's or the
 * receiver's own. */
static __device__ __forceinline__ size_t sr_slot(uint32_t b, uint64_t step) {
  return ((size_t)b * WS_SR_DEPTH + step % WS_SR_DEPTH) * WS_SR_SLOT_BYTES;
}

/* Bytes that step k of a block of `len` bytes carries: a stride, less at the end. */
static __device__ __forceinline__ uint64_t sr_chunk(uint64_t len, uint64_t k, uint64_t stride) {
  const uint64_t off = k * stride;
  return len > off ? (len - off < stride ? len - off : stride) : 0;
}

/* Slot header, two 16-byte words: {magic, blocks, bytes} {step, chunk}. */
static __device__ __forceinline__ void header_write(uint8_t *slot, uint32_t blocks, uint64_t bytes, uint64_t step,
                                                    uint64_t chunk) {
  ws_st_global_v4(slot, make_uint4(SR_MAGIC, blocks, (uint32_t)bytes, (uint32_t)(bytes >> 32)));
  ws_st_global_v4(slot + 16, make_uint4((uint32_t)step, (uint32_t)(step >> 32), (uint32_t)chunk, (uint32_t)(chunk >> 32)));
}

typedef struct {
  /* sending half (send_peer < 0: none) */
  const uint8_t *src;
  ws_sr_geometry send;
  int send_peer;
  uint8_t *remote_staging;  /* the receiver's region for us */
  uint64_t *remote_tail;    /* the receiver's tail[us][.] */
  const uint64_t *credits;  /* our head[send_peer][.] */
  uint64_t *send_step;      /* our send_step[send_peer][.] */
  /* receiving half (recv_peer < 0: none) */
  uint8_t *dst;
  ws_sr_geometry recv;
  int recv_peer;
  const uint8_t *staging;   /* our region for recv_peer */
  const uint64_t *tails;    /* our tail[recv_peer][.] */
  uint64_t *remote_head;    /* the sender's head[us][.] */
  uint64_t *recv_step;      /* our recv_step[recv_peer][.] */
  int rank;
  /* zero-copy: the sender stores straight into the receiver's symmetric buffer */
  int zero_copy;
  uint8_t *remote_dst;      /* the receiver's recvbuf, as we address it */
  uint64_t expect_addr;     /* ... and as it addresses it (what it must post) */
  const uint64_t *zc_ready; /* our zc_ready[send_peer][.] */
  const uint64_t *zc_addr;  /* our zc_addr[send_peer][.][2] */
  uint64_t *peer_zc_done;   /* the receiver's zc_done[us][.] */
  uint64_t *zsend_seq;      /* our zc_seq[0][send_peer][.] */
  uint64_t *peer_zc_ready;  /* the sender's zc_ready[us][.] */
  uint64_t *peer_zc_addr;   /* the sender's zc_addr[us][.][2] */
  const uint64_t *zc_done;  /* our zc_done[recv_peer][.] */
  uint64_t *zrecv_seq;      /* our zc_seq[1][recv_peer][.] */
} sr_args;

/* The role's threads copy n bytes, WS_SR_VEC_PER_THREAD 16-byte vectors in flight per
 * thread. `fresh`: the source was just written by a peer, read it past L1. */
static __device__ __forceinline__ void role_copy(uint8_t *dst, const uint8_t *src, uint64_t n, const ws_ctx *c, int fresh) {
  const uint64_t nvec = n / 16;
  const uint64_t t = (uint64_t)ws_role_thread(c), nt = c->nthreads;
  const uint4 *s = (const uint4 *)src;
  uint4 *d = (uint4 *)dst;
  for (uint64_t base = 0; base < nvec; base += nt * WS_SR_VEC_PER_THREAD) {
    uint4 v[WS_SR_VEC_PER_THREAD];
#pragma unroll
    for (int u = 0; u < WS_SR_VEC_PER_THREAD; u++) {
      const uint64_t i = base + (uint64_t)u * nt + t;
      if (i < nvec) v[u] = fresh ? ws_ld_global_cg_v4(s + i) : ws_ld_global_nc_v4(s + i);
    }
#pragma unroll
    for (int u = 0; u < WS_SR_VEC_PER_THREAD; u++) {
      const uint64_t i = base + (uint64_t)u * nt + t;
      if (i < nvec) ws_st_global_v4(d + i, v[u]);
    }
  }
  const uint64_t rest = n - nvec * 16;
  if (t < rest) dst[nvec * 16 + t] = src[nvec * 16 + t];
}

/* ---- low-latency lines --------------------------------------------------------------
 * Line j of a slot: {lo 4 bytes, flag, hi 4 bytes, flag}, flag = low 32 bits of step + 1.
 * Lines 0 and 1 carry the header {magic, blocks} {bytes lo, bytes hi}; the data starts at
 * line 2. A 16-byte store lands whole, so a line with both flags right is complete. */
#define LL_HEADER_LINES 2

/* 8 bytes of src at i (fewer at the end of n, zero-padded). */
static __device__ __forceinline__ uint64_t ld_8(const uint8_t *src, uint64_t i, uint64_t n) {
  if (i + 8 <= n) return *(const uint64_t *)(src + i);
  uint64_t v = 0;
  for (uint64_t k = i; k < n; k++) v |= (uint64_t)src[k] << (8 * (k - i));
  return v;
}

static __device__ __forceinline__ void st_8(uint8_t *dst, uint64_t i, uint64_t n, uint64_t v) {
  if (i + 8 <= n) { *(uint64_t *)(dst + i) = v; return; }
  for (uint64_t k = i; k < n; k++) dst[k] = (uint8_t)(v >> (8 * (k - i)));
}

static __device__ __forceinline__ ws_site sr_site(int edge, int peer, int rank, uint32_t block, uint64_t step);

/* Poll one line until both flags say `flag`, bounded. */
static __device__ __forceinline__ uint4 ll_wait_line(const uint8_t *line, uint32_t flag, const ws_ctx *c,
                                                     const ws_site *site) {
  uint4 v;
  WS_POLL_BOUNDED((v = ws_ld_volatile_global_v4(line), v.y == flag && v.w == flag), c, *site);
  return v;
}

static __device__ __forceinline__ ws_site sr_site(int edge, int peer, int rank, uint32_t block, uint64_t step) {
  ws_site s = ws_site_pipe("sendrecv", edge, (int)block, 0);
  s.peer = peer; s.rank = rank; s.step = step;
  return s;
}

/* Low-latency step: every thread waits for the credit itself and writes its lines. */
static __device__ __forceinline__ void ll_sender(const sr_args *a, const ws_ctx *c, uint32_t b) {
  const ws_sr_geometry *g = &a->send;
  const uint64_t step = a->send_step[b];
  uint8_t *slot = a->remote_staging + sr_slot(b, step);
  if (step + 1 > WS_SR_DEPTH) {
    const ws_site site = sr_site(WS_EDGE_PEER_CREDIT, a->send_peer, a->rank, b, step);
    ws_wait_flag_geq(&a->credits[b], step + 1 - WS_SR_DEPTH, c, &site);
  }
  const uint32_t flag = (uint32_t)(step + 1);
  const uint64_t begin = ws_sr_block_begin(g, b), n = ws_sr_block_bytes(g, b);
  const uint64_t lines = LL_HEADER_LINES + (n + 7) / 8;
  for (uint64_t j = (uint64_t)ws_role_thread(c); j < lines; j += c->nthreads) {
    uint4 v;
    if (j == 0) v = make_uint4(SR_MAGIC, flag, g->blocks, flag);
    else if (j == 1) v = make_uint4((uint32_t)g->bytes, flag, (uint32_t)(g->bytes >> 32), flag);
    else {
      const uint64_t d = ld_8(a->src + begin, (j - LL_HEADER_LINES) * 8, n);
      v = make_uint4((uint32_t)d, flag, (uint32_t)(d >> 32), flag);
    }
    ws_st_volatile_global_v4(slot + 16 * j, v);
  }
  ws_role_sync(c); /* every thread has read send_step before it moves on */
  if (ws_role_leader(c)) a->send_step[b] = step + 1;
}

/* Low-latency step: every thread polls its lines; then one credit for the slot. */
static __device__ __forceinline__ void ll_receiver(const sr_args *a, const ws_ctx *c, uint32_t b) {
  const ws_sr_geometry *g = &a->recv;
  const uint64_t step = a->recv_step[b];
  const uint8_t *slot = a->staging + sr_slot(b, step);
  const uint32_t flag = (uint32_t)(step + 1);
  const uint64_t begin = ws_sr_block_begin(g, b), n = ws_sr_block_bytes(g, b);
  const uint64_t lines = LL_HEADER_LINES + (n + 7) / 8;
  ws_site site = sr_site(WS_EDGE_PEER_DATA, a->recv_peer, a->rank, b, step);
  for (uint64_t j = (uint64_t)ws_role_thread(c); j < lines; j += c->nthreads) {
    const uint4 v = ll_wait_line(slot + 16 * j, flag, c, &site);
    if (j == 0 && (v.x != SR_MAGIC || v.z != g->blocks)) {
      const long long x[4] = {-1, (long long)v.z, (long long)g->bytes, (long long)g->blocks};
      ws_fault_raise(c, WS_FAULT_MISMATCH, &site, 0, x);
    } else if (j == 1 && (v.x | (uint64_t)v.z << 32) != g->bytes) {
      const long long x[4] = {(long long)(v.x | (uint64_t)v.z << 32), (long long)g->blocks, (long long)g->bytes,
                              (long long)g->blocks};
      ws_fault_raise(c, WS_FAULT_MISMATCH, &site, 0, x);
    } else if (j >= LL_HEADER_LINES) {
      st_8(a->dst + begin, (j - LL_HEADER_LINES) * 8, n, v.x | (uint64_t)v.z << 32);
    }
  }
  ws_role_sync(c); /* every line read before the slot is handed back */
  if (ws_role_leader(c)) {
    ws_st_relaxed_sys_u64(&a->remote_head[b], step + 1);
    a->recv_step[b] = step + 1;
  }
}

static __device__ __forceinline__ void sender(const sr_args *a, const ws_ctx *c, uint32_t b) {
  const ws_sr_geometry *g = &a->send;
  const uint64_t step0 = a->send_step[b], nsteps = ws_sr_block_steps(g, b);
  const uint64_t begin = ws_sr_block_begin(g, b), len = ws_sr_block_bytes(g, b);
  for (uint64_t k = 0; k < nsteps; k++) {
    const uint64_t step = step0 + k;
    uint8_t *slot = a->remote_staging + sr_slot(b, step);
    const uint64_t off = k * g->stride, chunk = sr_chunk(len, k, g->stride);
    if (ws_role_leader(c) && step + 1 > WS_SR_DEPTH) {
      const ws_site site = sr_site(WS_EDGE_PEER_CREDIT, a->send_peer, a->rank, b, step);
      ws_wait_flag_geq(&a->credits[b], step + 1 - WS_SR_DEPTH, c, &site);
    }
    ws_role_sync(c);
    role_copy(slot + WS_SR_HEADER_BYTES, a->src + begin + off, chunk, c, 0);
    if (ws_role_leader(c)) header_write(slot, g->blocks, g->bytes, step, chunk);
    ws_role_sync(c);
    if (ws_role_leader(c)) {
      ws_fence_acq_rel_sys(); /* the role's stores (ordered by the sync) before the tail */
      ws_st_relaxed_sys_u64(&a->remote_tail[b], step + 1);
    }
  }
  if (ws_role_leader(c)) a->send_step[b] = step0 + nsteps;
}

static __device__ __forceinline__ void receiver(const sr_args *a, const ws_ctx *c, uint32_t b) {
  const ws_sr_geometry *g = &a->recv;
  const uint64_t step0 = a->recv_step[b], nsteps = ws_sr_block_steps(g, b);
  const uint64_t begin = ws_sr_block_begin(g, b), len = ws_sr_block_bytes(g, b);
  for (uint64_t k = 0; k < nsteps; k++) {
    const uint64_t step = step0 + k;
    const uint8_t *slot = a->staging + sr_slot(b, step);
    const uint64_t off = k * g->stride, chunk = sr_chunk(len, k, g->stride);
    if (ws_role_leader(c)) {
      ws_site site = sr_site(WS_EDGE_PEER_DATA, a->recv_peer, a->rank, b, step);
      ws_wait_flag_geq(&a->tails[b], step + 1, c, &site);
      const uint4 h0 = ws_ld_global_cg_v4(slot), h1 = ws_ld_global_cg_v4(slot + 16); /* past L1: the slot is reused */
      const uint64_t bytes = h0.z | (uint64_t)h0.w << 32, hstep = h1.x | (uint64_t)h1.y << 32;
      const uint64_t hchunk = h1.z | (uint64_t)h1.w << 32;
      if (h0.x != SR_MAGIC || hstep != step || bytes != g->bytes || h0.y != g->blocks || hchunk != chunk) {
        const long long v[4] = {(long long)bytes, (long long)h0.y, (long long)g->bytes, (long long)g->blocks};
        ws_fault_raise(c, WS_FAULT_MISMATCH, &site, 0, v);
      }
    }
    ws_role_sync(c);
    role_copy(a->dst + begin + off, slot + WS_SR_HEADER_BYTES, chunk, c, 1);
    ws_role_sync(c); /* every thread's loads of the slot are done */
    if (ws_role_leader(c)) ws_st_relaxed_sys_u64(&a->remote_head[b], step + 1);
  }
  if (ws_role_leader(c)) a->recv_step[b] = step0 + nsteps;
}

/* What a zero-copy receiver posts beside its address: the bytes it expects and, in the
 * top 16 bits, the blocks it cut them into (the copy engine's form: 1). The sender checks
 * both, so that two ranks on different forms (copy_engine or WARPSPEC_SR_CE_MIN_BYTES
 * differing between them) fault with WS_ERR_MISMATCH instead of one of them finishing on
 * block 0's handshake alone with most of its data missing. */
#define ZC_SIZE_WORD(bytes, blocks) ((uint64_t)(bytes) | (uint64_t)(blocks) << 48)
#define ZC_WORD_BYTES(w) ((w) & ((1ull << 48) - 1))
#define ZC_WORD_BLOCKS(w) ((w) >> 48)

/* Zero-copy block b, sending side: wait until the receiver's block b posted its buffer
 * (and check it is where and as large as we think, cut as we cut it), push our span into
 * it, publish. */
static __device__ __forceinline__ void zc_sender(const sr_args *a, const ws_ctx *c, uint32_t b) {
  const ws_sr_geometry *g = &a->send;
  const uint64_t seq = a->zsend_seq[b] + 1;
  if (ws_role_leader(c)) {
    ws_site site = sr_site(WS_EDGE_PEER_CREDIT, a->send_peer, a->rank, b, seq);
    site.object = "sendrecv zero-copy";
    ws_wait_flag_geq(&a->zc_ready[b], seq, c, &site);
    const uint64_t where = ws_ld_acquire_sys_u64(&a->zc_addr[2 * b]), bytes = ws_ld_acquire_sys_u64(&a->zc_addr[2 * b + 1]);
    if (where != a->expect_addr || bytes != ZC_SIZE_WORD(g->bytes, g->blocks)) {
      const long long v[4] = {(long long)g->bytes, (long long)g->blocks, (long long)ZC_WORD_BYTES(bytes),
                              (long long)ZC_WORD_BLOCKS(bytes)};
      site.object = where != a->expect_addr ? "zero-copy: the peer's recvbuf is another symmetric object" : "zero-copy";
      ws_fault_raise(c, WS_FAULT_MISMATCH, &site, 0, v);
    }
  }
  ws_role_sync(c);
  const uint64_t begin = ws_sr_block_begin(g, b);
  role_copy(a->remote_dst + begin, a->src + begin, ws_sr_block_bytes(g, b), c, 0);
  ws_role_sync(c);
  if (ws_role_leader(c)) {
    ws_fence_acq_rel_sys();
    ws_st_relaxed_sys_u64(&a->peer_zc_done[b], seq);
    a->zsend_seq[b] = seq;
  }
}

/* Zero-copy block b, receiving side: post our buffer, wait until the sender is done. */
static __device__ __forceinline__ void zc_receiver(const sr_args *a, const ws_ctx *c, uint32_t b) {
  if (!ws_role_leader(c)) return;
  const uint64_t seq = a->zrecv_seq[b] + 1;
  ws_st_relaxed_sys_u64(&a->peer_zc_addr[2 * b], (uint64_t)(uintptr_t)a->dst);
  ws_st_relaxed_sys_u64(&a->peer_zc_addr[2 * b + 1], ZC_SIZE_WORD(a->recv.bytes, a->recv.blocks));
  ws_fence_acq_rel_sys();
  ws_st_relaxed_sys_u64(&a->peer_zc_ready[b], seq);
  const ws_site site = sr_site(WS_EDGE_PEER_DATA, a->recv_peer, a->rank, b, seq);
  ws_wait_flag_geq(&a->zc_done[b], seq, c, &site);
  a->zrecv_seq[b] = seq;
}

/* CTA b of one (send, receive) pair: its sending role and its receiving role. */
static __device__ __forceinline__ void sr_block(const sr_args *a, const ws_ctx *ctx, uint32_t b) {
  if (ctx->role == SR_SENDER) {
    if (a->send_peer >= 0 && b < a->send.blocks) {
      if (a->zero_copy) zc_sender(a, ctx, b);
      else if (a->send.ll) ll_sender(a, ctx, b);
      else sender(a, ctx, b);
    }
  } else if (ctx->role == SR_RECEIVER) {
    if (a->recv_peer >= 0 && b < a->recv.blocks) {
      if (a->zero_copy) zc_receiver(a, ctx, b);
      else if (a->recv.ll) ll_receiver(a, ctx, b);
      else receiver(a, ctx, b);
    }
  }
}

WS_KERNEL(sr) sendrecv_kernel(const __grid_constant__ sr_args a, ws_diag diag) {
  ws_ctx ctx = WS_SELF(sr, diag);
  sr_block(&a, &ctx, blockIdx.x);
}

/* ---- several pairs in one launch: the direct all-gather -----------------------------
 * Row y < npairs of the grid runs pair y (its own peers, so its own staging regions and
 * step counters: the steps stay in order per (peer, block) whatever else uses them);
 * the last row copies our own block into place with its sending roles. */
typedef struct {
  sr_args pair[WS_SR_MAX_PAIRS];
  int npairs;
  const uint8_t *local_src;
  uint8_t *local_dst;
  uint64_t local_bytes;
} sr_multi_args;

WS_KERNEL(sr) sendrecv_multi_kernel(const __grid_constant__ sr_multi_args m, ws_diag diag) {
  ws_ctx ctx = WS_SELF(sr, diag);
  if ((int)blockIdx.y < m.npairs) {
    sr_block(&m.pair[blockIdx.y], &ctx, blockIdx.x);
    return;
  }
  if (ctx.role != SR_SENDER || m.local_bytes == 0) return;
  /* ceil, then up to 16 bytes: rounding the quotient down lost the tail (3 MiB + 16 over 64 CTAs: 16 bytes) */
  const uint64_t per = ((m.local_bytes + gridDim.x - 1) / gridDim.x + 15) / 16 * 16, off = (uint64_t)blockIdx.x * per;
  if (off < m.local_bytes)
    role_copy(m.local_dst + off, m.local_src + off, m.local_bytes - off < per ? m.local_bytes - off : per, &ctx, 0);
}

/* ---- zero-copy: the copy engine writes into the receiver's symmetric buffer ---------
 * Stream of every rank: zc_kernel(phase 0), cudaMemcpyAsync to the peer, zc_kernel(1).
 * Phase 0: post "ready, address, bytes" to the rank we receive from; wait for the rank
 * we send to, and check that it receives exactly where and what we will write.
 * Phase 1: tell the receiver we are done; wait until our sender is done. Sequence
 * numbers live in device memory: graph-replayable like the staging path. */
#define ZC_ROLES(ROLE) ROLE(ZC_SIGNALS, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(zc, ZC_ROLES);

typedef struct {
  int phase, rank, send_peer, recv_peer;
  uint64_t *send_seq, *recv_seq;  /* our counters for these peers */
  uint64_t *peer_ready;           /* recv_peer's zc_ready[us]: we post */
  uint64_t *peer_addr;            /* recv_peer's zc_addr[us][2] */
  uint64_t recv_addr, recv_bytes; /* what we post */
  const uint64_t *ready;          /* our zc_ready[send_peer] */
  const uint64_t *addr;           /* our zc_addr[send_peer][2] */
  uint64_t send_addr, send_bytes; /* where and what we will write */
  uint64_t *peer_done;            /* send_peer's zc_done[us] */
  const uint64_t *done;           /* our zc_done[recv_peer] */
} zc_args;

WS_KERNEL(zc) zc_kernel(const __grid_constant__ zc_args a, ws_diag diag) {
  ws_ctx ctx = WS_SELF(zc, diag);
  if (ctx.lane == 0 && a.send_peer >= 0) { /* the sending side */
    if (a.phase == 0) {
      const uint64_t seq = *a.send_seq + 1;
      ws_site site = sr_site(WS_EDGE_PEER_CREDIT, a.send_peer, a.rank, 0, seq);
      site.object = "sendrecv zero-copy (is the peer calling with zero_copy?)";
      ws_wait_flag_geq(a.ready, seq, &ctx, &site);
      const uint64_t where = ws_ld_acquire_sys_u64(&a.addr[0]), bytes = ws_ld_acquire_sys_u64(&a.addr[1]);
      if (where != a.send_addr || bytes != ZC_SIZE_WORD(a.send_bytes, 1)) {
        const long long v[4] = {(long long)a.send_bytes, 1, (long long)ZC_WORD_BYTES(bytes), (long long)ZC_WORD_BLOCKS(bytes)};
        site.object = where != a.send_addr ? "zero-copy receive buffer at another address" : "zero-copy";
        ws_fault_raise(&ctx, WS_FAULT_MISMATCH, &site, 0, v);
      }
    } else {
      const uint64_t seq = ++*a.send_seq;
      ws_fence_acq_rel_sys();
      ws_st_relaxed_sys_u64(a.peer_done, seq);
    }
  }
  if (ctx.lane == 1 && a.recv_peer >= 0) { /* the receiving side */
    if (a.phase == 0) {
      const uint64_t seq = ++*a.recv_seq;
      ws_st_relaxed_sys_u64(&a.peer_addr[0], a.recv_addr);
      ws_st_relaxed_sys_u64(&a.peer_addr[1], ZC_SIZE_WORD(a.recv_bytes, 1));
      ws_fence_acq_rel_sys();
      ws_st_relaxed_sys_u64(a.peer_ready, seq);
    } else {
      const ws_site site = sr_site(WS_EDGE_PEER_DATA, a.recv_peer, a.rank, 0, *a.recv_seq);
      ws_wait_flag_geq(a.done, *a.recv_seq, &ctx, &site);
    }
  }
}

static ws_status zero_copy_ce(ws_comm *c, const void *sendbuf, size_t n, int send_peer, void *recvbuf, int recv_peer,
                              cudaStream_t stream) {
  ws_sr_state *sr = c->sr;
  ws_status s;
  if (!sr->zc_planned) {
    if ((s = ws_plan_init(&sr->zc_plan, "zero_copy", zc_roles, zc_NROLES, 0)) != WS_OK) return s;
    sr->zc_planned = 1;
  }
  void *peer_dst = NULL;
  if ((s = ws_comm_peer_ptr(c, recvbuf, send_peer, &peer_dst)) != WS_OK) return s;
  zc_args a;
  memset(&a, 0, sizeof a);
  a.rank = c->rank;
  a.send_peer = send_peer;
  a.recv_peer = recv_peer;
  /* block 0 of the per-block handshake words: the copy engine is one "block" */
  const size_t B = WS_SR_MAX_BLOCKS;
  a.send_seq = sr->zc_seq + (size_t)send_peer * B;
  a.recv_seq = sr->zc_seq + ((size_t)c->nranks + recv_peer) * B;
  a.peer_ready = sr->peer_zc_ready[recv_peer] + (size_t)c->rank * B;
  a.peer_addr = sr->peer_zc_addr[recv_peer] + 2 * (size_t)c->rank * B;
  a.recv_addr = (uint64_t)(uintptr_t)recvbuf;
  a.recv_bytes = n;
  a.ready = sr->zc_ready + (size_t)send_peer * B;
  a.addr = sr->zc_addr + 2 * (size_t)send_peer * B;
  a.send_addr = (uint64_t)(uintptr_t)recvbuf; /* the SHMEM convention: the same symmetric object */
  a.send_bytes = n;
  a.peer_done = sr->peer_zc_done[send_peer] + (size_t)c->rank * B;
  a.done = sr->zc_done + (size_t)recv_peer * B;
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&a, &diag};
  if ((s = ws_plan_launch(&sr->zc_plan, (const void *)zc_kernel, dim3{1, 1, 1}, stream, args)) != WS_OK) return s;
  WS_CUDA_TRY(cudaMemcpyAsync(peer_dst, sendbuf, n, cudaMemcpyDeviceToDevice, stream));
  a.phase = 1;
  return ws_plan_launch(&sr->zc_plan, (const void *)zc_kernel, dim3{1, 1, 1}, stream, args);
}

/* From this size on, zero-copy goes through the copy engine (WS_SR_CE_MIN_BYTES, or
 * WARPSPEC_SR_CE_MIN_BYTES; 0 counts as 1: every zero-copy transfer). */
static uint64_t ce_min_bytes(void) {
  const long long v = ws_knobs_get()->sr_ce_min_bytes;
  return v > 1 ? (uint64_t)v : 1;
}

static int overlap(const void *a, size_t na, const void *b, size_t nb) {
  const uint8_t *x = (const uint8_t *)a, *y = (const uint8_t *)b;
  return na && nb && x < y + nb && y < x + na;
}

/* The staging path's arguments of one (send, receive) pair (either peer WS_NO_PEER);
 * *grid: at least the pair's CTAs. */
static ws_status sr_pair(ws_comm *c, sr_args *a, const void *sendbuf, size_t sendbytes, int send_peer, void *recvbuf,
                         size_t recvbytes, int recv_peer, int ctas, uint32_t *grid) {
  ws_sr_state *sr = c->sr;
  a->rank = c->rank;
  a->send_peer = send_peer != WS_NO_PEER ? send_peer : -1;
  a->recv_peer = recv_peer != WS_NO_PEER ? recv_peer : -1;
  if (send_peer != WS_NO_PEER) {
    a->src = (const uint8_t *)sendbuf;
    a->send = ws_sr_geometry_make(sendbytes, (uint32_t)ctas);
    WS_REQUIRE(sr->peer_staging[send_peer] != NULL, "ws_sendrecv: rank %d cannot reach rank %d's memory (no NVLink/P2P)",
               c->rank, send_peer);
    a->remote_staging = sr->peer_staging[send_peer] + (size_t)c->rank * WS_SR_REGION_BYTES;
    a->remote_tail = sr->peer_tail[send_peer] + (size_t)c->rank * WS_SR_MAX_BLOCKS;
    a->credits = sr->head + (size_t)send_peer * WS_SR_MAX_BLOCKS;
    a->send_step = sr->send_step + (size_t)send_peer * WS_SR_MAX_BLOCKS;
    if (a->send.blocks > *grid) *grid = a->send.blocks;
  }
  if (recv_peer != WS_NO_PEER) {
    a->dst = (uint8_t *)recvbuf;
    a->recv = ws_sr_geometry_make(recvbytes, (uint32_t)ctas);
    WS_REQUIRE(sr->peer_head[recv_peer] != NULL, "ws_sendrecv: rank %d cannot reach rank %d's memory (no NVLink/P2P)",
               c->rank, recv_peer);
    a->staging = sr->staging + (size_t)recv_peer * WS_SR_REGION_BYTES;
    a->tails = sr->tail + (size_t)recv_peer * WS_SR_MAX_BLOCKS;
    a->remote_head = sr->peer_head[recv_peer] + (size_t)c->rank * WS_SR_MAX_BLOCKS;
    a->recv_step = sr->recv_step + (size_t)recv_peer * WS_SR_MAX_BLOCKS;
    if (a->recv.blocks > *grid) *grid = a->recv.blocks;
  }
  return WS_OK;
}

/* Turn the pair's sending and receiving halves to zero-copy: our span lands straight in
 * `obj` as send_peer addresses it (obj: our own address of the same symmetric object,
 * which is what send_peer's receiving half posts and our sender checks); our receiving
 * half posts a->dst to recv_peer. Both peers must be set. */
static ws_status sr_pair_zero_copy(ws_comm *c, sr_args *a, void *obj, int send_peer, int recv_peer) {
  ws_sr_state *sr = c->sr;
  const size_t B = WS_SR_MAX_BLOCKS;
  void *peer_dst = NULL;
  ws_status s;
  if ((s = ws_comm_peer_ptr(c, obj, send_peer, &peer_dst)) != WS_OK) return s;
  a->zero_copy = 1;
  a->remote_dst = (uint8_t *)peer_dst;
  a->expect_addr = (uint64_t)(uintptr_t)obj;
  a->zc_ready = sr->zc_ready + (size_t)send_peer * B;
  a->zc_addr = sr->zc_addr + 2 * (size_t)send_peer * B;
  a->peer_zc_done = sr->peer_zc_done[send_peer] + (size_t)c->rank * B;
  a->zsend_seq = sr->zc_seq + (size_t)send_peer * B;
  a->peer_zc_ready = sr->peer_zc_ready[recv_peer] + (size_t)c->rank * B;
  a->peer_zc_addr = sr->peer_zc_addr[recv_peer] + 2 * (size_t)c->rank * B;
  a->zc_done = sr->zc_done + (size_t)recv_peer * B;
  a->zrecv_seq = sr->zc_seq + ((size_t)c->nranks + recv_peer) * B;
  return WS_OK;
}

extern "C" ws_status ws_sendrecv(ws_comm *c, const void *sendbuf, size_t sendbytes, int send_peer, void *recvbuf,
                                 size_t recvbytes, int recv_peer, const ws_sendrecv_opts *opts, cudaStream_t stream) {
  WS_REQUIRE(c != NULL, "ws_sendrecv: comm is NULL");
  WS_REQUIRE(send_peer == WS_NO_PEER || (send_peer >= 0 && send_peer < c->nranks),
             "ws_sendrecv: send_peer %d out of range for %d ranks (WS_NO_PEER = -1 for none)", send_peer, c->nranks);
  WS_REQUIRE(recv_peer == WS_NO_PEER || (recv_peer >= 0 && recv_peer < c->nranks),
             "ws_sendrecv: recv_peer %d out of range for %d ranks (WS_NO_PEER = -1 for none)", recv_peer, c->nranks);
  const int ctas = opts ? opts->ctas : 0;
  const int zero_copy = opts ? opts->zero_copy : 0;
  const int copy_engine = opts ? opts->copy_engine : 0;
  WS_REQUIRE(ctas >= 0 && ctas <= WS_SR_MAX_BLOCKS, "ws_sendrecv: ctas %d, must be 1..%d (0: tuned default)", ctas,
             WS_SR_MAX_BLOCKS);
  const int sending = send_peer != WS_NO_PEER, receiving = recv_peer != WS_NO_PEER;
  if (sending) {
    WS_REQUIRE(sendbuf != NULL || sendbytes == 0, "ws_sendrecv: sendbuf is NULL with %zu bytes to send", sendbytes);
    WS_REQUIRE(((uintptr_t)sendbuf & 15u) == 0, "ws_sendrecv: sendbuf %p is not 16-byte aligned", sendbuf);
    WS_REQUIRE(ws_span_fits(sendbuf, sendbytes), "ws_sendrecv: sendbuf %p + %zu bytes runs past the end of the address "
               "space", sendbuf, sendbytes);
  }
  if (receiving) {
    WS_REQUIRE(recvbuf != NULL || recvbytes == 0, "ws_sendrecv: recvbuf is NULL with %zu bytes to receive", recvbytes);
    WS_REQUIRE(((uintptr_t)recvbuf & 15u) == 0, "ws_sendrecv: recvbuf %p is not 16-byte aligned", recvbuf);
    WS_REQUIRE(ws_span_fits(recvbuf, recvbytes), "ws_sendrecv: recvbuf %p + %zu bytes runs past the end of the address "
               "space", recvbuf, recvbytes);
  }
  WS_REQUIRE(!(sending && receiving && overlap(sendbuf, sendbytes, recvbuf, recvbytes)),
             "ws_sendrecv: sendbuf and recvbuf overlap");
  if (!sending && !receiving) return WS_OK;
  if (zero_copy) {
    WS_REQUIRE(sending && receiving, "ws_sendrecv: zero_copy needs both a send and a receive on every rank (the sender "
               "writes into the peer's copy of its own symmetric recvbuf)");
    WS_REQUIRE(ws_comm_is_symmetric(c, recvbuf, recvbytes ? recvbytes : 1),
               "ws_sendrecv: zero_copy: recvbuf %p is not in the symmetric heap (allocate it with ws_comm_alloc)", recvbuf);
    WS_REQUIRE(sendbytes < (1ull << 48), "ws_sendrecv: zero_copy: %zu bytes, at most 2^48 - 1", sendbytes);
    WS_REQUIRE(sendbytes == recvbytes, "ws_sendrecv: zero_copy: sendbytes %zu != recvbytes %zu (every rank must move the "
               "same size so that all take the same path)", sendbytes, recvbytes);
    WS_REQUIRE(copy_engine >= -1 && copy_engine <= 1, "ws_sendrecv: copy_engine %d, must be -1, 0 or 1", copy_engine);
    if (copy_engine > 0 || (copy_engine == 0 && sendbytes >= ce_min_bytes()))
      return zero_copy_ce(c, sendbuf, sendbytes, send_peer, recvbuf, recv_peer, stream);
  }

  ws_sr_state *sr = c->sr;
  ws_status s;
  if (!sr->sr_planned) {
    if ((s = ws_plan_init(&sr->sr_plan, "sendrecv", sr_roles, sr_NROLES, 0)) != WS_OK) return s;
    sr->sr_planned = 1;
  }
  sr_args a;
  memset(&a, 0, sizeof a);
  uint32_t grid = 0;
  if ((s = sr_pair(c, &a, sendbuf, sendbytes, send_peer, recvbuf, recvbytes, recv_peer, ctas, &grid)) != WS_OK) return s;
  /* smaller: the low-latency staging path is faster; the same symmetric object on the peer */
  if (zero_copy && sendbytes >= WS_SR_ZC_MIN_BYTES && (s = sr_pair_zero_copy(c, &a, recvbuf, send_peer, recv_peer)) != WS_OK)
    return s;
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&a, &diag};
  return ws_plan_launch(&sr->sr_plan, (const void *)sendrecv_kernel, dim3{grid, 1, 1}, stream, args);
}

extern "C" ws_status ws_send(ws_comm *c, const void *buf, size_t bytes, int peer, cudaStream_t stream) {
  WS_REQUIRE(peer != WS_NO_PEER, "ws_send: peer is WS_NO_PEER");
  return ws_sendrecv(c, buf, bytes, peer, NULL, 0, WS_NO_PEER, NULL, stream);
}

extern "C" ws_status ws_recv(ws_comm *c, void *buf, size_t bytes, int peer, cudaStream_t stream) {
  WS_REQUIRE(peer != WS_NO_PEER, "ws_recv: peer is WS_NO_PEER");
  return ws_sendrecv(c, NULL, 0, WS_NO_PEER, buf, bytes, peer, NULL, stream);
}

/* The direct all-gather (allgather.c chooses it): every rank sends its block to every
 * other rank at once, pair k = (to rank + 1 + k, from rank - 1 - k), one launch; the
 * block of rank q lands at out + q x bytes, ours copied by the last row of the grid.
 * zero_copy (recvbuf symmetric on every rank): each pair stores our block straight into
 * out + rank x bytes on its `to` rank, after that rank's receiving half posted it. */
extern "C" ws_status ws_sr_allgather_direct(ws_comm *c, const void *sendbuf, size_t bytes, void *recvbuf, int zero_copy,
                                            cudaStream_t stream) {
  const int n = c->nranks, r = c->rank;
  WS_REQUIRE(n - 1 <= WS_SR_MAX_PAIRS, "ws_allgather: the direct path takes at most %d peers, not %d", WS_SR_MAX_PAIRS,
             n - 1);
  ws_sr_state *sr = c->sr;
  ws_status s;
  if (!sr->ag_planned) {
    if ((s = ws_plan_init(&sr->ag_plan, "allgather_direct", sr_roles, sr_NROLES, 0)) != WS_OK) return s;
    sr->ag_planned = 1;
  }
  static sr_multi_args m; /* about 2 KB: not on the host stack of every call */
  memset(&m, 0, sizeof m);
  uint8_t *out = (uint8_t *)recvbuf;
  uint32_t grid = 1;
  /* CTAs per pair: the tuned count, but all rows at once on the GPU (a fixed cap, not the
   * SM count, so that every rank cuts the blocks the same way) */
  const uint32_t cap = WS_AG_DIRECT_MAX_CTAS / (uint32_t)n, def = ws_sr_default_blocks(bytes);
  const int ctas = (int)(def < cap ? def : cap);
  for (int k = 0; k < n - 1; k++) {
    const int to = (r + 1 + k) % n, from = (r - 1 - k + n) % n;
    if ((s = sr_pair(c, &m.pair[k], sendbuf, bytes, to, out + (size_t)from * bytes, bytes, from, ctas, &grid)) != WS_OK)
      return s;
    if (zero_copy && (s = sr_pair_zero_copy(c, &m.pair[k], out + (size_t)r * bytes, to, from)) != WS_OK) return s;
  }
  m.npairs = n - 1;
  if (out + (size_t)r * bytes != (const uint8_t *)sendbuf) {
    m.local_src = (const uint8_t *)sendbuf;
    m.local_dst = out + (size_t)r * bytes;
    m.local_bytes = bytes;
  }
  ws_diag diag;
  if ((s = ws_diag_get(&diag)) != WS_OK) return s;
  void *args[] = {&m, &diag};
  return ws_plan_launch(&sr->ag_plan, (const void *)sendrecv_multi_kernel, dim3{grid, (unsigned)n, 1}, stream, args);
}
