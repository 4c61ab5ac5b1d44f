/* comm_common.c - communicator functions that do not touch NVSHMEM. */
#include "comm_internal.h"

#include "../core/knobs.h"

#include <stdio.h>
#include <stdlib.h>

ws_status ws_comm_rank(const ws_comm *c, int *rank) {
  WS_REQUIRE(c != NULL && rank != NULL, "ws_comm_rank: comm or rank is NULL");
  *rank = c->rank;
  return WS_OK;
}

ws_status ws_comm_size(const ws_comm *c, int *nranks) {
  WS_REQUIRE(c != NULL && nranks != NULL, "ws_comm_size: comm or nranks is NULL");
  *nranks = c->nranks;
  return WS_OK;
}

ws_status ws_comm_device(const ws_comm *c, int *device) {
  WS_REQUIRE(c != NULL && device != NULL, "ws_comm_device: comm or device is NULL");
  *device = c->device;
  return WS_OK;
}

static int env_int(const char *a, const char *b, int fallback) {
  const char *v = getenv(a);
  if (!v && b) v = getenv(b);
  if (!v || !*v) return fallback;
  char *end = NULL;
  long x = strtol(v, &end, 10);
  return (end && *end == '\0' && x >= 0 && x < 1 << 20) ? (int)x : -2;
}

ws_status ws_comm_init_from_env(ws_comm **comm) {
  WS_REQUIRE(comm != NULL, "ws_comm_init_from_env: comm is NULL");
  /* the launcher's variables (config.h): they name this process, read here each time */
  const int rank = env_int(WS_RANK_ENV, "OMPI_COMM_WORLD_RANK", -1);
  const int nranks = env_int(WS_NRANKS_ENV, "OMPI_COMM_WORLD_SIZE", -1);
  const int local = env_int(WS_LOCAL_RANK_ENV, "OMPI_COMM_WORLD_LOCAL_RANK", rank);
  WS_REQUIRE(rank >= 0 && nranks >= 1 && local >= 0,
             "ws_comm_init_from_env: no valid rank/size in the environment (WS_RANK/WS_NRANKS from `warpspec run`, or "
             "OMPI_COMM_WORLD_RANK/SIZE from mpirun)");
  WS_REQUIRE(rank < nranks, "ws_comm_init_from_env: rank %d >= size %d", rank, nranks);
  int ndev = 0;
  WS_CUDA_TRY(cudaGetDeviceCount(&ndev));
  /* WARPSPEC_SHARE_GPU=1 (tests only): ranks share the GPUs round-robin, so that the
   * code of several ranks runs on a machine of one GPU. The ranks' kernels wait on each
   * other, so they must run side by side: under MPS, each client capped to its share of
   * the SMs (CUDA_MPS_ACTIVE_THREAD_PERCENTAGE). Timings there say nothing about NVLink. */
  const int share = ws_knobs_get()->share_gpu;
  WS_REQUIRE(ndev > 0 && (share || local < ndev),
             "ws_comm_init_from_env: local rank %d but only %d GPUs: one rank per GPU", local, ndev);
  WS_CUDA_TRY(cudaSetDevice(local % ndev));
  ws_comm_id id;
  ws_status s;
  if (rank == 0) {
    if ((s = ws_comm_get_unique_id(&id)) != WS_OK) return s;
    if ((s = ws_rendezvous_put(NULL, "nvshmem.id", &id, sizeof id)) != WS_OK) return s;
  } else if ((s = ws_rendezvous_get(NULL, "nvshmem.id", &id, sizeof id)) != WS_OK) {
    return s;
  }
  s = ws_comm_init(comm, rank, nranks, &id);
  /* ws_comm_init ends in a barrier of all ranks, so all have read the id by now; on a
   * failure nobody needs it any more. Either way rank 0 leaves nothing behind. */
  if (rank == 0) {
    /* A file the cleanup could not remove is harmless (the next job ignores it as
     * stale): the status and message stay the init's. */
    char msg[1024];
    snprintf(msg, sizeof msg, "%s", ws_last_error());
    (void)ws_rendezvous_cleanup(NULL, "nvshmem.id");
    if (s != WS_OK) ws_fail(s, "%s", msg);
  }
  return s;
}
