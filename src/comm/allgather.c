/* allgather.c - ws_allgather: on 2-8 ranks every block goes to every rank at once (one
 * launch of sendrecv's kernel over every pair: ws_sr_allgather_direct), by default at any
 * size; above WARPSPEC_AG_DIRECT_MAX_BYTES per rank, or past 8 ranks, around a ring of
 * ws_sendrecv calls, nranks - 1 steps. The direct path with a symmetric recvbuf
 * (ws_comm_alloc) from WARPSPEC_AG_ZC_MIN_BYTES up to WS_AG_ZC_MAX_BYTES per rank is
 * zero-copy (the sizes where it measured faster, config.h): each block is
 * stored once, into its place in every peer's recvbuf, where the staging path stores it
 * into the peer's staging slots and the peer copies it out (a second pass over its HBM).
 *
 * It keeps no state of its own: both paths move through sendrecv's staging and step
 * counters (sendrecv_internal.h), which that operation owns; here only the
 * communicator's rank and size are read. */
#include "comm_internal.h"
#include "sendrecv_internal.h"
#include "../core/knobs.h"
#include "../core/size_check.h"

#include <stdint.h>

ws_status ws_allgather(ws_comm *c, const void *sendbuf, size_t bytes, void *recvbuf, cudaStream_t stream) {
  WS_REQUIRE(c != NULL, "ws_allgather: comm is NULL");
  WS_REQUIRE((sendbuf && recvbuf) || bytes == 0, "ws_allgather: sendbuf or recvbuf is NULL");
  WS_REQUIRE(((uintptr_t)recvbuf & 15u) == 0 && (bytes % 16 == 0 || c->nranks == 1),
             "ws_allgather: recvbuf must be 16-byte aligned and bytes (%zu) a multiple of 16, so that every rank's "
             "block is aligned", bytes);
  WS_REQUIRE(((uintptr_t)sendbuf & 15u) == 0, "ws_allgather: sendbuf %p must be 16-byte aligned (it is read with "
             "16-byte loads)", sendbuf);
  size_t total = 0; /* recvbuf holds every rank's block */
  WS_REQUIRE(ws_size_mul3((size_t)c->nranks, bytes, 1, &total) && ws_span_fits(recvbuf, total),
             "ws_allgather: %d ranks x %zu bytes run past the end of the address space", c->nranks, bytes);
  uint8_t *out = (uint8_t *)recvbuf;
  const int n = c->nranks, r = c->rank;
  if (bytes == 0) return WS_OK;
  const ws_knobs *k = ws_knobs_get();
  if (n > 1 && n - 1 <= WS_SR_MAX_PAIRS && (long long)bytes <= k->ag_direct_max_bytes) { /* every block at once */
    /* zero-copy is decided here from this rank's recvbuf alone: every rank must pass a
     * symmetric one or none (a rank on the other path times out in its first wait, naming
     * the peer, as a zero-copy ws_sendrecv does) */
    const int zc = (long long)bytes >= k->ag_zc_min_bytes && bytes < WS_AG_ZC_MAX_BYTES &&
                   ws_comm_is_symmetric(c, recvbuf, total);
    return ws_sr_allgather_direct(c, sendbuf, bytes, recvbuf, zc, stream);
  }
  if (out + (size_t)r * bytes != (const uint8_t *)sendbuf)
    WS_CUDA_TRY(cudaMemcpyAsync(out + (size_t)r * bytes, sendbuf, bytes, cudaMemcpyDeviceToDevice, stream));
  /* Ring: in step s, pass on the block that arrived in step s-1 (our own first). */
  const int right = (r + 1) % n, left = (r + n - 1) % n;
  for (int s = 0; s < n - 1; s++) {
    const int give = (r - s + n) % n, take = (r - s - 1 + 2 * n) % n;
    ws_status st = ws_sendrecv(c, out + (size_t)give * bytes, bytes, right, out + (size_t)take * bytes, bytes, left, NULL,
                               stream);
    if (st != WS_OK) return st;
  }
  return WS_OK;
}
