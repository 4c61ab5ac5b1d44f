/* test_comm.c - communication without a GPU: sendrecv chunking and stride arithmetic,
 * argument validation and bootstrap error paths (the rendezvous: test_rendezvous.c). */
#define _GNU_SOURCE
#include "../test.h"
#include "warpspec/comm.h"
#include "warpspec/sendrecv_geometry.h"

#include <stdlib.h>
#include <unistd.h>

static void geometry(void) {
  const uint64_t sizes[] = {0, 1, 15, 16, 17, 4095, 4096, 8192, 65536, 65537, 1 << 20, (1 << 20) + 3, 8 << 20,
                            (64 << 20) + 5, 1ull << 30, 5ull << 30};
  for (unsigned i = 0; i < sizeof sizes / sizeof sizes[0]; i++)
    for (uint32_t blocks = 0; blocks <= WS_SR_MAX_BLOCKS; blocks += blocks < 4 ? 1 : 15) {
      const ws_sr_geometry g = ws_sr_geometry_make(sizes[i], blocks);
      CHECK(g.blocks >= 1 && g.blocks <= WS_SR_MAX_BLOCKS);
      if (blocks) CHECK(g.blocks == blocks);
      CHECK(g.stride % 16 == 0 && g.stride >= 16 && g.stride <= WS_SR_MAX_STRIDE);
      CHECK(g.per_block % 16 == 0);
      CHECK(g.ll == (g.per_block <= WS_SR_LL_BYTES));
      /* LL lines (8 data bytes per 16) plus header lines fit one slot */
      if (g.ll) CHECK(16 * (2 + (g.per_block + 7) / 8) <= WS_SR_SLOT_BYTES);
      uint64_t covered = 0, steps = 0;
      for (uint32_t b = 0; b < g.blocks; b++) {
        CHECK(ws_sr_block_begin(&g, b) == covered); /* contiguous, in order */
        if (ws_sr_block_bytes(&g, b)) CHECK(ws_sr_block_begin(&g, b) % 16 == 0); /* data starts aligned */
        covered += ws_sr_block_bytes(&g, b);
        const uint64_t st = ws_sr_block_steps(&g, b);
        CHECK(st >= 1);                             /* even empty blocks send a header */
        CHECK(st * g.stride >= ws_sr_block_bytes(&g, b));
        CHECK((st - 1) * g.stride < ws_sr_block_bytes(&g, b) || st == 1);
        steps += st;
      }
      CHECK(covered == sizes[i]);
      /* adaptive stride: about two steps per block once past one step */
      if (g.per_block > WS_SR_ONE_STEP_BYTES && g.stride < WS_SR_MAX_STRIDE) CHECK(ws_sr_block_steps(&g, 0) <= 2);
      (void)steps;
    }
  CHECK(ws_sr_default_blocks(32) == 1);
  CHECK(ws_sr_default_blocks(1ull << 30) <= WS_SR_MAX_BLOCKS);
  for (uint64_t n = 1; n < (1ull << 32); n *= 2) CHECK(ws_sr_default_blocks(n) <= ws_sr_default_blocks(2 * n));
}

static void arguments(void) {
  ws_comm_id id;
  ws_comm *c = NULL;
  if (ws_comm_available() == WS_OK) {
    CHECK_STATUS(ws_comm_get_unique_id(NULL), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_init(NULL, 0, 1, &id), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_init(&c, 0, 1, NULL), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_init(&c, 2, 2, &id), WS_ERR_INVALID);
    CHECK_MSG("rank 2 out of range");
    CHECK_STATUS(ws_comm_init(&c, 0, 0, &id), WS_ERR_INVALID);
    CHECK_MSG("nranks 0");
    CHECK_STATUS(ws_comm_alloc(NULL, 16, NULL), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_free(NULL, NULL), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_peer_ptr(NULL, NULL, 0, NULL), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_barrier(NULL, 0), WS_ERR_INVALID);
    CHECK_STATUS(ws_comm_destroy(NULL), WS_ERR_INVALID);
  } else {
    CHECK_STATUS(ws_comm_init(&c, 0, 1, &id), WS_ERR_UNSUPPORTED);
    CHECK_MSG("without NVSHMEM");
  }
  /* from the environment: nothing set, then a rank beyond the size */
  unsetenv("WS_RANK");
  unsetenv("WS_NRANKS");
  unsetenv("OMPI_COMM_WORLD_RANK");
  unsetenv("OMPI_COMM_WORLD_SIZE");
  CHECK_STATUS(ws_comm_init_from_env(&c), WS_ERR_INVALID);
  CHECK_MSG("no valid rank/size");
  setenv("WS_RANK", "3", 1);
  setenv("WS_NRANKS", "2", 1);
  CHECK_STATUS(ws_comm_init_from_env(&c), WS_ERR_INVALID);
  CHECK_MSG("rank 3 >= size 2");
  setenv("WS_RANK", "x", 1);
  CHECK_STATUS(ws_comm_init_from_env(&c), WS_ERR_INVALID);
  unsetenv("WS_RANK");
  unsetenv("WS_NRANKS");
  CHECK_STATUS(ws_comm_init_from_env(NULL), WS_ERR_INVALID);
  int r;
  CHECK_STATUS(ws_comm_rank(NULL, &r), WS_ERR_INVALID);
  CHECK_STATUS(ws_comm_size(NULL, &r), WS_ERR_INVALID);
  CHECK_STATUS(ws_comm_device(NULL, &r), WS_ERR_INVALID);
  char buf[32];
  CHECK_STATUS(ws_sendrecv(NULL, buf, 16, 0, buf + 16, 16, 0, NULL, 0), WS_ERR_INVALID);
  CHECK_MSG("comm is NULL");
  CHECK_STATUS(ws_send(NULL, buf, 16, 0, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_recv(NULL, buf, 16, 0, 0), WS_ERR_INVALID);
  CHECK_STATUS(ws_allgather(NULL, buf, 16, buf, 0), WS_ERR_INVALID);
}

int main(void) {
  geometry();
  arguments();
  return test_finish("test_comm");
}
