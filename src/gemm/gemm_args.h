/* gemm_args.h - what the GEMM kernels receive and how the host launches them; shared by
 * the C launcher and the CUDA kernels. */
#ifndef WARPSPEC_GEMM_ARGS_H
#define WARPSPEC_GEMM_ARGS_H

#include <stddef.h>
#include <stdint.h>

#include "warpspec/gemm.h"
#include "warpspec/plan.h"
#include "warpspec/tma.h"

#ifdef __cplusplus
extern "C" {
#endif

/* The problem as the tile schedule sees it (gemm_sched.cuh). */
typedef struct {
  int layout;           /* ws_gemm_layout */
  int groups, m, n;
  int bm, bn;           /* tile shape */
  int splits;           /* K slices per tile (1: no split-K; dense only) */
  int ksteps;           /* K steps of a whole tile (k / bk) */
  const int *offsets;   /* contiguous */
  const int *rows;      /* masked */
} gemm_shape;

typedef struct {
  ws_tmap map_sa;       /* scale_tma: a_scale as [k / 128][rows] fp32 (row stride a_scale_ld), box bm x 1 */
  ws_tmap map_sb;       /* scale_tma: b_scale as [groups n / 128][k / 128] fp32, box 1 x 4 */
  uint16_t *d;          /* bf16 output */
  float *partial;       /* split-K: [splits][rows][n] fp32 partial sums, else NULL */
  int cluster_split;    /* BF16 split-K in clusters (WARPSPEC_GEMM_CLUSTER_K): a tile's slices are one
                         * cluster, one item per CTA, summed through distributed shared memory */
  const float *a_scale; /* FP8 only: a_scale[row * a_rs + kblock * a_ks] */
  const float *b_scale;
  const int *a_rows;    /* gathered A: D row r reads A row a_rows[r] (-1: row 0), cp.async from a_gather */
  const uint8_t *a_gather;
  uint32_t a_row_bytes; /* gathered A: bytes between its rows (< 2^32, ws_gemm_check) */
  int k;
  uint32_t a_rs, a_ks;  /* a_scale strides (elements): (k / 128, 1) row-major, (1, a_scale_ld) K-block-major,
                         * (a_scale_stride, 1) gathered (by A row) */
  int scale_tma;        /* FP8: the loader brings each K block's scales into its stage (gemm_loader.cuh) */
  long long rows;       /* rows of A and D */
  gemm_shape shape;
} gemm_args;

/* One GEMM kernel, as its .cu file describes it to the launcher. */
typedef struct {
  int id;               /* WS_PLAN_SLOT_*: its slot in the plan cache */
  const char *name;
  const ws_role *roles;
  int nroles;
  size_t smem;          /* dynamic shared memory */
  const void *kernel;   /* (ws_tmap a, ws_tmap b, ws_tmap d, gemm_args, ws_diag) */
  int bm, bn, bk;
  int smem_scales;      /* FP8: its math reads the scales from the stage when they can be loaded there */
  ws_dtype dtype;
  size_t elem;          /* bytes per element of A and B */
  int pair;             /* CTAs per cluster sharing A (gemm_sched.cuh); 0 or 1: no cluster */
  int cluster_k;        /* 1: a dense tile's K slices run as one cluster and sum their partials in shared
                         * memory (gemm_bf16_skinny: one tile column of bn weight rows, A's rows as one box) */
} gemm_kernel;

const gemm_kernel *gemm_bf16_kernel_desc(void);
const gemm_kernel *gemm_fp8_kernel_desc(void);
const gemm_kernel *gemm_fp8_wide_kernel_desc(void);
const gemm_kernel *gemm_fp8_gather_kernel_desc(void); /* the 128-row tile over a gathered A (a_rows) */
const gemm_kernel *gemm_fp8_wide_pair_kernel_desc(void); /* the 192-row tile in CTA pairs (WARPSPEC_GEMM_PAIR) */
/* BF16 with at most 16, 32 or 64 rows: the weights on wgmma's M side (WARPSPEC_GEMM_SKINNY) */
const gemm_kernel *gemm_bf16_skinny16_kernel_desc(void);
const gemm_kernel *gemm_bf16_skinny32_kernel_desc(void);
const gemm_kernel *gemm_bf16_skinny64_kernel_desc(void);
/* ... and 65-128 rows, one K box a stage (WARPSPEC_GEMM_SKINNY_ROWS, 128 by default) */
const gemm_kernel *gemm_bf16_skinny128_kernel_desc(void);
/* FP8 with at most 16, 32 or 64 rows, the same swap (WARPSPEC_GEMM_FP8_SKINNY, on by default) */
const gemm_kernel *gemm_fp8_skinny16_kernel_desc(void);
const gemm_kernel *gemm_fp8_skinny32_kernel_desc(void);
const gemm_kernel *gemm_fp8_skinny64_kernel_desc(void);
/* K boxes (128 bytes of each weight row) a skinny kernel's stage holds at `tok` rows of A:
 * two, one at 128 (a box of A is then 16 KiB, twice the weights'; 7 stages of one box fit
 * where 3 of two would). The kernels' stage layout (gemm_skinny.cuh) and the host's slice
 * count (gemm_launch.c) both read it. */
#define GEMM_SKINNY_KBOXES(tok) ((tok) > 64 ? 1 : 2)
/* The K slices of the skinny kernel on a GPU of `sms` SMs, before the residency check. */
int gemm_skinny_splits(const gemm_kernel *k, const ws_gemm_problem *p, int sms);
/* The name of the kernel ws_gemm launches for p on a GPU of `sms` SMs (>= 1), NULL when p
 * fails ws_gemm_check: the tests' way to know that a case ran the kernel it was meant for. */
const char *gemm_kernel_name_for(const ws_gemm_problem *p, int sms);

/* Tensor maps, arguments, plan check (once per thread, device and kernel), launch. */
ws_status gemm_launch(const gemm_kernel *k, const ws_gemm_problem *p, int sms, cudaStream_t stream);
ws_status gemm_plan_of(const gemm_kernel *k, ws_plan *plan);
/* Split-K workspace the launch would use for p (0: no split). */
ws_status gemm_workspace_of(const gemm_kernel *k, const ws_gemm_problem *p, int sms, size_t *bytes);
/* Split-K's second pass: d[i] = bf16(sum over s of partial[s][i]), s in order. */
ws_status gemm_splitk_reduce(const float *partial, int splits, size_t count, uint16_t *d, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
