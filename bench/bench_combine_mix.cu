/* bench_combine_mix.cu - `warpspec bench combine-mix`: the traffic of combine's reduce
 * without its protocol, on every visible GPU at once (2 or more, NVLink peers), so that
 * what a few SMs can do with that mix is measured apart from our kernel.
 *
 * The reduce of an EP combine (DeepSeek-V3 shape: hidden 7168 BF16, top-8, 4096 tokens per
 * rank) reads, for each token a rank received, that token's local expert rows (R of them),
 * sums them in fp32, and pushes the BF16 sum to the token's rank: over NVLink for all but
 * 1/N of them. With D = N (1 - (1 - 1/N)^8) ranks per token, a rank pushes P = 4096 D sums
 * and reads R = 8 / D rows per sum (EP4: P 14746, R 2.22; EP2: P 8160, R 4.02), 470 MB
 * read against 158 MB (EP4) or 58 MB (EP2) over NVLink. docs/benchmarks.md, session 21:
 * the standalone combine at 24 SMs moves 180 GB/s (EP4), its SMs reading ~27 GB/s each,
 * while 24 SMs alone read 2.4-2.9 TB/s and push 337 GB/s all-to-all.
 *
 * Forms, each GPU pushing its P sums (row j to GPU j mod N) with `ctas` CTAs of 16 warps, a
 * warp per 2 KB chunk of a sum (the reduce's unit):
 *   regs       the rows' chunks by 16-byte loads into registers, then the sum's stores
 *              (ep_reduce_unit's form)
 *   ring cp    each warp streams its chunks through its own shared-memory ring, 5 in
 *              flight by 16-byte cp.async (ep_stream.cuh's default form)
 *   ring bulk  the same ring filled by one 1-D bulk copy per chunk on the slot's mbarrier
 *              (the library's opt-in of session 31, removed in 32: 0.57x of ring cp at
 *              24 CTAs)
 *   read only  ring cp without the stores: what the reads alone take in this form
 *   push only  the stores without the reads (a register pattern): what the pushes alone take
 *   rows tma   a CTA's sums in order, every row copied whole (14 KB) by one 1-D bulk copy
 *              into a ring of 14 slots (196 KB in flight per SM, as `bench hbm`'s 2.9 TB/s
 *              read at 24 CTAs had), 14 warps summing each slot (2 vectors a thread) and
 *              pushing a sum when its last row is in (session 40: can the reduce's reads
 *              go faster than the cp.async ring's at 24 SMs?)
 *   tma read   the same without the stores
 * With one GPU the sums all stay local (no NVLink bytes): the forms' read rates alone.
 * Reported per form: the slowest GPU's time (best of 5 after a warm-up), NVLink GB/s (the
 * remote sums' bytes of one GPU over that time) and the read GB/s of one GPU. If every
 * form with both streams stays far above the sum of the two alone, the SMs' shared path
 * is the bound and no schedule of the same bytes on the same SMs removes it. */
#include "bench.h"
#include "bench_check.h"
#include "warpspec/device/ptx.cuh"

#include <math.h>
#include <stdio.h>

#define MIX_H 7168                       /* hidden: BF16 elements of a row */
#define MIX_VEC (MIX_H / 8)              /* 16-byte vectors of a row: 896 */
#define MIX_CHUNK 128                    /* vectors per chunk (2 KB), 4 per lane */
#define MIX_CHUNKS (MIX_VEC / MIX_CHUNK) /* 7 */
#define MIX_SRC_ROWS 32768               /* 4096 tokens x top-8: the expert output rows */
#define MIX_WARPS 16
#define MIX_AHEAD 5
#define MIX_RING (MIX_AHEAD + 1)
#define MIX_MAX_GPUS BENCH_MAX_GPUS

enum { MIX_REGS = 0, MIX_RING_CP, MIX_RING_BULK, MIX_READ_ONLY, MIX_PUSH_ONLY, MIX_ROWS_TMA, MIX_TMA_READ, MIX_FORMS };

typedef struct {
  const uint4 *src;               /* this GPU's expert rows                                  */
  uint4 *inbox[MIX_MAX_GPUS];     /* every GPU's inbox (peer pointers): N x P rows           */
  uint4 *sink;
  int n, me, p;                   /* GPUs, this one, sums per GPU                            */
  float r;                        /* rows per sum on average                                 */
} mix_args;

/* Rows of sum j (floor / ceil of r so that the average is r) and its k-th row: the sums'
 * rows numbered in order (each source row about once, as in the reduce), then scattered by
 * an odd multiplier modulo MIX_SRC_ROWS (a power of two: a permutation), as an expert
 * layout scatters a token's rows. */
static __device__ __forceinline__ int mix_first(const mix_args *a, int j) { return (int)((float)j * a->r); }
static __device__ __forceinline__ int mix_nrows(const mix_args *a, int j) { return mix_first(a, j + 1) - mix_first(a, j); }
static __device__ __forceinline__ const uint4 *mix_row(const mix_args *a, int j, int k) {
  const uint32_t h = (uint32_t)(mix_first(a, j) + k) * 2654435761u;
  return a->src + (size_t)(h & (MIX_SRC_ROWS - 1)) * MIX_VEC;
}
static __device__ __forceinline__ uint4 *mix_dst(const mix_args *a, int j) {
  return a->inbox[j % a->n] + ((size_t)a->me * a->p + j) * MIX_VEC;
}

static __device__ __forceinline__ void fma8(float *acc, uint4 v) {
  const uint32_t u[4] = {v.x, v.y, v.z, v.w};
#pragma unroll
  for (int i = 0; i < 4; i++) {
    acc[2 * i] += __uint_as_float(u[i] << 16);
    acc[2 * i + 1] += __uint_as_float(u[i] & 0xFFFF0000u);
  }
}
static __device__ __forceinline__ uint4 pack8(const float *acc) {
  uint32_t u[4];
#pragma unroll
  for (int i = 0; i < 4; i++)
    u[i] = (__float_as_uint(acc[2 * i]) >> 16) | (__float_as_uint(acc[2 * i + 1]) & 0xFFFF0000u);
  return make_uint4(u[0], u[1], u[2], u[3]);
}

/* The forms' mbarrier waits, bounded: past about two seconds (MIX_WAIT_CYCLES) the wait
 * prints which form and barrier (MSG, a literal: a printf with arguments would take the
 * kernel a stack frame, which the build refuses) and traps, instead of hanging the run. */
#define MIX_WAIT_CYCLES 4000000000ll
#define MIX_WAIT(BAR, PARITY, MSG)                                                               \
  do {                                                                                           \
    const long long t0_ = clock64();                                                             \
    while (!ws_mbarrier_try_wait_parity((BAR), (PARITY))) {                                      \
      if (clock64() - t0_ > MIX_WAIT_CYCLES) {                                                   \
        printf("bench combine-mix: " MSG " wait timed out (about 2 s); the run is stopped\n"); \
        __trap();                                                                                \
      }                                                                                          \
    }                                                                                            \
  } while (0)

/* A finished sum's 16 bytes: pushed to dst, or, in the read-only forms, folded into *keep
 * (so that the reads are not dead code); mix_keep_out publishes keep where no run's data
 * can make it reach memory. */
static __device__ __forceinline__ void mix_sum_out(int read_only, uint4 *dst, uint4 v, uint4 *keep) {
  if (read_only) {
    keep->x ^= v.x; keep->y ^= v.y; keep->z ^= v.z; keep->w ^= v.w;
  } else {
    ws_st_global_v4(dst, v);
  }
}
static __device__ __forceinline__ void mix_keep_out(const mix_args *a, uint4 keep) {
  if (keep.x == 0x9E3779B9u && keep.y == 0x7F4A7C15u) *a->sink = keep;
}

/* regs and push only: a warp per (sum, chunk). */
template <int FORM>
__global__ void __launch_bounds__(MIX_WARPS * 32, 1) mix_regs(const __grid_constant__ mix_args a) {
  const int lane = threadIdx.x % 32, gw = blockIdx.x * MIX_WARPS + threadIdx.x / 32, nw = gridDim.x * MIX_WARPS;
  for (int it = gw; it < a.p * MIX_CHUNKS; it += nw) {
    const int j = it / MIX_CHUNKS, v0 = (it % MIX_CHUNKS) * MIX_CHUNK + lane;
    float acc[4][8] = {};
    if (FORM == MIX_REGS) { /* two rows in flight, as ep_reduce_unit<2> */
      const int nr = mix_nrows(&a, j);
#pragma unroll 1
      for (int k0 = 0; k0 < nr; k0 += 2) {
        uint4 v[2][4];
#pragma unroll
        for (int k = 0; k < 2; k++)
          if (k0 + k < nr)
#pragma unroll
            for (int u = 0; u < 4; u++) v[k][u] = ws_ld_global_nc_v4(mix_row(&a, j, k0 + k) + v0 + 32 * u);
#pragma unroll
        for (int k = 0; k < 2; k++)
          if (k0 + k < nr)
#pragma unroll
            for (int u = 0; u < 4; u++) fma8(acc[u], v[k][u]);
      }
    } else {
#pragma unroll
      for (int u = 0; u < 4; u++) acc[u][0] = (float)(j + u);
    }
    uint4 *d = mix_dst(&a, j) + v0;
#pragma unroll
    for (int u = 0; u < 4; u++) ws_st_global_v4(d + 32 * u, pack8(acc[u]));
  }
}

/* The rings: a warp's (sum, chunk) items gw, gw + nw, ...; each item one step per row. */
typedef struct {
  int it, k; /* item, row within it */
} mix_pos;

static __device__ __forceinline__ void mix_advance(const mix_args *a, mix_pos *p, int nw) {
  if (++p->k == mix_nrows(a, p->it / MIX_CHUNKS)) {
    p->k = 0;
    p->it += nw;
  }
}

template <int FORM>
__global__ void __launch_bounds__(MIX_WARPS * 32, 1) mix_ring(const __grid_constant__ mix_args a) {
  extern __shared__ __align__(128) uint4 ring_all[];
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int gw = blockIdx.x * MIX_WARPS + warp, nw = gridDim.x * MIX_WARPS, items = a.p * MIX_CHUNKS;
  uint4 *ring = ring_all + (size_t)warp * MIX_RING * MIX_CHUNK;
  uint64_t *bars = (uint64_t *)(ring_all + (size_t)MIX_WARPS * MIX_RING * MIX_CHUNK) + warp * MIX_RING;
  const uint32_t ring_addr = ws_smem_addr(ring);
  if (FORM == MIX_RING_BULK) {
    if (lane == 0) {
      for (int s = 0; s < MIX_RING; s++) ws_mbarrier_init(bars + s, 1);
      ws_fence_mbarrier_init();
    }
    __syncwarp();
  }
  mix_pos in = {gw, 0}, out = {gw, 0};
  int in_slot = 0, out_slot = 0;
  uint32_t phases = 0;
  float acc[4][8] = {};
  uint4 keep = make_uint4(0, 0, 0, 0);
  for (int step = 0;; step++) {
    /* copy the step MIX_AHEAD ahead of the one added below (the first MIX_AHEAD at once) */
    for (int c = 0; c < (step == 0 ? MIX_AHEAD + 1 : 1); c++) {
      if (in.it < items) {
        const uint4 *src = mix_row(&a, in.it / MIX_CHUNKS, in.k) + (in.it % MIX_CHUNKS) * MIX_CHUNK;
        if (FORM == MIX_RING_BULK) {
          __syncwarp();
          if (lane == 0) {
            ws_mbarrier_arrive_expect_tx(bars + in_slot, MIX_CHUNK * 16);
            ws_cp_async_bulk_global_to_shared_at(ring_addr + (uint32_t)(in_slot * MIX_CHUNK * 16), src, MIX_CHUNK * 16,
                                                 bars + in_slot);
          }
        } else {
#pragma unroll
          for (int u = 0; u < 4; u++)
            ws_cp_async_cg_16_to(ring_addr + (uint32_t)((in_slot * MIX_CHUNK + 32 * u + lane) * 16), src + 32 * u + lane,
                                 16);
        }
        mix_advance(&a, &in, nw);
      }
      if (FORM != MIX_RING_BULK) ws_cp_async_commit_group();
      in_slot = in_slot + 1 == MIX_RING ? 0 : in_slot + 1;
    }
    if (out.it >= items) break;
    if (FORM == MIX_RING_BULK) {
      MIX_WAIT(bars + out_slot, (phases >> out_slot) & 1u, "ring bulk: a slot's full");
      phases ^= 1u << out_slot;
    } else {
      WS_CP_ASYNC_WAIT_GROUP(MIX_AHEAD);
    }
    const uint4 *s = ring + out_slot * MIX_CHUNK + lane;
#pragma unroll
    for (int u = 0; u < 4; u++) fma8(acc[u], s[32 * u]);
    out_slot = out_slot + 1 == MIX_RING ? 0 : out_slot + 1;
    const int j = out.it / MIX_CHUNKS, v0 = (out.it % MIX_CHUNKS) * MIX_CHUNK + lane;
    mix_advance(&a, &out, nw);
    if (out.k == 0) { /* the item's last row: its sum is complete */
#pragma unroll
      for (int u = 0; u < 4; u++) {
        mix_sum_out(FORM == MIX_READ_ONLY, mix_dst(&a, j) + v0 + 32 * u, pack8(acc[u]), &keep);
#pragma unroll
        for (int e = 0; e < 8; e++) acc[u][e] = 0.0f;
      }
    }
  }
  if (FORM != MIX_RING_BULK) WS_CP_ASYNC_WAIT_GROUP(0);
  mix_keep_out(&a, keep);
}

#define MIX_RING_SMEM ((size_t)MIX_WARPS * MIX_RING * (MIX_CHUNK * 16 + 8))

/* rows tma: warp MIX_TMA_WARPS's lane 0 copies the rows of the CTA's sums (j = blockIdx.x,
 * + gridDim.x, ...) in order, slot n % MIX_TMA_SLOTS for the n-th row, after the slot's
 * previous row was summed (its empty mbarrier: one arrival per summing warp); the summing
 * warps take the rows in the same order from the full mbarriers. */
#define MIX_TMA_WARPS 14 /* x 32 threads x 2 vectors = a row's 896 */
#define MIX_TMA_SLOTS 14
#define MIX_ROW_BYTES (MIX_VEC * 16)
#define MIX_TMA_SMEM ((size_t)MIX_TMA_SLOTS * (MIX_ROW_BYTES + 16))

template <int FORM>
__global__ void __launch_bounds__((MIX_TMA_WARPS + 1) * 32, 1) mix_rows_tma(const __grid_constant__ mix_args a) {
  extern __shared__ __align__(128) uint4 slots[];
  uint64_t *full = (uint64_t *)(slots + (size_t)MIX_TMA_SLOTS * MIX_VEC), *empty = full + MIX_TMA_SLOTS;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    for (int s = 0; s < MIX_TMA_SLOTS; s++) {
      ws_mbarrier_init(full + s, 1);
      ws_mbarrier_init(empty + s, MIX_TMA_WARPS);
    }
    ws_fence_mbarrier_init();
  }
  __syncthreads();
  if (warp == MIX_TMA_WARPS) {
    if (lane == 0) {
      int n = 0;
      for (int j = blockIdx.x; j < a.p; j += gridDim.x)
        for (int k = 0, nr = mix_nrows(&a, j); k < nr; k++, n++) {
          const int slot = n % MIX_TMA_SLOTS, fill = n / MIX_TMA_SLOTS;
          if (fill > 0) MIX_WAIT(empty + slot, (uint32_t)(fill - 1) & 1u, "rows tma: the copier's empty-slot");
          ws_mbarrier_arrive_expect_tx(full + slot, MIX_ROW_BYTES);
          ws_cp_async_bulk_global_to_shared(slots + (size_t)slot * MIX_VEC, mix_row(&a, j, k), MIX_ROW_BYTES, full + slot);
        }
    }
    return;
  }
  const int t = threadIdx.x; /* vectors t and t + 448 of each row */
  uint4 keep = make_uint4(0, 0, 0, 0);
  int n = 0;
  for (int j = blockIdx.x; j < a.p; j += gridDim.x) {
    float acc[2][8] = {};
    for (int k = 0, nr = mix_nrows(&a, j); k < nr; k++, n++) {
      const int slot = n % MIX_TMA_SLOTS;
      MIX_WAIT(full + slot, (uint32_t)(n / MIX_TMA_SLOTS) & 1u, "rows tma: a summing warp's full-slot");
      const uint4 *row = slots + (size_t)slot * MIX_VEC;
      fma8(acc[0], row[t]);
      fma8(acc[1], row[t + MIX_TMA_WARPS * 32]);
      __syncwarp();
      if (lane == 0) ws_mbarrier_arrive(empty + slot);
    }
#pragma unroll
    for (int u = 0; u < 2; u++)
      mix_sum_out(FORM == MIX_TMA_READ, mix_dst(&a, j) + t + u * MIX_TMA_WARPS * 32, pack8(acc[u]), &keep);
  }
  mix_keep_out(&a, keep);
}

static int mix_launch(int form, int ctas, const mix_args *a, cudaStream_t st) {
  const dim3 grid(ctas), block(MIX_WARPS * 32);
  switch (form) {
  case MIX_REGS: mix_regs<MIX_REGS><<<grid, block, 0, st>>>(*a); break;
  case MIX_PUSH_ONLY: mix_regs<MIX_PUSH_ONLY><<<grid, block, 0, st>>>(*a); break;
  case MIX_RING_CP: mix_ring<MIX_RING_CP><<<grid, block, MIX_RING_SMEM, st>>>(*a); break;
  case MIX_RING_BULK: mix_ring<MIX_RING_BULK><<<grid, block, MIX_RING_SMEM, st>>>(*a); break;
  case MIX_ROWS_TMA: mix_rows_tma<MIX_ROWS_TMA><<<grid, dim3((MIX_TMA_WARPS + 1) * 32), MIX_TMA_SMEM, st>>>(*a); break;
  case MIX_TMA_READ: mix_rows_tma<MIX_TMA_READ><<<grid, dim3((MIX_TMA_WARPS + 1) * 32), MIX_TMA_SMEM, st>>>(*a); break;
  default: mix_ring<MIX_READ_ONLY><<<grid, block, MIX_RING_SMEM, st>>>(*a); break;
  }
  CK(cudaGetLastError());
  return 0;
}

/* Every GPU runs `form` at once (bench_gpus_best_ms: the slowest GPU's time, best of 5). */
typedef struct {
  int form, ctas, n;
  const mix_args *args;
  cudaStream_t *st;
} mix_job;

static int mix_launch_all(void *ctx) {
  const mix_job *j = (const mix_job *)ctx;
  for (int g = 0; g < j->n; g++) {
    CK(cudaSetDevice(g));
    if (mix_launch(j->form, j->ctas, &j->args[g], j->st[g])) return -1;
  }
  return 0;
}

static int mix_measure(int form, int ctas, int n, const mix_args *args, cudaStream_t *st, double *us) {
  mix_job j = {form, ctas, n, args, st};
  double ms = 0;
  if (bench_gpus_best_ms(n, st, mix_launch_all, &j, &ms)) return -1;
  *us = ms * 1e3;
  return 0;
}

extern "C" int bench_combine_mix(void) {
  int n = 0;
  CK(cudaGetDeviceCount(&n));
  if (n < 1) { fprintf(stderr, "bench combine-mix: no GPU\n"); return -1; }
  if (n > MIX_MAX_GPUS) n = MIX_MAX_GPUS;
  const double d = n * (1.0 - pow(1.0 - 1.0 / n, 8)); /* ranks per token, top-8 */
  const int p = (int)lround(4096 * d);
  const double r = 8.0 / d;
  mix_args args[MIX_MAX_GPUS];
  cudaStream_t st[MIX_MAX_GPUS];
  uint4 *src[MIX_MAX_GPUS], *inbox[MIX_MAX_GPUS], *sink[MIX_MAX_GPUS];
  const size_t src_bytes = (size_t)MIX_SRC_ROWS * MIX_VEC * 16, inbox_bytes = (size_t)n * p * MIX_VEC * 16;
  for (int g = 0; g < n; g++) {
    CK(cudaSetDevice(g));
    for (int q = 0; q < n; q++) {
      if (q == g) continue;
      cudaError_t e = cudaDeviceEnablePeerAccess(q, 0);
      if (e != cudaSuccess && e != cudaErrorPeerAccessAlreadyEnabled) CK(e);
      (void)cudaGetLastError();
    }
    CK(cudaMalloc(&src[g], src_bytes));
    CK(cudaMalloc(&inbox[g], inbox_bytes));
    CK(cudaMalloc(&sink[g], 16));
    CK(cudaMemset(src[g], 0x3C + g, src_bytes)); /* BF16 0x3C3C-ish: finite values */
    CK(cudaStreamCreateWithFlags(&st[g], cudaStreamNonBlocking));
    const void *rings[] = {(const void *)mix_ring<MIX_RING_CP>, (const void *)mix_ring<MIX_RING_BULK>,
                           (const void *)mix_ring<MIX_READ_ONLY>};
    for (int k = 0; k < 3; k++)
      CK(cudaFuncSetAttribute(rings[k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MIX_RING_SMEM));
    const void *tma[] = {(const void *)mix_rows_tma<MIX_ROWS_TMA>, (const void *)mix_rows_tma<MIX_TMA_READ>};
    for (int k = 0; k < 2; k++)
      CK(cudaFuncSetAttribute(tma[k], cudaFuncAttributeMaxDynamicSharedMemorySize, (int)MIX_TMA_SMEM));
  }
  for (int g = 0; g < n; g++) {
    args[g].src = src[g];
    for (int q = 0; q < n; q++) args[g].inbox[q] = inbox[q];
    args[g].sink = sink[g];
    args[g].n = n;
    args[g].me = g;
    args[g].p = p;
    args[g].r = (float)r;
  }
  const double remote = (double)p * (n - 1) / n * MIX_H * 2, read = (double)p * r * MIX_H * 2;
  printf("bench combine-mix: %d GPUs at once, each pushing %d sums of %.2f rows of %d BF16 (%.0f MB read, %.0f MB "
         "over NVLink per GPU)\n", n, p, r, MIX_H, read / 1e6, remote / 1e6);
  printf("  %-10s %5s %10s %12s %10s\n", "form", "CTAs", "us", "NVLink GB/s", "read GB/s");
  const char *names[] = {"regs", "ring cp", "ring bulk", "read only", "push only", "rows tma", "tma read"};
  const int ctas[] = {24, 48, 132};
  for (int c = 0; c < 3; c++)
    for (int f = 0; f < MIX_FORMS; f++) {
      double us = 0;
      if (mix_measure(f, ctas[c], n, args, st, &us)) return -1;
      const int reads_only = f == MIX_READ_ONLY || f == MIX_TMA_READ;
      printf("  %-10s %5d %10.1f %12.1f %10.1f\n", names[f], ctas[c], us, reads_only ? 0.0 : remote / us / 1e3,
             f == MIX_PUSH_ONLY ? 0.0 : read / us / 1e3);
    }
  for (int g = 0; g < n; g++) {
    CK(cudaSetDevice(g));
    CK(cudaFree(src[g]));
    CK(cudaFree(inbox[g]));
    CK(cudaFree(sink[g]));
    CK(cudaStreamDestroy(st[g]));
  }
  return 0;
}
