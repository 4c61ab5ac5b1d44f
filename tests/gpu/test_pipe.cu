/* test_pipe.cu - pipes with 1..8 stages and 1..3 readers, fed by plain stores, by
 * 1-D bulk copies and by TMA tensor loads, ended by close, on random data. The last fill
 * is a pipe with one writer arrival: the leader commits each slot first with its bytes
 * (ws_pipe_commit_bytes_at), then issues two counted TMA copies of half a slot each
 * (ws_pipe_copy_tile_2d_at), and closes alone.
 *
 * Roles: WRITER (4 warps) fills slots of 1 KiB from `in`; READER0 (2 warps),
 * READER1 (2 warps) and READER2 (1 warp, the __syncwarp path) each transform every
 * item into their own output; READER2 writes it through a shared-memory staging
 * buffer and a TMA store (ws_tma_store_2d, whose proxy fence this checks). Every block streams a random number of items (0 too)
 * then closes; readers stop on close and report how many items they saw. READER1 waits
 * the probed way (ws_pipe_probe_at for item i + 1 right after reading item i, then
 * ws_pipe_wait_probed_at), the others with ws_pipe_wait.
 * `--quick` runs a subset (for compute-sanitizer). */
#include "gpu_test.h"
#include "warpspec/device/warpspec.cuh"

#define MAX_STAGES 8
#define SLOT_U32 256
#define BLOCKS 6
#define MAX_ITEMS 40
#define MAX_READERS 3

typedef struct __align__(128) { uint32_t v[SLOT_U32]; } chunk_slot;
WS_PIPE_STORAGE(chunk_pipe, chunk_slot, MAX_STAGES);

#define PIPE_ROLES(ROLE)                 \
  ROLE(WRITER, 4, WS_REGS_ENTRY, 1)      \
  ROLE(READER0, 2, WS_REGS_ENTRY, 1)     \
  ROLE(READER1, 2, WS_REGS_ENTRY, 1)     \
  ROLE(READER2, 1, WS_REGS_ENTRY, 1)
WS_DECLARE_ROLES(pipe_test, PIPE_ROLES);

enum { FILL_STORES, FILL_BULK, FILL_TMA, FILL_TMA_COMMITTED, FILLS };
static const char *fill_name[] = {"stores", "bulk", "tma", "tma committed first"};

typedef struct {
  uint32_t stages, readers, fill;
  const int *nitems;   /* [BLOCKS] */
  const uint32_t *in;  /* [BLOCKS * MAX_ITEMS][SLOT_U32] */
  uint32_t *out;       /* [MAX_READERS][BLOCKS * MAX_ITEMS][SLOT_U32] */
  int *seen;           /* [BLOCKS][MAX_READERS] */
} pipe_args;

static __host__ __device__ uint32_t reader_fn(uint32_t x, int r) { return x * (2u * (uint32_t)r + 1u) + (uint32_t)r; }

WS_KERNEL(pipe_test) pipe_test_kernel(const __grid_constant__ ws_tmap in_map, const __grid_constant__ ws_tmap half_map,
                                      const __grid_constant__ ws_tmap out2_map, pipe_args a, ws_diag diag) {
  __shared__ chunk_pipe st;
  __shared__ __align__(128) uint32_t staged[SLOT_U32]; /* READER2's TMA-store source */
  ws_ctx ctx = WS_SELF(pipe_test, diag);
  uint32_t reader_threads = 0; /* the first a.readers reader roles take part */
  for (uint32_t r = 0; r < a.readers; r++) reader_threads += WS_ROLE_THREADS(pipe_test, READER0 + r);
  const int one_writer = a.fill == FILL_TMA_COMMITTED; /* the leader's arrival only */
  ws_pipe p = WS_PIPE_VIEW_N(&st, "test_pipe", one_writer ? 1u : WS_ROLE_THREADS(pipe_test, WRITER), reader_threads,
                             a.stages);
  if (threadIdx.x == 0) ws_pipe_init(&p);
  ws_init_sync();
  const uint32_t n = (uint32_t)a.nitems[blockIdx.x];
  const size_t base = (size_t)blockIdx.x * MAX_ITEMS;

  if (ctx.role == WRITER) {
    const int t = ws_role_thread(&ctx);
    for (uint32_t i = 0; i < n; i++) {
      const uint32_t s = ws_pipe_acquire(&p, &ctx, i);
      const uint32_t *src = a.in + (base + i) * SLOT_U32;
      if (a.fill == FILL_STORES)
        for (int j = t; j < SLOT_U32; j += (int)ctx.nthreads) st.slot[s].v[j] = src[j];
      else if (a.fill == FILL_BULK)
        ws_pipe_load_bulk(&p, &ctx, i, st.slot[s].v, src, sizeof(chunk_slot));
      else if (a.fill == FILL_TMA)
        ws_pipe_load_tile_2d(&p, &ctx, i, st.slot[s].v, &in_map, 0, (int)((base + i) * 8));
      if (one_writer) { /* committed before its copies land: the phase waits for the bytes */
        const ws_cursor k = ws_cursor_at(i, a.stages);
        ws_pipe_commit_bytes_at(&p, &ctx, k, 2u * half_map.box_bytes);
        ws_pipe_copy_tile_2d_at(&p, &ctx, k, st.slot[s].v, &half_map, 0, (int)((base + i) * 8));
        ws_pipe_copy_tile_2d_at(&p, &ctx, k, st.slot[s].v + SLOT_U32 / 2, &half_map, 0, (int)((base + i) * 8 + 4));
      } else {
        ws_pipe_commit(&p, &ctx, i);
      }
    }
    if (!one_writer || ws_role_leader(&ctx)) ws_pipe_close(&p, &ctx, n); /* one arrival: the leader's */
    return;
  }
  const int r = ctx.role - READER0;
  if (r >= (int)a.readers) return;
  const int t = ws_role_thread(&ctx);
  uint32_t i = 0;
  const int probed = ctx.role == READER1;
  uint32_t full = probed ? ws_pipe_probe_at(&p, ws_cursor_at(0, a.stages)) : 0u;
  for (;; i++) {
    const uint32_t s = i % a.stages;
    if (probed ? ws_pipe_wait_probed_at(&p, &ctx, ws_cursor_at(i, a.stages), full) : ws_pipe_wait(&p, &ctx, i)) break;
    if (ctx.role == READER2) {
      WS_STORE_WAIT_READ(&ctx, 0); /* the previous store has read `staged` */
      for (int j = t; j < SLOT_U32; j += (int)ctx.nthreads) staged[j] = reader_fn(st.slot[s].v[j], r);
      ws_pipe_release(&p, &ctx, i);
      ws_tma_store_2d(&ctx, &out2_map, staged, 0, (int)((base + i) * 8));
      continue;
    }
    uint32_t *dst = a.out + ((size_t)r * BLOCKS * MAX_ITEMS + base + i) * SLOT_U32;
    for (int j = t; j < SLOT_U32; j += (int)ctx.nthreads) dst[j] = reader_fn(st.slot[s].v[j], r);
    ws_pipe_release(&p, &ctx, i);
    if (probed) full = ws_pipe_probe_at(&p, ws_cursor_at(i + 1, a.stages)); /* an item or the close: it comes */
  }
  if (ctx.role == READER2) ws_store_drain(&ctx);
  if (ws_role_leader(&ctx)) a.seen[blockIdx.x * MAX_READERS + r] = (int)i;
}

int main(int argc, char **argv) {
  require_hopper();
  rng_seed_from_time();
  const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0;
  const size_t items = (size_t)BLOCKS * MAX_ITEMS;
  const size_t in_bytes = items * SLOT_U32 * 4, out_bytes = MAX_READERS * in_bytes;
  uint32_t *in, *out;
  int *nitems, *seen;
  CUDA_OK(cudaMalloc(&in, in_bytes));
  CUDA_OK(cudaMalloc(&out, out_bytes));
  CUDA_OK(cudaMalloc(&nitems, BLOCKS * sizeof(int)));
  CUDA_OK(cudaMalloc(&seen, BLOCKS * MAX_READERS * sizeof(int)));
  uint32_t *h_in = (uint32_t *)host_alloc(in_bytes, 1, 0), *h_out = (uint32_t *)host_alloc(out_bytes, 1, 0);
  int h_n[BLOCKS], h_seen[BLOCKS * MAX_READERS];

  ws_plan plan;
  WS_OK_OR_DIE(ws_plan_init(&plan, "pipe_test", pipe_test_roles, pipe_test_NROLES, 0));
  ws_tmap map, half_map, out2_map;
  WS_OK_OR_DIE(ws_tmap_2d(&map, in, WS_DTYPE_U32, items * 8, 32, 128, 8, 32));
  CHECK(map.box_bytes == sizeof(chunk_slot));
  WS_OK_OR_DIE(ws_tmap_2d(&half_map, in, WS_DTYPE_U32, items * 8, 32, 128, 4, 32));
  CHECK(2 * half_map.box_bytes == sizeof(chunk_slot));
  WS_OK_OR_DIE(ws_tmap_2d(&out2_map, out + 2 * items * SLOT_U32, WS_DTYPE_U32, items * 8, 32, 128, 8, 32));
  ws_diag diag;
  WS_OK_OR_DIE(ws_diag_get(&diag));

  int runs = 0;
  for (int fill = 0; fill < FILLS; fill++)
    for (uint32_t stages = 1; stages <= MAX_STAGES; stages++)
      for (uint32_t readers = 1; readers <= MAX_READERS; readers++) {
        if (quick && !(stages == 1 || stages == 3 || stages == 8)) continue;
        rng_fill(h_in, in_bytes);
        for (int b = 0; b < BLOCKS; b++) h_n[b] = (int)(rng_u32() % (MAX_ITEMS + 1));
        h_n[0] = MAX_ITEMS; /* at least one full-length stream */
        h_n[1] = 0;         /* and one that is closed at once  */
        CUDA_OK(cudaMemcpy(in, h_in, in_bytes, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemcpy(nitems, h_n, sizeof h_n, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(out, 0xCD, out_bytes));  /* poison */
        CUDA_OK(cudaMemset(seen, 0xFF, sizeof h_seen));
        pipe_args a = {stages, readers, (uint32_t)fill, nitems, in, out, seen};
        void *args[] = {&map, &half_map, &out2_map, &a, &diag};
        WS_OK_OR_DIE(ws_plan_launch(&plan, (const void *)pipe_test_kernel, dim3{BLOCKS, 1, 1}, 0, args));
        WS_OK_OR_DIE(ws_sync(0));
        CUDA_OK(cudaMemcpy(h_out, out, out_bytes, cudaMemcpyDeviceToHost));
        CUDA_OK(cudaMemcpy(h_seen, seen, sizeof h_seen, cudaMemcpyDeviceToHost));
        long bad = 0, untouched_bad = 0;
        for (int r = 0; r < MAX_READERS; r++)
          for (int b = 0; b < BLOCKS; b++) {
            const int want_seen = r < (int)readers ? h_n[b] : -1;
            if (h_seen[b * MAX_READERS + r] != want_seen) {
              fprintf(stderr, "fill %s stages %u readers %u: block %d reader %d saw %d items, expected %d\n",
                      fill_name[fill], stages, readers, b, r, h_seen[b * MAX_READERS + r], want_seen);
              test_failures++;
            }
            for (int i = 0; i < MAX_ITEMS; i++)
              for (int j = 0; j < SLOT_U32; j++) {
                const size_t item = (size_t)b * MAX_ITEMS + i;
                const uint32_t got = h_out[((size_t)r * items + item) * SLOT_U32 + j];
                const int written = r < (int)readers && i < h_n[b];
                if (written && got != reader_fn(h_in[item * SLOT_U32 + j], r)) bad++;
                if (!written && got != 0xCDCDCDCDu) untouched_bad++;
              }
          }
        if (bad || untouched_bad) {
          fprintf(stderr, "fill %s stages %u readers %u: %ld wrong values, %ld writes outside the stream\n",
                  fill_name[fill], stages, readers, bad, untouched_bad);
          test_failures++;
        }
        runs++;
      }
  printf("test_pipe: %d configurations (fills x stages x readers)\n", runs);
  return test_finish("test_pipe");
}
