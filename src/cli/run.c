/* run.c - `warpspec run -n N [--timeout S] [--] PROG ARGS...`: a single-node launcher
 * without MPI. Starts N copies of PROG, one per GPU, with WS_RANK, WS_NRANKS,
 * WS_LOCAL_RANK and a fresh rendezvous folder (WS_RENDEZVOUS_DIR) in their
 * environment, NVLink multicast off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1).
 * If one rank fails, the others get WS_RUN_GRACE_S seconds, then SIGTERM, then SIGKILL;
 * --timeout ends all of them after S seconds. Exit status: 0 if all ranks succeeded,
 * 77 if all succeeded or skipped (CTest's "skipped"), else the first failure's. */
#define _GNU_SOURCE
#include "cli.h"

#include <dirent.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WS_RUN_MAX_RANKS 64
#define WS_RUN_GRACE_S 10

static void remove_dir(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return;
  struct dirent *e;
  char path[1024];
  while ((e = readdir(d)) != NULL) {
    if (!strcmp(e->d_name, ".") || !strcmp(e->d_name, "..")) continue;
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    unlink(path);
  }
  closedir(d);
  rmdir(dir);
}

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

static void signal_all(pid_t *pids, int *alive, int n, int sig) {
  for (int r = 0; r < n; r++)
    if (alive[r]) kill(pids[r], sig);
}

int cli_run(int argc, char **argv) {
  int n = 0, i = 0;
  double timeout = 0;
  for (; i < argc; i++) {
    if (!strcmp(argv[i], "-n") && i + 1 < argc) n = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc) timeout = atof(argv[++i]);
    else if (!strcmp(argv[i], "--")) { i++; break; }
    else if (argv[i][0] == '-') { fprintf(stderr, "warpspec run: unknown option %s\n", argv[i]); return 2; }
    else break;
  }
  if (n < 1 || n > WS_RUN_MAX_RANKS || i >= argc) {
    fprintf(stderr, "usage: warpspec run -n N [--timeout S] [--] PROG [ARGS...]   (1 <= N <= %d)\n", WS_RUN_MAX_RANKS);
    return 2;
  }
  char dir[] = "/tmp/warpspec-run-XXXXXX";
  if (!mkdtemp(dir)) { perror("warpspec run: mkdtemp"); return 1; }
  pid_t pids[WS_RUN_MAX_RANKS];
  int alive[WS_RUN_MAX_RANKS] = {0}, status[WS_RUN_MAX_RANKS] = {0};
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < n; r++) {
    pid_t p = fork();
    if (p < 0) { perror("warpspec run: fork"); signal_all(pids, alive, r, SIGKILL); remove_dir(dir); return 1; }
    if (p == 0) {
      char v[32];
      snprintf(v, sizeof v, "%d", r);
      setenv("WS_RANK", v, 1);
      setenv("WS_LOCAL_RANK", v, 1);
      snprintf(v, sizeof v, "%d", n);
      setenv("WS_NRANKS", v, 1);
      setenv("WS_RENDEZVOUS_DIR", dir, 1);
      setenv("NCCL_NVLS_ENABLE", "0", 1);
      setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
      setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
      execvp(argv[i], argv + i);
      fprintf(stderr, "warpspec run: cannot start %s: %s\n", argv[i], strerror(errno));
      _exit(127);
    }
    pids[r] = p;
    alive[r] = 1;
  }
  const double start = now_s();
  double fail_at = 0;
  int left = n, first_bad = -1, timed_out = 0;
  while (left > 0) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < n; r++)
        if (pids[r] == p) {
          alive[r] = 0;
          left--;
          status[r] = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
          if (status[r] != 0 && status[r] != 77) {
            if (first_bad < 0) first_bad = r;
            if (fail_at == 0) fail_at = now_s();
            fprintf(stderr, "warpspec run: rank %d exited with status %d\n", r, status[r]);
          }
        }
      continue;
    }
    const double t = now_s();
    if (timeout > 0 && t - start > timeout) {
      fprintf(stderr, "warpspec run: timeout after %.0f s, stopping %d rank(s)\n", timeout, left);
      signal_all(pids, alive, n, SIGTERM);
      sleep(2);
      signal_all(pids, alive, n, SIGKILL);
      timed_out = 1;
      timeout = 0;
    } else if (fail_at > 0 && t - fail_at > WS_RUN_GRACE_S) {
      fprintf(stderr, "warpspec run: stopping %d rank(s) left after a failure\n", left);
      signal_all(pids, alive, n, SIGTERM);
      sleep(2);
      signal_all(pids, alive, n, SIGKILL);
      fail_at = -1e30;
    }
    usleep(10000);
  }
  remove_dir(dir);
  if (timed_out) return 124;
  if (first_bad >= 0) return status[first_bad] ? status[first_bad] : 1;
  for (int r = 0; r < n; r++)
    if (status[r] == 77) return 77;
  return 0;
}
