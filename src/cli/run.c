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
 * one stopped the launcher, 2 for a usage error, else the first failure's.
 *
 * Each rank leads its own process group, and the launcher signals whole groups: what a
 * rank started (a shell's children, a Python worker) is stopped with it, and whatever a
 * rank leaves running in its group when it exits is stopped when the job ends. A
 * process that leaves its group (setsid, a daemon) is out of reach. The ranks are not
 * the terminal's foreground group, so a terminal on stdin is replaced by /dev/null (a
 * read would stop them with SIGTTIN).
 *
 * SIGKILL to the launcher: it cannot clean up. Each rank gets SIGKILL with it (its
 * parent-death signal), but a rank's own children live on, and the folder stays:
 * it is $TMPDIR/warpspec-run-<launcher pid>-XXXXXX (ls -d /tmp/warpspec-run-<pid>-*),
 * and the job key in it starts with run-<launcher pid>. */
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
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define WS_RUN_GRACE_S 10      /* after a rank failed, the others' time to finish */
#define WS_RUN_KILL_GRACE_S 2  /* from SIGTERM to SIGKILL                          */
#define WS_RUN_MAX_TIMEOUT_S 1e6

static int usage(int rc) {
  fprintf(rc ? stderr : stdout,
          "usage: warpspec run -n N [--timeout S] [--] PROG [ARGS...]\n"
          "  N ranks (1..%d) of PROG, one per GPU; S seconds at most (0..%g, 0: no limit).\n"
          "  Each rank runs in its own process group, ended with it. If the launcher is\n"
          "  killed (SIGKILL), the ranks die with it but their rendezvous folder stays:\n"
          "  ${TMPDIR:-/tmp}/warpspec-run-<launcher pid>-*\n",
          WS_RUN_MAX_RANKS, WS_RUN_MAX_TIMEOUT_S);
  return rc;
}

/* The files the ranks left in the folder (never following links), then the folder;
 * -1 with errno if it is still there. */
static int remove_dir(const char *dir) {
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
  return rmdir(dir) == 0 || errno == ENOENT ? 0 : -1;
}

static volatile sig_atomic_t stop_signal;
static void on_signal(int sig) { stop_signal = sig; }

static double now_s(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* Every rank's process group, also of ranks already gone: their children may not be. */
static void signal_groups(const pid_t *pids, int n, int sig) {
  for (int r = 0; r < n; r++) kill(-pids[r], sig);
}

static int groups_empty(const pid_t *pids, int n) {
  for (int r = 0; r < n; r++)
    if (kill(-pids[r], 0) == 0 || errno != ESRCH) return 0;
  return 1;
}

/* In the child, between fork and exec. */
static void become_rank(int r, int n, const char *dir, const char *key, pid_t launcher, char **argv) {
  /* Also set by the launcher: whichever runs first, the group exists before either
   * the launcher signals it or PROG starts. */
  setpgid(0, 0);
  /* The parent-death signal covers a launcher killed outright; if it died before this
   * line, the rank already has a new parent and would never get the signal. */
  if (prctl(PR_SET_PDEATHSIG, SIGKILL) != 0 || getppid() != launcher) _exit(127);
  if (isatty(STDIN_FILENO)) {
    const int null = open("/dev/null", O_RDONLY);
    if (null >= 0) { dup2(null, STDIN_FILENO); close(null); }
  }
  char v[32];
  snprintf(v, sizeof v, "%d", r);
  setenv(WS_RANK_ENV, v, 1);
  setenv(WS_LOCAL_RANK_ENV, v, 1);
  snprintf(v, sizeof v, "%d", n);
  setenv(WS_NRANKS_ENV, v, 1);
  signal(SIGINT, SIG_DFL);
  signal(SIGTERM, SIG_DFL);
  signal(SIGHUP, SIG_DFL);
  setenv(WS_RENDEZVOUS_DIR_ENV, dir, 1);
  setenv(WS_RENDEZVOUS_KEY_ENV, key, 1);
  setenv("NCCL_NVLS_ENABLE", "0", 1);
  setenv("NVSHMEM_DISABLE_NVLS", "1", 1);
  setenv("TORCH_SYMM_MEM_DISABLE_MULTICAST", "1", 1);
  execvp(argv[0], argv);
  fprintf(stderr, "warpspec run: cannot start %s: %s\n", argv[0], strerror(errno));
  _exit(127);
}

int cli_run(int argc, char **argv) {
  long long n = 0;
  double timeout = 0;
  int i = 0;
  for (; i < argc; i++) {
    ws_status s = WS_OK;
    if (!strcmp(argv[i], "-h") || !strcmp(argv[i], "--help")) return usage(0);
    else if (!strcmp(argv[i], "-n") && i + 1 < argc) s = cli_parse_int("-n", argv[++i], 1, WS_RUN_MAX_RANKS, &n);
    else if (!strcmp(argv[i], "--timeout") && i + 1 < argc)
      s = cli_parse_real("--timeout", argv[++i], 0, WS_RUN_MAX_TIMEOUT_S, &timeout);
    else if (!strcmp(argv[i], "--")) { i++; break; }
    else if (argv[i][0] == '-') { fprintf(stderr, "warpspec run: unknown option %s\n", argv[i]); return usage(2); }
    else break;
    if (s != WS_OK) { fprintf(stderr, "warpspec run: %s\n", ws_last_error()); return 2; }
  }
  if (n < 1 || i >= argc) return usage(2);
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  const pid_t launcher = getpid();
  /* What a rank leaves behind when it exits becomes our child, not init's: it is reaped
   * here when stopped, so an empty group reads as empty, not as a zombie waiting for an
   * init that may never reap it. */
  prctl(PR_SET_CHILD_SUBREAPER, 1);
  char dir[1024], key[96];
  if (snprintf(dir, sizeof dir, "%s/warpspec-run-%ld-XXXXXX", base, (long)launcher) >= (int)sizeof dir) {
    fprintf(stderr, "warpspec run: TMPDIR too long\n");
    return 1;
  }
  if (!mkdtemp(dir)) { fprintf(stderr, "warpspec run: mkdtemp %s: %s\n", dir, strerror(errno)); return 1; }
  struct timespec now;
  clock_gettime(CLOCK_REALTIME, &now);
  snprintf(key, sizeof key, "run-%ld-%lld%09ld", (long)launcher, (long long)now.tv_sec, now.tv_nsec);
  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sa.sa_handler = on_signal;
  sigemptyset(&sa.sa_mask);
  sigaction(SIGINT, &sa, NULL);
  sigaction(SIGTERM, &sa, NULL);
  sigaction(SIGHUP, &sa, NULL);
  pid_t pids[WS_RUN_MAX_RANKS];
  int status[WS_RUN_MAX_RANKS] = {0};
  const int nr = (int)n;
  fflush(stdout);
  fflush(stderr);
  for (int r = 0; r < nr; r++) {
    pid_t p = fork();
    if (p < 0) {
      perror("warpspec run: fork");
      signal_groups(pids, r, SIGKILL);
      remove_dir(dir);
      return 1;
    }
    if (p == 0) become_rank(r, nr, dir, key, launcher, argv + i);
    setpgid(p, p); /* EACCES once the child has exec'd: it set the group itself by then */
    pids[r] = p;
  }
  const double start = now_s();
  double fail_at = 0, kill_at = 0;
  int left = nr, first_bad = -1, timed_out = 0, stopping = 0, killed = 0;
  int stopped_by = 0;
  for (;;) {
    int st = 0;
    pid_t p = waitpid(-1, &st, WNOHANG);
    if (p > 0) {
      for (int r = 0; r < nr; r++)
        if (pids[r] == p) {
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
    int stop = 0;
    if (stop_signal && !stopped_by) {
      stopped_by = stop_signal;
      fprintf(stderr, "warpspec run: signal %d, stopping %d rank(s)\n", (int)stopped_by, left);
      stop = 1;
    } else if (timeout > 0 && !timed_out && t - start > timeout) {
      fprintf(stderr, "warpspec run: timeout after %g s, stopping %d rank(s)\n", timeout, left);
      timed_out = stop = 1;
    } else if (fail_at > 0 && !stopping && t - fail_at > WS_RUN_GRACE_S) {
      fprintf(stderr, "warpspec run: stopping %d rank(s) left after a failure\n", left);
      stop = 1;
    } else if (left == 0 && !stopping && !groups_empty(pids, nr)) {
      fprintf(stderr, "warpspec run: stopping what the ranks left running\n");
      stop = 1;
    }
    if (stop && !stopping) {
      signal_groups(pids, nr, SIGTERM);
      stopping = 1;
      kill_at = t + WS_RUN_KILL_GRACE_S;
    }
    if (stopping && !killed && t > kill_at) {
      signal_groups(pids, nr, SIGKILL);
      killed = 1;
    }
    if (left == 0 && (killed || groups_empty(pids, nr))) break;
    usleep(10000);
  }
  if (remove_dir(dir) != 0)
    fprintf(stderr, "warpspec run: cannot remove the rendezvous folder %s: %s\n", dir, strerror(errno));
  if (stopped_by) return 128 + stopped_by;
  if (timed_out) return 124;
  if (first_bad >= 0) return status[first_bad] ? status[first_bad] : 1;
  for (int r = 0; r < nr; r++)
    if (status[r] == 77) return 77;
  return 0;
}
