/* rendezvous.c - processes of one node meet through files in a folder.
 *
 * Rank 0 writes `name` (header + payload, see rendezvous.h) into a temporary file it
 * creates exclusively, then renames it into place; the others poll for it, bounded by
 * WARPSPEC_RENDEZVOUS_TIMEOUT_MS (default WS_RENDEZVOUS_TIMEOUT_MS, config.h). What
 * keeps a stranger, an earlier job and a crash out:
 *   - the folder is used only if it is a real directory (not a link), owned by this user
 *     and not writable by group or others; created 0700 when absent. All file work
 *     happens relative to the opened folder, with O_NOFOLLOW, so the checked folder is
 *     the one used;
 *   - a reader takes a file only if its header carries this job's key and was written
 *     after the job's launcher started; anything else is stale and it keeps waiting;
 *   - rank 0 removes the file, and the folder if it made it, once every rank has read
 *     it (ws_rendezvous_cleanup, which ws_comm_init_from_env calls after its barrier).
 * The default folder is ${TMPDIR:-/tmp}/warpspec-rdv-<uid>-<job id> under mpirun;
 * `warpspec run` makes a fresh one per job (mkdtemp) and hands it over.
 *
 * The job key (WS_RENDEZVOUS_KEY, else mpirun's job id) separates jobs that share a
 * folder, so it is used whole: the file name carries a readable prefix and a hash of
 * all of it (ws_rdv_file_name), the header the key itself, compared in full. Keys of
 * 1..WS_RDV_KEY_MAX bytes; a longer one is refused rather than cut. WS_RENDEZVOUS_KEY
 * set to "" is refused too: it reads as a key, but every job given it would share it.
 * No key at all (nothing set, no job id) keeps working with the bare name: that needs
 * WS_RENDEZVOUS_DIR (there is no default folder without a job id), the files of earlier
 * runs are still told apart by time, and only concurrent jobs sharing that folder by
 * hand would meet, which is why README asks for a key per job when launching by hand.
 * The key and the folder come from the launcher and name this job: they are read at each
 * call, not kept with the knobs (docs/knobs.md).
 *
 * Every open of the id file is non-blocking and followed by a type check: a FIFO or a
 * device planted under the name is refused at once, not waited on without a bound. */
#define _GNU_SOURCE
#include "rendezvous.h"

#include "../core/internal.h"
#include "../core/knobs.h"
#include "warpspec/comm.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#define PATH_LEN 1024

/* ---- names ------------------------------------------------------------------------- */
static const char *job_id(void) {
  const char *job = getenv("OMPI_MCA_ess_base_jobid");
  if (!job || !*job) job = getenv("PMIX_NAMESPACE");
  return job && *job ? job : NULL;
}

const char *ws_rendezvous_key(void) {
  const char *k = getenv(WS_RENDEZVOUS_KEY_ENV);
  if (k) return k; /* "" included: put, get and cleanup refuse it (job_key) */
  k = job_id();
  return k ? k : "";
}

static void sanitize(char *s) {
  for (; *s; s++)
    if (!((*s >= 'a' && *s <= 'z') || (*s >= 'A' && *s <= 'Z') || (*s >= '0' && *s <= '9') || *s == '-' || *s == '.'))
      *s = '_';
}

const char *ws_rendezvous_dir(void) {
  static _Thread_local char dir[PATH_LEN];
  const char *d = getenv(WS_RENDEZVOUS_DIR_ENV);
  if (d && d[0]) return d;
  const char *job = job_id();
  if (!job) return NULL;
  const char *base = getenv("TMPDIR");
  if (!base || !*base) base = "/tmp";
  char tail[256];
  snprintf(tail, sizeof tail, "warpspec-rdv-%u-%s", (unsigned)geteuid(), job);
  sanitize(tail);
  if (snprintf(dir, sizeof dir, "%s/%s", base, tail) >= (int)sizeof dir) return NULL;
  return dir;
}

/* This job's key, checked: an explicit "" and keys over WS_RDV_KEY_MAX are errors. */
static ws_status job_key(const char *fn, const char **key) {
  const char *env = getenv(WS_RENDEZVOUS_KEY_ENV);
  WS_REQUIRE(env == NULL || env[0] != '\0',
             "%s: WS_RENDEZVOUS_KEY is set but empty: every job given it would read the others' files; unset it "
             "(mpirun's job id is used then) or give each job its own key", fn);
  const char *k = ws_rendezvous_key();
  const size_t n = strlen(k);
  WS_REQUIRE(n <= WS_RDV_KEY_MAX, "%s: job key '%.40s...' is %zu bytes, at most %d (WS_RENDEZVOUS_KEY or mpirun's job "
             "id)", fn, k, n, WS_RDV_KEY_MAX);
  *key = k;
  return WS_OK;
}

static uint64_t fnv1a64(const char *s) {
  uint64_t h = 0xcbf29ce484222325ull;
  for (; *s; s++) {
    h ^= (unsigned char)*s;
    h *= 0x100000001b3ull;
  }
  return h;
}

int ws_rdv_file_name(const char *name, const char *key, char *out, size_t len) {
  char prefix[WS_RDV_KEY_PREFIX + 1];
  snprintf(prefix, sizeof prefix, "%s", key);
  sanitize(prefix);
  const int n = key[0] ? snprintf(out, len, "%s.%s.%016llx", name, prefix, (unsigned long long)fnv1a64(key))
                       : snprintf(out, len, "%s", name);
  return n > 0 && (size_t)n < len ? n : -1;
}

static ws_status file_name(const char *fn, const char *name, const char *key, char *out, size_t len) {
  const int n = ws_rdv_file_name(name, key, out, len);
  WS_REQUIRE(n > 0 && n < 256, "%s: file name for '%s' too long", fn, name);
  return WS_OK;
}

/* ---- time ---------------------------------------------------------------------------- */
static uint64_t realtime_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* Field `want` (1-based, as proc(5) counts) of /proc/<pid>/stat; 0 if unreadable. */
static unsigned long long proc_stat_field(long pid, int want) {
  char path[64], buf[1024];
  snprintf(path, sizeof path, "/proc/%ld/stat", pid);
  FILE *f = fopen(path, "r");
  if (!f) return 0;
  const size_t n = fread(buf, 1, sizeof buf - 1, f);
  fclose(f);
  buf[n] = '\0';
  char *p = strrchr(buf, ')'); /* the command name may hold spaces: count after it */
  if (!p) return 0;
  int field = 2;
  for (p++; *p && field < want; p++)
    if (*p == ' ') field++;
  return field == want ? strtoull(p, NULL, 10) : 0;
}

static uint64_t boot_time_ns(void) {
  FILE *f = fopen("/proc/stat", "r");
  if (!f) return 0;
  char line[256];
  unsigned long long btime = 0;
  while (fgets(line, sizeof line, f))
    if (sscanf(line, "btime %llu", &btime) == 1) break;
  fclose(f);
  return (uint64_t)btime * 1000000000ull;
}

uint64_t ws_rdv_not_before_ns(void) {
  static uint64_t cached;
  if (cached) return cached;
  const long hz = sysconf(_SC_CLK_TCK);
  const uint64_t boot = boot_time_ns();
  /* the launcher (warpspec run, mpirun, a shell) started before any rank of this job */
  long pid = (long)getppid();
  if (pid <= 1) pid = (long)getpid();
  unsigned long long ticks = proc_stat_field(pid, 22);
  if (!ticks && pid != (long)getpid()) ticks = proc_stat_field((long)getpid(), 22);
  uint64_t start = (boot && ticks && hz > 0) ? boot + (uint64_t)(ticks * (1000000000ull / (unsigned long long)hz)) : 0;
  if (!start) start = realtime_ns() - 60ull * 1000000000ull; /* no /proc: only files older than a minute are stale */
  cached = start > WS_RDV_START_SLACK_NS ? start - WS_RDV_START_SLACK_NS : 1;
  return cached;
}

/* ---- the folder ---------------------------------------------------------------------- */
/* This process made these folders (cleanup removes them). */
static char created_dirs[4][PATH_LEN];

static void remember_created(const char *dir) {
  for (int i = 0; i < 4; i++)
    if (!created_dirs[i][0] || !strcmp(created_dirs[i], dir)) {
      snprintf(created_dirs[i], PATH_LEN, "%s", dir);
      return;
    }
}

static int made_here(const char *dir) {
  for (int i = 0; i < 4; i++)
    if (created_dirs[i][0] && !strcmp(created_dirs[i], dir)) return i;
  return -1;
}

/* Open the folder for *at() calls after checking what it is. *fd = -1 if it does not
 * exist (and create is 0). */
static ws_status open_dir(const char *fn, const char *dir, int create, int *fd) {
  *fd = -1;
  struct stat st;
  if (lstat(dir, &st) != 0) {
    if (errno != ENOENT) return ws_fail(WS_ERR_INVALID, "%s: rendezvous folder %s: %s", fn, dir, strerror(errno));
    if (!create) return WS_OK;
    if (mkdir(dir, 0700) == 0) remember_created(dir);
    else if (errno != EEXIST)
      return ws_fail(WS_ERR_INVALID, "%s: cannot create rendezvous folder %s: %s", fn, dir, strerror(errno));
  }
  const int d = open(dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (d < 0) {
    if (errno == ELOOP || errno == ENOTDIR) {
      if (lstat(dir, &st) == 0 && S_ISLNK(st.st_mode))
        return ws_fail(WS_ERR_INVALID, "%s: rendezvous folder %s is a symbolic link: refused (whoever made it chooses "
                       "where the id goes); remove it or set WS_RENDEZVOUS_DIR", fn, dir);
      return ws_fail(WS_ERR_INVALID, "%s: rendezvous folder %s is not a directory", fn, dir);
    }
    if (errno == ENOENT && !create) return WS_OK;
    return ws_fail(WS_ERR_INVALID, "%s: cannot open rendezvous folder %s: %s", fn, dir, strerror(errno));
  }
  if (fstat(d, &st) != 0) {
    close(d);
    return ws_fail(WS_ERR_INVALID, "%s: cannot stat rendezvous folder %s: %s", fn, dir, strerror(errno));
  }
  if (st.st_uid != geteuid()) {
    close(d);
    return ws_fail(WS_ERR_INVALID, "%s: rendezvous folder %s is owned by uid %u, not by this user (uid %u): another user "
                   "may have made it to hand this job their id; remove it or set WS_RENDEZVOUS_DIR", fn, dir,
                   (unsigned)st.st_uid, (unsigned)geteuid());
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    close(d);
    return ws_fail(WS_ERR_INVALID, "%s: rendezvous folder %s has mode %03o: writable by group or others, so others "
                   "could replace the id; make it 0700 (chmod 700) or remove it", fn, dir, (unsigned)(st.st_mode & 0777));
  }
  *fd = d;
  return WS_OK;
}

static ws_status check_args(const char *fn, const char **dir, const char *name, const void *data, size_t bytes,
                            const char **key) {
  if (*dir == NULL) *dir = ws_rendezvous_dir();
  WS_REQUIRE(*dir != NULL, "%s: no rendezvous folder: set WS_RENDEZVOUS_DIR or start under `warpspec run` or mpirun", fn);
  WS_REQUIRE(strlen(*dir) < PATH_LEN - 300, "%s: rendezvous folder path too long", fn);
  WS_REQUIRE(name != NULL && name[0] != '\0' && name[0] != '.' && strchr(name, '/') == NULL,
             "%s: name must be a plain file name (no '/', not starting with '.')", fn);
  WS_REQUIRE(data != NULL, "%s: data is NULL", fn);
  WS_REQUIRE(bytes <= WS_RDV_MAX_PAYLOAD, "%s: %zu bytes, at most %u", fn, bytes, WS_RDV_MAX_PAYLOAD);
  return job_key(fn, key);
}

static int write_all(int fd, const void *p, size_t n) {
  const char *c = (const char *)p;
  while (n) {
    const ssize_t w = write(fd, c, n);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return -1;
    c += w;
    n -= (size_t)w;
  }
  return 0;
}

/* ---- put / get / cleanup ----------------------------------------------------------- */
ws_status ws_rendezvous_put(const char *dir, const char *name, const void *data, size_t bytes) {
  static const char *fn = "ws_rendezvous_put";
  const char *key = NULL;
  ws_status s = check_args(fn, &dir, name, data, bytes, &key);
  char file[256], tmp[300];
  if (s == WS_OK) s = file_name(fn, name, key, file, sizeof file);
  if (s != WS_OK) return s;
  int dfd;
  if ((s = open_dir(fn, dir, 1, &dfd)) != WS_OK) return s;
  static unsigned counter;
  snprintf(tmp, sizeof tmp, ".%s.%ld.%u", file, (long)getpid(), counter++);
  const int fd = openat(dfd, tmp, O_WRONLY | O_CREAT | O_EXCL | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) {
    s = ws_fail(WS_ERR_INVALID, "%s: cannot create %s/%s: %s", fn, dir, tmp, strerror(errno));
    close(dfd);
    return s;
  }
  ws_rdv_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, WS_RDV_MAGIC, sizeof h.magic);
  h.version = WS_RDV_VERSION;
  h.header_bytes = (uint32_t)sizeof h;
  h.created_ns = realtime_ns();
  h.payload_bytes = bytes;
  h.writer_pid = (int64_t)getpid();
  snprintf(h.key, sizeof h.key, "%s", key); /* whole: job_key bounded it */
  const int bad = write_all(fd, &h, sizeof h) != 0 || write_all(fd, data, bytes) != 0;
  if (close(fd) != 0 || bad) {
    s = ws_fail(WS_ERR_INVALID, "%s: short write to %s/%s", fn, dir, tmp);
    unlinkat(dfd, tmp, 0);
  } else if (renameat(dfd, tmp, dfd, file) != 0) {
    s = ws_fail(WS_ERR_INVALID, "%s: rename to %s/%s: %s", fn, dir, file, strerror(errno));
    unlinkat(dfd, tmp, 0);
  }
  close(dfd);
  return s;
}

static const char *file_type(mode_t m) {
  if (S_ISFIFO(m)) return "a FIFO";
  if (S_ISCHR(m)) return "a character device";
  if (S_ISBLK(m)) return "a block device";
  if (S_ISSOCK(m)) return "a socket";
  if (S_ISDIR(m)) return "a directory";
  return "of another type";
}

/* One look at the file. WS_OK with *ready = 1: payload copied; *ready = 0: absent or
 * stale (why in `stale`), keep waiting; an error status: a clear error. */
static ws_status try_read(const char *fn, const char *dir, const char *file, const char *key, void *data,
                          size_t bytes, int *ready, char *stale, size_t stale_len) {
  *ready = 0;
  int dfd;
  ws_status s = open_dir(fn, dir, 0, &dfd);
  if (s != WS_OK || dfd < 0) return s;
  /* O_NONBLOCK: opening a FIFO would wait for a writer, outside the bound */
  const int fd = openat(dfd, file, O_RDONLY | O_NOFOLLOW | O_CLOEXEC | O_NONBLOCK | O_NOCTTY);
  const int err = errno;
  close(dfd);
  if (fd < 0) {
    if (err == ENOENT) return WS_OK;
    if (err == ELOOP) return ws_fail(WS_ERR_INVALID, "%s: %s/%s is a symbolic link: refused", fn, dir, file);
    return ws_fail(WS_ERR_INVALID, "%s: cannot open %s/%s: %s", fn, dir, file, strerror(err));
  }
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int e = errno;
    close(fd);
    return ws_fail(WS_ERR_INVALID, "%s: cannot stat %s/%s: %s", fn, dir, file, strerror(e));
  }
  if (!S_ISREG(st.st_mode)) {
    close(fd);
    return ws_fail(WS_ERR_INVALID, "%s: %s/%s is %s, not a regular file: refused (remove it)", fn, dir, file,
                   file_type(st.st_mode));
  }
  if (st.st_uid != geteuid()) {
    close(fd);
    return ws_fail(WS_ERR_INVALID, "%s: %s/%s is owned by uid %u, not by this user (uid %u): refused", fn, dir, file,
                   (unsigned)st.st_uid, (unsigned)geteuid());
  }
  const uint64_t mtime_ns = (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec;
  const uint64_t not_before = ws_rdv_not_before_ns();
  ws_rdv_header h;
  memset(&h, 0, sizeof h);
  const ssize_t got = pread(fd, &h, sizeof h, 0);
  const size_t want_total = sizeof h + bytes;
  if (got != (ssize_t)sizeof h || memcmp(h.magic, WS_RDV_MAGIC, sizeof h.magic) != 0 || h.version != WS_RDV_VERSION ||
      h.header_bytes != sizeof h || h.key[sizeof h.key - 1] != '\0') {
    close(fd);
    if (mtime_ns < not_before) { /* left by an earlier job (or an older warpspec): not ours */
      snprintf(stale, stale_len, "a file from before this job started, without a valid header");
      return WS_OK;
    }
    return ws_fail(WS_ERR_INVALID, "%s: %s/%s is not a warpspec rendezvous file of this version (%zd bytes%s): "
                   "truncated or foreign", fn, dir, file, got < 0 ? (ssize_t)0 : got,
                   got == (ssize_t)sizeof h ? ", bad header" : ", short header");
  }
  if (strcmp(h.key, key) != 0) {
    close(fd);
    snprintf(stale, stale_len, "a file of another job (key '%.60s', this job's is '%.60s')", h.key, key);
    return WS_OK;
  }
  if (h.created_ns < not_before) {
    close(fd);
    snprintf(stale, stale_len, "a file written %.1f s before this job's launcher started (an earlier run)",
             (double)(not_before + WS_RDV_START_SLACK_NS - h.created_ns) * 1e-9);
    return WS_OK;
  }
  if (h.payload_bytes != bytes) {
    close(fd);
    return ws_fail(WS_ERR_INVALID, "%s: %s/%s holds %llu bytes, expected %zu (rank 0 wrote something else under this "
                   "name)", fn, dir, file, (unsigned long long)h.payload_bytes, bytes);
  }
  if ((uint64_t)st.st_size != want_total) {
    close(fd);
    return ws_fail(WS_ERR_INVALID, "%s: %s/%s is %lld bytes, expected %zu (header %zu + payload %zu): %s", fn, dir, file,
                   (long long)st.st_size, want_total, sizeof h, bytes,
                   (uint64_t)st.st_size < want_total ? "truncated" : "oversized");
  }
  const ssize_t n = pread(fd, data, bytes, (off_t)sizeof h);
  close(fd);
  if (n != (ssize_t)bytes)
    return ws_fail(WS_ERR_INVALID, "%s: %s/%s: read %zd of %zu payload bytes", fn, dir, file, n, bytes);
  *ready = 1;
  return WS_OK;
}

static long timeout_ms(void) { return ws_knobs_get()->rendezvous_timeout_ms; }

static uint64_t monotonic_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

ws_status ws_rendezvous_get(const char *dir, const char *name, void *data, size_t bytes) {
  static const char *fn = "ws_rendezvous_get";
  const char *key = NULL;
  ws_status s = check_args(fn, &dir, name, data, bytes, &key);
  char file[256];
  if (s == WS_OK) s = file_name(fn, name, key, file, sizeof file);
  if (s != WS_OK) return s;
  const long limit = timeout_ms();
  const uint64_t deadline = monotonic_ns() + (uint64_t)limit * 1000000ull;
  const struct timespec nap = {0, 1000000};
  char stale[256] = "";
  for (;;) {
    int ready = 0;
    if ((s = try_read(fn, dir, file, key, data, bytes, &ready, stale, sizeof stale)) != WS_OK) return s;
    if (ready) return WS_OK;
    if (monotonic_ns() > deadline) break;
    nanosleep(&nap, NULL);
  }
  return ws_fail(WS_ERR_TIMEOUT, "%s: '%s' did not appear in %s within %ld ms%s%s: did rank 0 start?", fn, file, dir, limit,
                 stale[0] ? "; ignored " : "", stale);
}

ws_status ws_rendezvous_cleanup(const char *dir, const char *name) {
  static const char *fn = "ws_rendezvous_cleanup";
  const char dummy = 0;
  const char *key = NULL;
  ws_status s = check_args(fn, &dir, name, &dummy, 0, &key);
  char file[256];
  if (s == WS_OK) s = file_name(fn, name, key, file, sizeof file);
  if (s != WS_OK) return s;
  int dfd;
  if ((s = open_dir(fn, dir, 0, &dfd)) != WS_OK) return s;
  if (dfd < 0) return WS_OK; /* nothing there */
  if (unlinkat(dfd, file, 0) != 0 && errno != ENOENT)
    s = ws_fail(WS_ERR_INVALID, "%s: cannot remove %s/%s: %s", fn, dir, file, strerror(errno));
  close(dfd);
  const int slot = made_here(dir);
  if (slot >= 0 && rmdir(dir) == 0) created_dirs[slot][0] = '\0'; /* others' files still there: it stays */
  return s;
}
