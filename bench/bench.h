/* bench.h - benchmarks run by `warpspec bench`. */
#ifndef WARPSPEC_BENCH_H
#define WARPSPEC_BENCH_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  size_t bytes;       /* copy size */
  int iters;          /* timed repetitions per variant */
  const char *csv;    /* optional CSV output path */
  int sweep;          /* 1: also the L2 evict-first and contiguous-run variants */
} bench_pipe_opts;

/* One line of a run's closing summary (printf format), kept until bench_headlines_print;
 * at most 16 lines. */
void bench_headline(const char *fmt, ...);
void bench_headlines_print(const char *title);

/* Streaming copy (both modes) against cudaMemcpy D2D, and pipe hand-off latency. */
int bench_pipe(const bench_pipe_opts *o);

/* Hand-off latency of a pipe between two roles: ns per item, median over `reps`.
 * role_warps: warps of writer and reader roles (1 or 4); fenced: keep the proxy
 * fences a pipe has by default. Returns 0 or -1. */
int bench_pipe_handoff(int stages, int role_warps, int fenced, int items, int reps, double *ns_per_item, int *errors);

typedef struct {
  unsigned long long max_bytes; /* largest message */
  const char *csv;              /* rank 0 writes the CSV */
  int nccl_probe;               /* only one NCCL exchange per size (for ncu) */
  int ranks;                    /* outside the launcher: ranks to start (0: 2) */
  int allgather;                /* the all-gather benchmark instead */
} bench_sr_opts;

/* Under `warpspec run -n N`: ws_sendrecv (send to rank+1, receive from rank-1) against
 * NCCL and the copy engine. 0 or -1. */
int bench_sendrecv(const bench_sr_opts *o);

/* Under `warpspec run -n N`: ws_allgather (ring) against ncclAllGather. 0 or -1. */
int bench_allgather(const bench_sr_opts *o);

typedef struct {
  const char *csv;   /* rank 0 writes the CSV (NULL: none)                       */
  const char *shape; /* "DeepSeekV3" or "Flash" only (NULL: both)                */
  int quick;         /* 1, 8 and 128 tokens only                                  */
  int ranks;         /* outside the launcher: ranks to start (0: 1, EP1)          */
  int tokens;        /* one token count per rank only (0: the list)       */
  const char *trace; /* rank 0: one more fused call per token count, its block    */
                     /* trace_block's role timeline to TRACE.<shape>.<tokens>.csv */
  int trace_block;
  int sms;           /* the layer's num_sms: CTAs of the transfer kernels (0: default) */
} bench_moe_opts;

typedef struct {
  const char *csv;   /* rank 0 writes the CSV (NULL: none)                               */
  int ranks;         /* outside the launcher: ranks to start (0: 2)                      */
  int tokens;        /* one token count per rank only (0: 128 .. 4096)                    */
  int sms;           /* CTAs of the transfer kernels (0: 24)                               */
  int receive;       /* -1: both receives; WS_EP_RECEIVE_COPY or _INDEX: that one          */
  const char *trace; /* a directory: one more pair per case under a role timeline       */
  int profile;       /* few calls, for Nsight Compute: 3 timed pairs, 128 and 4096 tokens  */
} bench_ep_opts;

/* Under `warpspec run -n N`: ws_ep_dispatch and ws_ep_combine alone (bench_ep.cu). 0 or -1. */
int bench_ep(const bench_ep_opts *o);

/* The attention kernels alone on one GPU (bench_attn_kernels.cu): the parts named in
 * `parts`, a mask of BENCH_ATTN_*, every schedule and grid each has; `match` not NULL:
 * only the shapes whose name contains it (the copy reference always). 0 or -1. */
enum { BENCH_ATTN_MLA = 1, BENCH_ATTN_FLASH = 2, BENCH_ATTN_NSA = 4 };
int bench_attn_kernels(int parts, const char *match);

/* Under `warpspec run -n N`: the whole MoE layer (ws_moe_layer_forward) and its stages'
 * time split at the shapes. 0 or -1. */
int bench_moe(const bench_moe_opts *o);

/* ws_gemm (BF16 dense) against cuBLASLt; csv may be NULL. 0 or -1. */
int bench_gemm(const char *csv, const char *only, double soak_seconds);

typedef struct {
  int variant; /* -1: every variant; else bench_gemm_gather_variant's index */
  int tokens;  /* tokens routed top-8 over 256 experts (the layer's 4096)   */
  int reps;    /* timed runs per variant                                     */
  int pitch;   /* bytes between the padded token rows (0: 7552, the EP inbox's) */
} bench_gemm_gather_opts;

/* The MoE L1's FP8 GEMM on copied rows and on gathered rows placed several ways, one GPU
 * (bench_gemm_gather.cu). 0, or -1 on an error or a D that differs from the copied one. */
int bench_gemm_gather(const bench_gemm_gather_opts *o);

/* The index of the variant named `name`, or -1 after printing the names (no GPU needed). */
int bench_gemm_gather_variant(const char *name);

/* One process, two GPUs: copy engine, SM push/pull and TMA push over NVLink. 0 or -1. */
/* Local-memory read and copy ceilings by CTA count, GPU 0 (bench_hbm.cu). 0 or -1. */
int bench_hbm(void);
int bench_nvlink(void);
/* Combine's reduce traffic without its protocol, every GPU at once (bench_combine_mix.cu). */
int bench_combine_mix(void);

#ifdef __cplusplus
}
#endif
#endif
