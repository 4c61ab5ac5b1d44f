/* comm_test.h - the start of a multi-rank GPU test (one process per GPU under `warpspec
 * run -n N` or mpirun): skip without NVSHMEM or with fewer GPUs than ranks (exit 77),
 * the communicator from the launcher's environment, and one random seed for all ranks
 * (rank 0's, handed over through the rendezvous folder as `seed_name`), so that every
 * rank can draw every rank's data for its own reference. */
#ifndef WARPSPEC_COMM_TEST_H
#define WARPSPEC_COMM_TEST_H

#include "gpu_test.h"
#include "warpspec/comm.h"

#include <unistd.h>

static inline ws_comm *comm_test_start(const char *seed_name, int *rank, int *nranks, uint64_t *seed) {
  require_hopper();
  int ndev = 0;
  if (cudaGetDeviceCount(&ndev) != cudaSuccess) ndev = 0;
  const char *n_env = getenv("WS_NRANKS");
  if (!n_env) n_env = getenv("OMPI_COMM_WORLD_SIZE");
  const int want = n_env ? atoi(n_env) : 1;
  if (ws_comm_available() != WS_OK || (ndev < want && !getenv(WS_SHARE_GPU_ENV))) {
    printf("needs NVSHMEM and %d GPUs (have %d): skipped\n", want, ndev);
    exit(TEST_SKIP);
  }
  ws_comm *comm = NULL;
  WS_OK_OR_DIE(ws_comm_init_from_env(&comm));
  WS_OK_OR_DIE(ws_comm_rank(comm, rank));
  WS_OK_OR_DIE(ws_comm_size(comm, nranks));
  if (*rank == 0) {
    *seed = (uint64_t)time(NULL) * 0x9E3779B97F4A7C15ull ^ (uint64_t)getpid();
    WS_OK_OR_DIE(ws_rendezvous_put(NULL, seed_name, seed, sizeof *seed));
  } else {
    WS_OK_OR_DIE(ws_rendezvous_get(NULL, seed_name, seed, sizeof *seed));
  }
  WS_OK_OR_DIE(ws_comm_barrier(comm, 0));
  WS_OK_OR_DIE(ws_sync(0));
  if (*rank == 0) WS_OK_OR_DIE(ws_rendezvous_cleanup(NULL, seed_name));
  return comm;
}

#endif
