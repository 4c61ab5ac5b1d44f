/* test_sendrecv.cu [all|missing|mismatch] - run under `warpspec run -n N`.
 *
 * all:      ws_sendrecv between N ranks (send to rank+1, receive from rank-1) on
 *           random data at sizes from 0 B to 1 GiB, odd sizes included; several CTA
 *           counts; repeated launches; one direction only (ws_send / ws_recv); a CUDA
 *           graph replayed with fresh data; the ring all-gather; argument errors.
 *           The receive buffer is poisoned and its guard bytes must stay untouched.
 * missing:  rank 0 receives from rank 1, which never sends: WS_ERR_TIMEOUT naming
 *           peer 1 and block 0, within the bound.
 * mismatch: rank 0 sends 1000 bytes, rank 1 expects 2000: WS_ERR_MISMATCH on rank 1.
 * quick:    "all" up to 8 MiB (for compute-sanitizer).
 * Exits 77 (skipped) without NVSHMEM or with fewer GPUs than ranks. */
#include "gpu_test.h"
#include "warpspec/comm.h"

#include <sys/time.h>
#include <unistd.h>

#define GUARD 256

/* Bytes of rank r's message number `seq`: a hash, so any rank can check any byte. */
static __host__ __device__ inline uint8_t pattern(uint64_t seed, int rank, uint64_t seq, uint64_t i) {
  uint64_t x = seed ^ ((uint64_t)rank << 56) ^ (seq << 40) ^ (i >> 3);
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  x ^= x >> 31;
  return (uint8_t)(x >> (8 * (i & 7)));
}

__global__ void fill_kernel(uint8_t *p, uint64_t n, uint64_t seed, int rank, uint64_t seq) {
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n; i += (uint64_t)gridDim.x * blockDim.x)
    p[i] = pattern(seed, rank, seq, i);
}

/* Counts bytes of p[0, n) that differ from the pattern and of p[n, n + guard) that
 * are not the poison 0xCD. */
__global__ void check_kernel(const uint8_t *p, uint64_t n, uint64_t guard, uint64_t seed, int rank, uint64_t seq,
                             unsigned long long *bad) {
  unsigned long long local = 0;
  for (uint64_t i = blockIdx.x * (uint64_t)blockDim.x + threadIdx.x; i < n + guard; i += (uint64_t)gridDim.x * blockDim.x)
    local += p[i] != (i < n ? pattern(seed, rank, seq, i) : (uint8_t)0xCD);
  if (local) atomicAdd(bad, local);
}

static uint64_t seed;
static int rank, nranks;
static unsigned long long *d_bad;

static void fill(uint8_t *p, uint64_t n, int who, uint64_t seq, cudaStream_t s) {
  if (n) fill_kernel<<<264, 256, 0, s>>>(p, n, seed, who, seq);
  CUDA_OK(cudaGetLastError());
}

/* Bytes that differ from rank `who`'s message `seq`, plus guard bytes written. */
static unsigned long long check_guard(const uint8_t *p, uint64_t n, uint64_t guard, int who, uint64_t seq, cudaStream_t s) {
  unsigned long long bad = 0;
  CUDA_OK(cudaMemsetAsync(d_bad, 0, sizeof bad, s));
  check_kernel<<<264, 256, 0, s>>>(p, n, guard, seed, who, seq, d_bad);
  CUDA_OK(cudaGetLastError());
  WS_OK_OR_DIE(ws_sync(s));
  CUDA_OK(cudaMemcpy(&bad, d_bad, sizeof bad, cudaMemcpyDeviceToHost));
  return bad;
}

static unsigned long long check(const uint8_t *p, uint64_t n, int who, uint64_t seq, cudaStream_t s) {
  return check_guard(p, n, GUARD, who, seq, s);
}

static double now(void) {
  struct timeval tv;
  gettimeofday(&tv, NULL);
  return tv.tv_sec + tv.tv_usec * 1e-6;
}

/* One exchange of n bytes: send to right, receive from left; verify. */
static void exchange(ws_comm *c, uint8_t *sbuf, uint8_t *rbuf, uint64_t n, int ctas, uint64_t seq, cudaStream_t s) {
  const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
  fill(sbuf, n, rank, seq, s);
  CUDA_OK(cudaMemsetAsync(rbuf, 0xCD, n + GUARD, s));
  ws_sendrecv_opts o = {ctas, 0, 0};
  WS_OK_OR_DIE(ws_sendrecv(c, sbuf, n, right, rbuf, n, left, &o, s));
  const unsigned long long bad = check(rbuf, n, left, seq, s);
  if (bad) {
    fprintf(stderr, "rank %d: %llu wrong bytes receiving %llu bytes (ctas %d, seq %llu)\n", rank, bad,
            (unsigned long long)n, ctas, (unsigned long long)seq);
    test_failures++;
  }
}

static uint64_t max_size = (uint64_t)1 << 30; /* "quick": 8 MiB, for compute-sanitizer */

static void run_all(ws_comm *c) {
  const uint64_t max = max_size;
  uint8_t *sbuf, *rbuf;
  const uint64_t cap = (max > (16u << 20) ? max : (16u << 20)) + GUARD; /* the fixed-size cases below need 9 MiB */
  CUDA_OK(cudaMalloc(&sbuf, cap));
  CUDA_OK(cudaMalloc(&rbuf, cap + GUARD));
  cudaStream_t s;
  CUDA_OK(cudaStreamCreate(&s));
  uint64_t seq = 1;
  const uint64_t sizes[] = {0, 1, 15, 16, 17, 4095, 65536, 65536 + 16, (1 << 20) + 3, 8 << 20, (64 << 20) + 5, 256 << 20, max};
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    if (sizes[i] <= max) exchange(c, sbuf, rbuf, sizes[i], 0, seq++, s);
  printf("rank %d: sizes 0 B .. %llu B ok\n", rank, (unsigned long long)max);
  const int ctas[] = {1, 3, 7, 16, 32};
  for (unsigned i = 0; i < 5; i++) exchange(c, sbuf, rbuf, (8 << 20) + 48, ctas[i], seq++, s);
  for (int rep = 0; rep < 20; rep++) exchange(c, sbuf, rbuf, (uint64_t)(rng_u32() % (3 << 20)), (int)(rep % 5) * 4, seq++, s);
  printf("rank %d: CTA counts and repeated launches ok\n", rank);

  /* One direction: even ranks send to rank+1, odd ranks receive from rank-1. */
  if (nranks % 2 == 0) {
    const uint64_t n = (5 << 20) + 1;
    if (rank % 2 == 0) {
      fill(sbuf, n, rank, seq, s);
      WS_OK_OR_DIE(ws_send(c, sbuf, n, rank + 1, s));
      WS_OK_OR_DIE(ws_sync(s));
    } else {
      CUDA_OK(cudaMemsetAsync(rbuf, 0xCD, n + GUARD, s));
      WS_OK_OR_DIE(ws_recv(c, rbuf, n, rank - 1, s));
      const unsigned long long bad = check(rbuf, n, rank - 1, seq, s);
      if (bad) { fprintf(stderr, "rank %d: ws_recv: %llu wrong bytes\n", rank, bad); test_failures++; }
    }
    seq++;
    printf("rank %d: ws_send / ws_recv ok\n", rank);
  }

  /* A graph of one sendrecv, replayed with fresh data. */
  {
    const uint64_t n = (3 << 20) + 32;
    const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    cudaGraph_t g;
    cudaGraphExec_t ge;
    CUDA_OK(cudaStreamBeginCapture(s, cudaStreamCaptureModeGlobal));
    WS_OK_OR_DIE(ws_sendrecv(c, sbuf, n, right, rbuf, n, left, NULL, s));
    CUDA_OK(cudaStreamEndCapture(s, &g));
    CUDA_OK(cudaGraphInstantiate(&ge, g, 0));
    for (int rep = 0; rep < 5; rep++, seq++) {
      fill(sbuf, n, rank, seq, s);
      CUDA_OK(cudaMemsetAsync(rbuf, 0xCD, n + GUARD, s));
      CUDA_OK(cudaGraphLaunch(ge, s));
      const unsigned long long bad = check(rbuf, n, left, seq, s);
      if (bad) { fprintf(stderr, "rank %d: graph replay %d: %llu wrong bytes\n", rank, rep, bad); test_failures++; }
    }
    cudaGraphExecDestroy(ge);
    cudaGraphDestroy(g);
    printf("rank %d: CUDA graph replays ok\n", rank);
  }

  /* Zero-copy into a symmetric receive buffer: the staging path below
   * WS_SR_CE_MIN_BYTES, the copy engine from there on. */
  {
    const uint64_t zmax = max < (64u << 20) ? max : (64 << 20) + 64;
    uint8_t *zbuf = NULL;
    WS_OK_OR_DIE(ws_comm_alloc(c, zmax + GUARD, (void **)&zbuf));
    const uint64_t zsizes[] = {0, 48, 1 << 20, zmax < (9u << 20) ? zmax - 16 : (9 << 20) + 7, zmax};
    const int right = (rank + 1) % nranks, left = (rank + nranks - 1) % nranks;
    for (unsigned i = 0; i < sizeof zsizes / sizeof zsizes[0]; i++, seq++)
      for (int rep = 0; rep < 3; rep++) { /* stores, copy engine, by size */
        ws_sendrecv_opts zc = {(int)(i % 3) * 5, 1, rep == 0 ? -1 : rep == 1 ? 1 : 0};
        const uint64_t n = zsizes[i];
        fill(sbuf, n, rank, seq + rep * 1000, s);
        CUDA_OK(cudaMemsetAsync(zbuf, 0xCD, n + GUARD, s));
        WS_OK_OR_DIE(ws_comm_barrier(c, s)); /* the peer may write into zbuf from now on */
        WS_OK_OR_DIE(ws_sendrecv(c, sbuf, n, right, zbuf, n, left, &zc, s));
        const unsigned long long bad = check(zbuf, n, left, seq + rep * 1000, s);
        WS_OK_OR_DIE(ws_comm_barrier(c, s)); /* everyone checked before zbuf is poisoned again */
        if (bad) {
          fprintf(stderr, "rank %d: zero-copy %llu bytes: %llu wrong bytes\n", rank, (unsigned long long)n, bad);
          test_failures++;
        }
      }
    WS_OK_OR_DIE(ws_sync(s));
    WS_OK_OR_DIE(ws_comm_free(c, zbuf));
    printf("rank %d: zero-copy (16-byte stores and copy engine) ok\n", rank);
  }

  /* All-gather: the direct path (every block at once, ws_allgather's default at every
   * size: the low-latency lines, one step, two steps per block), the ring
   * (WARPSPEC_AG_DIRECT_MAX_BYTES=0), and the direct path into a symmetric recvbuf: zero-copy
   * at every size (WARPSPEC_AG_ZC_MIN_BYTES=0), then at the default threshold (staging below
   * its 16 MiB, zero-copy from it). Out of place and in place (our block already in recvbuf), each
   * size four times in a row so that the step and handshake counters carry over. */
  {
    const uint64_t sizes[] = {16, 4096 + 16, 64 * 1024, 300 * 1024 + 16 * 3, 1 << 20, (1 << 20) + 16 * 7,
                              (3 << 20) + 16, (3 << 20) + 16 * 5, (16 << 20) + 16 * 3};
    const int nsizes = (int)(sizeof sizes / sizeof sizes[0]);
    const uint64_t zag_bytes = sizes[nsizes - 1] * nranks + GUARD;
    uint8_t *zag = NULL;
    WS_OK_OR_DIE(ws_comm_alloc(c, zag_bytes, (void **)&zag));
    static const char *const pass_name[4] = {"direct", "ring", "zero-copy", "symmetric, default threshold"};
    for (int pass = 0; pass < 4; pass++) {
      if (pass == 1) setenv(WS_AG_DIRECT_MAX_BYTES_ENV, "0", 1);
      if (pass == 2) { unsetenv(WS_AG_DIRECT_MAX_BYTES_ENV); setenv(WS_AG_ZC_MIN_BYTES_ENV, "0", 1); }
      if (pass == 3) unsetenv(WS_AG_ZC_MIN_BYTES_ENV);
      WS_OK_OR_DIE(ws_knobs_reload());
      uint8_t *out = pass >= 2 ? zag : rbuf;
      for (int i = pass == 3 ? nsizes - 3 : 0; i < nsizes; i++) {
        /* the plain buffers hold cap bytes: the larger sizes only where they fit */
        if (pass < 2 && sizes[i] * nranks + GUARD > cap) continue;
        for (int rep = 0; rep < 4; rep++) {
          const uint64_t n = sizes[i];
          const int in_place = rep & 1;
          uint8_t *send = in_place ? out + (size_t)rank * n : sbuf;
          CUDA_OK(cudaMemsetAsync(out, 0xCD, n * nranks + GUARD, s));
          fill(send, n, rank, seq, s);
          /* zero-copy: a peer stores into our recvbuf once our call has posted it; the barrier
           * only keeps the poison of this round from racing the previous round's checks */
          if (pass >= 2) WS_OK_OR_DIE(ws_comm_barrier(c, s));
          WS_OK_OR_DIE(ws_allgather(c, send, n, out, s));
          WS_OK_OR_DIE(ws_sync(s));
          for (int r = 0; r < nranks; r++) {
            /* only the last block is followed by the poisoned guard */
            const unsigned long long bad = check_guard(out + r * n, n, r == nranks - 1 ? GUARD : 0, r, seq, s);
            if (bad) {
              fprintf(stderr, "rank %d: %s all-gather of %llu bytes (%s), block of rank %d: %llu wrong bytes\n", rank,
                      pass_name[pass], (unsigned long long)n, in_place ? "in place" : "out of place", r, bad);
              test_failures++;
            }
          }
          WS_OK_OR_DIE(ws_comm_barrier(c, s)); /* everyone checked before the buffer is poisoned again */
          seq++;
        }
      }
    }
    WS_OK_OR_DIE(ws_sync(s));
    WS_OK_OR_DIE(ws_comm_free(c, zag));
    WS_OK_OR_DIE(ws_knobs_reload());
    printf("rank %d: all-gather (direct, ring, zero-copy; in and out of place) ok\n", rank);
  }

  /* Argument errors: reported before the GPU is touched. */
  CHECK_STATUS(ws_sendrecv(c, sbuf, 16, nranks, rbuf, 16, 0, NULL, s), WS_ERR_INVALID);
  CHECK_MSG("send_peer");
  CHECK_STATUS(ws_sendrecv(c, sbuf, 16, 0, rbuf, 16, -7, NULL, s), WS_ERR_INVALID);
  CHECK_MSG("recv_peer -7");
  CHECK_STATUS(ws_sendrecv(c, NULL, 16, 0, rbuf, 16, 0, NULL, s), WS_ERR_INVALID);
  CHECK_MSG("sendbuf is NULL");
  CHECK_STATUS(ws_sendrecv(c, sbuf + 4, 16, 0, rbuf, 16, 0, NULL, s), WS_ERR_INVALID);
  CHECK_MSG("16-byte aligned");
  CHECK_STATUS(ws_sendrecv(c, sbuf, 64, 0, sbuf + 32, 64, 0, NULL, s), WS_ERR_INVALID);
  CHECK_MSG("overlap");
  CHECK_STATUS(ws_allgather(c, sbuf + 4, 16, rbuf, s), WS_ERR_INVALID);
  CHECK_MSG("sendbuf");
  ws_sendrecv_opts bad_ctas = {WS_SR_MAX_BLOCKS + 1, 0, 0};
  CHECK_STATUS(ws_sendrecv(c, sbuf, 16, 0, rbuf, 16, 0, &bad_ctas, s), WS_ERR_INVALID);
  CHECK_MSG("ctas 65");
  ws_sendrecv_opts zc = {0, 1, 0};
  CHECK_STATUS(ws_sendrecv(c, sbuf, 16, 0, rbuf, 16, 0, &zc, s), WS_ERR_INVALID);
  CHECK_MSG("symmetric heap");
  CHECK_STATUS(ws_sendrecv(c, NULL, 0, WS_NO_PEER, NULL, 0, WS_NO_PEER, NULL, s), WS_OK);
  CHECK_STATUS(ws_send(c, sbuf, 16, WS_NO_PEER, s), WS_ERR_INVALID);
  CHECK_STATUS(ws_allgather(c, sbuf, 8, rbuf, s), nranks == 1 ? WS_OK : WS_ERR_INVALID);
  void *pp = NULL;
  CHECK_STATUS(ws_comm_peer_ptr(c, sbuf, nranks, &pp), WS_ERR_INVALID);

  cudaStreamDestroy(s);
  cudaFree(sbuf);
  cudaFree(rbuf);
}

int main(int argc, char **argv) {
  const char *mode = argc > 1 ? argv[1] : "all";
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  /* ranks as the launcher says (`warpspec run` or mpirun); the communicator's own count
   * is what the test uses once it exists */
  const char *n_env = getenv("WS_NRANKS");
  if (!n_env) n_env = getenv("OMPI_COMM_WORLD_SIZE");
  nranks = n_env ? atoi(n_env) : 1;
  if (ws_comm_available() != WS_OK || (ndev < nranks && !getenv(WS_SHARE_GPU_ENV)) || ndev == 0) {
    printf("needs NVSHMEM and %d GPUs (have %d): skipped\n", nranks, ndev);
    return TEST_SKIP;
  }
  ws_comm *c = NULL;
  WS_OK_OR_DIE(ws_comm_init_from_env(&c));
  WS_OK_OR_DIE(ws_comm_rank(c, &rank));
  WS_OK_OR_DIE(ws_comm_size(c, &nranks));
  CUDA_OK(cudaMalloc(&d_bad, sizeof *d_bad));
  /* A fresh seed per run, the same on every rank. */
  if (rank == 0) {
    seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    WS_OK_OR_DIE(ws_rendezvous_put(NULL, "seed", &seed, sizeof seed));
  } else {
    WS_OK_OR_DIE(ws_rendezvous_get(NULL, "seed", &seed, sizeof seed));
  }
  /* every rank has the seed once past a barrier: rank 0 removes the file */
  WS_OK_OR_DIE(ws_comm_barrier(c, 0));
  WS_OK_OR_DIE(ws_sync(0));
  if (rank == 0) WS_OK_OR_DIE(ws_rendezvous_cleanup(NULL, "seed"));
  rng_state ^= seed; /* the same draws on every rank: both sides pick the same sizes */
  printf("rank %d of %d: seed %llu, mode %s\n", rank, nranks, (unsigned long long)seed, mode);

  if (!strcmp(mode, "all") || !strcmp(mode, "quick")) {
    if (!strcmp(mode, "quick")) max_size = 8u << 20;
    run_all(c);
  } else if (!strcmp(mode, "missing") || !strcmp(mode, "mismatch")) {
    const int missing = !strcmp(mode, "missing");
    WS_OK_OR_DIE(ws_set_timeout_ms(500));
    uint8_t *buf;
    CUDA_OK(cudaMalloc(&buf, 4096));
    const double t0 = now();
    ws_status st = WS_OK;
    if (missing && rank == 0) st = ws_recv(c, buf, 4096, 1, 0);
    if (!missing && rank == 0) st = ws_send(c, buf, 1000, 1, 0);
    if (!missing && rank == 1) st = ws_recv(c, buf, 2000, 0, 0);
    if (st == WS_OK) st = ws_sync(0);
    const double dt = now() - t0;
    printf("rank %d: %s after %.3f s: %s\n", rank, ws_strerror(st), dt, st == WS_OK ? "" : ws_last_error());
    if (missing && rank == 0) {
      CHECK(st == WS_ERR_TIMEOUT);
      CHECK_MSG("peer 1");
      CHECK_MSG("block 0");
      CHECK_MSG("peer's data");
      CHECK(dt < 0.5 + 10.0);
    } else if (!missing && rank == 1) {
      CHECK(st == WS_ERR_MISMATCH);
      CHECK_MSG("sends 1000 bytes");
      CHECK_MSG("expects 2000 bytes");
    } else {
      CHECK(st == WS_OK);
    }
    /* A rank whose context died cannot take part in teardown collectives; the others
     * would wait for it. Leave without them. */
    fflush(stdout);
    _exit(test_finish(mode) ? 1 : 0);
  } else if (!strcmp(mode, "zc-forms")) {
    /* Zero-copy on two forms at once: rank 0 by the copy engine (one handshake block),
     * rank 1 by stores (several blocks). Each receiver posts its block count beside its
     * bytes, so both must fault (mismatch, or a timeout behind the peer's fault), never
     * return success with part of the data. */
    WS_OK_OR_DIE(ws_set_timeout_ms(500));
    const uint64_t n = 8u << 20;
    uint8_t *src, *zbuf;
    CUDA_OK(cudaMalloc(&src, n));
    WS_OK_OR_DIE(ws_comm_alloc(c, n, (void **)&zbuf));
    WS_OK_OR_DIE(ws_comm_barrier(c, 0));
    WS_OK_OR_DIE(ws_sync(0));
    const int peer = 1 - rank;
    ws_sendrecv_opts o = {0, 1, rank == 0 ? 1 : -1};
    ws_status st = rank < 2 ? ws_sendrecv(c, src, n, peer, zbuf, n, peer, &o, 0) : WS_OK;
    if (st == WS_OK && rank < 2) st = ws_sync(0);
    printf("rank %d: %s: %s\n", rank, ws_strerror(st), st == WS_OK ? "" : ws_last_error());
    if (rank < 2) CHECK(st == WS_ERR_MISMATCH || st == WS_ERR_TIMEOUT);
    if (rank < 2 && st == WS_ERR_MISMATCH) CHECK_MSG("zero-copy");
    fflush(stdout);
    _exit(test_finish(mode) ? 1 : 0);
  }
  WS_OK_OR_DIE(ws_comm_destroy(c));
  return test_finish("test_sendrecv");
}
