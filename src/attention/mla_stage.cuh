/* mla_stage.cuh - the MLA kernel's shared memory and roles (mla_sparse.cu): Q, the two kv
 * stages of nine swizzled [64][64] boxes, the P tile and the exchange arrays; the key
 * modes its instances are compiled for; the gather and math roles. Included by the
 * kernel's pieces (mla_fp8_gather.cuh, mla_math.cuh) and the kernel. */
#ifndef WARPSPEC_MLA_STAGE_CUH
#define WARPSPEC_MLA_STAGE_CUH

#include "warpspec/device/warpspec.cuh"
#include "mla_internal.h"

#define MLA_BOXES (MLA_DQK / 64) /* 64-column boxes of a row: 9              */
#define MLA_PIECES (MLA_DQK / 8) /* 16-byte pieces of a row: 72              */
#define MLA_STAGES 2
#define MLA_WG_CHUNKS (MLA_DV / 2 / 8) /* 8-column chunks of a warpgroup's 256 output columns: 32 */

typedef struct {
  uint16_t q[MLA_BOXES][MLA_BH * 64];               /* 1024-byte aligned boxes, 8 KB each */
  uint16_t kv[MLA_STAGES][MLA_BOXES][MLA_BN * 64];
  uint16_t p[MLA_BH * 64];                          /* P: [64 heads][64 keys], swizzled  */
  float rmax[2][MLA_BH];                            /* each warpgroup's block row maxima */
  float lsum[2][MLA_BH];                            /* each warpgroup's row sums (end)   */
  uint8_t valid[MLA_STAGES][MLA_BN];                /* the stage's rows: 1 read, 0 masked */
  int rows[MLA_STAGES][MLA_BN];                     /* FP8: the stage's kv rows, for the copies */
  float qexp[MLA_BH];                               /* FP8 f16 form: e of row h (Q x 2^-e) */
  float gmax[4];                                    /* FP8 f16 form: the gather warps' largest tile scales */
  int eblk[MLA_STAGES];                             /* FP8 f16 form: the stage's block power of two E */
  uint64_t q_full[1], q_empty[1], kv_full[MLA_STAGES], kv_empty[MLA_STAGES];
  int q_closed[1], kv_closed[MLA_STAGES];
} mla_smem;

/* A kernel's key mode, a template parameter rather than a runtime test, so that each
 * kernel holds only its own case's code (a runtime branch for ROWS cost 128-head decode
 * 1-3%, docs/design_mla.md 8):
 *   PLAIN  one token per CTA: prefill's index lists, paged decode with 64+ heads or s_q 1,
 *          and sparse decode when one CTA takes a whole list;
 *   SPLIT  sparse decode with its index lists split over CTAs;
 *   ROWS   paged decode with fewer heads than MLA_BH and s_q > 1: a sequence's s_q tokens
 *          share tiles (MLA_ROW_TILES), each row masked at its own token's causal limit. */
enum { MLA_KEYS_PLAIN = 0, MLA_KEYS_SPLIT = 1, MLA_KEYS_ROWS = 2 };

#define MLA_ROLES(ROLE) ROLE(S_GATHER, 4, 40, 1) ROLE(S_MATH, 4, 232, 2)
WS_DECLARE_ROLES(mla_sparse, MLA_ROLES);

/* Byte offset of 16-byte piece `piece` (0..7) of row `row` in a [rows][128 B] box with
 * the 128-byte swizzle (what TMA writes and wgmma's 128B descriptors read). */
static __device__ __forceinline__ uint32_t mla_swizzle(int row, int piece) {
  return ws_swizzle128_offset((uint32_t)row, (uint32_t)piece);
}

#endif
