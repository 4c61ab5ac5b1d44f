/* sendrecv_state.c - sendrecv's per-communicator state: made in ws_comm_init, freed in
 * ws_comm_destroy (the hooks of comm_internal.h).
 *
 * The symmetric blocks are made in one fixed order (staging, tail, head, zc_ready,
 * zc_addr, zc_done) and freed in the same order: NVSHMEM's allocations are collective,
 * and a rank that made them in another order, or another size, would hand its peers
 * addresses of other blocks. */
#include "sendrecv_internal.h"

#include <stdlib.h>

size_t ws_sr_heap_bytes(int nranks) { return (size_t)nranks * WS_SR_REGION_BYTES; }

ws_status ws_sr_init(ws_comm *c) {
  ws_sr_state *sr = (ws_sr_state *)calloc(1, sizeof *sr);
  if (!sr) return ws_fail(WS_ERR_NOMEM, "ws_comm_init: out of host memory");
  c->sr = sr;
  ws_status s;
  const size_t nsig = (size_t)c->nranks * WS_SR_MAX_BLOCKS * sizeof(uint64_t);
  if ((s = ws_comm_sym_alloc(c, ws_sr_heap_bytes(c->nranks), (void **)&sr->staging, "staging")) != WS_OK ||
      (s = ws_comm_sym_alloc(c, nsig, (void **)&sr->tail, "tail signals")) != WS_OK ||
      (s = ws_comm_sym_alloc(c, nsig, (void **)&sr->head, "head signals")) != WS_OK ||
      (s = ws_comm_sym_alloc(c, nsig, (void **)&sr->zc_ready, "zero-copy signals")) != WS_OK ||
      (s = ws_comm_sym_alloc(c, 2 * nsig, (void **)&sr->zc_addr, "zero-copy signals")) != WS_OK ||
      (s = ws_comm_sym_alloc(c, nsig, (void **)&sr->zc_done, "zero-copy signals")) != WS_OK)
    return s;
  if (cudaMalloc((void **)&sr->send_step, nsig) != cudaSuccess || cudaMalloc((void **)&sr->recv_step, nsig) != cudaSuccess ||
      cudaMemset(sr->send_step, 0, nsig) != cudaSuccess || cudaMemset(sr->recv_step, 0, nsig) != cudaSuccess ||
      cudaMalloc((void **)&sr->zc_seq, 2 * nsig) != cudaSuccess || cudaMemset(sr->zc_seq, 0, 2 * nsig) != cudaSuccess)
    return ws_fail(WS_ERR_NOMEM, "ws_comm_init: step counters: %s", cudaGetErrorString(cudaGetLastError()));
  /* NULL for a rank out of reach: ws_sendrecv refuses that peer when it is named. */
  for (int p = 0; p < c->nranks; p++) {
    sr->peer_staging[p] = (uint8_t *)ws_comm_peer_addr(c, sr->staging, p);
    sr->peer_tail[p] = (uint64_t *)ws_comm_peer_addr(c, sr->tail, p);
    sr->peer_head[p] = (uint64_t *)ws_comm_peer_addr(c, sr->head, p);
    sr->peer_zc_ready[p] = (uint64_t *)ws_comm_peer_addr(c, sr->zc_ready, p);
    sr->peer_zc_addr[p] = (uint64_t *)ws_comm_peer_addr(c, sr->zc_addr, p);
    sr->peer_zc_done[p] = (uint64_t *)ws_comm_peer_addr(c, sr->zc_done, p);
  }
  return WS_OK;
}

void ws_sr_fini(ws_comm *c, int collective) {
  ws_sr_state *sr = c->sr;
  if (!sr) return;
  if (collective) {
    if (sr->staging) ws_comm_sym_free(c, sr->staging);
    if (sr->tail) ws_comm_sym_free(c, sr->tail);
    if (sr->head) ws_comm_sym_free(c, sr->head);
    if (sr->zc_ready) ws_comm_sym_free(c, sr->zc_ready);
    if (sr->zc_addr) ws_comm_sym_free(c, sr->zc_addr);
    if (sr->zc_done) ws_comm_sym_free(c, sr->zc_done);
    if (sr->zc_seq) cudaFree(sr->zc_seq);
    if (sr->send_step) cudaFree(sr->send_step);
    if (sr->recv_step) cudaFree(sr->recv_step);
  }
  free(sr);
  c->sr = NULL;
}
