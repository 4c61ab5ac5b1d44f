/* test_stream.cu - ws_stream_copy against memcmp on random data: sizes from 1 byte
 * to 96 MiB (odd sizes, partial boxes, tails), both writer modes, several grids and
 * pipe depths, repeated calls; the bytes after the destination stay untouched. */
#include "gpu_test.h"
#include "warpspec/warpspec.h"

#define GUARD 4096

int main(int argc, char **argv) {
  require_hopper();
  const int quick = argc > 1 && strcmp(argv[1], "--quick") == 0; /* for compute-sanitizer */
  rng_seed_from_time();
  const size_t sizes[] = {1, 15, 16, 1023, 1024, 1040, 32768 - 16, 32768, 32768 + 16, 1 << 20,
                          (1 << 20) + 7, 3 * 32768 * 133 + 1024 + 48, (size_t)96 << 20};
  /* {stages, ctas_per_sm, ctas, l2_evict_first, contiguous} */
  const int grids[][5] = {{0, 0, 0, 0, 0}, {1, 0, 1, 0, 0}, {3, 0, 3, 1, 1}, {6, 2, 0, 0, 0}, {2, 2, 0, 1, 1}};
  const int ngrids = (int)(sizeof grids / sizeof grids[0]);
  const size_t max = (size_t)96 << 20;
  uint8_t *src, *dst;
  CUDA_OK(cudaMalloc(&src, max));
  CUDA_OK(cudaMalloc(&dst, max + GUARD));
  uint8_t *h_src = (uint8_t *)host_alloc(max, 1, 0), *h_dst = (uint8_t *)host_alloc(max, 1, GUARD);
  cudaStream_t stream;
  CUDA_OK(cudaStreamCreate(&stream));
  int cases = 0;
  for (unsigned si = 0; si < sizeof sizes / sizeof sizes[0]; si++)
    for (int mode = 0; mode < 2; mode++)
      for (int ci = 0; ci < ngrids; ci++) {
        const size_t n = sizes[si];
        if (n > (64u << 20) && ci != 0) continue;
        if (quick && n > (2u << 20)) continue;
        printf("size %zu mode %d stages %d ctas_per_sm %d ctas %d\n", n, mode, grids[ci][0], grids[ci][1], grids[ci][2]);
        fflush(stdout);
        rng_fill(h_src, n);
        CUDA_OK(cudaMemcpy(src, h_src, n, cudaMemcpyHostToDevice));
        CUDA_OK(cudaMemset(dst, 0xCD, n + GUARD));
        for (int rep = 0; rep < 2; rep++)
        {
          ws_stream_opts o = {(ws_stream_mode)mode, grids[ci][0], grids[ci][1], grids[ci][2], grids[ci][3], grids[ci][4]};
          WS_OK_OR_DIE(ws_stream_copy(dst, src, n, &o, stream));
        }
        WS_OK_OR_DIE(ws_sync(stream));
        CUDA_OK(cudaMemcpy(h_dst, dst, n + GUARD, cudaMemcpyDeviceToHost));
        if (memcmp(h_dst, h_src, n) != 0) {
          size_t i = 0;
          while (h_dst[i] == h_src[i]) i++;
          fprintf(stderr, "size %zu mode %d grid %d: first difference at byte %zu\n", n, mode, ci, i);
          test_failures++;
        }
        for (size_t g = 0; g < GUARD; g++)
          if (h_dst[n + g] != 0xCD) {
            fprintf(stderr, "size %zu mode %d: wrote past the end at +%zu\n", n, mode, g);
            test_failures++;
            break;
          }
        cases++;
      }
  printf("test_stream: %d cases\n", cases);
  return test_finish("test_stream");
}
