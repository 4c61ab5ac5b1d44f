/* warpspec/comm.h - a communicator on NVSHMEM, and point-to-point transfers.
 *
 * One process per GPU. Rank 0 makes a unique id, the ranks pass its bytes to each
 * other by any means (the launcher `warpspec run` and ws_comm_init_from_env do it
 * through a rendezvous folder), and all call ws_comm_init. The communicator owns a
 * symmetric heap (NVSHMEM) for staging and signals; peer pointers are resolved on the
 * host, so the transfer kernels are plain loads and stores over NVLink and keep
 * setmaxnreg and full register budgets (no relocatable device code).
 *
 * Transfers are stream-ordered. Their errors (a peer that never shows up, mismatched
 * sizes) surface at ws_sync() as WS_ERR_TIMEOUT / WS_ERR_MISMATCH naming peer and
 * block. Concurrent transfers between the same two ranks on different streams are not
 * supported: keep one stream per communicator. */
#ifndef WARPSPEC_COMM_H
#define WARPSPEC_COMM_H

#include <stddef.h>

#include <cuda_runtime_api.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct ws_comm ws_comm;

/* The bootstrap id (NVSHMEM's unique id), 128 opaque bytes. */
typedef struct {
  unsigned char bytes[128];
} ws_comm_id;

enum { WS_NO_PEER = -1 };

/* WS_OK if the library was built with NVSHMEM, else WS_ERR_UNSUPPORTED. */
ws_status ws_comm_available(void);

/* On rank 0, before ws_comm_init. */
ws_status ws_comm_get_unique_id(ws_comm_id *id);

/* Collective. Uses the current CUDA device; one rank per GPU. */
ws_status ws_comm_init(ws_comm **comm, int rank, int nranks, const ws_comm_id *id);

/* Collective. Rank, size and local rank from `warpspec run` (WS_RANK, WS_NRANKS,
 * WS_LOCAL_RANK) or Open MPI's mpirun (OMPI_COMM_WORLD_*); selects device = local rank;
 * exchanges the id through the rendezvous folder (ws_rendezvous_dir) and, on rank 0,
 * removes it again once all ranks are in. Single node. */
ws_status ws_comm_init_from_env(ws_comm **comm);

ws_status ws_comm_rank(const ws_comm *comm, int *rank);
ws_status ws_comm_size(const ws_comm *comm, int *nranks);
ws_status ws_comm_device(const ws_comm *comm, int *device);

/* Collective: the same size on every rank. Memory is zeroed. */
ws_status ws_comm_alloc(ws_comm *comm, size_t bytes, void **ptr);
ws_status ws_comm_free(ws_comm *comm, void *ptr);

/* Address of `peer`'s copy of the symmetric object `ptr`, loadable and storable from
 * this GPU (NVLink / PCIe peer access). WS_ERR_UNSUPPORTED if not reachable. */
ws_status ws_comm_peer_ptr(const ws_comm *comm, const void *ptr, int peer, void **peer_ptr);

/* All ranks reach this point on `stream` before any continues (device-side). */
ws_status ws_comm_barrier(ws_comm *comm, cudaStream_t stream);

/* Collective: waits for the device, frees the communicator's memory, finalizes. */
ws_status ws_comm_destroy(ws_comm *comm);

/* Host-side rendezvous between the processes of one node: rank 0 puts, others get
 * (bounded by WARPSPEC_RENDEZVOUS_TIMEOUT_MS, default 60 s). `dir` may be NULL for the
 * default folder. The folder must be a real directory of this user, not writable by group
 * or others (created 0700 when absent; anything else is WS_ERR_INVALID naming it). A file
 * carries the job key and its creation time: get ignores files of another job or from
 * before this job's launcher started, and waits for the fresh one; a truncated or
 * foreign file is WS_ERR_INVALID. Payloads up to 1 MiB. */
ws_status ws_rendezvous_put(const char *dir, const char *name, const void *data, size_t bytes);
ws_status ws_rendezvous_get(const char *dir, const char *name, void *data, size_t bytes);
/* Rank 0, once every rank has read `name`: remove the file, and the folder if this
 * process created it and it is empty. */
ws_status ws_rendezvous_cleanup(const char *dir, const char *name);
/* The folder ws_comm_init_from_env uses: WS_RENDEZVOUS_DIR (`warpspec run` sets it), or
 * ${TMPDIR:-/tmp}/warpspec-rdv-<uid>-<job id> under mpirun; NULL if neither. */
const char *ws_rendezvous_dir(void);
/* This job's key, written into and checked in every file: WS_RENDEZVOUS_KEY (`warpspec
 * run` sets a fresh one per launch), else mpirun's job id, else "" (no key: the bare
 * file name, for ranks started by hand with WS_RENDEZVOUS_DIR). The key is compared
 * whole; put, get and cleanup refuse (WS_ERR_INVALID) a key over 255 bytes and a
 * WS_RENDEZVOUS_KEY that is set but empty. */
const char *ws_rendezvous_key(void);

/* ---- point to point ------------------------------------------------------------- */
typedef struct {
  int ctas;       /* CTAs per direction, 1..WS_SR_MAX_BLOCKS; 0: tuned default by size */
  int zero_copy;  /* 1: every rank's recvbuf is the same symmetric object (ws_comm_alloc):
                   * from WS_SR_ZC_MIN_BYTES on the sender writes straight into the
                   * receiver's buffer with 16-byte stores, from WS_SR_CE_MIN_BYTES (or
                   * WARPSPEC_SR_CE_MIN_BYTES) on by the copy engine; smaller messages
                   * take the staging path, which is faster there. All ranks of the call
                   * must agree. */
  int copy_engine; /* zero-copy only: 0 by size, 1 copy engine at any size, -1 never */
} ws_sendrecv_opts;

/* Send `sendbytes` to send_peer and receive `recvbytes` from recv_peer in one kernel:
 * each CTA runs a sender role and a receiver role. Either peer may be WS_NO_PEER (then
 * its buffer and size are ignored). Buffers: device memory, 16-byte aligned, any size.
 * The receiving side must expect exactly what the sending side sends. opts may be NULL. */
ws_status ws_sendrecv(ws_comm *comm, const void *sendbuf, size_t sendbytes, int send_peer, void *recvbuf,
                      size_t recvbytes, int recv_peer, const ws_sendrecv_opts *opts, cudaStream_t stream);

ws_status ws_send(ws_comm *comm, const void *buf, size_t bytes, int peer, cudaStream_t stream);
ws_status ws_recv(ws_comm *comm, void *buf, size_t bytes, int peer, cudaStream_t stream);

/* All-gather: recvbuf[r * bytes ...] = rank r's sendbuf, for every rank r (sendbuf may be
 * recvbuf's own block: in place). One launch sends our block to every rank at once (up to
 * WARPSPEC_AG_DIRECT_MAX_BYTES per rank, default every size); above, a ring of sendrecvs.
 * With recvbuf in the symmetric heap (ws_comm_alloc, on every rank: all or none) blocks of
 * WS_AG_ZC_MIN_BYTES (WARPSPEC_AG_ZC_MIN_BYTES, 16 MiB) up to WS_AG_ZC_MAX_BYTES (64 MiB)
 * are zero-copy: stored once, straight into their place in every peer's recvbuf, instead
 * of through sendrecv's staging slots. */
ws_status ws_allgather(ws_comm *comm, const void *sendbuf, size_t bytes, void *recvbuf, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
