/* run.c - `warpspec run -n N [--timeout S] [--] PROG ARGS...`: a single-node launcher
 * without MPI. Starts N copies of PROG, one per GPU, with WS_RANK, WS_NRANKS,
 * WS_LOCAL_RANK and a fresh rendezvous folder (WS_RENDEZVOUS_DIR) in their
 * environment, NVLink multicast off (NCCL_NVLS_ENABLE=0, NVSHMEM_DISABLE_NVLS=1).
 * If one rank fails, the others get WS_RUN_GRACE_S seconds, then SIGTERM, then SIGKILL;
 * --timeout ends all of them after S seconds; SIGINT, SIGTERM or SIGHUP to the launcher
 * ends them the same way. The folder (mode 0700, under $TMPDIR or /tmp) and a job key
 * unique to this launch (WS_RENDEZVOUS_KEY) go to the ranks; the folder is removed on
 * every way out: success, failure, timeout, signal. Exit status: 0 if all ranks
 * succeeded, 77 if all succeeded or skipped (CTest's "skipped"), 128 + the signal if
 * one stopped the launcher, 2 for a usage error, else the first failure's. */
#define _GNU_SOURCE
#include "cli.h"
#include "parse_num.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WS_RUN_GRACE_S 10
#define WS_RUN_MAX_TIMEOUT_S 1e6

/* The files the ranks left in the folder (never following links), then the folder. */
static void remove_dir(const char *dir) {
  const int fd = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd >= 0) {
    DIR *d = fdopendir(fd);
    if (d) {
      struct dirent *e;
      while ((e = readdir(d)) != NULL)
        if (strcmp(e->d_name, ".") && strcmp(e->d_name, "..")) unlinkat(fd, e->d_name, 0);
      closedir(d); /* closes fd */
    } else {
      close(fd);
    }
  }
  rmdir(dir);
}

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

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
  long long ranks = 0;
  double timeout = 0;
  int i = 0;
  for (; i < argc; i++) {
    ws_status s = WS_OK;
    if (!strcmp(argv[i], "-n") && i + 1 < argc) s = cli_parse_int("-n", argv[++i], 1, WS_RUN_MAX_RANKS, &ranks);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
      s = cli_parse_real("--timeout", argv[++i], 0, WS_RUN_MAX_TIMEOUT_S, &timeout);
    else if (!strcmp(argv[i], "--")) { i++; break; }
    else if (argv[i][0] == '-') { fprintf(stderr, "warpspec run: unknown option %s\n", argv[i]); return 2; }
    else break;
    if (s != WS_OK) { fprintf(stderr, "warpspec run: %s\n", ws_last_error()); return 2; }
  }
  if (ranks < 1 || i >= argc) {
    fprintf(stderr, "usage: warpspec run -n N [--timeout S] [--] PROG [ARGS...]   (1 <= N <= %d, 0 <= S <= %g, 0: no limit)\n",
            WS_RUN_MAX_RANKS, WS_RUN_MAX_TIMEOUT_S);
    return 2;
  }
  const int n = (int)ranks;
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  char dir[1024], key[96];
  if (snprintf(dir, sizeof dir, "%s/warpspec-run-XXXXXX", base) >= (int)sizeof dir) {
    fprintf(stderr, "warpspec run: TMPDIR too long\n");
    return 1;
  }
  if (!mkdtemp(dir)) { fprintf(stderr, "warpspec run: mkdtemp %s: %s\n", dir, strerror(errno)); return 1; }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  snprintf(key, sizeof key, "run-%ld-%lld%09ld", (long)getpid(), (long long)now.tv_sec, now.tv_nsec);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
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
      signal(SIGINT, SIG_DFL);
      signal(SIGTERM, SIG_DFL);
      signal(SIGHUP, SIG_DFL);
      setenv("WS_RENDEZVOUS_DIR", dir, 1);
      setenv("WS_RENDEZVOUS_KEY", key, 1);
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
  int stopped_by = 0;
  double kill_at = 0;
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
    if (stop_signal && !stopped_by) {
      stopped_by = stop_signal;
      fprintf(stderr, "warpspec run: signal %d, stopping %d rank(s)\n", (int)stopped_by, left);
      signal_all(pids, alive, n, SIGTERM);
      kill_at = t + 2;
    } else if (kill_at > 0 && t > kill_at) {
      signal_all(pids, alive, n, SIGKILL);
      kill_at = 0;
    } else if (timeout > 0 && t - start > timeout) {
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
  if (stopped_by) return 128 + stopped_by;
  if (timed_out) return 124;
  if (first_bad >= 0) return status[first_bad] ? status[first_bad] : 1;
  for (int r = 0; r < n; r++)
    if (status[r] == 77) return 77;
  return 0;
}
