/* layer.c - the MoE layer in one call: dispatch, the experts (unfused: L1 grouped
 * GEMM, SwiGLU + per-128 requantisation, L2 grouped GEMM; fused: one persistent kernel,
 * layer_kernel.cu), combine, all stream-ordered on the handle's buffers (no host
 * synchronisation: graph-capturable). The fused layer path runs dispatch and combine
 * inside the same kernel: on one GPU as local copies (layer_items.cuh), on several
 * ranks over the dispatch handle's symmetric buffers (layer_items_ep.cuh). */
#include "../../core/index_check.h"
#include "../../core/internal.h"
#include "../../core/knobs.h"
#include "../../core/size_check.h"
#include "warpspec/check.h"
#include "warpspec/fp8.h"
#include "warpspec/gemm.h"
#include "warpspec/moe.h"
#include "warpspec/moe_layer.h"
#include "layer_kernel.h"
#include "layer_auto.h"
#include "../swiglu_internal.h"

#include <stdlib.h>
#include <string.h>

struct ws_moe_layer {
  ws_moe_layer_config cfg;
  ws_ep *ep;
  int local_experts;
  size_t max_rows, act_ld;
  const void *w1, *w2;
  const float *w1_scale, *w2_scale;
  uint16_t *h;   /* [max_rows][2 I] bf16: L1 out (unfused path only)               */
  uint8_t *act;  /* [max_rows][I] e4m3: SwiGLU, requantised                     */
  float *act_s;  /* [I / 128][act_ld]: its scales, K-block-major (L2 reads them) */
  uint16_t *y;   /* [max_rows][H] bf16: L2 out                                  */
  uint8_t *xq;   /* [max_tokens][H] e4m3: a BF16 input quantised                */
  float *xs;     /* [max_tokens][H / 128]                                       */
  uint32_t *counters; /* fused experts: per 64-row block, zero between calls          */
  /* the fused layer (one GPU): its own grouped layout, written by the kernel */
  int nranks;
  uint8_t *gx;   /* [max_rows][H] e4m3                                           */
  float *gxs;    /* [H / 128][act_ld]                                            */
  int *offsets;  /* [E + 1]                                                      */
  int *entry_row; /* [max_tokens][K]                                             */
  int *bad_id;   /* [4]                                                          */
  int tile_force; /* WARPSPEC_MOE_TILE at create: 64 or 128 forces the tile, else 0   */
  int gather;     /* the unfused path's L1 reads the received rows in place (index receive) */
  int pair_force; /* WARPSPEC_MOE_PAIR at create: 1 / 0 forces CTA pairs on / off, else -1 */
};

static void layer_free(ws_moe_layer *l) {
  void *dev[] = {l->h, l->act, l->act_s, l->y, l->xq, l->xs, l->counters, l->gx, l->gxs, l->offsets, l->entry_row, l->bad_id};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i]) cudaFree(dev[i]);
  free(l);
}

static ws_status layer_alloc(ws_moe_layer *l, void **p, size_t bytes) {
  if (cudaMalloc(p, bytes + 256) != cudaSuccess) {
    (void)cudaGetLastError();
    *p = NULL;
    return ws_fail(WS_ERR_NOMEM, "ws_moe_layer_create: cudaMalloc of %zu bytes failed", bytes + 256);
  }
  (void)l;
  return cudaMemset(*p, 0, bytes + 256) == cudaSuccess ? WS_OK : ws_fail_cuda(cudaGetLastError(), "cudaMemset");
}

ws_status ws_moe_layer_create(ws_moe_layer **out, ws_comm *comm, const ws_moe_layer_config *cfg, const void *w1,
                              const float *w1_scale, const void *w2, const float *w2_scale) {
  WS_REQUIRE(out != NULL, "ws_moe_layer_create: layer is NULL");
  *out = NULL; /* a failed create leaves no stale handle behind */
  WS_REQUIRE(comm != NULL && cfg != NULL, "ws_moe_layer_create: comm or cfg is NULL");
  WS_REQUIRE(cfg->path == WS_MOE_AUTO || cfg->path == WS_MOE_UNFUSED || cfg->path == WS_MOE_FUSED_EXPERTS ||
                 cfg->path == WS_MOE_FUSED_LAYER,
             "ws_moe_layer_create: path %d unknown (WS_MOE_AUTO = 0, WS_MOE_UNFUSED = 1, WS_MOE_FUSED_EXPERTS = 2, "
             "WS_MOE_FUSED_LAYER = 3)", (int)cfg->path);
  /* bounded (as the dispatcher bounds hidden) so that every product of the weights' and
   * rows' extents stays in 64 bits and each kernel's 32-bit offsets */
  WS_REQUIRE(cfg->hidden >= 128 && cfg->hidden % 128 == 0 && cfg->hidden <= 65536,
             "ws_moe_layer_create: hidden %d, a positive multiple of 128, at most 65536", cfg->hidden);
  WS_REQUIRE(cfg->inter >= 128 && cfg->inter % 128 == 0 && cfg->inter <= 65536,
             "ws_moe_layer_create: inter %d, a positive multiple of 128, at most 65536", cfg->inter);
  WS_REQUIRE(w1 && w1_scale && w2 && w2_scale, "ws_moe_layer_create: a weight or weight-scale pointer is NULL");
  WS_REQUIRE(((uintptr_t)w1 & 15u) == 0 && ((uintptr_t)w2 & 15u) == 0 && ((uintptr_t)w1_scale & 15u) == 0 &&
                 ((uintptr_t)w2_scale & 15u) == 0,
             "ws_moe_layer_create: weights and their scales must be 16-byte aligned");
  ws_ep_config ec;
  memset(&ec, 0, sizeof ec);
  ec.hidden = cfg->hidden;
  ec.experts = cfg->experts;
  ec.topk = cfg->topk;
  ec.max_tokens = cfg->max_tokens;
  ec.payload = WS_EP_FP8;
  /* the tile rows: no tile straddles two experts */
  ec.row_align = cfg->path == WS_MOE_UNFUSED ? 128 : MOE_EXPERTS_BM;
  ec.mode = WS_EP_NORMAL;
  /* gathered (WS_MOE_GATHER_DEFAULT, WARPSPEC_MOE_GATHER): the unfused path reads the
   * received rows in place, with no copy to allocate (hundreds of MB a rank at thousands
   * of tokens); the fused paths take the copy */
  const ws_knobs *knobs = ws_knobs_get();
  const int gather = knobs->moe_gather;
  ec.receive = gather && cfg->path == WS_MOE_UNFUSED ? WS_EP_RECEIVE_INDEX : WS_EP_RECEIVE_COPY;
  int n = 0;
  ws_status s;
  /* The layer's transfer kernels run alone in stream order, with no compute beside them
   * to leave SMs to, so by default they take every SM up to WS_EP_MAX_SMS (ws_ep's own
   * default, 24, leaves room for overlap): at thousands of tokens they are bound by the
   * SMs' copies, not by the links (docs/design.md, "Knobs: why these defaults"). */
  ec.num_sms = cfg->num_sms;
  if (ec.num_sms == 0) {
    if ((s = ws_device_sms(&ec.num_sms)) != WS_OK) return s;
    ec.num_sms = ec.num_sms < WS_EP_MAX_SMS ? ec.num_sms : WS_EP_MAX_SMS;
  }
  if ((s = ws_comm_size(comm, &n)) != WS_OK || (s = ws_ep_config_check(&ec, n)) != WS_OK) return s;
  WS_REQUIRE(ws_ep_max_rows(&ec, n) <= (size_t)WS_EXTENT_MAX, "ws_moe_layer_create: %zu receive rows (max_tokens %d, top-%d, %d "
             "ranks), at most 2^30 (the expert GEMMs' m)", ws_ep_max_rows(&ec, n), cfg->max_tokens, cfg->topk, n);
  ws_moe_layer *l = (ws_moe_layer *)calloc(1, sizeof *l);
  if (!l) return ws_fail(WS_ERR_NOMEM, "ws_moe_layer_create: out of host memory");
  l->cfg = *cfg;
  l->tile_force = knobs->moe_tile == MOE_EXPERTS_BM || knobs->moe_tile == MOE_EXPERTS_BM_WIDE ? knobs->moe_tile : 0;
  l->pair_force = knobs->moe_pair;
  l->gather = gather;
  l->local_experts = cfg->experts / n;
  l->nranks = n;
  l->max_rows = ws_ep_max_rows(&ec, n);
  l->act_ld = (l->max_rows + 3) / 4 * 4;
  l->w1 = w1; l->w1_scale = w1_scale; l->w2 = w2; l->w2_scale = w2_scale;
  const size_t R = l->max_rows, H = (size_t)cfg->hidden, I = (size_t)cfg->inter, T = (size_t)cfg->max_tokens;
  const int fused = cfg->path != WS_MOE_UNFUSED, unfused = cfg->path == WS_MOE_AUTO || cfg->path == WS_MOE_UNFUSED;
  const int whole = n == 1 && (cfg->path == WS_MOE_AUTO || cfg->path == WS_MOE_FUSED_LAYER);
  const size_t K = (size_t)cfg->topk, E = (size_t)cfg->experts;
  if ((unfused && (s = layer_alloc(l, (void **)&l->h, R * 2 * I * 2)) != WS_OK) ||
      (fused && (s = layer_alloc(l, (void **)&l->counters, moe_experts_counter_words((int)R, cfg->hidden) * 4)) != WS_OK) ||
      (s = layer_alloc(l, (void **)&l->act, R * I)) != WS_OK ||
      (s = layer_alloc(l, (void **)&l->act_s, (I / 128) * l->act_ld * 4)) != WS_OK ||
      (s = layer_alloc(l, (void **)&l->y, R * H * 2)) != WS_OK || (s = layer_alloc(l, (void **)&l->xq, T * H)) != WS_OK ||
      (s = layer_alloc(l, (void **)&l->xs, T * (H / 128) * 4)) != WS_OK ||
      (whole && (s = layer_alloc(l, (void **)&l->gx, R * H)) != WS_OK) ||
      (whole && (s = layer_alloc(l, (void **)&l->gxs, (H / 128) * l->act_ld * 4)) != WS_OK) ||
      (whole && (s = layer_alloc(l, (void **)&l->offsets, (E + 1) * 4)) != WS_OK) ||
      (whole && (s = layer_alloc(l, (void **)&l->entry_row, T * K * 4)) != WS_OK) ||
      (whole && (s = layer_alloc(l, (void **)&l->bad_id, 4 * 4)) != WS_OK)) {
    layer_free(l);
    return s;
  }
  if ((s = ws_ep_create(&l->ep, comm, &ec)) != WS_OK) {
    layer_free(l);
    return s;
  }
  *out = l;
  return WS_OK;
}

ws_status ws_moe_layer_destroy(ws_moe_layer *l) {
  WS_REQUIRE(l != NULL, "ws_moe_layer_destroy: layer is NULL");
  const ws_status s = ws_ep_destroy(l->ep);
  layer_free(l);
  return s;
}

/* Rows a local expert gets on average in a call of `tokens` tokens per rank (T K / L):
 * what the path, tile and pair choices below go by. */
static double layer_rows_per_expert(const ws_moe_layer *l, int tokens) {
  return (double)tokens * l->cfg.topk / l->local_experts;
}

/* WS_MOE_AUTO: with every rank passing about as many tokens as this one and routing about
 * uniform, T K (token, expert) pairs land on each rank, T K / L rows per local expert. */
ws_moe_path moe_layer_auto_path(int nranks, double rows) {
  if (nranks == 1) return rows < WS_MOE_AUTO_LAYER_ROWS ? WS_MOE_FUSED_LAYER : WS_MOE_UNFUSED;
  if (rows < WS_MOE_AUTO_EP_LAYER_ROWS) return WS_MOE_FUSED_LAYER;
  return rows < WS_MOE_AUTO_FUSED_ROWS ? WS_MOE_FUSED_EXPERTS : WS_MOE_UNFUSED;
}

/* Which path a call takes: the configured one, or auto's. */
static ws_moe_path layer_path(const ws_moe_layer *l, int tokens) {
  if (l->cfg.path != WS_MOE_AUTO) return l->cfg.path;
  return moe_layer_auto_path(l->nranks, layer_rows_per_expert(l, tokens));
}

ws_status ws_moe_layer_path_for(const ws_moe_layer *l, int tokens, ws_moe_path *path) {
  WS_REQUIRE(l != NULL && path != NULL, "ws_moe_layer_path_for: layer or path is NULL");
  WS_REQUIRE(tokens >= 0, "ws_moe_layer_path_for: tokens %d < 0", tokens);
  *path = layer_path(l, tokens);
  return WS_OK;
}

/* The experts kernel's tile rows for a call of `tokens` tokens per rank: the 128-row tile
 * from WS_MOE_WIDE_ROWS rows per local expert (config.h, 0: never); WARPSPEC_MOE_TILE=
 * 64|128 when the layer was created forces one (tests, measurements). */
static int layer_tile_rows(const ws_moe_layer *l, int tokens) {
  if (l->tile_force) return l->tile_force;
  const double rows = layer_rows_per_expert(l, tokens);
  return WS_MOE_WIDE_ROWS > 0 && rows >= WS_MOE_WIDE_ROWS ? MOE_EXPERTS_BM_WIDE : MOE_EXPERTS_BM;
}

/* The fused experts path's CTA pairs (layer_kernel.cu: the weights read from L2 once per
 * 128 rows) from WS_MOE_PAIR_ROWS rows per local expert (config.h); WARPSPEC_MOE_PAIR=1|0
 * when the layer was created forces them on or off. Not with a forced 128-row tile. */
static int layer_pair(const ws_moe_layer *l, int tokens) {
  if (l->tile_force == MOE_EXPERTS_BM_WIDE) return 0;
  if (l->pair_force >= 0) return l->pair_force;
  const double rows = layer_rows_per_expert(l, tokens);
  return WS_MOE_PAIR_ROWS > 0 && rows >= WS_MOE_PAIR_ROWS;
}

/* The experts kernel's problem on a grouped layout (x, its scales and the offsets). */
static void layer_experts_problem(const ws_moe_layer *l, moe_experts_problem *p, const void *x, const float *xs,
                                  int xs_ld, const int *offsets, int tokens) {
  memset(p, 0, sizeof *p);
  p->tile_rows = layer_tile_rows(l, tokens);
  p->hidden = l->cfg.hidden;
  p->inter = l->cfg.inter;
  p->groups = l->local_experts;
  p->max_rows = (int)l->max_rows;
  p->offsets = offsets;
  p->x = x;
  p->x_scale = xs;
  p->x_scale_ld = xs_ld;
  p->w1 = l->w1;
  p->w1_scale = l->w1_scale;
  p->w2 = l->w2;
  p->w2_scale = l->w2_scale;
  p->act = l->act;
  p->act_scale = l->act_s;
  p->act_ld = (int)l->act_ld;
  p->y = l->y;
  p->counters = l->counters;
}

/* The call; with `ev` (6 events) also an event before the call and after each of its five
 * stages (dispatch with the input quantiser, L1, SwiGLU + requant, L2, combine). */
static ws_status layer_run(ws_moe_layer *l, const void *x, const float *x_scale, const int *topk_idx,
                           const float *topk_weights, int tokens, void *out, cudaStream_t stream, cudaEvent_t *ev) {
#define STAGE_DONE(i) do { if (ev) WS_CUDA_TRY(cudaEventRecord(ev[i], stream)); } while (0)
  WS_REQUIRE(l != NULL, "ws_moe_layer_forward: layer is NULL");
  WS_REQUIRE(tokens >= 0 && tokens <= l->cfg.max_tokens, "ws_moe_layer_forward: tokens %d, must be 0..%d (max_tokens)",
             tokens, l->cfg.max_tokens);
  /* 0 tokens (an idle data-parallel rank, which still serves its experts to the others):
   * x, x_scale, topk_idx, topk_weights and out may all be NULL, as empty tensors' are */
  WS_REQUIRE(tokens == 0 || (x != NULL && topk_idx != NULL && topk_weights != NULL && out != NULL),
             "ws_moe_layer_forward: x, topk_idx, topk_weights or out is NULL with %d tokens", tokens);
  WS_REQUIRE(((uintptr_t)out & 15u) == 0, "ws_moe_layer_forward: out %p is not 16-byte aligned", out);
  const size_t H = (size_t)l->cfg.hidden, I = (size_t)l->cfg.inter;
  const ws_moe_path path = layer_path(l, tokens);
  ws_status s;
  /* the validation mode's expert-id scan: ws_ep_dispatch does it on the other paths */
  if (path == WS_MOE_FUSED_LAYER && ws_check_mode() &&
      (s = ws_index_check_range("ws_moe_layer_forward (validation)", "topk_idx", topk_idx, (long long)tokens * l->cfg.topk,
                                0, l->cfg.experts, -1, stream)) != WS_OK)
    return s;
  STAGE_DONE(0);
  if (path == WS_MOE_FUSED_LAYER) { /* everything in one kernel, BF16 rows quantised inside; its launcher checks the inputs */
    moe_layer_io io;
    memset(&io, 0, sizeof io);
    moe_experts_problem p;
    io.tokens = tokens;
    io.topk = l->cfg.topk;
    io.topk_idx = topk_idx;
    io.topk_weights = topk_weights;
    io.x = x;
    io.x_scale = x_scale;
    io.out = out;
    if (l->nranks == 1) { /* its own grouped layout */
      io.entry_row = l->entry_row;
      io.bad_id = l->bad_id;
      layer_experts_problem(l, &p, l->gx, l->gxs, (int)l->act_ld, l->offsets, tokens);
    } else { /* the dispatch handle's receive layout and buffers */
      ws_ep_recv r;
      if ((s = ws_ep_recv_layout(l->ep, &r)) != WS_OK) return s;
      io.ep = ep_kernel_args(l->ep);
      layer_experts_problem(l, &p, r.x, r.x_scale, r.scale_ld, r.expert_offsets, tokens);
    }
    p.layer = &io;
    STAGE_DONE(1);
    if ((s = moe_experts_launch(&p, stream)) != WS_OK) return s;
    for (int i = 2; i <= 5; i++) STAGE_DONE(i);
    return WS_OK;
  }
  if (tokens > 0 && x_scale == NULL) { /* BF16 in: the 1 x 128 quantiser first */
    WS_REQUIRE(((uintptr_t)x & 15u) == 0, "ws_moe_layer_forward: x %p is not 16-byte aligned", x);
    if ((s = ws_fp8_quantize_1x128(x, (size_t)tokens, H, H, l->xq, l->xs, stream)) != WS_OK) return s;
    x = l->xq;
    x_scale = l->xs;
  }
  /* the unfused path's L1 GEMM may read the received rows in place (gathered A) when
   * WARPSPEC_MOE_GATHER (default WS_MOE_GATHER_DEFAULT) says so; off by default until the
   * gathered loader, which fetches row by row, keeps pace with the copied tile */
  ws_ep_recv r;
  if ((s = ep_dispatch(l->ep, x, x_scale, topk_idx, topk_weights, tokens, &r, NULL,
                       l->gather && path == WS_MOE_UNFUSED, stream)) != WS_OK)
    return s;
  STAGE_DONE(1);
  if (path == WS_MOE_FUSED_EXPERTS) {
    moe_experts_problem p;
    layer_experts_problem(l, &p, r.x, r.x_scale, r.scale_ld, r.expert_offsets, tokens);
    p.pair = layer_pair(l, tokens);
    if (p.pair) p.tile_rows = MOE_EXPERTS_BM;
    if ((s = moe_experts_launch(&p, stream)) != WS_OK) return s;
    STAGE_DONE(2);
    STAGE_DONE(3);
    STAGE_DONE(4);
  } else {
    /* L1: [rows][H] x [2 I][H]^T per expert -> h [rows][2 I] bf16 */
    ws_gemm_problem g;
    memset(&g, 0, sizeof g);
    g.type = WS_GEMM_FP8;
    if ((s = ws_ep_recv_gemm(&r, &g)) != WS_OK) return s;
    g.n = (int)(2 * I);
    g.k = (int)H;
    g.b = l->w1;
    g.d = l->h;
    g.b_scale = l->w1_scale;
    if ((s = ws_gemm(&g, stream)) != WS_OK) return s;
    STAGE_DONE(2);
    /* only the rows in use: expert_offsets[local experts], on the device */
    if ((s = moe_swiglu_quant_live(l->h, (size_t)r.max_rows, r.expert_offsets + r.local_experts, I, l->act, l->act_s,
                                   l->act_ld, stream)) != WS_OK)
      return s;
    STAGE_DONE(3);
    /* L2: [rows][I] x [H][I]^T per expert -> y [rows][H] bf16 */
    g.n = (int)H;
    g.k = (int)I;
    g.a = l->act;
    g.a_rows = NULL; /* L2 reads the activations it wrote, in layout order */
    g.a_rows_total = 0;
    g.a_row_bytes = 0;
    g.a_scale_stride = 0;
    g.b = l->w2;
    g.d = l->y;
    g.a_scale = l->act_s;
    g.b_scale = l->w2_scale;
    g.a_scale_ld = (int)l->act_ld;
    if ((s = ws_gemm(&g, stream)) != WS_OK) return s;
    STAGE_DONE(4);
  }
  if ((s = ws_ep_combine(l->ep, l->y, out, stream)) != WS_OK) return s;
  STAGE_DONE(5);
  return WS_OK;
#undef STAGE_DONE
}

ws_status ws_moe_layer_forward(ws_moe_layer *l, const void *x, const float *x_scale, const int *topk_idx,
                               const float *topk_weights, int tokens, void *out, cudaStream_t stream) {
  return layer_run(l, x, x_scale, topk_idx, topk_weights, tokens, out, stream, NULL);
}

ws_status ws_moe_layer_profile(ws_moe_layer *l, const void *x, const float *x_scale, const int *topk_idx,
                               const float *topk_weights, int tokens, void *out, cudaStream_t stream, float ms[5]) {
  WS_REQUIRE(ms != NULL, "ws_moe_layer_profile: ms is NULL");
  cudaEvent_t ev[6];
  int made = 0;
  ws_status s = WS_OK;
  for (; made < 6; made++)
    if (cudaEventCreate(&ev[made]) != cudaSuccess) {
      s = ws_fail_cuda(cudaGetLastError(), "cudaEventCreate");
      break;
    }
  if (s == WS_OK) s = layer_run(l, x, x_scale, topk_idx, topk_weights, tokens, out, stream, ev);
  if (s == WS_OK) s = ws_sync(stream);
  for (int i = 0; s == WS_OK && i < 5; i++)
    if (cudaEventElapsedTime(&ms[i], ev[i], ev[i + 1]) != cudaSuccess) s = ws_fail_cuda(cudaGetLastError(), "cudaEventElapsedTime");
  const ws_moe_path path = layer_path(l, tokens);
  if (s == WS_OK && path != WS_MOE_UNFUSED) { /* one kernel for [1] .. [3]: the events after it come back to back */
    ms[1] += ms[2] + ms[3];
    ms[2] = ms[3] = 0.0f;
    if (path == WS_MOE_FUSED_LAYER) { /* and dispatch and combine too */
      ms[1] += ms[0] + ms[4];
      ms[0] = ms[4] = 0.0f;
    }
  }
  for (int i = 0; i < made; i++) cudaEventDestroy(ev[i]);
  return s;
}
