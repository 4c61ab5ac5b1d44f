/* warpspec/config.h - every tunable, limit and timeout of the library in one place.
 *
 * Hardware facts (Hopper, sm_90a) are named here too, so no magic number appears in
 * the code that uses them. Plain C; included by host and device code alike. */
#ifndef WARPSPEC_CONFIG_H
#define WARPSPEC_CONFIG_H

/* ---- hardware limits of one CTA on sm_90 ---------------------------------------- */
#define WS_WARP_SIZE            32
#define WS_WARPGROUP_WARPS      4      /* setmaxnreg and wgmma work per warpgroup      */
#define WS_MAX_THREADS          1024   /* threads per block                             */
#define WS_REGS_PER_CTA         65536  /* register file one CTA may own                 */
#define WS_REGS_MIN             24     /* setmaxnreg range, multiples of 8              */
#define WS_REGS_MAX             256
#define WS_REGS_GRANULE         8
#define WS_REGS_ALLOC_WARPS     4      /* ptxas sizes the cap for whole 4-warp groups:  */
                                       /* 288 threads get 65536 / 384 -> 168, not 224   */
#define WS_NAMED_BARRIERS       16     /* ids 0..15; 0 belongs to __syncthreads()      */

/* ---- library limits ----------------------------------------------------------------- */
#define WS_MAX_ROLES            8      /* roles in one table                            */
#define WS_MAX_WARPGROUPS       (WS_MAX_THREADS / (WS_WARP_SIZE * WS_WARPGROUP_WARPS))
#define WS_NAME_LEN             24     /* role / pipe / barrier names, NUL included     */
#define WS_MAX_USER_BARRIERS    8      /* extra named barriers a plan may reserve      */
#define WS_PIPE_MAX_STAGES      32
#define WS_PIPE_MAX_READERS     8
#define WS_COMM_MAX_RANKS       64     /* ranks of a communicator (peer arrays sized by it) */

/* ---- bounded waits ----------------------------------------------------------------- */
/* Every wait the library performs gives up after this long and reports WS_ERR_TIMEOUT.
 * Override per process with WARPSPEC_TIMEOUT_MS (below) or ws_set_timeout_ms(). */
#define WS_TIMEOUT_MS_DEFAULT   4000
#define WS_TIMEOUT_MS_MAX       (3600u * 1000u) /* one hour: a bound, not a way to wait forever */
/* A wait on a peer (a transfer's data or credit) gives up at the bound; a wait on a hand-
 * off inside the kernel at this many times it. When a rank is missing, the waits queued
 * behind the one on it (a loader waiting for the route, math waiting for a stage) then
 * still wait when the peer wait gives up, and the error names the peer. */
#define WS_LOCAL_WAIT_PATIENCE  2
/* try_wait polls between two reads of the global timer: keeps the clock off the hot path */
#define WS_WAIT_POLLS_PER_CLOCK 32
/* After a timeout, how long other timed-out threads give the first one to finish
 * writing the fault record before they trap too. */
#define WS_FAULT_RECORD_NS      1000000000ull

/* ---- streaming copy (the pipe benchmark kernel) ------------------------------------- */
#define WS_STREAM_MAX_STAGES    6      /* pipe capacity: 6 x 32 KiB fits the opt-in smem */
#define WS_STREAM_STAGES        6      /* default depth: the fastest one measured       */
#define WS_STREAM_CTAS_PER_SM   1      /* default persistent grid: CTAs per SM          */
#define WS_STREAM_BOX_ROWS      32     /* TMA box: rows x 1024 bytes = 32 KiB per stage */
#define WS_STREAM_ROW_BYTES     1024
#define WS_STREAM_WRITER_WARPS  8      /* thread-store mode: warps storing each item    */

/* ---- communication: sendrecv --------------------------------------------------- */
#define WS_SR_MAX_BLOCKS        64     /* CTAs one direction of a sendrecv may use      */
#define WS_SR_DEPTH             3      /* staging slots per (peer, block)               */
#define WS_SR_MAX_STRIDE        (512 * 1024) /* payload bytes of one step               */
#define WS_SR_HEADER_BYTES      128    /* slot header; keeps the payload 128-B aligned  */
#define WS_SR_SLOT_BYTES        (WS_SR_MAX_STRIDE + WS_SR_HEADER_BYTES)
#define WS_SR_ONE_STEP_BYTES    (64 * 1024)  /* up to this per block: one step          */
#define WS_SR_LL_BYTES          (8 * 1024)   /* up to this per block: flags in the data  */
#define WS_SR_SEND_WARPS        8      /* sender role of each CTA                       */
#define WS_SR_RECV_WARPS        8      /* receiver role of each CTA                     */
#define WS_SR_VEC_PER_THREAD    8      /* 16-byte vectors each thread keeps in flight   */
#define WS_SR_ZC_MIN_BYTES      (2u << 20)  /* zero-copy: from here stores go to the peer's buffer */
#define WS_SR_CE_MIN_BYTES      (64u << 20) /* zero-copy: from here the copy engine moves it */
#define WS_SR_MAX_PAIRS         7      /* (send, receive) pairs of one launch: 8 ranks  */
/* ws_allgather sends each block to every rank at once (one launch, our own block copied
 * by the same kernel) up to this many bytes per rank with 2..WS_SR_MAX_PAIRS + 1 ranks;
 * above, the ring of ws_sendrecv. Every size by default: on 4 x H200 the direct path was
 * as fast as the ring or faster at every size from 32 B to 128 MB per rank (5 against
 * 18-20 us below 512 KB, 28 against 43 us at 2 MB; docs/benchmarks.md, session 20). */
#define WS_AG_DIRECT_MAX_BYTES  (1ull << 40)
#define WS_AG_DIRECT_MAX_CTAS   128    /* its grid, every row resident on 132 SMs       */
/* ... and from WS_AG_ZC_MIN_BYTES up to (not including) WS_AG_ZC_MAX_BYTES per rank, when
 * recvbuf is in the symmetric heap (ws_comm_alloc) on every rank, each block is stored
 * straight into its place in every peer's recvbuf (sendrecv's zero-copy handshake per
 * pair): one copy instead of a push into the peer's staging and a copy out of it.
 * Measured (4 x H100, session 24, beside the staging path in one run): faster at 32 MiB
 * per rank on 4 ranks (321 against 342 us) and at 8-32 MiB on 2 ranks (5-7%), slower at
 * 2-8 MiB on 4 ranks and at 128 MiB (1411 against 1299 us on 4 ranks); the copy engine
 * instead of stores was level on 4 ranks at 128 MiB and 15% slower on 2 ranks. */
#define WS_AG_ZC_MIN_BYTES      (16ull << 20)
#define WS_AG_ZC_MAX_BYTES      (64ull << 20)
#define WS_COMM_HEAP_SPARE      (1ull << 30) /* symmetric heap beyond the staging, default  */
#define WS_RENDEZVOUS_TIMEOUT_MS 60000 /* ranks wait this long for each other at init   */
#define WS_HOST_THREADS_MAX     64     /* threads of the float64 host references          */

/* ---- MoE dispatch / combine ----------------------------------------------------- */
#define WS_EP_DEFAULT_SMS       24     /* CTAs per transfer kernel unless the config says  */
#define WS_EP_DECODE_SMS        64     /* ... and for handles of at most this many tokens: */
#define WS_EP_DECODE_MAX_TOKENS 512
#define WS_EP_WARPS             16     /* warps per CTA of the dispatch/combine kernels    */
#define WS_EP_ROUTE_THREADS     256    /* tokens per CTA of the routing kernel              */
/* Normal-mode dispatch, overlapped: the send pushes to one destination rank at a time
 * (itself first, then rank + 1, ...) and flags each as it finishes, on half the handle's
 * SMs; the expand runs beside it on the other half and copies each source's rows as that
 * source's flags arrive (dispatch.cu). Chosen per call from WS_EP_OVERLAP_MIN_SMS SMs and
 * WS_EP_OVERLAP_MIN_TOKENS tokens (4 x H200, EP4, copy receive, session 27: at 48 SMs
 * 4096 tokens 471 -> 459 us, 2048 261 -> 249, 1024 153 -> 149, but 512 96 -> 103 and 128
 * 45 -> 55; at 24 SMs slower at every size, 4096 600 -> 755; the layer's 128 SMs, 4096
 * tokens, 446 -> 362 us). A phased send alone is ~1.5x the all-ranks send (it reloads a
 * row per rank and pushes to one rank at a time), so the overlap pays only where the
 * expand it hides is long. WARPSPEC_EP_OVERLAP=0|1 forces it. */
#define WS_EP_OVERLAP_DEFAULT   (-1) /* chosen per call */
/* Combine in one kernel, its reducer and gatherer warps at once (combine.cu), from this many
 * ranks (4 x H200, 4096 tokens per rank, session 33: EP4 24 SMs 899 -> 670 us, 48 SMs 680
 * -> 657, 128 tokens level; EP2 503 -> 562: two kernels there), with WS_EP_FUSED_REDUCERS
 * of each CTA's 16 warps reducing (14: the same). WARPSPEC_EP_COMBINE=kernels|fused forces it. */
#define WS_EP_FUSED_MIN_RANKS   4
#define WS_EP_FUSED_REDUCERS    12
#define WS_EP_OVERLAP_MIN_SMS   48
#define WS_EP_OVERLAP_MIN_TOKENS 1024
/* The index receive's expand copies no rows, so the overlap hides nothing there; the phased
 * send is what remains, and it is the faster send only with many SMs and ranks (4 x H200,
 * index receive, 4096 tokens per rank, session 34, all-ranks send against phased: EP2 48 /
 * 64 / 128 SMs 136 / 129 / 124 us against 194 / 176 / 151-158; EP4 48 / 64 SMs 304 / 306
 * against 355 / 335, but 128 SMs 323 against 302). */
#define WS_EP_OVERLAP_INDEX_MIN_SMS   128
#define WS_EP_OVERLAP_INDEX_MIN_RANKS 4
/* MoE layer, WS_MOE_AUTO, by the rows a local expert is expected to get (tokens x topk /
 * local experts). On one GPU: the whole-layer kernel (WS_MOE_FUSED_LAYER) below
 * WS_MOE_AUTO_LAYER_ROWS, where one launch beats the unfused GEMMs' launches and padding;
 * above it the unfused GEMMs, whose 128- and 192-row tiles read the weights fewer times.
 * With several ranks: the whole layer below WS_MOE_AUTO_EP_LAYER_ROWS (at decode its
 * in-kernel dispatch and combine save launches; beyond a few rows they cost the math
 * warps' time), the fused experts kernel (64-row tiles) between dispatch and combine below
 * WS_MOE_AUTO_FUSED_ROWS, else unfused. Each threshold sits at a measured crossover
 * (docs/design.md, "Knobs: why these defaults"). */
#define WS_MOE_AUTO_LAYER_ROWS      80
#define WS_MOE_AUTO_FUSED_ROWS      224
#define WS_MOE_AUTO_EP_LAYER_ROWS   2
/* The fused experts kernel (both fused paths) would take its 128-row tile from this many
 * rows per local expert; 0: never, because an expert's last partial tile then costs a
 * whole 128-row tile, and the 64-row tile was never slower where it was measured.
 * WARPSPEC_MOE_TILE=128 takes it anyway. */
#define WS_MOE_WIDE_ROWS            0

/* The fused experts path (WS_MOE_FUSED_EXPERTS) runs its kernel in CTA pairs, each pair's
 * weights read from L2 once for 128 rows, from this many rows per local expert; 0: never
 * (not a clear win where measured). WARPSPEC_MOE_PAIR=1|0 forces them on or off. */
#define WS_MOE_PAIR_ROWS            0

/* The whole layer on one GPU with at most this many (token, slot) entries: each loader of
 * the experts kernel counts the experts' rows itself at its first tile instead of waiting
 * for the route item's offsets (0: never). WARPSPEC_MOE_SELF_ROUTE=0 turns it off. */
#define WS_MOE_SELF_ROUTE_ENTRIES   256

/* ... and with at most this many (a warp's lanes, each one entry), the scheduler warp finds
 * each tile from the distinct experts in its lanes instead of walking the offsets of every
 * expert (layer_sched.cuh, moe_few_item). WARPSPEC_MOE_FEW_DECODE=0 turns it off. */
#define WS_MOE_FEW_DECODE_ENTRIES   32
/* ... and at most this many tokens, the route item also expands them (mx_route_few): at 4
 * tokens one CTA expanding every token was slower than expand items on 4 (+3 us, H200). */
#define WS_MOE_ROUTE_EXPANDS_TOKENS 2

/* The unfused path's L1 GEMM reads the received rows in place (no gathered copy) when 1;
 * 0 until that gathered loader keeps pace with the copy. WARPSPEC_MOE_GATHER=0|1 forces it. */
#define WS_MOE_GATHER_DEFAULT       0

/* ---- GEMM ------------------------------------------------------------------------ */
/* Split-K for dense problems with fewer output tiles than half the SMs (a few rows):
 * each tile's K range is cut into slices for more CTAs; fp32 partials, then one summing
 * pass. A slice is at least this many K steps (64 wide for BF16, 128 for FP8). */
#define WS_GEMM_SPLITK_MIN_STEPS 4
#define WS_GEMM_SPLITK_MAX       16
#define WS_GEMM_SPLITK_BF16_WIDE 4  /* the BF16 128 x 256 tile from 16 tiles on (gemm_launch.c) */
/* Dense problems of at most this many rows run a skinny kernel (weights on wgmma's M side,
 * A's rows on N, K slices summed inside a cluster; gemm_bf16_skinny.cu, gemm_fp8_skinny.cu):
 * FP8 ones (and FP8 masked groups with at most this much room) up to 64; BF16 ones up to
 * WS_GEMM_SKINNY_ROWS_DEFAULT (WARPSPEC_GEMM_SKINNY_ROWS), whose 65-128 rows take the
 * 128-wide instance (H200, session 39: 1.08-1.11x cuBLASLt at 128 x (4096, 7168) where the
 * 128 x 256 tile ran 0.82-0.86x). */
#define WS_GEMM_SKINNY_MAX_ROWS     64
#define WS_GEMM_SKINNY_ROWS_DEFAULT 128
/* BF16 split-K on the 128 x 256 tile: a tile's slices, when there are at most this many,
 * run as one cluster and sum their partials through distributed shared memory (no
 * workspace, no summing kernel, the same bits); more slices keep the workspace
 * (WARPSPEC_GEMM_CLUSTER_K; docs/knobs.md has the measurements). */
#define WS_GEMM_CLUSTER_K_DEFAULT 2
/* FP8: how much faster a 192-row tile (three math warpgroups) computes a row than a
 * 128-row tile (two), with row-major activation scales (global loads in both kernels)
 * and with K-block-major ones, which the 192-row kernel takes through TMA (k a multiple
 * of 512). ws_gemm_tile weighs it against the padding of each group's last tile. Measured
 * numbers (docs/design.md, "Knobs: why these defaults"), not a model. */
#define WS_GEMM_FP8_WIDE_GAIN     1.08
#define WS_GEMM_FP8_WIDE_GAIN_TMA 1.15
/* grouped contiguous FP8 problems over padded spans (rows_hint without group_rows) of at
 * most this many rows per group (mean) take the 128-row tile whatever the wave model says
 * (gemm_host.c, session 46) */
#define WS_GEMM_FP8_WIDE_GROUP_MIN_ROWS 192
/* routed FP8 groups with their counts (group_rows) take one 192-row tile row each, the
 * padding skipped, where at most this share of them is expected past 192 rows (a second,
 * partial tile row: the expert's weights then read about twice); else 128-row tiles over
 * the whole padded spans (gemm_host.c, session 47) */
#define WS_GEMM_FP8_ONE_ROW_TAIL 0.1

/* ---- attention ------------------------------------------------------------------- */
/* Flash forward with a causal mask takes its tiles longest first, but in groups of
 * (sequence, head) pairs whose K and V fit this share of the L2 (1 / WS_ATTN_L2_SHARE):
 * the CTAs in flight then read the K / V of a few heads, each from HBM about once, instead
 * of every head at once (at B16 S1024 H32 d 128 that read each K / V block 4.5 times and
 * held the kernel at HBM speed, 250 TFLOPS; docs/benchmarks.md, session 28). */
#define WS_ATTN_L2_SHARE 2
/* ... and groups of at least the grid's SMs / WS_ATTN_ROUND_BLOCKS pairs: a round of the
 * persistent grid then holds at most this many query blocks of one pair, whose key ranges
 * differ little (even rounds), read by the CTAs in step (long sequences: 3 pairs a group
 * at S 16384, d 128 were 5-15% slower than 16). 4 (33 pairs on 132 SMs): the best forced
 * size or within 1.2% of it at 11 of 12 shapes swept on an H200 (d 64 and 128, S 1024-16384,
 * session 29; docs/design.md, "Knobs"), where 8 (17 pairs) was up to 15% slower. */
#define WS_ATTN_ROUND_BLOCKS 4
/* Flash forward's schedule by default, from the key blocks (128 keys) a query tile sees on
 * average (all of seqlen_k; about half with a causal mask): plain up to
 * WS_ATTN_PLAIN_MAX_BLOCKS at d 128 (the overlapped schedules' extra prologue and hand-over
 * do not pay for 4 blocks), overlap-pingpong above (the overlap with the exponentials in
 * turns: 1-3.5% over the overlap alone from S 4096, session 30); the 128-row d 64 kernel
 * plain below WS_ATTN_OVERLAP_MIN_BLOCKS, the overlap from it; 192/128 plain. One H200,
 * every schedule timed in rotation (docs/design.md, "Knobs"; sessions 29-30). */
#define WS_ATTN_PLAIN_MAX_BLOCKS   4
#define WS_ATTN_OVERLAP_MIN_BLOCKS 32
/* d 64 runs the tall tile (192 query rows, three math warpgroups, plain) without a mask
 * and with a causal one from WS_ATTN_TALL_MIN_BLOCKS key blocks per tile on average (S 2048):
 * without a mask 1.03-1.04x the 128-row default at S 512-1024, 1.14-1.19x from S 2048; causal
 * 0.86-0.92x at S 512-1024 (a 192-row tile's diagonal is longer, its grid a smaller
 * multiple of the SMs), 0.98-1.13x from S 2048. One H200, timed in rotation, session 30. */
#define WS_ATTN_TALL_MIN_BLOCKS 8

/* ---- environment variables -------------------------------------------------------- */
/* Every knob the library reads from the environment, one prefix, one reader
 * (src/core/knobs.c): parsed once, at the first call that needs one, and kept, because
 * the ops consult them on their fast path. ws_knobs_reload() (knobs.h) reads them again
 * after a setenv. A value outside the accepted ones is reported once on stderr and the
 * default is used. What each accepts and changes: docs/knobs.md. The WS_* spellings of
 * earlier releases are still read, as deprecated aliases, where the new name is unset. */
#define WS_TIMEOUT_ENV            "WARPSPEC_TIMEOUT_MS"    /* WS_TIMEOUT_MS_DEFAULT          */
#define WS_CHECK_ENV              "WARPSPEC_CHECK"         /* 0: the validation mode, off    */
#define WS_HOST_THREADS_ENV       "WARPSPEC_HOST_THREADS"  /* the online CPUs                */
#define WS_PDL_ENV                "WARPSPEC_PDL"           /* 1: chained launches            */
#define WS_ATTN_SCHEDULE_ENV      "WARPSPEC_ATTN_SCHEDULE" /* per head dim (flash_fwd.cu)    */
#define WS_ATTN_GRID_ENV          "WARPSPEC_ATTN_GRID"     /* persistent                     */
#define WS_ATTN_HEAD_GROUP_ENV    "WARPSPEC_ATTN_HEAD_GROUP" /* from the L2 (WS_ATTN_L2_SHARE) */
#define WS_ATTN_O_STORE_ENV       "WARPSPEC_ATTN_O_STORE"  /* tma                            */
#define WS_ATTN_WG_BLOCKS_ENV     "WARPSPEC_ATTN_WG_BLOCKS" /* tile (own: opt-in)             */
#define WS_ATTN_TILE_ROWS_ENV     "WARPSPEC_ATTN_TILE_ROWS" /* chosen; 128 or 192 (d 64)     */
#define WS_MLA_GATHER_AHEAD_ENV   "WARPSPEC_MLA_GATHER_AHEAD" /* on: the few-head decode's gather does not wait for its copies */
#define WS_MLA_FP8_F16_ENV        "WARPSPEC_MLA_FP8_F16"    /* on: the 64-row MLA kernel's FP8 cache as f16 (off: BF16) */
#define WS_GEMM_SPLITS_ENV        "WARPSPEC_GEMM_SPLITS"   /* per problem (split-K above)    */
#define WS_GEMM_FP8_TILE_ENV      "WARPSPEC_GEMM_FP8_TILE" /* per problem (WIDE_GAIN above)  */
#define WS_GEMM_PAIR_ENV          "WARPSPEC_GEMM_PAIR"     /* off: the 192-row tile alone     */
#define WS_GEMM_SKINNY_ENV        "WARPSPEC_GEMM_SKINNY"   /* off: few BF16 rows on the 128 x 256 tile */
#define WS_GEMM_FP8_SKINNY_ENV    "WARPSPEC_GEMM_FP8_SKINNY" /* off: FP8 of <= 64 rows on the 128 x 128 tile with split-K */
#define WS_GEMM_SKINNY_ROWS_ENV   "WARPSPEC_GEMM_SKINNY_ROWS" /* BF16 of at most this many rows on the skinny kernel (16-128) */
#define WS_GEMM_CLUSTER_K_ENV     "WARPSPEC_GEMM_CLUSTER_K" /* 0: BF16 split-K through the workspace; N: clusters up to N slices */
#define WS_MOE_GATHER_ENV         "WARPSPEC_MOE_GATHER"    /* WS_MOE_GATHER_DEFAULT          */
#define WS_EP_OVERLAP_ENV         "WARPSPEC_EP_OVERLAP"    /* WS_EP_OVERLAP_DEFAULT          */
#define WS_EP_COMBINE_ENV         "WARPSPEC_EP_COMBINE"    /* by ranks (WS_EP_FUSED_MIN_RANKS) */
#define WS_EP_RECORDS_ENV         "WARPSPEC_EP_RECORDS"    /* off: the expand books each entry from the inbox row's meta */
#define WS_MOE_TILE_ENV           "WARPSPEC_MOE_TILE"      /* per layer (WS_MOE_WIDE_ROWS)   */
#define WS_MOE_PAIR_ENV           "WARPSPEC_MOE_PAIR"      /* per layer (WS_MOE_PAIR_ROWS)   */
#define WS_MOE_SCHED_ENV          "WARPSPEC_MOE_SCHED"     /* claimed                        */
#define WS_MOE_SELF_ROUTE_ENV     "WARPSPEC_MOE_SELF_ROUTE" /* 1: WS_MOE_SELF_ROUTE_ENTRIES  */
#define WS_MOE_SLICE_COMBINE_ENV  "WARPSPEC_MOE_SLICE_COMBINE" /* 1: L2 epilogues combine (few tokens) */
#define WS_MOE_FEW_DECODE_ENV     "WARPSPEC_MOE_FEW_DECODE" /* 1: WS_MOE_FEW_DECODE_ENTRIES  */
#define WS_MOE_ROUTE_AT_ONCE_ENV  "WARPSPEC_MOE_ROUTE_AT_ONCE" /* 0: the route is claimed like any item */
#define WS_MOE_W1_GATE_UP_ENV     "WARPSPEC_MOE_W1_GATE_UP" /* 0: W1 as 2-D rows, four boxes a stage (on)     */
#define WS_SR_CE_MIN_BYTES_ENV    "WARPSPEC_SR_CE_MIN_BYTES" /* WS_SR_CE_MIN_BYTES           */
#define WS_AG_DIRECT_MAX_BYTES_ENV "WARPSPEC_AG_DIRECT_MAX_BYTES" /* WS_AG_DIRECT_MAX_BYTES    */
#define WS_AG_ZC_MIN_BYTES_ENV    "WARPSPEC_AG_ZC_MIN_BYTES" /* WS_AG_ZC_MIN_BYTES           */
#define WS_RENDEZVOUS_TIMEOUT_ENV "WARPSPEC_RENDEZVOUS_TIMEOUT_MS" /* WS_RENDEZVOUS_TIMEOUT_MS */
#define WS_SHARE_GPU_ENV          "WARPSPEC_SHARE_GPU"     /* 0; tests: ranks share GPUs (MPS) */
#define WS_DEBUG_NVML_ENV         "WARPSPEC_DEBUG_NVML"    /* 0; the CLI's NVLink count      */
/* Not knobs: what a launcher (`warpspec run`, or one's own) tells each rank. They name
 * the process and its job, so they are read where used, each time. */
#define WS_RANK_ENV               "WS_RANK"
#define WS_NRANKS_ENV             "WS_NRANKS"
#define WS_LOCAL_RANK_ENV         "WS_LOCAL_RANK"
#define WS_RENDEZVOUS_DIR_ENV     "WS_RENDEZVOUS_DIR"
#define WS_RENDEZVOUS_KEY_ENV     "WS_RENDEZVOUS_KEY"

#endif
