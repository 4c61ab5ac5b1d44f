/* ep.cu - the dispatch/combine handle: config checks, worst-case buffers on the
 * communicator's symmetric heap, the config compared across ranks, and the launcher
 * the kernels share. Host code only. */
#include "ep_internal.h"
#include "../core/knobs.h"

#include <stdlib.h>
#include <string.h>

static void ep_fill_args(const ws_ep *ep, ep_args *a);

static int ep_sms(const ws_ep_config *c) {
  if (c->num_sms) return c->num_sms;
  return c->max_tokens <= WS_EP_DECODE_MAX_TOKENS ? WS_EP_DECODE_SMS : WS_EP_DEFAULT_SMS;
}

extern "C" int ws_ep_config_sms(const ws_ep_config *c) { return c ? ep_sms(c) : 0; }

extern "C" ws_status ws_ep_config_check(const ws_ep_config *c, int nranks) {
  WS_REQUIRE(c != NULL, "ws_ep: config is NULL");
  WS_REQUIRE(nranks >= 1 && nranks <= WS_COMM_MAX_RANKS, "ws_ep: %d ranks, must be 1..%d", nranks, WS_COMM_MAX_RANKS);
  WS_REQUIRE(c->payload == WS_EP_BF16 || c->payload == WS_EP_FP8, "ws_ep: payload %d, must be WS_EP_BF16 or WS_EP_FP8",
             (int)c->payload);
  WS_REQUIRE(c->hidden > 0 && c->hidden % (c->payload == WS_EP_FP8 ? 128 : 8) == 0 && c->hidden <= 65536,
             "ws_ep: hidden %d must be a positive multiple of %d (%s), at most 65536", c->hidden,
             c->payload == WS_EP_FP8 ? 128 : 8, c->payload == WS_EP_FP8 ? "FP8 scales cover 128 columns" : "16-byte rows");
  WS_REQUIRE(c->experts >= 1 && c->experts <= WS_EP_MAX_EXPERTS, "ws_ep: experts %d, must be 1..%d", c->experts,
             WS_EP_MAX_EXPERTS);
  WS_REQUIRE(c->experts % nranks == 0, "ws_ep: experts %d is not a multiple of the %d ranks", c->experts, nranks);
  WS_REQUIRE(c->topk >= 1 && c->topk <= WS_EP_MAX_TOPK, "ws_ep: topk %d, must be 1..%d", c->topk, WS_EP_MAX_TOPK);
  WS_REQUIRE(c->max_tokens >= 1 && c->max_tokens <= (1 << 20), "ws_ep: max_tokens %d, must be 1..%d", c->max_tokens,
             1 << 20);
  WS_REQUIRE(c->row_align >= 1 && c->row_align <= 1024, "ws_ep: row_align %d, must be 1..1024", c->row_align);
  WS_REQUIRE(c->num_sms >= 0 && c->num_sms <= WS_EP_MAX_SMS, "ws_ep: num_sms %d, must be 1..%d (0: default %d, %d "
             "up to %d tokens)", c->num_sms, WS_EP_MAX_SMS, WS_EP_DEFAULT_SMS, WS_EP_DECODE_SMS, WS_EP_DECODE_MAX_TOKENS);
  WS_REQUIRE(c->mode == WS_EP_NORMAL || c->mode == WS_EP_LOW_LATENCY, "ws_ep: mode %d, must be WS_EP_NORMAL or "
             "WS_EP_LOW_LATENCY", (int)c->mode);
  WS_REQUIRE(c->receive == WS_EP_RECEIVE_COPY || c->receive == WS_EP_RECEIVE_INDEX, "ws_ep: receive %d, must be "
             "WS_EP_RECEIVE_COPY (0) or WS_EP_RECEIVE_INDEX (1)", (int)c->receive);
  const size_t rows = ws_ep_max_rows(c, nranks);
  WS_REQUIRE(rows + 4 < (size_t)1 << 31, "ws_ep: %zu receive rows exceed the int range of ws_gemm", rows);
  return WS_OK;
}

extern "C" size_t ws_ep_max_rows(const ws_ep_config *c, int nranks) {
  if (!c || nranks < 1 || c->experts < nranks) return 0;
  const int L = c->experts / nranks;
  if (c->mode == WS_EP_LOW_LATENCY) return (size_t)L * (size_t)nranks * (size_t)c->max_tokens;
  /* topk rows a token, not min(topk, L): a token naming one expert in two slots is two
   * entries (moe.h), so with fewer local experts than slots a rank can still get topk */
  return (size_t)nranks * (size_t)c->max_tokens * (size_t)c->topk + (size_t)L * (size_t)(c->row_align - 1);
}

/* The symmetric buffer: one allocation (ep_buffers.h lays the objects out in it), and
 * every peer's copy at one offset from ours (ep_args.peer_delta): checked here, so the
 * kernels can reach any object of any peer by adding that offset. */
static ws_status sym_alloc(ws_ep *ep, size_t bytes, void **mine) {
  ws_status s = ws_comm_alloc(ep->comm, bytes, mine);
  if (s != WS_OK) return s;
  for (int p = 0; p < ep->nranks; p++) {
    void *q = NULL;
    if ((s = ws_comm_peer_ptr(ep->comm, *mine, p, &q)) != WS_OK) return s;
    ep->peer_delta[p] = (int64_t)((const char *)q - (const char *)*mine);
  }
  return WS_OK;
}

static void ep_release(ws_ep *ep) {
  if (ep->sym) ws_comm_free(ep->comm, ep->sym);
  void *dev[] = {ep->epochs, ep->send_counts, ep->entries, ep->tok_slot, ep->bad_id, ep->route_cnt, ep->num_tokens,
                 ep->recv_ntok, ep->comb_row, ep->comb_w, ep->x, ep->x_scale, ep->offsets, ep->expert_counts, ep->src_rank,
                 ep->src_token, ep->src_slot, ep->weight, ep->row_index, ep->ll_marked, ep->route_order};
  for (size_t i = 0; i < sizeof dev / sizeof dev[0]; i++)
    if (dev[i]) cudaFree(dev[i]);
  if (ep->host_buf) cudaFreeHost(ep->host_buf);
  free(ep);
}

/* Every rank's config must equal ours: each writes its own into a symmetric array,
 * then reads the others' after a barrier. With it the environment's choices that shape
 * the symmetric buffer (WARPSPEC_EP_RECORDS). */
typedef struct {
  ws_ep_config cfg;
  int records;
} ep_shape;
static ws_status compare_configs(ws_ep *ep) {
  const int n = ep->nranks;
  ep_shape *box = NULL;
  ws_status s = ws_comm_alloc(ep->comm, sizeof(ep_shape), (void **)&box);
  if (s != WS_OK) return s;
  ep_shape ours;
  memset(&ours, 0, sizeof ours);
  ours.cfg = ep->cfg;
  ours.records = ep->records;
  WS_CUDA_TRY(cudaMemcpy(box, &ours, sizeof ours, cudaMemcpyHostToDevice));
  if ((s = ws_comm_barrier(ep->comm, 0)) != WS_OK || (s = ws_sync(0)) != WS_OK) return s;
  for (int p = 0; p < n && s == WS_OK; p++) {
    void *q = NULL;
    ep_shape shape;
    if ((s = ws_comm_peer_ptr(ep->comm, box, p, &q)) != WS_OK) break;
    if (cudaMemcpy(&shape, q, sizeof shape, cudaMemcpyDefault) != cudaSuccess) {
      s = ws_fail(WS_ERR_CUDA, "ws_ep_create: reading rank %d's config failed", p);
      break;
    }
    const ws_ep_config theirs = shape.cfg, *m = &ep->cfg;
    if (shape.records != ep->records) {
      s = ws_fail(WS_ERR_MISMATCH, "ws_ep_create: rank %d has " WS_EP_RECORDS_ENV "=%d and rank %d %d: every rank must "
                  "run with the same environment", ep->rank, ep->records, p, shape.records);
      break;
    }
    const char *field = theirs.hidden != m->hidden ? "hidden" : theirs.experts != m->experts ? "experts"
                        : theirs.topk != m->topk ? "topk" : theirs.max_tokens != m->max_tokens ? "max_tokens"
                        : theirs.payload != m->payload ? "payload" : theirs.row_align != m->row_align ? "row_align"
                        : theirs.num_sms != m->num_sms ? "num_sms" : theirs.mode != m->mode ? "mode"
                        : theirs.receive != m->receive ? "receive" : NULL;
    if (field)
      s = ws_fail(WS_ERR_MISMATCH, "ws_ep_create: rank %d and rank %d disagree on the config's %s: every rank must pass "
                  "the same config", ep->rank, p, field);
  }
  /* everyone has read every box before it goes */
  ws_status b = ws_comm_barrier(ep->comm, 0);
  if (b == WS_OK) b = ws_sync(0);
  ws_comm_free(ep->comm, box);
  return s != WS_OK ? s : b;
}

#define DEV_ALLOC(ptr, bytes)                                                              \
  do {                                                                                     \
    if (cudaMalloc((void **)&(ptr), (bytes)) != cudaSuccess) {                             \
      ep_release(ep);                                                                      \
      return ws_fail(WS_ERR_NOMEM, "ws_ep_create: cudaMalloc of %zu bytes failed", (size_t)(bytes)); \
    }                                                                                      \
    cudaMemset((ptr), 0, (bytes));                                                         \
  } while (0)

extern "C" ws_status ws_ep_create(ws_ep **out, ws_comm *comm, const ws_ep_config *cfg) {
  WS_REQUIRE(out != NULL && comm != NULL, "ws_ep_create: ep or comm is NULL");
  *out = NULL;
  ws_status s;
  int rank = 0, n = 0;
  if ((s = ws_comm_rank(comm, &rank)) != WS_OK || (s = ws_comm_size(comm, &n)) != WS_OK) return s;
  if ((s = ws_ep_config_check(cfg, n)) != WS_OK) return s;
  ws_ep *ep = (ws_ep *)calloc(1, sizeof *ep);
  if (!ep) return ws_fail(WS_ERR_NOMEM, "ws_ep_create: out of host memory");
  ep->comm = comm;
  ep->cfg = *cfg;
  ep->rank = rank;
  ep->nranks = n;
  ep->local_experts = cfg->experts / n;
  ep->fp8 = cfg->payload == WS_EP_FP8;
  ep->sms = ep_sms(cfg);
  ep->host_tokens = -1;
  ep->max_rows = (int)ws_ep_max_rows(cfg, n);
  ep->scale_ld = (ep->max_rows + 3) / 4 * 4;
  ep->inbox_row = ep_inbox_row_bytes(cfg->hidden, ep->fp8, cfg->topk);
  ep->records = ws_knobs_get()->ep_records;
  if ((s = compare_configs(ep)) != WS_OK) {
    free(ep);
    return s;
  }
  const size_t L = (size_t)ep->local_experts, T = (size_t)cfg->max_tokens, N = (size_t)n, K = (size_t)cfg->topk;
  const size_t H = (size_t)cfg->hidden, R = (size_t)ep->max_rows;
  /* symmetric: every rank allocates the same buffer, laid out the same way */
  const ep_buffers lay =
      ep_buffers_make(n, ep->local_experts, cfg->max_tokens, cfg->hidden, ep->fp8, cfg->topk, ep->sms, ep->records);
  if ((s = sym_alloc(ep, lay.bytes, &ep->sym)) != WS_OK) {
    ep_release(ep);
    return s;
  }
  {
    uint8_t *b = (uint8_t *)ep->sym;
    ep->counts = (int *)(b + lay.counts);
    ep->count_flag = (uint64_t *)(b + lay.count_flag);
    ep->inbox = b + lay.inbox;
    ep->data_flag = (uint64_t *)(b + lay.data_flag);
    ep->ack = (uint64_t *)(b + lay.ack);
    ep->comb_inbox = (uint16_t *)(b + lay.comb_inbox);
    ep->comb_flag = (uint64_t *)(b + lay.comb_flag);
    ep->comb_ack = (uint64_t *)(b + lay.comb_ack);
    ep->comb_prog = (uint64_t *)(b + lay.comb_prog);
    ep->comb_done = (uint64_t *)(b + lay.comb_done);
    ep->rec = ep->records ? (ep_record *)(b + lay.rec) : NULL;
    /* ws_comm_alloc zeroes it: flags and counts start at zero on every rank */
  }
  DEV_ALLOC(ep->epochs, 7 * sizeof(uint64_t));
  DEV_ALLOC(ep->send_counts, N * (L + 1) * sizeof(int));
  DEV_ALLOC(ep->entries, T * K * sizeof(ep_entry));
  DEV_ALLOC(ep->tok_slot, T * N * sizeof(int));
  DEV_ALLOC(ep->bad_id, 4 * sizeof(int));
  DEV_ALLOC(ep->route_cnt, ((size_t)cfg->experts + N + 1) * sizeof(int));
  DEV_ALLOC(ep->route_order, (T / 32 + 1) * sizeof(int));
  DEV_ALLOC(ep->num_tokens, sizeof(int));
  DEV_ALLOC(ep->recv_ntok, N * sizeof(int));
  DEV_ALLOC(ep->comb_row, N * T * K * sizeof(int));
  DEV_ALLOC(ep->comb_w, N * T * K * sizeof(float));
  if (cfg->receive == WS_EP_RECEIVE_COPY) { /* the index receive reads the rows in the inbox */
    DEV_ALLOC(ep->x, R * ep_payload_bytes(cfg->hidden, ep->fp8) + 16);
    if (ep->fp8) DEV_ALLOC(ep->x_scale, (H / 128) * (size_t)ep->scale_ld * sizeof(float) + 16);
  }
  DEV_ALLOC(ep->row_index, R * sizeof(int));
  if (cfg->mode == WS_EP_LOW_LATENCY) { /* "every row was real": the first call marks each block's padding */
    DEV_ALLOC(ep->ll_marked, L * sizeof(int));
    int *full = (int *)malloc(L * sizeof(int));
    if (!full) {
      ep_release(ep);
      return ws_fail(WS_ERR_NOMEM, "ws_ep_create: out of host memory");
    }
    for (size_t l = 0; l < L; l++) full[l] = (int)(N * T);
    const cudaError_t e = cudaMemcpy(ep->ll_marked, full, L * sizeof(int), cudaMemcpyHostToDevice);
    free(full);
    if (e != cudaSuccess) {
      ep_release(ep);
      return ws_fail_cuda(e, "ws_ep_create: cudaMemcpy");
    }
  }
  DEV_ALLOC(ep->offsets, (L + 1) * sizeof(int));
  DEV_ALLOC(ep->expert_counts, L * sizeof(int));
  DEV_ALLOC(ep->src_rank, R * sizeof(int));
  DEV_ALLOC(ep->src_token, R * sizeof(int));
  DEV_ALLOC(ep->src_slot, R * sizeof(int));
  DEV_ALLOC(ep->weight, R * sizeof(float));
  if (cudaHostAlloc((void **)&ep->host_buf, (L + 1 + 4) * sizeof(int), cudaHostAllocDefault) != cudaSuccess) {
    ep->host_buf = NULL;
    ep_release(ep);
    return ws_fail(WS_ERR_NOMEM, "ws_ep_create: pinned host buffer");
  }
  ep_fill_args(ep, &ep->args);
  WS_CUDA_TRY(cudaDeviceSynchronize());
  /* every rank's buffers are zeroed before any peer writes into them */
  if ((s = ws_comm_barrier(comm, 0)) != WS_OK || (s = ws_sync(0)) != WS_OK) {
    ep_release(ep);
    return s;
  }
  *out = ep;
  return WS_OK;
}

extern "C" ws_status ws_ep_destroy(ws_ep *ep) {
  WS_REQUIRE(ep != NULL, "ws_ep_destroy: ep is NULL");
  WS_CUDA_TRY(cudaDeviceSynchronize());
  ws_status s = ws_comm_barrier(ep->comm, 0); /* no peer still writes into our buffers */
  if (s == WS_OK) s = ws_sync(0);
  ep_release(ep);
  return s;
}

extern "C" ws_status ws_ep_recv_layout(const ws_ep *ep, ws_ep_recv *r) {
  WS_REQUIRE(ep != NULL && r != NULL, "ws_ep_recv_layout: ep or recv is NULL");
  r->x = ep->x;
  r->x_scale = ep->x_scale;
  r->scale_ld = ep->fp8 && ep->x ? ep->scale_ld : 0;
  r->max_rows = ep->max_rows;
  r->local_experts = ep->local_experts;
  r->expert_offsets = ep->offsets;
  r->expert_counts = ep->expert_counts;
  r->src_rank = ep->src_rank;
  r->src_token = ep->src_token;
  r->src_slot = ep->src_slot;
  r->weight = ep->weight;
  const int index = ep->last_index; /* x stays the copy's buffer where the handle has one (the MoE layer's fused paths) */
  r->row_index = index ? ep->row_index : NULL;
  r->rows = index ? ep->inbox : NULL;
  r->row_scales = index && ep->fp8 ? (const float *)(ep->inbox + ep_payload_bytes(ep->cfg.hidden, 1)) : NULL;
  r->row_bytes = index ? ep->inbox_row : 0;
  r->rows_total = index ? ep->nranks * ep->cfg.max_tokens : 0;
  r->fp8 = ep->fp8;
  r->masked = ep->cfg.mode == WS_EP_LOW_LATENCY;
  r->expected_rows = ep->host_tokens > 0 ? ep->host_tokens * ep->cfg.topk : 0;
  return WS_OK;
}

extern "C" ws_status ws_ep_recv_gemm(const ws_ep_recv *r, ws_gemm_problem *p) {
  WS_REQUIRE(r != NULL && p != NULL, "ws_ep_recv_gemm: recv or problem is NULL");
  WS_REQUIRE(r->local_experts >= 1 && r->max_rows >= 0, "ws_ep_recv_gemm: recv holds no layout (from ws_ep_dispatch "
             "or ws_ep_recv_layout)");
  if (r->masked) {
    p->layout = WS_GEMM_GROUPED_MASKED;
    p->m = r->max_rows / r->local_experts;
    p->group_offsets = NULL;
    p->group_rows = r->expert_counts;
  } else {
    p->layout = WS_GEMM_GROUPED_CONTIGUOUS;
    p->m = r->max_rows;
    p->group_offsets = r->expert_offsets;
    p->group_rows = r->expert_counts; /* the rows in use: the tile choice may skip the padding */
  }
  p->rows_hint = r->masked ? 0 : r->expected_rows;
  p->groups = r->local_experts;
  if (r->row_index) {
    p->a = r->rows;
    p->a_scale = r->row_scales;
    p->a_scale_ld = 0;
    p->a_rows = r->row_index;
    p->a_rows_total = r->rows_total;
    p->a_row_bytes = r->row_bytes;
    p->a_scale_stride = r->row_scales ? (int)(r->row_bytes / 4) : 0;
  } else {
    p->a = r->x;
    p->a_scale = r->x_scale;
    p->a_scale_ld = r->scale_ld;
    p->a_rows = NULL;
    p->a_rows_total = 0;
    p->a_row_bytes = 0;
    p->a_scale_stride = 0;
  }
  return WS_OK;
}

extern "C" ws_status ws_ep_check(ws_ep *ep, cudaStream_t stream) {
  WS_REQUIRE(ep != NULL, "ws_ep_check: ep is NULL");
  WS_CUDA_TRY(cudaMemcpyAsync(ep->host_buf, ep->bad_id, 4 * sizeof(int), cudaMemcpyDeviceToHost, stream));
  ws_status s = ws_sync(stream);
  if (s != WS_OK) return s;
  return ep_report_bad_ids(ep, ep->host_buf, stream);
}

/* bad: the 4 ints of ep->bad_id as the host read them (count, token, slot, expert). */
extern "C" ws_status ep_report_bad_ids(ws_ep *ep, const int *bad, cudaStream_t stream) {
  if (bad[0] == 0) return WS_OK;
  WS_CUDA_TRY(cudaMemsetAsync(ep->bad_id, 0, 4 * sizeof(int), stream));
  return ws_fail(WS_ERR_INVALID, "ws_ep_dispatch: %d top-k entries were skipped, out of range (experts are 0..%d, -1 "
                 "skips a slot) or, in low-latency mode, past max_tokens %d entries for their expert (a token names an "
                 "expert in several slots); the first: token %d slot %d has expert %d", bad[0], ep->cfg.experts - 1,
                 ep->cfg.max_tokens, bad[1], bad[2], bad[3]);
}

static void ep_fill_args(const ws_ep *ep, ep_args *a) {
  memset(a, 0, sizeof *a);
  a->rank = ep->rank; a->nranks = ep->nranks; a->L = ep->local_experts; a->topk = ep->cfg.topk;
  a->hidden = ep->cfg.hidden; a->fp8 = ep->fp8; a->sms = ep->sms; a->max_tokens = ep->cfg.max_tokens;
  a->max_rows = ep->max_rows; a->scale_ld = ep->scale_ld; a->row_align = ep->cfg.row_align;
  a->experts = ep->cfg.experts; a->inbox_row = ep->inbox_row;
  a->ll = ep->cfg.mode == WS_EP_LOW_LATENCY;
  a->epochs = ep->epochs; a->send_counts = ep->send_counts; a->entries = ep->entries; a->tok_slot = ep->tok_slot;
  a->bad_id = ep->bad_id; a->route_cnt = ep->route_cnt; a->num_tokens = ep->num_tokens; a->recv_ntok = ep->recv_ntok;
  a->comb_row = ep->comb_row; a->comb_w = ep->comb_w;
  a->counts = ep->counts; a->count_flag = ep->count_flag; a->inbox = ep->inbox; a->data_flag = ep->data_flag;
  a->ack = ep->ack; a->comb_inbox = ep->comb_inbox; a->comb_flag = ep->comb_flag; a->comb_ack = ep->comb_ack;
  a->comb_prog = ep->comb_prog; a->comb_done = ep->comb_done;
  a->records = ep->records; a->rec = ep->rec;
  for (int p = 0; p < ep->nranks; p++) a->peer_delta[p] = ep->peer_delta[p];
  a->x = (uint8_t *)ep->x; a->x_scale = ep->x_scale; a->offsets = ep->offsets; a->expert_counts = ep->expert_counts;
  a->src_rank = ep->src_rank; a->src_token = ep->src_token; a->src_slot = ep->src_slot; a->weight = ep->weight;
  a->row_index = ep->row_index;
  a->ll_marked = ep->ll_marked;
  a->route_order = ep->route_order;
}

extern "C" const struct ep_args *ep_kernel_args(const ws_ep *ep) { return &ep->args; }

extern "C" ws_status ep_launch(ws_ep *ep, int slot, const char *name, const ws_role *roles, int nroles, const void *func,
                               dim3 grid, size_t smem, cudaStream_t stream, void **args) {
  ws_status s;
  if (!ep->planned[slot]) {
    if ((s = ws_plan_init(&ep->plans[slot], name, roles, nroles, 0)) != WS_OK) return s;
    ep->planned[slot] = 1;
  }
  if ((s = ws_plan_set_smem(&ep->plans[slot], smem)) != WS_OK) return s; /* re-checked only when it changes */
  return ws_plan_launch_chained(&ep->plans[slot], func, grid, stream, args);
}
