/* warpspec/gemm.h - GEMMs for MoE experts: D = A x B^T in BF16 or FP8 (E4M3 with
 * DeepSeek-style block scales), dense or grouped.
 *
 * Shapes (all row-major, K contiguous; "rows" below is m, or the masked layout's
 * groups x m):
 *   A  rows x k        activations, bf16 or e4m3
 *   B  groups x n x k  weights of each group (expert), bf16 or e4m3
 *   D  rows x n        bf16 output
 *   FP8 scales: a_scale[row][k / 128] (1 x 128 blocks), b_scale[g][n / 128][k / 128]
 *   (128 x 128 blocks); D[r][j] = sum_k A[r][k] a_scale[r][k/128] B[g][j][k] b_scale[g][j/128][k/128].
 *   a_scale may instead be K-block-major, a_scale[k / 128][a_scale_ld] (a_scale_ld > 0:
 *   at least rows, a multiple of 4), the layout DeepGEMM and cuBLASLt's block scaling
 *   take: each K block's scales of consecutive rows are contiguous, so the loader moves
 *   them into shared memory with one TMA copy (5% faster at large M on an H200).
 * Layouts:
 *   dense                 one group; m rows
 *   grouped contiguous    the rows of all groups stacked: group g owns rows
 *                         [group_offsets[g], group_offsets[g + 1]); m = total rows; a group
 *                         may be empty. With group_rows too, only the first group_rows[g]
 *                         rows of each span are in use (the rest is padding, e.g. ws_ep's
 *                         receive layout aligned to 128 rows; a count past its span is cut
 *                         to the span): ws_gemm skips the padding, or computes whole spans
 *                         where that is faster (FP8 with rows_hint, ws_gemm_tile's rule),
 *                         so the padding rows of D hold unspecified values
 *   grouped masked        A is groups x m x k, D groups x m x n, group g has group_rows[g]
 *                         valid rows (<= m); the rest of D is left untouched
 * group_offsets / group_rows live in device memory for ws_gemm (read on the GPU, so the
 * call is graph-capturable) and in host memory for ws_gemm_reference. */
#ifndef WARPSPEC_GEMM_H
#define WARPSPEC_GEMM_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "plan.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef enum { WS_GEMM_BF16 = 0, WS_GEMM_FP8 = 1 } ws_gemm_type;
typedef enum { WS_GEMM_DENSE = 0, WS_GEMM_GROUPED_CONTIGUOUS = 1, WS_GEMM_GROUPED_MASKED = 2 } ws_gemm_layout;

typedef struct {
  ws_gemm_type type;
  ws_gemm_layout layout;
  int m, n, k;
  int groups;                /* 1 for dense                                          */
  const void *a;
  const void *b;
  void *d;
  const float *a_scale;      /* FP8 only                                             */
  const float *b_scale;      /* FP8 only                                             */
  const int *group_offsets;  /* contiguous: groups + 1 offsets, 0 first, m last     */
  const int *group_rows;     /* masked: groups counts; contiguous: optional, rows in use */
  void *workspace;           /* optional, 16-byte aligned device memory: with it, a dense */
  size_t workspace_bytes;    /* problem with few rows splits K (ws_gemm_workspace_size) */
  int a_scale_ld;            /* FP8: 0 = a_scale[row][k / 128]; > 0 = a_scale[k / 128][a_scale_ld] */
  /* Gathered A (optional; zero: A's rows are D's rows). With a_rows, D row r reads row
   * a_rows[r] of an A of a_rows_total rows a_row_bytes apart (0: k x the element size; a
   * multiple of 16), and, FP8, the scales of that row: a_scale[a_rows[r] x a_scale_stride
   * + k / 128] (a_scale_stride in floats, 0: k / 128; a_scale_ld must be 0). a_rows[r] = -1
   * marks a row whose output is not wanted (padding): it reads A row 0 and its D row holds
   * whatever that gives. The loader fetches each row of a tile with its own TMA copy, so
   * rows may stay where another kernel put them: ws_ep's index receive layout
   * (WS_EP_RECV_INDEX) is read in place this way, no copy into a contiguous A. Device
   * memory, read on the GPU. */
  const int *a_rows;
  int a_rows_total;
  int a_scale_stride;
  size_t a_row_bytes;
  /* Contiguous layout whose m is only the rows' room (ws_ep's receive layout: the worst case
   * and the padding): the rows the groups are expected to hold in all (0: m). Read only by
   * the tile choice (ws_gemm_tile), never as a bound; ws_ep_recv_gemm sets it. */
  int rows_hint;
} ws_gemm_problem;

/* Shape and argument checks, no GPU: K a multiple of 128 (FP8) or 64 (BF16), N a
 * multiple of 128 (FP8) or 8 (BF16), 16-byte aligned pointers, scales present for FP8
 * (a_scale_ld 0, or at least the rows and a multiple of 4), offsets / counts present for
 * grouped layouts. */
ws_status ws_gemm_check(const ws_gemm_problem *p);

/* D = A x B^T on the GPU, stream-ordered, every type and layout: a TMA loader role and
 * wgmma warpgroups on a multi-stage pipe, persistent over the tiles of all groups
 * (BF16: 128 x 256 tiles, two warpgroups, 4 stages; dense BF16 of at most 64 rows:
 * the weights on wgmma's M side in 64-row tiles, A's rows on N, the K slices of a tile
 * summed inside a cluster, WARPSPEC_GEMM_SKINNY; FP8: 128 x 128 tiles, two
 * warpgroups, 6 stages, or 192 x 128 tiles, three warpgroups, 4 stages, whichever
 * ws_gemm_tile picks; scales promoted in fp32 per 128-wide K block). Group offsets /
 * counts are read on the device, trusted; the validation mode (warpspec/check.h,
 * WARPSPEC_CHECK=1) scans them first. */
ws_status ws_gemm(const ws_gemm_problem *p, cudaStream_t stream);

/* The output tile ws_gemm uses for p on a GPU with `sms` SMs (0: the current device's),
 * rows x cols (BF16 with at most 64 rows: 16, 32 or 64 rows of A by 64 weight rows).
 * FP8 takes the 192-row tile when the rows per group are many enough that its higher
 * tensor-core use outweighs the padding of the last tile (a wave model over the tiles;
 * WS_GEMM_FP8_WIDE_GAIN and _GAIN_TMA in config.h), else the 128-row one. Routed groups
 * (contiguous with rows_hint: their counts spread about the mean) take one 192-row tile
 * row each where nearly all fit one (with group_rows), else 128-row tiles over the whole
 * padded spans (WS_GEMM_FP8_ONE_ROW_TAIL). WARPSPEC_GEMM_FP8_TILE=128 or 192 in the
 * environment forces one, group_rows then always honoured (docs/knobs.md). */
ws_status ws_gemm_tile(const ws_gemm_problem *p, int sms, int *tile_rows, int *tile_cols);

/* Device memory ws_gemm would use for split-K on this problem on the current device: a
 * dense problem whose output tiles would leave most SMs idle (a few rows) cuts K into
 * slices for more CTAs, writes fp32 partials there and sums them in a second pass (the
 * same result on every run). 0 when the problem does not split, and for BF16 of at most
 * 64 rows, whose slices sum inside a cluster (WARPSPEC_GEMM_SKINNY). Without a workspace of
 * that size ws_gemm runs without split-K. A workspace serves one call at a time: calls
 * in flight together (other streams) need their own. WARPSPEC_GEMM_SPLITS=N in the
 * environment forces N slices (1: never split). */
ws_status ws_gemm_workspace_size(const ws_gemm_problem *p, size_t *bytes);

/* The role plan of a GEMM kernel (for `warpspec plan --kernel gemm_bf16|gemm_fp8`). */
ws_status ws_gemm_plan(ws_gemm_type type, ws_plan *plan);

/* The role plan of the GEMM kernel of that type whose output tiles have `tile_rows`
 * rows, as ws_gemm_tile names it: 128 (BF16, FP8), 192 (FP8's three math warpgroups,
 * `warpspec plan --kernel gemm_fp8_wide`) or 16, 32, 64 (BF16 with few rows,
 * `--kernel gemm_bf16_skinny` for 64). WS_ERR_INVALID for a tile no kernel has. */
ws_status ws_gemm_plan_tile(ws_gemm_type type, int tile_rows, ws_plan *plan);

/* Rows of A and D the problem has (m, or groups x m when masked). */
size_t ws_gemm_rows(const ws_gemm_problem *p);

/* Group of row r in the contiguous layout (host offsets), -1 if none. */
int ws_gemm_group_of_row(const int *group_offsets, int groups, int row);

/* float64 reference on the host: the problem's pointers are host pointers; d gets
 * rows x n doubles (rows beyond a group's count, masked or contiguous with group_rows,
 * are set to 0). */
ws_status ws_gemm_reference(const ws_gemm_problem *host_problem, double *d);

#ifdef __cplusplus
}
#endif
#endif
