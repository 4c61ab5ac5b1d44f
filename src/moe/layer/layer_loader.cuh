/* layer_loader.cuh - the fused experts kernel's loader warpgroup (layer_kernel.cu):
 * the scheduler warp's claims and item decoding, the TMA loader of every item's stages,
 * and the CTA-pair variant that multicasts the weights into both CTAs. */
#ifndef WARPSPEC_MOE_LAYER_LOADER_CUH
#define WARPSPEC_MOE_LAYER_LOADER_CUH

#include "layer_types.cuh"

/* ---- LOADER ------------------------------------------------------------------------ */
/* An L2 tile's wait for the act rows of one of its 64-row blocks (lane 0; TMA is issued
 * by the same lane); `readers`: the block's L2 tiles. */
WS_DEV void mx_wait_rows(const ws_ctx *c, const mx_args *a, int blk, uint32_t readers) {
  if (c->lane == 0) {
    const uint32_t target = (uint32_t)(a->inter / 128);
    const ws_site site = ws_site_pipe("moe experts L1 rows", WS_EDGE_FULL, blk, 0);
    ws_wait_count_geq(a->ready + blk, target, c, &site);
    ws_fence_proxy_async_global(); /* the generic stores of act, read next by TMA */
    if (atomicAdd(a->seen + blk, 1u) == readers - 1u) { /* no other reader or writer of blk is left */
      a->ready[blk] = 0u;
      a->seen[blk] = 0u;
    }
  }
  __syncwarp();
}

/* The whole layer: lane 0 waits until *count >= target (the route item: the offsets and
 * entry rows; every expand item: the rows of x), then the warp reads (after the
 * __syncwarp) or TMA loads (after the proxy fence) what they wrote. */
WS_DEV void mx_wait_count(const ws_ctx *c, const uint32_t *count, uint32_t target, const char *what) {
  if (c->lane == 0) {
    const ws_site site = ws_site_pipe(what, WS_EDGE_FULL, 0, 0);
    ws_wait_count_geq(count, target, c, &site);
    ws_fence_proxy_async_global();
  }
  __syncwarp();
}

/* Hand an item with no loads to the math: its info in a committed stage. */
template <int BM>
WS_DEV ws_cursor mx_hand(const ws_pipe *pipe, const ws_ctx *c, mx_smem<BM> *sm, ws_cursor k, int t, int kind, int index,
                         int target) {
  ws_pipe_acquire_at(pipe, c, k);
  if (c->lane == 0) {
    mx_item_info *it = &sm->item[k.stage];
    it->t = t; it->kind = kind; it->tile.g = index; it->tile.count = target;
  }
  ws_pipe_commit_bytes_at(pipe, c, k, 0u); /* the pipe's one writer arrival (mx_load) */
  return ws_cursor_next(k, pipe->stages);
}

/* The loader's copy of both schedules in shared memory, with the expert offsets too when
 * they fit: one round trip for all of them, where the walk to the CTA's first item (32
 * groups a step) chained eight at 1 token (256 experts), about 5 us before the first
 * weights moved. The cursors then start. */
template <int BM>
WS_DEV void mx_start_cursors(const mx_args *a, mx_smem<BM> *sm, int writer, int own_offsets, gemm_cursor *c1,
                             gemm_cursor *c2) {
  if (writer) {
    sm->shape[0] = a->l1;
    sm->shape[1] = a->l2.shape;
    if (own_offsets) sm->shape[0].offsets = sm->shape[1].offsets = sm->offsets;
  }
  __syncwarp();
  *c1 = gemm_cursor_start(&sm->shape[0]);
  *c2 = gemm_cursor_start(&sm->shape[1]);
}

template <int BM>
WS_DEV void mx_load_offsets(const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm, gemm_cursor *c1, gemm_cursor *c2) {
  const int n = a->l1.groups + 1, fits = n <= MX_SMEM_OFFSETS;
  if (fits) { /* the source pointer read once: with it re-read from the kernel's parameters
               * after every store (they might alias), each load waited for the one before */
    const int *src = a->l1.offsets;
#pragma unroll 4
    for (int i = c->lane; i < n; i += 32) sm->offsets[i] = __ldcg(src + i);
  }
  mx_start_cursors(a, sm, c->lane == 0, fits, c1, c2);
}

/* One GPU and few entries (ly->self_route): the loader counts the experts' rows itself from
 * topk_idx and pads and sums them as the route item does (the same offsets, in shared
 * memory), so its tiles need not wait for the route item and read its offsets. At 1 token
 * the loaders waited for the route item until 8.3 us, then read its offsets until 12.7 us
 * (H100). A loader does it at its first tile, after it has handed out the route item if
 * that was its first claim: done before any claim, it delayed the route item by as long. */
template <int BM>
WS_DEV void mx_self_route(const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm, gemm_cursor *c1, gemm_cursor *c2) {
  const int E = a->l1.groups, n = a->layer.tokens * a->layer.topk, lane = c->lane;
  const int *idx = a->layer.topk_idx;
  int *cnt = sm->offsets;
  for (int e = lane; e <= E; e += 32) cnt[e] = 0;
  __syncwarp();
  for (int j = lane; j < n; j += 32) {
    const int e = __ldg(idx + j);
    if (e >= 0 && e < E) atomicAdd(&cnt[e], 1);
  }
  __syncwarp();
  int e0, e1;
  mx_run_of(E, lane, 32, &e0, &e1);
  int run = mx_padded_start(cnt, e0, e1, lane, 32, NULL, 0u);
  for (int e = e0; e < e1; e++) { /* in place: the counts become the groups' starts */
    const int p = mx_pad_rows(cnt[e]);
    cnt[e] = run;
    run += p;
  }
  if (lane == 31) cnt[E] = run;
  mx_start_cursors(a, sm, lane == 31, 1, c1, c2);
}

/* At most a warp's lanes of entries (ly->few_decode): lane j ends holding the j-th distinct
 * expert named by topk_idx in increasing order (-1 past them); returns their number U,
 * which is also the layer's number of row blocks (moe_few_item). What mx_self_route,
 * mx_count_tiles and the cursor walk took 4.2 + 1.3 + 3.1 us for at 1 token (H200 probes,
 * session 43: loops over every expert's count and offsets) is one load and two rounds of
 * 32 shuffles here (mx_few_distinct: the layout the route item's mx_route_few shares).
 * e: this lane's entry, loaded by the scheduler before its first claim (the load's round
 * trip beside the claim's). */
WS_DEV int mx_few_route(const ws_ctx *c, const mx_args *a, int e, int *sorted) {
  const mx_few_entry f = mx_few_distinct_of(e, a->l1.groups, c->lane);
  *sorted = -1;
#pragma unroll 1
  for (int j = 0; j < 32; j++) {
    const int ej = __shfl_sync(0xffffffffu, f.e, j), rj = __shfl_sync(0xffffffffu, f.rank, j);
    if ((f.firsts >> j & 1u) && rj == c->lane) *sorted = ej;
  }
  return __popc(f.firsts);
}

/* The whole layer: row blocks of BM over every expert (the tile numbering's unit), from
 * the offsets the loader holds (a full warp). */
WS_DEV int mx_count_tiles(const gemm_shape *s, int lane) {
  int n = 0;
  for (int g = lane; g < s->groups; g += 32) n += (s->offsets[g + 1] - s->offsets[g] + s->bm - 1) / s->bm;
  return (int)__reduce_add_sync(0xffffffffu, (unsigned)n);
}

/* The CTA's next item: claimed from the global counter (lane 0; the whole warp gets it),
 * or (a->static_walk) the i-th of the CTA-strided walk. With layer.route_at_once item 0
 * (the route) is block 0's without a claim (mx_math), and the counter numbers from 1. */
WS_DEV int mx_claim(const ws_ctx *c, const mx_args *a, int *i) {
  if (a->static_walk && !a->layer.on) return (int)blockIdx.x + (*i)++ * (int)gridDim.x;
  uint32_t t = 0;
  if (c->lane == 0) t = atomicAdd(a->next_item, 1u);
  return (int)__shfl_sync(0xffffffffu, t, 0) + a->layer.route_at_once;
}

/* W1 row of 64-row box q of a K step (below). */
template <int BM> WS_DEV int mx_w1_box_row(int q, int j, int gate, int I) {
  return BM == MOE_EXPERTS_BM ? gate + (q / 2) * 64 + (q % 2) * I : gate + j * 64 + q * I;
}

/* One K step's B rows of expert g, act columns col .. (gate: W1 row g 2I + col): 64-row
 * tile: L1 gate + 64r .. and up (gate + I) of the same columns for warpgroup r = 0, 1 (four
 * 64-row boxes; two with a->w1_gate_up, each a warpgroup's gate and up rows), L2 the 256
 * output columns' rows of W2 from row `down` (one box); 128-row tile: L1 loop j's
 * gate + 64j .. and up (two boxes, or one), L2 the 128 output columns' rows (one box). The
 * L2 rows are contiguous in W2, so one box lands them where four would, with a quarter of
 * the TMA operations. */
template <int BM>
WS_DEV void mx_load_b(const mx_args *a, const ws_pipe *pipe, const ws_ctx *c, ws_cursor k, mx_stage<BM> *st,
                      const ws_tmap *map_w1, const ws_tmap *map_w2, int l2, int kk, int j, int g, int col, int down,
                      int I) {
  if (!l2 && a->w1_gate_up) { /* [E][gate, up][I][H]: 64 act columns' gate and up rows a box */
#pragma unroll
    for (int q = 0; q < MX_B_ROWS(BM) / 128; q++)
      ws_pipe_copy_tile_4d_at(pipe, c, k, st->b + q * 128 * MX_BK, map_w1, kk * MX_BK,
                              col + (BM == MOE_EXPERTS_BM ? q : j) * 64, 0, g);
    return;
  }
#pragma unroll
  for (int q = 0; q < MX_B_ROWS(BM) / 64; q++)
    if (!l2 || q == 0)
      ws_pipe_copy_tile_2d_at(pipe, c, k, st->b + q * 64 * MX_BK, l2 ? map_w2 : map_w1, kk * MX_BK,
                              l2 ? down : mx_w1_box_row<BM>(q, j, g * 2 * I + col, I));
}

/* A K step's copy bytes, committed before its copies (ws_pipe_commit_bytes_at): the
 * weights (mx_load_b's boxes), the rows and their scales. */
template <int BM>
WS_DEV uint32_t mx_stage_bytes(const mx_args *a, int l2, const ws_tmap *map_x, const ws_tmap *map_w1,
                               const ws_tmap *map_act, const ws_tmap *map_w2) {
  const uint32_t w1_boxes = (uint32_t)(MX_B_ROWS(BM) / (a->w1_gate_up ? 128 : 64));
  return l2 ? map_w2->box_bytes + map_act->box_bytes + a->map_as.box_bytes
            : w1_boxes * map_w1->box_bytes + map_x->box_bytes + a->map_xs.box_bytes;
}

/* The scheduler warp (warp 1 of the loader role): claims the CTA's items in order,
 * decodes each (the whole layer: items 0 .. pre - 1 are route, send and expand, then the
 * tiles, known once routed: `tiles` row blocks of BM, then reduce (one GPU: combine) and
 * gather; the cursors read the offsets, so they start once routed) and hands it to the
 * loader warp through `items`. One item ahead: it claims the next one when the loader
 * takes the last one, as the loader itself did when it finished that one's loads; at few
 * entries (ly->few_decode) once the loader has issued the last one's loads (mx_load). */
template <int BM>
WS_DEV void mx_schedule(const ws_pipe *items, const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm) {
  const int I = a->inter, l2_items = moe_experts_l2_items(BM, a->hidden);
  const mx_layer_args *ly = &a->layer;
  gemm_cursor c1, c2;
  const int pre = moe_layer_pre(ly->on, ly->send_items, ly->expand_items), per_tile = I / MOE_EXPERTS_L1_BN + l2_items;
  int tiles = ly->on ? -1 : 0, l1_done = 0, walk = 0, routed_seen = !ly->on;
  int few_expert = -1; /* ly->few_decode: lane j's the j-th distinct expert (mx_few_route) */
  /* ... from this lane's entry, asked for now: its round trip runs beside the first claim's */
  int few_entry = ly->few_decode && c->lane < ly->tokens * ly->topk ? __ldg(ly->topk_idx + c->lane) : -1;
  if (!ly->on) mx_load_offsets(c, a, sm, &c1, &c2);
  /* probe points of the whole layer's first tile's decode (WS_PROBES builds, base 20): 0
   * the slot for it acquired, 1 claimed, 2 the route waited for, 3 the offsets in hand (its
   * own route at decode), 4 the tiles counted, 5 the item decoded, 6 handed over */
  WS_PROBE_DECLARE(p);
  for (ws_cursor k = {0, 0};; k = ws_cursor_next(k, items->stages)) {
    mx_claimed *it = &sm->items.slot[ws_pipe_acquire_at(items, c, k)];
    WS_PROBE(p, 0);
    const int t = mx_claim(c, a, &walk);
    const int probe = tiles < 0 && t >= pre; /* the layer's first tile on this CTA */
    if (probe) WS_PROBE(p, 1);
    /* send and expand items read the route's entries, the tiles its offsets: the offsets
     * are loaded and the tiles counted only before the first tile, not before an expand
     * item's hand-over (at 1 token the expand item now starts 4 us earlier; H100) */
    if (t > 0 && routed_seen == 0 && (t < pre || !ly->self_route)) { /* self-routing tiles need no route item */
      mx_wait_count(c, ly->routed, 1u, "moe layer route");
      routed_seen = 1;
    }
    if (probe) WS_PROBE(p, 2);
    if (tiles < 0 && t >= pre) { /* the first tile: the offsets, counted here or the route item's */
      if (ly->few_decode) {
        tiles = mx_few_route(c, a, few_entry, &few_expert);
        if (probe) WS_PROBE(p, 3);
      } else {
        if (ly->self_route) mx_self_route(c, a, sm, &c1, &c2);
        else mx_load_offsets(c, a, sm, &c1, &c2);
        if (probe) WS_PROBE(p, 3);
        tiles = mx_count_tiles(&sm->shape[0], c->lane);
      }
    }
    if (probe) WS_PROBE(p, 4);
    /* route; send, expand; the tiles; reduce (one GPU: combine), gather */
    int index;
    int kind = moe_layer_item(ly->on, ly->nranks, ly->send_items, ly->reduce_items, ly->gather_items, pre, tiles * per_tile,
                              t, &index);
    /* combine items read the route's entry rows: with the loaders routing for themselves
     * nothing before them waited for it, and with no tile at all (every slot -1) their
     * wait for the L2 stores is for none (the route writes the -1 rows they read) */
    if ((kind == MX_COMBINE || kind == MX_REDUCE || kind == MX_GATHER) && routed_seen == 0) {
      mx_wait_count(c, ly->routed, 1u, "moe layer route");
      routed_seen = 1;
    }
    gemm_tile tile;
    int l2 = 0;
    if (kind == MX_L1 && ly->few_decode) {
      int u, tn;
      if (moe_few_item(tiles, I / MOE_EXPERTS_L1_BN, l2_items, t - pre, &u, &tn, &l2))
        tile = moe_few_tile(__shfl_sync(0xffffffffu, few_expert, u), u, tn, l2 ? I / MX_BK : a->hidden / MX_BK);
      else kind = -1;
    } else if (kind == MX_L1 && !moe_experts_item(&sm->shape[0], &sm->shape[1], &c1, &c2, &l1_done, t - pre, &tile, &l2)) {
      kind = -1;
    }
    if (probe) WS_PROBE(p, 5);
    if (c->lane == 0) {
      it->t = t; it->kind = kind; it->index = index; it->l2 = l2; it->target = 2 * tiles * l2_items;
      if (kind == MX_L1) it->tile = tile;
    }
    ws_pipe_commit_at(items, c, k);
    if (probe) {
      WS_PROBE(p, 6);
      ws_ctx as_loader = *c; /* the trace takes one writer warp per role: the loader's */
      as_loader.warp = 0;
      WS_PROBE_FLUSH(&as_loader, p, 7, 20);
    }
    if (kind < 0) return;
  }
}

/* After a loader's last item: the last of the grid's `loaders` to get here resets the
 * claim counter (and the whole layer's route and expand counts) for the next call. */
WS_DEV void mx_reset_claims(const ws_ctx *c, const mx_args *a, uint32_t loaders) {
  if (c->lane == 0 && atomicAdd(a->next_item + 1, 1u) == loaders - 1u) {
    a->next_item[0] = 0u;
    a->next_item[1] = 0u;
    if (a->layer.on) {
      *a->layer.routed = 0u;
      *a->layer.expanded = 0u;
    }
  }
}

/* The loader's six tensor maps into the cache before its first copy (the role leader). */
WS_DEV void mx_prefetch_maps(const ws_ctx *c, const mx_args *a, const ws_tmap *map_x, const ws_tmap *map_w1,
                             const ws_tmap *map_act, const ws_tmap *map_w2) {
  if (!ws_role_leader(c)) return;
  ws_prefetch_tensormap(&map_x->map);
  ws_prefetch_tensormap(&map_w1->map);
  ws_prefetch_tensormap(&map_act->map);
  ws_prefetch_tensormap(&map_w2->map);
  ws_prefetch_tensormap(&a->map_xs.map);
  ws_prefetch_tensormap(&a->map_as.map);
}

/* A census of the stages (WS_PROBES builds with -DWS_PROBES_STAGES=1 as well): each time
 * the loader comes to a slot it must refill, was it free already, still holding a stage
 * the math has not released though it landed (the math is behind), or still waiting for
 * its bytes (the stream is behind)? At 1 token each SM streams about 30 GB/s in the layer
 * where bench hbm gives one CTA 61 (session 43); the math warpgroups have no registers
 * left to count their own waits. Reported per tile as probe points base .. base + 3 (30:
 * L1, 40: L2), 1 us per slot (bench/trace_probes.py prints the counts as times). */
#if defined(WS_PROBES) && defined(WS_PROBES_STAGES)
#define MX_CENSUS_DECLARE(n) uint32_t n[3] = {0u, 0u, 0u}
WS_DEV void mx_census(const ws_pipe *pipe, ws_cursor k, uint32_t *n) {
  if (ws_mbarrier_test_wait_parity(&pipe->empty[k.stage], k.phase ^ 1u)) n[0]++;
  else if (ws_mbarrier_test_wait_parity(&pipe->full[k.stage], k.phase ^ 1u)) n[1]++; /* its previous fill landed */
  else n[2]++;
}
WS_DEV void mx_census_report(const ws_ctx *c, uint32_t *n, int base) {
  ws_probe q;
  q.t[3] = (uint32_t)ws_globaltimer();
  q.t[2] = q.t[3] - 1000u * n[2];
  q.t[1] = q.t[2] - 1000u * n[1];
  q.t[0] = q.t[1] - 1000u * n[0];
  WS_PROBE_FLUSH(c, q, 4, base);
  n[0] = n[1] = n[2] = 0u;
}
#define MX_CENSUS(pipe, k, n) mx_census((pipe), (k), (n))
#define MX_CENSUS_REPORT(c, n, base) mx_census_report((c), (n), (base))
/* ... and the loader's own time per tile, in SM clocks / 2 (about ns at 2 GHz): in the
 * slots' acquire, and from the acquire's return to the commit (the stage's copies issued;
 * a TMA issue that the SM's copy queue holds back shows here). Points base + 20 .. + 22. */
#define MX_LOADER_CLOCKS_DECLARE(v) unsigned long long v[3] = {0ull, 0ull, 0ull}
#define MX_LOADER_CLOCK(v, i)                                                                                          \
  do {                                                                                                                 \
    const unsigned long long now_ = clock64();                                                                         \
    if ((i) >= 0) (v)[(i)] += now_ - (v)[2];                                                                           \
    (v)[2] = now_;                                                                                                     \
  } while (0)
WS_DEV void mx_loader_clocks_report(const ws_ctx *c, unsigned long long *v, int base) {
  ws_probe q;
  q.t[2] = (uint32_t)ws_globaltimer();
  q.t[1] = q.t[2] - (uint32_t)(v[1] / 2);
  q.t[0] = q.t[1] - (uint32_t)(v[0] / 2);
  WS_PROBE_FLUSH(c, q, 3, base + 20);
  v[0] = v[1] = 0ull;
}
#define MX_LOADER_CLOCKS_REPORT(c, v, base) mx_loader_clocks_report((c), (v), (base))
#else
#define MX_LOADER_CLOCKS_DECLARE(v) (void)0
#define MX_LOADER_CLOCK(v, i) ((void)0)
#define MX_LOADER_CLOCKS_REPORT(c, v, base) ((void)0)
#define MX_CENSUS_DECLARE(n) (void)0
#define MX_CENSUS(pipe, k, n) ((void)0)
#define MX_CENSUS_REPORT(c, n, base) ((void)0)
#endif

/* The loader warp (warp 0 of the loader role): the items from the scheduler, each tile's
 * loads stage by stage. */
template <int BM>
WS_DEV void mx_load(const ws_pipe *pipe, const ws_pipe *items, const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm,
                    const ws_tmap *map_x, const ws_tmap *map_w1, const ws_tmap *map_act, const ws_tmap *map_w2) {
  mx_prefetch_maps(c, a, map_x, map_w1, map_act, map_w2);
  const int H = a->hidden, I = a->inter, hb = H / MX_BK, l2_items = moe_experts_l2_items(BM, H);
  const int l2_bn = moe_experts_l2_bn(BM);
  const mx_layer_args *ly = &a->layer;
  ws_cursor k = {0, 0};
  int expanding = ly->on; /* the whole layer: the first L1 tile waits for the expand items */
  /* probe points of a tile (WS_PROBES builds; base 0 L1, 10 L2): 0 the wait for the
   * item, 1 item in hand, 2 first slot free, 3 its rows ready (L2), 4 every stage issued */
  WS_PROBE_DECLARE(p);
  MX_CENSUS_DECLARE(census);
  MX_LOADER_CLOCKS_DECLARE(clocks);
  for (ws_cursor ki = {0, 0};; ki = ws_cursor_next(ki, items->stages)) {
    WS_PROBE(p, 0);
    ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_SCHEDULE);
    const mx_claimed *it = &sm->items.slot[ki.stage];
    ws_pipe_wait_at(items, c, ki);
    ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_SCHEDULE);
    WS_PROBE(p, 1);
    const int t = it->t, kind = it->kind, l2 = it->l2;
    if (kind < 0) break;
    if (kind != MX_L1) {
      const int index = it->index, target = it->target;
      ws_pipe_release_at(items, c, ki);
      k = mx_hand(pipe, c, sm, k, t, kind, index, target);
      continue;
    }
    const gemm_tile tile = it->tile;
    /* Few entries: the scheduler claims the CTA's next item only once this one's loads are
     * out (the decode takes it well under a stage's time). Claimed as soon as the tile was
     * in hand, the CTAs whose first item was an L2 tile, waiting for L1's rows, took a
     * second L2 tile to run after it while L1's CTAs still had none: at 1 token (Flash
     * shape) the layer's last CTAs ran two L2 tiles after the rows, 8 us more. */
    const int claim_late = ly->few_decode;
    if (!claim_late) ws_pipe_release_at(items, c, ki);
    const int row = tile.row0 + tile.tm * BM, blk = row / MOE_EXPERTS_BM;
    /* the 128-row tile's second 64 rows: still this expert's? (else: the next one's) */
    const int both = BM == MOE_EXPERTS_BM || tile.tm * BM + MOE_EXPERTS_BM < tile.count;
    const int ksteps = l2 ? I / MX_BK : (BM == MOE_EXPERTS_BM ? hb : 2 * hb);
    const int col = tile.tn * MOE_EXPERTS_L1_BN, down = tile.g * H + tile.tn * l2_bn;
    const uint32_t stage_bytes = mx_stage_bytes<BM>(a, l2, map_x, map_w1, map_act, map_w2);
    ws_trace_mark(c, WS_TRACE_ITEM_BEGIN, t);
    for (int ks = 0; ks < ksteps; ks++, k = ws_cursor_next(k, pipe->stages)) {
      const int j = l2 || BM == MOE_EXPERTS_BM ? 0 : ks / hb, kk = ks - j * hb; /* L1 loop, its K block */
      if (ks == 0) ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_SLOT); /* the item's first free slot */
      MX_CENSUS(pipe, k, census);
      MX_LOADER_CLOCK(clocks, -1);
      mx_stage<BM> *st = &sm->pipe.slot[ws_pipe_acquire_at(pipe, c, k)];
      MX_LOADER_CLOCK(clocks, 0);
      if (ks == 0) ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_SLOT);
      if (ks == 0) WS_PROBE(p, 2);
      if (ks == 0 && c->lane == 0) { /* published by the commit */
        mx_item_info *info = &sm->item[k.stage];
        info->t = t; info->kind = l2 ? MX_L2 : MX_L1; info->tile = tile;
      }
      /* committed with its bytes before its copies: the stage completes when they land */
      ws_pipe_commit_bytes_at(pipe, c, k, stage_bytes);
      mx_load_b(a, pipe, c, k, st, map_w1, map_w2, l2, kk, j, tile.g, col, down, I);
      if ((l2 || expanding) && ks == 0) { /* the weights are already on their way */
        ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_ROWS);
        if (l2) {
          mx_wait_rows(c, a, blk, (uint32_t)l2_items);
          if (BM != MOE_EXPERTS_BM && both) mx_wait_rows(c, a, blk + 1, (uint32_t)l2_items);
        } else {
          mx_wait_count(c, ly->expanded, mx_expand_target(ly), "moe layer x rows");
        }
        expanding = 0;
        ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_ROWS);
      }
      if (ks == 0) WS_PROBE(p, 3);
      ws_pipe_copy_tile_2d_at(pipe, c, k, st->a, l2 ? map_act : map_x, kk * MX_BK, row);
      ws_pipe_copy_tile_2d_at(pipe, c, k, st->a_scale, l2 ? &a->map_as : &a->map_xs, row, kk);
      MX_LOADER_CLOCK(clocks, 1);
    }
    if (claim_late) ws_pipe_release_at(items, c, ki);
    ws_trace_mark(c, WS_TRACE_ITEM_END, t); /* its loads issued (they land later) */
    WS_PROBE(p, 4);
    WS_PROBE_FLUSH(c, p, 5, l2 ? 10 : 0);
    MX_CENSUS_REPORT(c, census, l2 ? 40 : 30);
    MX_LOADER_CLOCKS_REPORT(c, clocks, l2 ? 40 : 30);
  }
  /* the end, as an item of its own: index -1 in a committed stage (the math stops there) */
  ws_pipe_acquire_at(pipe, c, k);
  if (c->lane == 0) sm->item[k.stage].t = -1;
  ws_pipe_commit_bytes_at(pipe, c, k, 0u);
  /* the last CTA to run out of items resets the claim counter and the route and expand
   * counts for the next call. Every expand item must have counted by then: a loader waits
   * for them before its first L1 tile, but with no tiles at all (no tokens, or every slot
   * -1) none does, and an expand item still running would count into the next call. */
  if (ly->on) mx_wait_count(c, ly->expanded, mx_expand_target(ly), "moe layer x rows");
  mx_reset_claims(c, a, gridDim.x);
}

/* ---- CTA PAIRS (prefill) ---------------------------------------------------------- */
/* From a few 64-row blocks per expert on, the 64-row tile reads each expert's weights
 * from L2 once per block: ncu at 8192 tokens (DeepSeek-V3, H100) showed the fused kernel
 * moving 76-81 GB from L2 into the SMs where the unfused GEMMs' 192-row tiles move 64 GB,
 * every kernel at the same L2 ceiling. In pairs (clusters of 2 CTAs, args.pair) the pair
 * takes a 128-row block of one expert, each CTA 64 of its rows with the 64-row tile's
 * math, and every weight box is read from L2 once and multicast into both CTAs: per K
 * step 2 x 8 KiB of rows and 32 KiB of weights instead of 2 x 40 KiB.
 *
 * The pair's one loader is rank 0's: it claims the item, writes each CTA's half of it
 * into that CTA's first stage (the peer's through st.async, counted on the peer's `full`
 * barrier like a copy), multicasts the weights, loads each CTA's rows, and arrives once on
 * the peer's `full` with the bytes that will land there. Both CTAs' math warps release
 * their stages on rank 0's `empty` barriers, so no stage is refilled in either CTA before
 * both have read it; the peer's own loader and `empty` barriers stay idle. A block whose
 * second 64 rows are past the expert's end leaves the peer's half empty: nothing is
 * loaded for it and its math only passes the stages on. */

/* Item t's weights for one K step, every box multicast to both CTAs of the pair (the
 * 64-row tile's boxes: L1 gate and up of act columns c .. c + 127, L2 256 output rows). */
template <int BM>
WS_DEV void mx_multicast_b(uint64_t *full, mx_stage<BM> *st, const ws_tmap *map_w1, const ws_tmap *map_w2, int l2,
                           int kk, int gate, int down, int I) {
  if (l2) {
    ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->b, &map_w2->map, kk * MX_BK, down, full, 0x3);
    return;
  }
#pragma unroll
  for (int q = 0; q < MX_B_ROWS(BM) / 64; q++)
    ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->b + q * 64 * MX_BK, &map_w1->map, kk * MX_BK,
                                                          mx_w1_box_row<BM>(q, 0, gate, I), full, 0x3);
}

/* The peer's copy of an item (lane 0 of rank 0): 8 bytes at a time into its item slot. */
WS_DEV void mx_send_item(uint32_t peer_item, uint32_t peer_full, const mx_item_info *it) {
  const uint32_t *w = (const uint32_t *)it;
#pragma unroll
  for (int i = 0; i < MX_ITEM_WORDS; i += 2) ws_st_async_v2_b32(peer_item + 4u * (uint32_t)i, w[i], w[i + 1], peer_full);
}

template <int BM>
WS_DEV void mx_load_pair(const ws_pipe *pipe, const ws_pipe *items, const ws_ctx *c, const mx_args *a, mx_smem<BM> *sm,
                         const ws_tmap *map_x, const ws_tmap *map_w1, const ws_tmap *map_act, const ws_tmap *map_w2) {
  static_assert(MX_ITEM_WORDS % 2 == 0, "the item goes to the peer 8 bytes at a time"); /* BM: 64 (host check) */
  mx_prefetch_maps(c, a, map_x, map_w1, map_act, map_w2);
  const int H = a->hidden, I = a->inter, hb = H / MX_BK, l2_items = moe_experts_l2_items(BM, H);
  const uint32_t a_bytes = map_x->box_bytes + a->map_xs.box_bytes;
  const uint32_t peer_full = ws_mapa_shared_cluster(&pipe->full[0], 1u);
  const uint32_t peer_item = ws_mapa_shared_cluster(&sm->item[0], 1u);
  ws_cursor k = {0, 0};
  for (ws_cursor ki = {0, 0};; ki = ws_cursor_next(ki, items->stages)) { /* rank 0's scheduler warp decodes */
    ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_SCHEDULE);
    const mx_claimed *claimed = &sm->items.slot[ki.stage];
    ws_pipe_wait_at(items, c, ki);
    ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_SCHEDULE);
    const int t = claimed->t, l2 = claimed->l2;
    if (claimed->kind < 0) break;
    const gemm_tile tile = claimed->tile; /* a 128-row block (the schedules number them: host, a->pair) */
    ws_pipe_release_at(items, c, ki);
    const int row = tile.row0 + tile.tm * 2 * BM, blk = row / MOE_EXPERTS_BM;
    const int both = tile.tm * 2 * BM + BM < tile.count; /* the peer's 64 rows are this expert's */
    const int ksteps = l2 ? I / MX_BK : hb;
    const int gate = tile.g * 2 * I + tile.tn * MOE_EXPERTS_L1_BN, down = tile.g * H + tile.tn * moe_experts_l2_bn(BM);
    ws_trace_mark(c, WS_TRACE_ITEM_BEGIN, t);
    for (int ks = 0; ks < ksteps; ks++, k = ws_cursor_next(k, pipe->stages)) {
      mx_stage<BM> *st = &sm->pipe.slot[ws_pipe_acquire_at(pipe, c, k)];
      uint64_t *full = &pipe->full[k.stage];
      if (c->lane == 0) {
        const uint32_t item_bytes = ks == 0 ? (uint32_t)sizeof(mx_item_info) : 0u;
        const uint32_t b_bytes = l2 ? map_w2->box_bytes : 4u * map_w1->box_bytes; /* mx_multicast_b's boxes */
        ws_mbarrier_expect_tx(full, b_bytes);
        ws_mbarrier_arrive_expect_tx_relaxed_cluster(peer_full + 8u * k.stage, b_bytes + (both ? a_bytes : 0u) + item_bytes);
        if (ks == 0) { /* each CTA its own 64 rows of the block; published by the commits */
          mx_item_info it;
          it.t = t; it.kind = l2 ? MX_L2 : MX_L1; it.tile = tile;
          it.tile.tm = 2 * tile.tm;
          sm->item[k.stage] = it;
          it.tile.tm++;
          mx_send_item(peer_item + (uint32_t)(k.stage * sizeof(mx_item_info)), peer_full + 8u * k.stage, &it);
        }
        mx_multicast_b(full, st, map_w1, map_w2, l2, ks, gate, down, I);
      }
      if (l2 && ks == 0) { /* the weights are already on their way */
        ws_trace_mark(c, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_ROWS);
        mx_wait_rows(c, a, blk, (uint32_t)l2_items);
        if (both) mx_wait_rows(c, a, blk + 1, (uint32_t)l2_items);
        ws_trace_mark(c, WS_TRACE_WAIT_END, WS_TRACE_ON_ROWS);
      }
      const ws_tmap *ma = l2 ? map_act : map_x, *ms = l2 ? &a->map_as : &a->map_xs;
      ws_pipe_load_tile_2d_at(pipe, c, k, st->a, ma, ks * MX_BK, row);
      ws_pipe_load_tile_2d_at(pipe, c, k, st->a_scale, ms, row, ks);
      if (both && c->lane == 0) {
        ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->a, &ma->map, ks * MX_BK, row + BM, full, 0x2);
        ws_cp_async_bulk_tensor_2d_global_to_shared_multicast(st->a_scale, &ms->map, row + BM, ks, full, 0x2);
      }
      ws_pipe_commit_at(pipe, c, k);
    }
    ws_trace_mark(c, WS_TRACE_ITEM_END, t);
  }
  /* the end for both CTAs: item -1 in a committed stage */
  ws_pipe_acquire_at(pipe, c, k);
  if (c->lane == 0) {
    mx_item_info it;
    memset(&it, 0, sizeof it);
    it.t = -1;
    sm->item[k.stage] = it;
    ws_mbarrier_arrive_expect_tx_relaxed_cluster(peer_full + 8u * k.stage, (uint32_t)sizeof(mx_item_info));
    mx_send_item(peer_item + (uint32_t)(k.stage * sizeof(mx_item_info)), peer_full + 8u * k.stage, &it);
  }
  ws_pipe_commit_at(pipe, c, k);
  mx_reset_claims(c, a, gridDim.x / 2); /* one loader per pair */
}

#endif
