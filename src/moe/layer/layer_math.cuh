/* layer_math.cuh - the fused experts kernel's math warpgroups (layer_kernel.cu):
 * the FP8 K loop and promotion, the L1 epilogue (SwiGLU, the 1 x 128 requant, the act
 * rows out), the L2 stores, and the layer's work items between tiles. */
#ifndef WARPSPEC_MOE_LAYER_MATH_CUH
#define WARPSPEC_MOE_LAYER_MATH_CUH

#include "layer_types.cuh"

/* The math warpgroups' probe points take registers the 208-register math no longer has
 * (12 bytes spilled, session 42: a build that spills does not launch): in a WS_PROBES
 * build only with -DWS_PROBES_MATH=1 as well, the loader's and the scheduler's always. */
#if defined(WS_PROBES) && defined(WS_PROBES_MATH)
#define MX_PROBE_DECLARE(p) WS_PROBE_DECLARE(p)
#define MX_PROBE(p, i) WS_PROBE(p, i)
#define MX_PROBE_FLUSH(c, p, n, base) WS_PROBE_FLUSH(c, p, n, base)
#else
#define MX_PROBE_DECLARE(p) (void)0
#define MX_PROBE(p, i) ((void)0)
#define MX_PROBE_FLUSH(c, p, n, base) ((void)0)
#endif

/* ---- MATH -------------------------------------------------------------------------- */
/* total += acc x a_scale x b_scale, columns 0..63 of the warpgroup's 128 with b0 and
 * 64..127 with b1 (L1: gate and up blocks; L2: b0 = b1). Registers 4j, 4j + 1 are row
 * lr, 4j + 2, 4j + 3 row lr + 8; the products as the FP8 GEMM forms them (same bits). */
WS_DEV void mx_promote(float *total, const float *acc, float a0, float a1, float b0, float b1) {
  const float f00 = a0 * b0, f10 = a1 * b0, f01 = a0 * b1, f11 = a1 * b1;
#pragma unroll
  for (int j = 0; j < 16; j++) {
    const float f0 = j < 8 ? f00 : f01, f1 = j < 8 ? f10 : f11;
    total[4 * j + 0] += acc[4 * j + 0] * f0;
    total[4 * j + 1] += acc[4 * j + 1] * f0;
    total[4 * j + 2] += acc[4 * j + 2] * f1;
    total[4 * j + 3] += acc[4 * j + 3] * f1;
  }
}

/* A math warp is done with stage c: in pairs on rank 0's `empty` barrier (mx_load_pair). */
template <int PAIR> WS_DEV void mx_release(const ws_pipe *pipe, const ws_ctx *ctx, ws_cursor c) {
  if (PAIR) ws_pipe_release_warp_to_at(pipe, ctx, c, 0u);
  else ws_pipe_release_warp_at(pipe, ctx, c);
}

/* In pairs, the peer's half of a block past its expert's end: nothing was loaded for it;
 * the warp passes the item's K steps on. */
WS_DEV ws_cursor mx_skip(const ws_pipe *pipe, const ws_ctx *ctx, int kblocks, ws_cursor c) {
  for (int kb = 0; kb < kblocks; kb++, c = ws_cursor_next(c, pipe->stages)) {
    ws_pipe_wait_at(pipe, ctx, c);
    mx_release<1>(pipe, ctx, c);
  }
  return c;
}

/* K blocks kb0 .. kb1 - 1 of a tile for this warpgroup; lane l of (s0, s1) holds the B
 * scales of block kb0 + l. The rows' scales come from the stage: this thread's rows are
 * ar and ar + 8 of the tile. */
template <int BM, int PAIR>
WS_DEV void mx_kblocks(float *total, float *acc, const ws_pipe *pipe, const ws_ctx *ctx, mx_smem<BM> *sm, uint64_t da0,
                       uint64_t db0, int kb0, int kb1, int kblocks, float s0, float s1, int ar, ws_cursor *cp,
                       uint32_t *fullp) {
  const uint32_t stage_bytes = (uint32_t)sizeof(sm->pipe.slot[0]);
  ws_cursor c = *cp;
  uint32_t full = *fullp;
  for (int kb = kb0; kb < kb1; kb++, c = ws_cursor_next(c, pipe->stages)) {
    const float b0 = __shfl_sync(0xffffffffu, s0, kb - kb0), b1 = __shfl_sync(0xffffffffu, s1, kb - kb0);
    fp8_issue(acc, pipe, ctx, da0, db0, stage_bytes, c, full);
    const float *as = sm->pipe.slot[c.stage].a_scale;
    const float a0 = ws_ld_shared_f32(as + ar), a1 = ws_ld_shared_f32(as + ar + 8);
    full = kb + 1 < kblocks ? ws_pipe_probe_at(pipe, ws_cursor_next(c, pipe->stages)) : 0u;
    WS_WGMMA_WAIT_GROUP(0);
    mx_release<PAIR>(pipe, ctx, c);
    mx_promote(total, acc, a0, a1, b0, b1);
  }
  *cp = c;
  *fullp = full;
}

/* One tile's K loop for this warpgroup. The B scales (weights: read-only, __ldg) are held
 * by the warp's lanes 32 K blocks at a time, in two sets that take turns: while the K
 * blocks of one set run, the other set's loads (issued 32 K blocks earlier) land, and a
 * set is reloaded straight after its blocks (no register move, so nothing waits on the
 * load until its first use 32 blocks on). Loaded one K block ahead instead (the earlier
 * form), every K block waited on a DRAM round trip queued behind the weight stream: at 1
 * token the kernel streamed about 10 GB/s per SM (ncu, docs/benchmarks.md, session 7).
 * Same values, same bits. Returns the pipe cursor after the loop. */
#define MX_SCALE_CHUNK 32
template <int BM, int PAIR>
WS_DEV ws_cursor mx_tile(float *total, float *acc, const ws_pipe *pipe, const ws_ctx *ctx, mx_smem<BM> *sm, uint64_t da0,
                         uint64_t db0, int kblocks, const float *bs0, const float *bs1, int ar, ws_cursor c) {
#pragma unroll
  for (int i = 0; i < 64; i++) total[i] = 0.0f;
  const int lane = ctx->lane, last = kblocks - 1, ch = MX_SCALE_CHUNK;
  float p0 = __ldg(bs0 + min(lane, last)), p1 = __ldg(bs1 + min(lane, last));
  float q0 = __ldg(bs0 + min(ch + lane, last)), q1 = __ldg(bs1 + min(ch + lane, last));
  uint32_t full = ws_pipe_probe_at(pipe, c);
  for (int base = 0; base < kblocks; base += 2 * ch) {
    mx_kblocks<BM, PAIR>(total, acc, pipe, ctx, sm, da0, db0, base, min(base + ch, kblocks), kblocks, p0, p1, ar, &c, &full);
    if (base + 2 * ch < kblocks) {
      p0 = __ldg(bs0 + min(base + 2 * ch + lane, last));
      p1 = __ldg(bs1 + min(base + 2 * ch + lane, last));
    }
    if (base + ch < kblocks)
      mx_kblocks<BM, PAIR>(total, acc, pipe, ctx, sm, da0, db0, base + ch, min(base + 2 * ch, kblocks), kblocks, q0, q1, ar,
                           &c, &full);
    if (base + 3 * ch < kblocks) {
      q0 = __ldg(bs0 + min(base + 3 * ch + lane, last));
      q1 = __ldg(bs1 + min(base + 3 * ch + lane, last));
    }
  }
  return c;
}

WS_DEV float mx_bf16_round(float v) { return __bfloat162float(__float2bfloat16_rn(v)); }

/* SwiGLU of this thread's 32 act values (rows lr, lr + 8; 16 columns each) from the
 * bf16-rounded gate and up (what the unfused path reads back from h), and each row's
 * amax over them. */
WS_DEV void mx_swiglu(const float *total, float v[2][16], float amax[2]) {
#pragma unroll
  for (int h = 0; h < 2; h++)
#pragma unroll
    for (int j = 0; j < 8; j++)
#pragma unroll
      for (int e = 0; e < 2; e++) {
        const float g = mx_bf16_round(total[4 * j + 2 * h + e]), u = mx_bf16_round(total[4 * (j + 8) + 2 * h + e]);
        v[h][2 * j + e] = moe_silu_mul(g, u);
        amax[h] = fmaxf(amax[h], fabsf(v[h][2 * j + e]));
      }
}

/* A row's amax over the 4 threads of its quad (the warpgroup's 64 columns). */
WS_DEV float mx_quad_max(float m) {
  m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 1));
  return fmaxf(m, __shfl_xor_sync(0xffffffffu, m, 2));
}

/* This thread's 16 values of row r, columns col0 + 8j + 2q (+1), as e4m3 of v x f (f: the
 * block's moe_act_inv_scale) into the tile. */
WS_DEV void mx_put_e4m3(uint8_t *tile_row, int col, const float *v, float f) {
#pragma unroll
  for (int j = 0; j < 8; j++) *(uint16_t *)(tile_row + col + 8 * j) = ws_to_e4m3x2(v[2 * j] * f, v[2 * j + 1] * f);
}

/* The act tile's first n rows (128 bytes each) to global memory as 16-byte stores by
 * `threads` threads (i: this one's index). */
WS_DEV void mx_store_act(const mx_args *a, const uint8_t *act, int n, int row0, int tn, int i, int threads) {
  for (int ch = i; ch < n * 8; ch += threads) {
    const int r = ch / 8, col = (ch % 8) * 16;
    const uint4 val = *(const uint4 *)(act + r * MX_ACT_LD + col);
    ws_st_global_v4(a->act + (size_t)(row0 + r) * (size_t)a->inter + (size_t)tn * 128 + col, val);
  }
}

/* 64-row L1's epilogue: this warpgroup's 64 act columns of the tile's rows, the row's
 * amax over both warpgroups' columns, e4m3 into the shared tile, then 16-byte stores and
 * one release of the tile on the block's counter. */
template <int BM>
WS_DEV void mx_l1_epilogue(const ws_ctx *ctx, const mx_args *a, mx_smem<BM> *sm, const gemm_tile *tile, int wg, int lr,
                           const float *total) {
  const int q = ctx->lane % 4, row0 = tile->row0 + tile->tm * BM;
  float v[2][16], amax[2] = {0.0f, 0.0f};
  mx_swiglu(total, v, amax);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    amax[h] = mx_quad_max(amax[h]);
    if (q == 0) sm->amax[wg][lr + 8 * h] = amax[h];
  }
  ws_named_sync((uint32_t)a->bar, 2 * 128);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = lr + 8 * h;
    const float s = ws_fp8_scale_of(fmaxf(amax[h], sm->amax[wg ^ 1][r]));
    mx_put_e4m3(sm->epi[0].l1.act + r * MX_ACT_LD, wg * 64 + 2 * q, v[h], moe_act_inv_scale(s));
    if (wg == 0 && q == 0) a->act_scale[(size_t)tile->tn * a->act_ld + (size_t)(row0 + r)] = s;
  }
  ws_named_sync((uint32_t)a->bar, 2 * 128);
  const int i = wg * 128 + ctx->warp * 32 + ctx->lane; /* 256 threads, 512 chunks of 16 bytes */
  mx_store_act(a, sm->epi[0].l1.act, BM, row0, tile->tn, i, 256);
  ws_fence_proxy_async_global(); /* L2's loaders read these rows by TMA */
  /* the tile's stores ordered before thread 0 by the barrier; its release is cumulative */
  ws_named_sync((uint32_t)a->bar, 2 * 128);
  if (i == 0 && a->layer.drop != MOE_DROP_L1_RELEASE) ws_red_release_gpu_add_u32(a->ready + row0 / MOE_EXPERTS_BM, 1u);
}

/* 128-row L1, after its first K loop (act columns c .. c + 63): the SwiGLU values and the
 * rows' partial amax wait in this thread's slots of shared memory (the same thread takes
 * them back; in registers they spilled the math's 208 around the second loop). */
template <int BM>
WS_DEV void mx_l1_park(mx_smem<BM> *sm, int wg, int ti, const float *total) {
  float v[2][16], amax[2] = {0.0f, 0.0f};
  mx_swiglu(total, v, amax);
  float *park = sm->epi[wg].l1.park + ti;
#pragma unroll
  for (int h = 0; h < 2; h++) {
#pragma unroll
    for (int e = 0; e < 16; e++) park[(h * 16 + e) * 128] = v[h][e];
    park[(32 + h) * 128] = amax[h];
  }
}

/* 128-row L1's epilogue, after the second K loop (columns c + 64 .. c + 127): this
 * warpgroup's 64 rows over all 128 act columns, so the amax is the quad's; e4m3 into the
 * warpgroup's rows of the shared tile, 16-byte stores, then a release of its 64-row
 * block, unless those rows are the next expert's. */
template <int BM>
WS_DEV void mx_l1_epilogue_wide(const ws_ctx *ctx, const mx_args *a, mx_smem<BM> *sm, const gemm_tile *tile, int wg,
                                int lr, const float *total) {
  const int q = ctx->lane % 4, ti = ws_role_thread(ctx), row0 = tile->row0 + tile->tm * BM + wg * 64;
  const int mine = tile->tm * BM + wg * 64 < tile->count; /* else the next expert's rows */
  uint8_t *act = sm->epi[wg].l1.act;
  const float *park = sm->epi[wg].l1.park + ti;
  float v[2][16], amax[2] = {park[32 * 128], park[33 * 128]};
  mx_swiglu(total, v, amax);
#pragma unroll
  for (int h = 0; h < 2; h++) {
    const int r = lr + 8 * h;
    const float s = ws_fp8_scale_of(mx_quad_max(amax[h]));
    float p[16];
#pragma unroll
    for (int e = 0; e < 16; e++) p[e] = park[(h * 16 + e) * 128];
    mx_put_e4m3(act + r * MX_ACT_LD, 2 * q, p, moe_act_inv_scale(s));
    mx_put_e4m3(act + r * MX_ACT_LD, 64 + 2 * q, v[h], moe_act_inv_scale(s));
    if (q == 0 && mine) a->act_scale[(size_t)tile->tn * a->act_ld + (size_t)(row0 + r)] = s;
  }
  if (!mine) return;
  ws_role_sync(ctx); /* the warpgroup's rows of the tile */
  mx_store_act(a, act, 64, row0, tile->tn, ti, 128);
  ws_fence_proxy_async_global(); /* L2's loaders read these rows by TMA */
  ws_role_sync(ctx);            /* the warpgroup's stores before its leader's release */
  if (ws_role_leader(ctx) && a->layer.drop != MOE_DROP_L1_RELEASE)
    ws_red_release_gpu_add_u32(a->ready + row0 / MOE_EXPERTS_BM, 1u);
}

/* The whole layer: combine reads y, so each warpgroup counts its half of an L2 tile once
 * its stores are complete. Done one tile late (before the next tile's stores, or before
 * combine): waiting for the stores right after issuing them stalled the warpgroup about
 * 2 us per tile, and the loader with it once every slot was full (+114 us at 128 tokens,
 * DeepSeek-V3, H100). The barrier orders the plain stores of a partial tile before the
 * leader's release. slice_combine: the count is on the tile's column slice tn (2 halves
 * per 64-row block); returns 1 in every thread of the warpgroup that counted last, which
 * then sums that slice (mx_sum_slice; its leader's acquire and the barrier come before
 * the warpgroup reads the other CTAs' y). `last`: the warpgroup's word of shared memory. */
WS_DEV int mx_count_stored(const ws_ctx *ctx, const mx_args *a, int tn, int *last) {
  ws_role_sync(ctx);
  const mx_layer_args *L = &a->layer;
  if (ws_role_leader(ctx)) {
    WS_CP_ASYNC_BULK_WAIT_GROUP(0);
    ws_fence_proxy_async_global();
    int mine = 0;
    if (L->drop != MOE_DROP_L2_STORED) {
      if (!L->slice_combine) {
        ws_red_release_gpu_add_u32(L->l2_done, 1u);
      } else {
        /* the route item's total: written before this tile's rows existed (route -> the
         * expand items' wait on `routed`, or the route's own expand -> `expanded` -> the
         * L1 loaders -> `ready`) */
        const uint32_t halves = 2u * (uint32_t)(__ldcg(L->offsets + L->experts) / MOE_EXPERTS_BM);
        mine = ws_atom_acq_rel_gpu_add_u32(L->slice_done + tn, 1u) == halves - 1u;
        if (mine) L->slice_done[tn] = 0u; /* nobody else counts on it again this call */
      }
    }
    if (L->slice_combine) *last = mine;
  }
  if (!L->slice_combine) return 0;
  ws_role_sync(ctx);
  return *last;
}

/* slice_combine: this warpgroup counted column slice tn last: its sums for every token.
 * Called where no tile's accumulators are live (inside the epilogue they spilled). */
WS_DEV void mx_sum_slice(const ws_ctx *ctx, const mx_args *a, int tn) {
  ws_trace_mark(ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_EPILOGUE);
  mx_combine_slice(&a->layer, a->l2.d, tn, ctx->warp, 4, ctx->lane, a->hidden);
  ws_trace_mark(ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_EPILOGUE);
}

/* Wait for the next item's first stage and take the item the loader decoded into it:
 * its kind + 1 (MX_L1 + 1 ..), or 0 (none left: -1). Lane 0 reads it (the lane that releases the
 * stage: racecheck does not count __syncwarp as ordering the other lanes' reads before
 * that release) and hands it to the warp. Not the pipe's close, whose flag every lane
 * reads. */
template <int BM>
WS_DEV int mx_next(const ws_pipe *pipe, const ws_ctx *ctx, const mx_smem<BM> *sm, ws_cursor c, gemm_tile *tile) {
  ws_trace_mark(ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_STAGE);
  ws_pipe_wait_at(pipe, ctx, c);
  ws_trace_mark(ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_STAGE);
  int w[MX_ITEM_WORDS];
  const int *src = (const int *)&sm->item[c.stage];
#pragma unroll
  for (int i = 0; i < MX_ITEM_WORDS; i++) w[i] = __shfl_sync(0xffffffffu, ctx->lane == 0 ? src[i] : 0, 0);
  mx_item_info it;
  memcpy(&it, w, sizeof it);
  if (it.t < 0) return 0;
  *tile = it.tile;
  ws_trace_mark(ctx, WS_TRACE_ITEM_BEGIN, it.t);
  return it.kind + 1;
}

template <int BM, int PAIR>
WS_DEV void mx_math(mx_smem<BM> *sm, const ws_pipe *pipe_in, const ws_ctx *ctx_in, const mx_args *args_in,
                    const ws_tmap *map_y) {
  const ws_pipe pipe = *pipe_in;
  const ws_ctx ctx = *ctx_in;
  const mx_args &a = *args_in;
  const int wide = BM != MOE_EXPERTS_BM;
  const int wg = __shfl_sync(0xffffffffu, ctx.replica, 0);
  /* 64-row tile: the same A rows, B rows 128 wg ..; 128-row tile: A rows 64 wg .., the same B */
  const uint64_t da0 = ws_wgmma_desc_k128b(sm->pipe.slot[0].a + (wide ? wg * 64 * MX_BK : 0));
  const uint64_t db0 = ws_wgmma_desc_k128b(sm->pipe.slot[0].b + (wide ? 0 : wg * 128 * MX_BK));
  const int lr = ctx.warp * 16 + ctx.lane / 4; /* this thread's rows: lr and lr + 8 of the warpgroup's */
  const int ar = lr + (wide ? wg * 64 : 0);    /* ... and of the tile (their scales in the stage)     */
  const int hb = a.hidden / 128, ib = a.inter / 128;
  float acc[64], total[64];
  ws_cursor c = {0, 0};
  gemm_tile tile;
  /* Two loops, L1 items then L2 items (the order they come in), each with one tile body:
   * one loop with both bodies behind a branch merged the cursor from two paths, and ptxas
   * then kept the wgmma descriptors in ordinary registers (an R2UR move before every
   * wgmma instead of uniform-datapath arithmetic). */
  const int gw = wg * 4 + ctx.warp, mi = gw * 32 + ctx.lane; /* warp and thread of the 256 */
  /* probe points of a tile (WS_PROBES and WS_PROBES_MATH builds; base 0 L1, 10 L2): 0 the wait for its first
   * stage, 1 the stage in, 2 the K loop done, 3 the epilogue done */
  MX_PROBE_DECLARE(p);
  MX_PROBE(p, 0);
  /* layer.route_at_once: block 0 starts with the route (item 0), which no scheduler claims
   * and no stage carries: at 1 token the claim, the scheduler's cold code and the hand-off
   * through the loader had the route begin 4.4 us into the kernel (H200, session 43) */
  int at_once = !PAIR && a.layer.route_at_once && blockIdx.x == 0;
  int phase = MX_ROUTE + 1;
  if (at_once) ws_trace_mark(&ctx, WS_TRACE_ITEM_BEGIN, 0);
  else phase = mx_next(&pipe, &ctx, sm, c, &tile);
  /* the whole layer's route, send and expand items (layer_items.cuh, one GPU;
   * layer_items_ep.cuh, several ranks): their stage carries only the item, free again at
   * once. The route's scratch is warpgroup 0's epilogue memory: no L2 store pending yet. */
  const uint32_t bar = (uint32_t)a.bar;
  const int ep = a.layer.nranks > 1;
  while (!PAIR && (phase == MX_ROUTE + 1 || phase == MX_SEND + 1 || phase == MX_EXPAND + 1)) {
    if (!at_once) {
      ws_pipe_release_warp_at(&pipe, &ctx, c);
      c = ws_cursor_next(c, pipe.stages);
    }
    at_once = 0;
    int *scratch = (int *)sm->epi[0].out;
    const int route_expands = phase == MX_ROUTE + 1 && !ep && a.layer.route_expands; /* mx_route_few */
    if (phase == MX_ROUTE + 1) {
      if (ep) mxe_route(&a.layer, scratch, &ctx, mi, bar, &sm->ep);
      else if (route_expands) mx_route_few(&a.layer, scratch, mi, bar, a.hidden);
      else mx_route(&a.layer, scratch, mi, bar, a.hidden);
    } else if (phase == MX_SEND + 1) {
      mxe_send(&a.layer, tile.g, gw, ctx.lane, mi, bar, &sm->ep);
    } else if (ep) {
      mxe_expand(&a.layer, scratch, &ctx, tile.g, gw, ctx.lane, mi, bar, &sm->ep);
    }
    if (route_expands || (phase == MX_EXPAND + 1 && !ep)) {
      const int tpi = a.layer.tokens_per_item, t0 = route_expands ? 0 : tile.g * tpi;
      mx_expand(&a.layer, route_expands ? scratch : NULL, t0, route_expands ? a.layer.tokens : min(tpi, a.layer.tokens - t0),
                gw, ctx.lane, a.hidden);
      mx_expand_done(&a.layer, mi, bar, route_expands);
    }
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  while (phase == MX_L1 + 1) {
    MX_PROBE(p, 1);
    const float *bs = a.w1_scale + ((size_t)tile.g * 2 * ib + (size_t)tile.tn) * hb; /* gate block; up is ib blocks on */
    if (PAIR && tile.tm * BM >= tile.count) {
      c = mx_skip(&pipe, &ctx, hb, c);
    } else if (!wide) {
      c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, hb, bs, bs + (size_t)ib * hb, ar, c);
      MX_PROBE(p, 2);
      ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_EPILOGUE); /* the tensor cores idle from here */
      mx_l1_epilogue(&ctx, &a, sm, &tile, wg, lr, total);
      ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_EPILOGUE);
      MX_PROBE(p, 3);
      MX_PROBE_FLUSH(&ctx, p, 4, 0);
    } else { /* act columns c .. c + 63, then c + 64 .. c + 127: the same scale blocks */
      c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, hb, bs, bs + (size_t)ib * hb, ar, c);
      mx_l1_park(sm, wg, ws_role_thread(&ctx), total);
      c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, hb, bs, bs + (size_t)ib * hb, ar, c);
      mx_l1_epilogue_wide(&ctx, &a, sm, &tile, wg, lr, total);
    }
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    MX_PROBE(p, 0);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  int stored = 0; /* the whole layer: this warpgroup's last L2 tile is not counted yet */
  int stored_tn = 0; /* ... and its column tile (slice_combine) */
  uint64_t to_sum = 0; /* slice_combine: the column tiles this warpgroup counted last */
  while (phase == MX_L2 + 1) {
    if (PAIR && tile.tm * BM >= tile.count) {
      c = mx_skip(&pipe, &ctx, ib, c);
      ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
      phase = mx_next(&pipe, &ctx, sm, c, &tile);
      continue;
    }
    /* this warpgroup's 128 columns (64-row tile: past H, H an odd multiple of 128,
     * computed, not stored) */
    MX_PROBE(p, 1);
    const int nb = wide ? tile.tn : min(2 * tile.tn + wg, hb - 1);
    const float *bs = a.w2_scale + ((size_t)tile.g * hb + (size_t)nb) * ib;
    c = mx_tile<BM, PAIR>(total, acc, &pipe, &ctx, sm, da0, db0, ib, bs, bs, ar, c);
    MX_PROBE(p, 2);
    gemm_tile out = tile;
    out.tn = wide ? tile.tn : 2 * tile.tn + wg;
    /* the previous tile's stores are long done; its slice, if this warpgroup completed it,
     * is summed after the loop (in it, the sums' registers spilled the accumulators') */
    if (stored && mx_count_stored(&ctx, &a, stored_tn, &sm->slice_last[wg])) to_sum |= 1ull << stored_tn;
    /* rows past the expert's end (the 128-row tile's next-expert half) are not stored */
    ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_EPILOGUE);
    gemm_store_fragment<128, 2>(&ctx, &a.l2, &out, tile.tm * BM + (wide ? wg * 64 : 0), total, sm->epi[wg].out, map_y);
    ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_EPILOGUE);
    MX_PROBE(p, 3);
    MX_PROBE_FLUSH(&ctx, p, 4, 10);
    stored = !PAIR && a.layer.on;
    stored_tn = tile.tn;
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    MX_PROBE(p, 0);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  /* before any combine item waits for the count */
  if (stored && mx_count_stored(&ctx, &a, stored_tn, &sm->slice_last[wg])) to_sum |= 1ull << stored_tn;
  for (; to_sum; to_sum &= to_sum - 1) mx_sum_slice(&ctx, &a, __ffsll((long long)to_sum) - 1);
  while (!PAIR && (phase == MX_COMBINE + 1 || phase == MX_REDUCE + 1 || phase == MX_GATHER + 1)) {
    ws_pipe_release_warp_at(&pipe, &ctx, c);
    c = ws_cursor_next(c, pipe.stages);
    if (phase == MX_REDUCE + 1) {
      mxe_reduce(&a.layer, &ctx, a.l2.d, tile.g, (uint32_t)tile.count, gw, ctx.lane, mi, bar, &sm->ep);
    } else if (phase == MX_GATHER + 1) {
      mxe_gather(&a.layer, &ctx, tile.g, gw, ctx.lane, mi, bar, &sm->ep);
    } else {
      ws_trace_mark(&ctx, WS_TRACE_WAIT_BEGIN, WS_TRACE_ON_ROWS);
      if (mi == 0) mx_combine_wait(&a.layer, &ctx, (uint32_t)tile.count, a.layer.reduce_items);
      ws_named_sync(bar, MX_LAYER_THREADS);
      ws_trace_mark(&ctx, WS_TRACE_WAIT_END, WS_TRACE_ON_ROWS);
      mx_combine(&a.layer, a.l2.d, tile.g, gw, ctx.lane, a.hidden);
    }
    ws_trace_mark(&ctx, WS_TRACE_ITEM_END, -1);
    phase = mx_next(&pipe, &ctx, sm, c, &tile);
  }
  ws_store_drain(&ctx);
}


#endif
