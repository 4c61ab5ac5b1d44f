/* sendrecv_internal.h - the sendrecv operation's state, one per communicator.
 *
 * ws_sendrecv (and ws_send, ws_recv, and ws_allgather's ring over them) owns it; the
 * communicator holds only the pointer (comm->sr) and calls ws_sr_init / ws_sr_fini
 * (comm_internal.h) so that the symmetric blocks below are made and freed on every
 * rank together. Read by sendrecv.cu (the kernels' arguments) and sendrecv_state.c
 * (allocation). */
#ifndef WARPSPEC_SENDRECV_INTERNAL_H
#define WARPSPEC_SENDRECV_INTERNAL_H

#include <stdint.h>

#include "comm_internal.h"

/* Bytes of one sender's staging region on a receiver. */
#define WS_SR_REGION_BYTES ((size_t)WS_SR_MAX_BLOCKS * WS_SR_DEPTH * WS_SR_SLOT_BYTES)

typedef struct ws_sr_state {
  /* Symmetric (every rank has the same layout; peers write into ours):
   *   staging[sender][block][slot][WS_SR_SLOT_BYTES]  data a sender pushes to us
   *   tail[sender][block]   steps a sender has published to us
   *   head[receiver][block] steps a receiver has drained of ours (our credits) */
  uint8_t *staging;
  uint64_t *tail;
  uint64_t *head;
  /* zero-copy handshake, symmetric, indexed by the other rank and the block:
   *   zc_ready[r][b]    receiver r is ready for our call (sequence number),
   *   zc_addr[r][b][2]  ... into this receive address, this many bytes (the sender checks),
   *   zc_done[r][b]     sender r finished writing into our buffer (sequence number) */
  uint64_t *zc_ready;
  uint64_t *zc_addr;
  uint64_t *zc_done;
  uint64_t *peer_zc_ready[WS_COMM_MAX_RANKS];
  uint64_t *peer_zc_addr[WS_COMM_MAX_RANKS];
  uint64_t *peer_zc_done[WS_COMM_MAX_RANKS];
  uint64_t *zc_seq;    /* local [2][rank][block]: calls sent to / received from each rank */
  uint8_t *peer_staging[WS_COMM_MAX_RANKS]; /* rank p's staging, as we address it */
  uint64_t *peer_tail[WS_COMM_MAX_RANKS];
  uint64_t *peer_head[WS_COMM_MAX_RANKS];
  /* Local, persistent across launches (monotonic step counters, graph-replayable). */
  uint64_t *send_step; /* [peer][block] */
  uint64_t *recv_step; /* [peer][block] */
  ws_plan sr_plan;     /* the sendrecv kernel's plan, checked on first use */
  int sr_planned;
  ws_plan zc_plan;     /* the zero-copy handshake kernel's */
  int zc_planned;
  ws_plan ag_plan;     /* the direct all-gather's (several pairs in one launch) */
  int ag_planned;
} ws_sr_state;

/* ws_allgather's direct path (sendrecv.cu): every pair of ranks at once, in one launch,
 * through the staging path, or (zero_copy: recvbuf symmetric on every rank) straight into
 * the peers' recvbufs. At most WS_SR_MAX_PAIRS + 1 ranks. */
#ifdef __cplusplus
extern "C"
#endif
ws_status ws_sr_allgather_direct(ws_comm *c, const void *sendbuf, size_t bytes, void *recvbuf, int zero_copy,
                                 cudaStream_t stream);

#endif
