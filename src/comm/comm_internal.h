/* comm_internal.h - the communicator's state, shared by its sources.
 *
 * The communicator is the runtime layer of src/comm: ranks, the device, the symmetric
 * heap, peer addresses, barriers. It knows no operation's internals. An operation that
 * keeps state per communicator (sendrecv: its staging, signals and step counters) owns
 * it in a struct of its own, made and freed by the hooks below: the communicator calls
 * them, because symmetric allocations are collective and must happen on every rank in
 * the same order, which only ws_comm_init and ws_comm_destroy guarantee (an operation
 * may be called by a subset of the ranks, or inside a CUDA graph capture). */
#ifndef WARPSPEC_COMM_INTERNAL_H
#define WARPSPEC_COMM_INTERNAL_H

#include <stddef.h>

#include "../core/internal.h"
#include "warpspec/comm.h"
#include "warpspec/config.h" /* WS_COMM_MAX_RANKS */

struct ws_sr_state; /* sendrecv's, defined in sendrecv_internal.h */

struct ws_comm {
  int rank, nranks, device;
  struct ws_sr_state *sr; /* made by ws_sr_init in ws_comm_init, freed by ws_sr_fini */
};

#ifdef __cplusplus
extern "C" {
#endif
/* 1 if [ptr, ptr + bytes) lies in the symmetric heap. */
int ws_comm_is_symmetric(const ws_comm *comm, const void *ptr, size_t bytes);

/* The heap as the communicator's hooks see it (comm.cu; comm_none.c without NVSHMEM).
 * ws_comm_sym_alloc is collective (every rank, same order, same size) and zeroes the
 * block on the device without a barrier: peers may write into it only after the
 * caller's next barrier (ws_comm_init ends with one). `what` names the block in the
 * message of a failure. ws_comm_sym_free is collective too. ws_comm_peer_addr is
 * rank `peer`'s copy of a symmetric address as this rank stores to it, NULL when that
 * rank's memory is out of reach (no NVLink/P2P path): not an error until used. */
ws_status ws_comm_sym_alloc(ws_comm *comm, size_t bytes, void **ptr, const char *what);
void ws_comm_sym_free(ws_comm *comm, void *ptr);
void *ws_comm_peer_addr(const ws_comm *comm, const void *ptr, int peer);

/* sendrecv's hooks (sendrecv_state.c). ws_sr_init: collective, inside ws_comm_init
 * after the heap is up; sets comm->sr as soon as it exists, so that a failure half way
 * leaves what ws_sr_fini frees. ws_sr_fini(comm, collective): collective 1 frees the
 * symmetric blocks in the order they were made (a destroy every rank reaches);
 * collective 0 frees the host struct alone (a dead context: no collective, no CUDA
 * call). ws_sr_heap_bytes: the symmetric bytes sendrecv needs for `nranks` ranks, less
 * its signals, which the heap's spare holds (the default NVSHMEM_SYMMETRIC_SIZE). */
ws_status ws_sr_init(ws_comm *comm);
void ws_sr_fini(ws_comm *comm, int collective);
size_t ws_sr_heap_bytes(int nranks);
#ifdef __cplusplus
}
#endif

#endif
