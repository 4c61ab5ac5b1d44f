/* layer_types.cuh - the fused experts kernel's (layer_kernel.cu) shared-memory
 * layout, pipes, role table and arguments: what its loader (layer_loader.cuh) and
 * math (layer_math.cuh) both read. */
#ifndef WARPSPEC_MOE_LAYER_TYPES_CUH
#define WARPSPEC_MOE_LAYER_TYPES_CUH

#include "../../core/internal.h"
#include "warpspec/device/fp8.cuh"
#include "../../gemm/fp8_mma.cuh"
#include "../../gemm/gemm_epilogue.cuh"
#include "../../gemm/gemm_loader.cuh"
#include "layer_kernel.h"
#include "layer_sched.cuh"
#include "layer_items_ep.cuh"
#include "layer_items.cuh"
#include "../swiglu.cuh"

#include <cuda_bf16.h>

#define MX_BK 128
#ifndef MX_STAGES
#define MX_STAGES 4 /* 64-row tile: 4 x 41 KiB; a fifth stage does not fit beside the epilogue buffers */
#endif
#ifndef MX_WIDE_STAGES
#define MX_WIDE_STAGES 4 /* 128-row tile: 4 x 33 KiB (5 fit, but the math then spilled its packed predicates) */
#endif
#define MX_B_ROWS(BM) ((BM) == MOE_EXPERTS_BM ? 256 : 128)                /* B rows of a stage */
#define MX_STAGES_OF(BM) ((BM) == MOE_EXPERTS_BM ? MX_STAGES : MX_WIDE_STAGES)
#define MX_SMEM_OFFSETS (WS_EP_MAX_EXPERTS + 1) /* local experts whose offsets the loader holds */
#define MX_ACT_LD (128 + 16) /* a row of the act tile in shared memory, padded: no bank conflicts */
#define MX_PARK 34           /* 128-row L1: per thread the first 64 act columns' 32 SwiGLU values, 2 row amaxes */

template <int BM> struct __align__(1024) mx_stage {
  uint8_t a[BM * MX_BK];            /* x (L1) or act (L2) rows: 8 or 16 KiB  */
  uint8_t b[MX_B_ROWS(BM) * MX_BK]; /* W1 or W2 rows: 32 or 16 KiB           */
  float a_scale[BM];                /* the K block's scales of the rows      */
};

/* WS_PIPE_STORAGE's layout, one per tile shape */
template <int BM> struct mx_pipe {
  uint64_t full[MX_STAGES_OF(BM)];
  uint64_t empty[MX_STAGES_OF(BM)];
  int closed[MX_STAGES_OF(BM)];
  mx_stage<BM> slot[MX_STAGES_OF(BM)];
};

/* An item as the loader decoded it, handed to the math in the item's first stage: the
 * math no longer walks the groups itself (at 1 token that walk, up to 256 mostly empty
 * experts, stood between every landed first stage and the item's first wgmma). */
typedef struct {
  int t;          /* the item, -1: none left                                        */
  int kind;       /* MX_L1 .. MX_GATHER                                             */
  gemm_tile tile; /* a tile; else g: the expand / combine index, count: combine's
                   * target of stored L2 tile halves                                */
} mx_item_info;
#define MX_ITEM_WORDS ((int)(sizeof(mx_item_info) / sizeof(int)))

/* The scheduler warp's hand-off to the loader warp (mx_schedule): the next item, decoded.
 * Decoding took the loader about 2 us per item (a claim's round trip, the schedule's
 * divisions, code fetched cold once per item): the trace at 8192 tokens (DeepSeek-V3,
 * H100) showed it between the last stage of one item and the first of the next, and the
 * math waiting 3 us for the first stage of every L2 tile (whose epilogue is short). Done
 * inline one stage into the item before, it only moved the wait inside that item. */
typedef struct {
  int t, kind, index; /* kind: MX_L1 for a tile (l2: its phase), a handed item, or -1: none left */
  int l2, target;     /* target: a combine item's count of stored L2 tile halves */
  gemm_tile tile;
} mx_claimed;
WS_PIPE_STORAGE(mx_items, mx_claimed, 1);

/* A math warpgroup's epilogue memory: its L2 output chunks, or L1's act rows (and the
 * 128-row tile's parked SwiGLU half). A CTA runs every L1 item it claims before any L2
 * item (claims are in order), and the route and expand items' scratch (epi[0].out) comes
 * before both. 64-row
 * tile: both warpgroups write the one act tile of warpgroup 0's region, and leave it on a
 * barrier of both; 128-row tile: each warpgroup only ever touches its own region. */
template <int BM> union __align__(1024) mx_epi {
  uint8_t out[2 * GEMM_CHUNK_BYTES];    /* L2: two 64 x 64 bf16 chunks            */
  struct {
    uint8_t act[MOE_EXPERTS_BM * MX_ACT_LD]; /* L1: 64 rows x 128 act columns, e4m3 */
    float park[BM == MOE_EXPERTS_BM ? 1 : MX_PARK * 128];
  } l1;
};

template <int BM> struct mx_smem {
  mx_pipe<BM> pipe;
  mx_epi<BM> epi[2];                      /* per math warpgroup */
  float amax[2][MOE_EXPERTS_BM];          /* 64-row L1: each warpgroup's half-row amax */
  __align__(16) mx_item_info item[MX_STAGES_OF(BM)]; /* the item whose first stage this is (8-byte st.async) */
  gemm_shape shape[2];                    /* the scheduler's L1 and L2 schedules */
  mx_items items;                         /* its items, decoded, to the loader   */
  int offsets[MX_SMEM_OFFSETS];           /* and the expert offsets they read  */
  mxe_shared ep;                          /* several ranks: epochs, "last item" flag */
  int slice_last[2];                      /* per math warpgroup: it counted its slice last */
};

/* Two math warpgroups at 208 registers, then a loader warpgroup at 88 with two working
 * warps, the loader (warp 0: TMA) and the scheduler (warp 1: claims and decodes the
 * items): 384 threads, 2 x 128 x 208 + 128 x 88 = 64512, all the launch gives (168
 * each). The scheduler walks both phases' cursors and, for the whole layer, the route /
 * expand / combine numbering: one warp doing both spilled at 72 with its shared-memory
 * schedules, at 56 with the layer items, at 40 before them; the math (acc and total, 128
 * floats) fits 208. */
#define MX_ROLES(ROLE) ROLE(X_MATH, 4, 208, 2) ROLE(X_LOADER, 2, 88, 1)
WS_DECLARE_ROLES(moe_experts, MX_ROLES);

typedef struct {
  gemm_shape l1;          /* rows x I act columns, tiles BM x 128, K = H                   */
  gemm_args l2;           /* y: rows x H, tiles BM x L2 columns, K = I (what the store reads) */
  ws_tmap map_xs, map_as; /* x_scale, act_scale as [K / 128][rows] fp32, box BM x 1         */
  const float *w1_scale, *w2_scale;
  uint8_t *act;
  float *act_scale;
  uint32_t act_ld;
  uint32_t *ready;        /* [64-row blocks]: releases of the block's L1 tiles, one per tile */
  uint32_t *seen;         /* [64-row blocks]: L2 tiles past their wait (the last cleans up)  */
  uint32_t *next_item;    /* [2]: the next item to claim, CTAs finished (the last resets)   */
  int hidden, inter;
  int bar;                /* the plan's user barrier: a tile's two math warpgroups         */
  int static_walk;        /* CTA-strided items instead of claims (WARPSPEC_MOE_SCHED=static) */
  int pair;               /* launched in CTA pairs (moe_experts_kernel<BM, 1>): l1 / l2 number
                           * 128-row blocks, each CTA of the pair takes 64 of the rows      */
  int w1_gate_up;         /* map_w1 is W1 as [E][gate, up][I][H] (4-D) and each 64 act
                           * columns' gate and up rows come in one box (mx_load_b), not two
                           * (WARPSPEC_MOE_W1_GATE_UP; never in pairs)                      */
  mx_layer_args layer;    /* the whole layer (layer_items.cuh), or layer.on = 0        */
} mx_args;

#endif
