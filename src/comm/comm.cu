/* comm.cu - the communicator on NVSHMEM's host library (no device API: peer pointers
 * are resolved here and handed to plain, non-rdc kernels). Host code only. */

#include <nvshmem.h>
#include <nvshmemx.h>

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "comm_internal.h"

static int initialized; /* NVSHMEM allows one initialisation per process */

extern "C" ws_status ws_comm_available(void) { return WS_OK; }

extern "C" ws_status ws_comm_get_unique_id(ws_comm_id *id) {
  WS_REQUIRE(id != NULL, "ws_comm_get_unique_id: id is NULL");
  static_assert(sizeof(nvshmemx_uniqueid_t) == sizeof(ws_comm_id), "unique id size");
  nvshmemx_uniqueid_t uid;
  memset(&uid, 0, sizeof uid);
  if (nvshmemx_get_uniqueid(&uid) != 0) return ws_fail(WS_ERR_CUDA, "ws_comm_get_unique_id: nvshmemx_get_uniqueid failed");
  memcpy(id->bytes, &uid, sizeof uid);
  return WS_OK;
}

/* NVLink multicast stays off on shared hosts; everything else is the user's choice. */
static void default_env(int nranks) {
  setenv("NVSHMEM_DISABLE_NVLS", "1", 0);
  /* sendrecv's staging for every peer plus room for the user's symmetric buffers. */
  char size[32];
  snprintf(size, sizeof size, "%llu", (unsigned long long)(ws_sr_heap_bytes(nranks) + WS_COMM_HEAP_SPARE));
  setenv("NVSHMEM_SYMMETRIC_SIZE", size, 0);
}

/* The hooks' heap (comm_internal.h). The names are C: sendrecv_state.c calls them. */
extern "C" ws_status ws_comm_sym_alloc(ws_comm *c, size_t bytes, void **p, const char *what) {
  (void)c;
  *p = nvshmem_malloc(bytes);
  if (*p == NULL)
    return ws_fail(WS_ERR_NOMEM, "ws_comm_init: nvshmem_malloc of %zu bytes for %s failed (symmetric heap too small? "
                   "set NVSHMEM_SYMMETRIC_SIZE)", bytes, what);
  WS_CUDA_TRY(cudaMemset(*p, 0, bytes));
  return WS_OK;
}

extern "C" void ws_comm_sym_free(ws_comm *c, void *p) {
  (void)c;
  nvshmem_free(p);
}

extern "C" void *ws_comm_peer_addr(const ws_comm *c, const void *p, int peer) {
  (void)c;
  return nvshmem_ptr(p, peer);
}

/* Operations' state first (collective frees, in the order they were made), then ours. */
static void release(ws_comm *c) {
  ws_sr_fini(c, 1);
  free(c);
}

extern "C" ws_status ws_comm_init(ws_comm **out, int rank, int nranks, const ws_comm_id *id) {
  WS_REQUIRE(out != NULL && id != NULL, "ws_comm_init: comm or id is NULL");
  *out = NULL;
  WS_REQUIRE(nranks >= 1 && nranks <= WS_COMM_MAX_RANKS, "ws_comm_init: nranks %d, must be 1..%d", nranks, WS_COMM_MAX_RANKS);
  WS_REQUIRE(rank >= 0 && rank < nranks, "ws_comm_init: rank %d out of range for %d ranks", rank, nranks);
  WS_REQUIRE(!initialized, "ws_comm_init: this process already has a communicator (NVSHMEM initialises once)");
  int dev = 0;
  WS_CUDA_TRY(cudaGetDevice(&dev));
  WS_CUDA_TRY(cudaFree(0)); /* a context on the chosen device before NVSHMEM binds to it */
  default_env(nranks);
  nvshmemx_init_attr_t attr = NVSHMEMX_INIT_ATTR_INITIALIZER;
  nvshmemx_uniqueid_t uid;
  memcpy(&uid, id->bytes, sizeof uid);
  if (nvshmemx_set_attr_uniqueid_args(rank, nranks, &uid, &attr) != 0)
    return ws_fail(WS_ERR_INVALID, "ws_comm_init: nvshmemx_set_attr_uniqueid_args(rank %d, nranks %d) failed", rank, nranks);
  if (nvshmemx_hostlib_init_attr(NVSHMEMX_INIT_WITH_UNIQUEID, &attr) != 0)
    return ws_fail(WS_ERR_CUDA, "ws_comm_init: NVSHMEM initialisation failed on rank %d of %d (device %d); "
                   "NVSHMEM_DEBUG=INFO says why", rank, nranks, dev);
  initialized = 1;
  if (nvshmem_my_pe() != rank || nvshmem_n_pes() != nranks) {
    ws_status s = ws_fail(WS_ERR_INVALID, "ws_comm_init: NVSHMEM made this rank %d of %d, asked for %d of %d",
                          nvshmem_my_pe(), nvshmem_n_pes(), rank, nranks);
    nvshmemx_hostlib_finalize();
    initialized = 0;
    return s;
  }
  ws_comm *c = (ws_comm *)calloc(1, sizeof *c);
  if (!c) return ws_fail(WS_ERR_NOMEM, "ws_comm_init: out of host memory");
  c->rank = rank;
  c->nranks = nranks;
  c->device = dev;
  ws_status s = ws_sr_init(c); /* sendrecv's symmetric blocks: the first ones of the heap */
  if (s != WS_OK) {
    release(c);
    return s;
  }
  WS_CUDA_TRY(cudaDeviceSynchronize());
  nvshmem_barrier_all(); /* everyone's buffers are zeroed before anyone writes into them */
  *out = c;
  return WS_OK;
}

extern "C" ws_status ws_comm_alloc(ws_comm *c, size_t bytes, void **ptr) {
  WS_REQUIRE(c != NULL && ptr != NULL, "ws_comm_alloc: comm or ptr is NULL");
  WS_REQUIRE(bytes > 0, "ws_comm_alloc: 0 bytes");
  void *p = nvshmem_malloc(bytes);
  if (!p) return ws_fail(WS_ERR_NOMEM, "ws_comm_alloc: nvshmem_malloc(%zu) failed (NVSHMEM_SYMMETRIC_SIZE?)", bytes);
  WS_CUDA_TRY(cudaMemset(p, 0, bytes));
  WS_CUDA_TRY(cudaDeviceSynchronize());
  nvshmem_barrier_all();
  *ptr = p;
  return WS_OK;
}

extern "C" ws_status ws_comm_free(ws_comm *c, void *ptr) {
  WS_REQUIRE(c != NULL && ptr != NULL, "ws_comm_free: comm or ptr is NULL");
  WS_CUDA_TRY(cudaDeviceSynchronize());
  nvshmem_free(ptr);
  return WS_OK;
}

extern "C" ws_status ws_comm_peer_ptr(const ws_comm *c, const void *ptr, int peer, void **out) {
  WS_REQUIRE(c != NULL && ptr != NULL && out != NULL, "ws_comm_peer_ptr: comm, ptr or out is NULL");
  WS_REQUIRE(peer >= 0 && peer < c->nranks, "ws_comm_peer_ptr: peer %d out of range for %d ranks", peer, c->nranks);
  *out = nvshmem_ptr(ptr, peer);
  if (*out == NULL)
    return ws_fail(WS_ERR_UNSUPPORTED, "ws_comm_peer_ptr: rank %d cannot load/store rank %d's memory (no NVLink/P2P path, "
                   "or %p is not symmetric)", c->rank, peer, ptr);
  return WS_OK;
}

extern "C" int ws_comm_is_symmetric(const ws_comm *c, const void *ptr, size_t bytes) {
  if (!c || !ptr || bytes == 0) return 0;
  return nvshmem_ptr(ptr, c->rank) != NULL && nvshmem_ptr((const uint8_t *)ptr + bytes - 1, c->rank) != NULL;
}

extern "C" ws_status ws_comm_barrier(ws_comm *c, cudaStream_t stream) {
  WS_REQUIRE(c != NULL, "ws_comm_barrier: comm is NULL");
  nvshmemx_barrier_all_on_stream(stream);
  WS_CUDA_TRY(cudaGetLastError());
  return WS_OK;
}

extern "C" ws_status ws_comm_destroy(ws_comm *c) {
  WS_REQUIRE(c != NULL, "ws_comm_destroy: comm is NULL");
  cudaError_t e = cudaDeviceSynchronize();
  if (e != cudaSuccess) {
    /* A dead context (a trapped kernel) cannot take part in collectives: do not wait for
     * peers, just report. */
    ws_sr_fini(c, 0);
    free(c);
    return ws_check_cuda(e, "ws_comm_destroy: cudaDeviceSynchronize");
  }
  nvshmem_barrier_all();
  release(c);
  nvshmemx_hostlib_finalize();
  initialized = 0;
  return WS_OK;
}
