/* knobs.h - the library's environment knobs, parsed once (knobs.c); not installed.
 *
 * Callers read a field of ws_knobs_get() where they used to call getenv: the names and
 * defaults are in config.h, the accepted values in docs/knobs.md and in knobs.c's table.
 * Plain C, also included by the .cu launchers. */
#ifndef WARPSPEC_KNOBS_INTERNAL_H
#define WARPSPEC_KNOBS_INTERNAL_H

#include "warpspec/knobs.h"

#ifdef __cplusplus
extern "C" {
#endif

/* WARPSPEC_ATTN_SCHEDULE: the flash kernel's schedule; AUTO picks per head dim. */
enum { WS_ATTN_SCHED_AUTO = -1, WS_ATTN_SCHED_PLAIN = 0, WS_ATTN_SCHED_PINGPONG = 1, WS_ATTN_SCHED_OVERLAP = 2,
       WS_ATTN_SCHED_OVERLAP_PINGPONG = 3 };

typedef struct {
  int timeout_ms;            /* WARPSPEC_TIMEOUT_MS: bound of every device-side wait        */
  int check;                 /* WARPSPEC_CHECK: 1 = validation mode on                       */
  int host_threads;          /* WARPSPEC_HOST_THREADS: 0 = the online CPUs                   */
  int pdl;                   /* WARPSPEC_PDL: 1 = the library's launches chained             */
  int attn_schedule;         /* WARPSPEC_ATTN_SCHEDULE: WS_ATTN_SCHED_*                      */
  int attn_persistent;       /* WARPSPEC_ATTN_GRID: 1 persistent, 0 one CTA per tile         */
  int attn_head_group;       /* WARPSPEC_ATTN_HEAD_GROUP: 0 = from the L2, else forced       */
  int attn_o_tma;            /* WARPSPEC_ATTN_O_STORE: 1 tma (through shared memory), 0 rows */
  int attn_wg_blocks;        /* WARPSPEC_ATTN_WG_BLOCKS: 0 = tile, 1 = own (tall d 64: a warpgroup's own rows' blocks) */
  int attn_tile_rows;        /* WARPSPEC_ATTN_TILE_ROWS: 0 = chosen per mask and length, 128, or 192 (d 64) */
  int mla_gather_ahead;      /* WARPSPEC_MLA_GATHER_AHEAD: the few-head MLA decode's stages land by mbarrier */
  int mla_fp8_f16;           /* WARPSPEC_MLA_FP8_F16: the 64-row MLA kernel converts the FP8 cache to f16 */
  int gemm_splits;           /* WARPSPEC_GEMM_SPLITS: 0 = chosen per problem, else forced    */
  int gemm_fp8_tile;         /* WARPSPEC_GEMM_FP8_TILE: 0 = chosen per problem, 128 or 192   */
  int gemm_pair;             /* WARPSPEC_GEMM_PAIR: the 192-row FP8 tile in CTA pairs        */
  int gemm_skinny;           /* WARPSPEC_GEMM_SKINNY: BF16 of <= 64 rows on the skinny kernel */
  int gemm_fp8_skinny;       /* WARPSPEC_GEMM_FP8_SKINNY: FP8 of <= 64 rows on the skinny kernel */
  int gemm_skinny_rows;      /* WARPSPEC_GEMM_SKINNY_ROWS: BF16 rows up to which the skinny kernel runs (64, 128) */
  int gemm_cluster_k;        /* WARPSPEC_GEMM_CLUSTER_K: BF16 split-K summed in clusters of at most this many slices */
  int moe_gather;            /* WARPSPEC_MOE_GATHER: 0 / 1                                   */
  int ep_overlap;            /* WARPSPEC_EP_OVERLAP: -1 = chosen per call, 0 / 1 forced     */
  int ep_combine;            /* WARPSPEC_EP_COMBINE: -1 by ranks, 0 kernels, 1 fused              */
  int ep_records;            /* WARPSPEC_EP_RECORDS: senders write entry records (read at ws_ep_create) */
  int moe_tile;              /* WARPSPEC_MOE_TILE: 0 = chosen per layer, 64 or 128           */
  int moe_pair;              /* WARPSPEC_MOE_PAIR: -1 = chosen per layer, 0 / 1 forced       */
  int moe_static_walk;       /* WARPSPEC_MOE_SCHED: 1 static, 0 claimed                      */
  int moe_self_route;        /* WARPSPEC_MOE_SELF_ROUTE: 0 / 1                               */
  int moe_slice_combine;     /* WARPSPEC_MOE_SLICE_COMBINE: 0 / 1                            */
  int moe_few_decode;        /* WARPSPEC_MOE_FEW_DECODE: 0 / 1                               */
  int moe_route_at_once;     /* WARPSPEC_MOE_ROUTE_AT_ONCE: 0 / 1                            */
  int moe_w1_gate_up;        /* WARPSPEC_MOE_W1_GATE_UP: 0 / 1                               */
  long long sr_ce_min_bytes; /* WARPSPEC_SR_CE_MIN_BYTES: zero-copy by copy engine from here */
  long long ag_direct_max_bytes; /* WARPSPEC_AG_DIRECT_MAX_BYTES: all-gather direct up to here */
  long long ag_zc_min_bytes;     /* WARPSPEC_AG_ZC_MIN_BYTES: all-gather zero-copy from here    */
  int rendezvous_timeout_ms; /* WARPSPEC_RENDEZVOUS_TIMEOUT_MS                               */
  int share_gpu;             /* WARPSPEC_SHARE_GPU: 1 = ranks may share a GPU (tests, MPS)   */
  int debug_nvml;            /* WARPSPEC_DEBUG_NVML: 1 = the CLI prints its NVML queries     */
} ws_knobs;

/* The knobs, parsed from the environment at the first call in the process (thread-safe)
 * and again at ws_knobs_reload(). Never NULL. */
const ws_knobs *ws_knobs_get(void);

/* Parse the one knob called `name` (its WARPSPEC_ name) again, leaving the others as they
 * are: ws_set_check_mode(-1) goes back to the environment's WARPSPEC_CHECK this way. */
void ws_knobs_reread(const char *name);

#ifdef __cplusplus
}
#endif
#endif
