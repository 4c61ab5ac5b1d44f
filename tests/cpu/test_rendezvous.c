/* test_rendezvous.c - the rendezvous folder and files against what other users, earlier
 * jobs and crashes leave behind (no GPU). Each case ends in a clear error or in waiting
 * for the fresh file and then success, and leaves no file behind:
 *   folder owned by another user (as root), mode 0777, a symbolic link as the folder or
 *   as the id file; a stale file of an earlier run and one of another job (ignored,
 *   then the fresh one is read); truncated, short-header and oversized files; the
 *   folder appearing late; two concurrent jobs, in one folder and in their default
 *   folders; cleanup after success and after a rank that exits early; job keys that
 *   agree on a long prefix or differ only in a character a file name cannot hold,
 *   empty, too long or absent; a FIFO as the id file or the folder. */
#define _GNU_SOURCE
#include "../test.h"
#include "../../src/comm/rendezvous.h"
#include "warpspec/comm.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static char base[] = "/tmp/ws-test-rdv-XXXXXX"; /* everything the test makes lives here */
static const char payload[] = "128 bytes of a unique id, more or less";

static void msleep(int ms) {
  struct timespec t = {ms / 1000, (long)(ms % 1000) * 1000000L};
  nanosleep(&t, NULL);
}

static uint64_t realtime_ns(void) {
  struct timespec t;
  clock_gettime(CLOCK_REALTIME, &t);
  return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

static int count_entries(const char *dir) {
  DIR *d = opendir(dir);
  if (!d) return -1;
  int n = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) n += strcmp(e->d_name, ".") && strcmp(e->d_name, "..");
  closedir(d);
  return n;
}

/* A fresh sub-folder of base, mode 0700. */
static void make_dir(char *out, size_t len, const char *name) {
  snprintf(out, len, "%s/%s", base, name);
  CHECK(mkdir(out, 0700) == 0);
}

/* Write a rendezvous file by hand: header fields as given, then `bytes` of payload,
 * then `extra` more bytes; total length cut to `cut` if cut >= 0. */
static void write_file(const char *path, const char *key, uint64_t created_ns, size_t bytes, size_t extra, long cut) {
  ws_rdv_header h;
  memset(&h, 0, sizeof h);
  memcpy(h.magic, WS_RDV_MAGIC, sizeof h.magic);
  h.version = WS_RDV_VERSION;
  h.header_bytes = sizeof h;
  h.created_ns = created_ns;
  h.payload_bytes = bytes;
  h.writer_pid = 1;
  snprintf(h.key, sizeof h.key, "%s", key);
  char buf[4096];
  memcpy(buf, &h, sizeof h);
  memset(buf + sizeof h, 'x', bytes + extra);
  size_t total = sizeof h + bytes + extra;
  if (cut >= 0) total = (size_t)cut;
  FILE *f = fopen(path, "wb");
  CHECK(f != NULL);
  if (f) {
    CHECK(fwrite(buf, 1, total, f) == total);
    fclose(f);
  }
}

/* Fork a "rank 0" that waits `delay_ms`, then puts the payload (with the key it is
 * given, "" to keep the environment's) and exits. */
static pid_t writer_after(const char *dir, const char *name, int delay_ms, const char *key) {
  fflush(stdout);
  fflush(stderr);
  pid_t p = fork();
  if (p == 0) {
    if (key) setenv("WS_RENDEZVOUS_KEY", key, 1);
    msleep(delay_ms);
    _exit(ws_rendezvous_put(dir, name, payload, sizeof payload) == WS_OK ? 0 : 1);
  }
  return p;
}

static int wait_ok(pid_t p) {
  int st = 0;
  return waitpid(p, &st, 0) == p && WIFEXITED(st) && WEXITSTATUS(st) == 0;
}

static void basic_and_cleanup(void) {
  char dir[512], got[sizeof payload];
  snprintf(dir, sizeof dir, "%s/made-by-put", base);
  setenv("WS_RENDEZVOUS_KEY", "job-basic", 1);
  /* the folder is created 0700 by put, read, then removed with the file by cleanup */
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
  struct stat st;
  CHECK(lstat(dir, &st) == 0 && S_ISDIR(st.st_mode) && (st.st_mode & 0777) == 0700);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  CHECK(memcmp(got, payload, sizeof payload) == 0);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, 8), WS_ERR_INVALID); /* another size: an error, not a hang */
  CHECK_MSG("expected 8");
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  CHECK(lstat(dir, &st) != 0); /* gone: file and folder */
  /* a folder made by someone else (the launcher) stays; the file goes */
  make_dir(dir, sizeof dir, "launcher");
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
  CHECK(count_entries(dir) == 1);
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  CHECK(count_entries(dir) == 0);
  CHECK(rmdir(dir) == 0);
}

static void unsafe_folders(void) {
  char dir[512], got[sizeof payload];
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "5000"); /* errors must come at once, not at the bound */
  /* mode 0777 */
  make_dir(dir, sizeof dir, "open");
  CHECK(chmod(dir, 0777) == 0);
  time_t t0 = time(NULL);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_MSG("writable by group or others");
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("mode 777");
  CHECK(time(NULL) - t0 < 3);
  CHECK(count_entries(dir) == 0);
  CHECK(rmdir(dir) == 0);
  /* group-writable only */
  make_dir(dir, sizeof dir, "group");
  CHECK(chmod(dir, 0770) == 0);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK(rmdir(dir) == 0);
  /* a symbolic link where the folder should be (pointing at a folder we own) */
  char target[512], link[512];
  make_dir(target, sizeof target, "target");
  snprintf(link, sizeof link, "%s/link", base);
  CHECK(symlink(target, link) == 0);
  CHECK_STATUS(ws_rendezvous_put(link, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_MSG("symbolic link");
  CHECK_STATUS(ws_rendezvous_get(link, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("symbolic link");
  CHECK(count_entries(target) == 0);
  unlink(link);
  /* a regular file where the folder should be */
  snprintf(link, sizeof link, "%s/plainfile", base);
  write_file(link, "", 1, 1, 0, -1);
  CHECK_STATUS(ws_rendezvous_put(link, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_MSG("not a directory");
  unlink(link);
  /* owned by another user: only root can make one to test with */
  if (geteuid() == 0) {
    make_dir(dir, sizeof dir, "stranger");
    CHECK(chown(dir, 54321, 54321) == 0);
    CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_ERR_INVALID);
    CHECK_MSG("owned by uid 54321");
    CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
    CHECK_MSG("another user");
    CHECK(count_entries(dir) == 0);
    CHECK(rmdir(dir) == 0);
    /* the default folder under mpirun, made first by a stranger */
    setenv("TMPDIR", base, 1);
    setenv("OMPI_MCA_ess_base_jobid", "4242", 1);
    unsetenv("WS_RENDEZVOUS_DIR");
    const char *def = ws_rendezvous_dir();
    CHECK(def != NULL && mkdir(def, 0700) == 0 && chown(def, 54321, 54321) == 0);
    CHECK_STATUS(ws_rendezvous_put(NULL, "id", payload, sizeof payload), WS_ERR_INVALID);
    CHECK_MSG("owned by uid 54321");
    rmdir(def);
    unsetenv("OMPI_MCA_ess_base_jobid");
    unsetenv("TMPDIR");
  } else {
    printf("not root: the folder-of-another-user cases are not run\n");
  }
  rmdir(target);
}

static void bad_files(void) {
  char dir[512], path[900], got[sizeof payload];
  make_dir(dir, sizeof dir, "files");
  setenv("WS_RENDEZVOUS_KEY", "job-files", 1);
  char file[300];
  CHECK(ws_rdv_file_name("id", "job-files", file, sizeof file) > 0); /* the file of name "id" for this key */
  snprintf(path, sizeof path, "%s/%s", dir, file);
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "5000");
  /* the id file as a symbolic link to a good-looking file elsewhere */
  char elsewhere[600];
  snprintf(elsewhere, sizeof elsewhere, "%s/elsewhere", base);
  write_file(elsewhere, "job-files", realtime_ns(), sizeof payload, 0, -1);
  CHECK(symlink(elsewhere, path) == 0);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("symbolic link");
  unlink(path);
  unlink(elsewhere);
  /* fresh, this job's, but cut short / too long / a header cut short */
  write_file(path, "job-files", realtime_ns(), sizeof payload, 0, (long)(sizeof(ws_rdv_header) + 5));
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("truncated");
  write_file(path, "job-files", realtime_ns(), sizeof payload, 7, -1);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("oversized");
  write_file(path, "job-files", realtime_ns(), sizeof payload, 0, 20);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("short header");
  /* a stale file of an earlier run with the same job key: ignored, the fresh one read */
  write_file(path, "job-files", realtime_ns() - 3600ull * 1000000000ull, sizeof payload, 0, -1);
  pid_t w = writer_after(dir, "id", 150, NULL);
  memset(got, 0, sizeof got);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  CHECK(memcmp(got, payload, sizeof payload) == 0);
  CHECK(wait_ok(w));
  /* the same without a writer: a timeout that says what was ignored */
  write_file(path, "job-files", realtime_ns() - 3600ull * 1000000000ull, sizeof payload, 0, -1);
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "200");
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_TIMEOUT);
  CHECK_MSG("earlier run");
  /* an old file without any header (an older warpspec, a crash): stale as well */
  write_file(path, "", 1, 1, 0, 10);
  struct timespec old[2] = {{1000000, 0}, {1000000, 0}};
  CHECK(utimensat(AT_FDCWD, path, old, 0) == 0);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_TIMEOUT);
  CHECK_MSG("without a valid header");
  /* a fresh file of another job under our name: ignored, then ours */
  write_file(path, "job-other", realtime_ns(), sizeof payload, 0, -1);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_TIMEOUT);
  CHECK_MSG("another job");
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "5000");
  w = writer_after(dir, "id", 100, NULL);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  CHECK(wait_ok(w));
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  CHECK(count_entries(dir) == 0); /* no temporary file left either */
  CHECK(rmdir(dir) == 0);
}

/* The folder appears late (rank 0 starts after the readers); two jobs run at once. */
static void timing_and_concurrency(void) {
  char dir[512], got[sizeof payload];
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "10000");
  snprintf(dir, sizeof dir, "%s/late", base);
  pid_t w = writer_after(dir, "id", 200, "job-late");
  setenv("WS_RENDEZVOUS_KEY", "job-late", 1);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  CHECK(wait_ok(w));
  char file[300], path[900];
  CHECK(ws_rdv_file_name("id", "job-late", file, sizeof file) > 0);
  snprintf(path, sizeof path, "%s/%s", dir, file);
  unlink(path);
  rmdir(dir);
  /* two jobs, one folder: each reader gets its own job's file */
  make_dir(dir, sizeof dir, "shared");
  pid_t readers[4];
  const char *keys[2] = {"job-A", "job-B"};
  fflush(stdout);
  fflush(stderr);
  for (int j = 0; j < 2; j++)
    for (int r = 0; r < 2; r++) {
      readers[2 * j + r] = fork();
      if (readers[2 * j + r] == 0) {
        setenv("WS_RENDEZVOUS_KEY", keys[j], 1);
        char mine[64], want[64];
        snprintf(want, sizeof want, "payload of %s", keys[j]);
        if (r == 0) { /* rank 0 of job j */
          msleep(50 + 30 * j);
          _exit(ws_rendezvous_put(dir, "id", want, sizeof want) == WS_OK ? 0 : 1);
        }
        const ws_status s = ws_rendezvous_get(dir, "id", mine, sizeof mine);
        _exit(s == WS_OK && !strcmp(mine, want) ? 0 : 1);
      }
    }
  for (int i = 0; i < 4; i++) CHECK(wait_ok(readers[i]));
  for (int j = 0; j < 2; j++) {
    setenv("WS_RENDEZVOUS_KEY", keys[j], 1);
    CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  }
  CHECK(count_entries(dir) == 0);
  rmdir(dir);
  /* two mpirun jobs: their default folders differ, and carry the user id */
  unsetenv("WS_RENDEZVOUS_DIR");
  unsetenv("WS_RENDEZVOUS_KEY");
  setenv("TMPDIR", base, 1);
  setenv("OMPI_MCA_ess_base_jobid", "777", 1);
  char a[512];
  snprintf(a, sizeof a, "%s", ws_rendezvous_dir());
  CHECK(strcmp(ws_rendezvous_key(), "777") == 0);
  setenv("OMPI_MCA_ess_base_jobid", "778", 1);
  CHECK(strcmp(a, ws_rendezvous_dir()) != 0);
  char uid[32];
  snprintf(uid, sizeof uid, "-%u-", (unsigned)geteuid());
  CHECK(strstr(a, base) == a && strstr(a, uid) != NULL);
  unsetenv("OMPI_MCA_ess_base_jobid");
  unsetenv("TMPDIR");
}

/* Rank 1 exits before reading; rank 0's init then fails, and its cleanup still leaves
 * nothing behind (ws_comm_init_from_env does this on every way out). */
static void early_exit(void) {
  char dir[512], got[sizeof payload];
  snprintf(dir, sizeof dir, "%s/early", base);
  setenv("WS_RENDEZVOUS_KEY", "job-early", 1);
  fflush(stdout);
  pid_t r1 = fork();
  if (r1 == 0) _exit(3); /* a rank that dies at once */
  int st = 0;
  waitpid(r1, &st, 0);
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 3);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  struct stat sb;
  CHECK(lstat(dir, &sb) != 0);
  /* a later job with the same key and folder is not blocked by anything */
  pid_t w = writer_after(dir, "id", 50, NULL);
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "5000");
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  CHECK(wait_ok(w));
  char file[300], path[900];
  CHECK(ws_rdv_file_name("id", "job-early", file, sizeof file) > 0);
  snprintf(path, sizeof path, "%s/%s", dir, file);
  unlink(path);
  rmdir(dir);
}

/* Keys are compared whole: keys that agree on their first 63 bytes, or that differ only
 * in a character the file name cannot hold, are two jobs; an empty or too long key is
 * an error; without any key the file is the bare name. */
static void job_keys(void) {
  char dir[512], got[sizeof payload];
  make_dir(dir, sizeof dir, "keys");
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "300");
  char long_a[128], long_b[128];
  memset(long_a, 'n', 100);
  memcpy(long_b, long_a, 100);
  snprintf(long_a + 100, 28, "-job-A");
  snprintf(long_b + 100, 28, "-job-B");
  const char payload_b[sizeof payload] = "the other job's id";
  const char *pairs[2][2] = {{long_a, long_b}, {"job/A", "job_A"}};
  for (int i = 0; i < 2; i++) {
    setenv("WS_RENDEZVOUS_KEY", pairs[i][0], 1);
    CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
    setenv("WS_RENDEZVOUS_KEY", pairs[i][1], 1);
    CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_TIMEOUT); /* A's id is not B's */
    CHECK_STATUS(ws_rendezvous_put(dir, "id", payload_b, sizeof payload_b), WS_OK);
    memset(got, 0, sizeof got);
    CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
    CHECK(memcmp(got, payload_b, sizeof got) == 0);
    setenv("WS_RENDEZVOUS_KEY", pairs[i][0], 1); /* B's put left A's file alone */
    memset(got, 0, sizeof got);
    CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
    CHECK(memcmp(got, payload, sizeof got) == 0);
    CHECK(count_entries(dir) == 2);
    for (int j = 0; j < 2; j++) {
      setenv("WS_RENDEZVOUS_KEY", pairs[i][j], 1);
      CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
    }
    CHECK(count_entries(dir) == 0);
  }
  /* the longest key is kept whole in the header; one more byte is refused */
  char longest[WS_RDV_KEY_MAX + 2];
  memset(longest, 'k', WS_RDV_KEY_MAX);
  longest[WS_RDV_KEY_MAX] = '\0';
  setenv("WS_RENDEZVOUS_KEY", longest, 1);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  char file[300], path[900];
  CHECK(ws_rdv_file_name("id", longest, file, sizeof file) > 0);
  snprintf(path, sizeof path, "%s/%s", dir, file);
  ws_rdv_header h;
  memset(&h, 0, sizeof h);
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL && fread(&h, sizeof h, 1, f) == 1);
  if (f) fclose(f);
  CHECK(strncmp(h.key, longest, sizeof h.key) == 0);
  CHECK(strlen(file) < 80); /* the name stays short whatever the key */
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  longest[WS_RDV_KEY_MAX] = 'k';
  longest[WS_RDV_KEY_MAX + 1] = '\0';
  setenv("WS_RENDEZVOUS_KEY", longest, 1);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_MSG("at most 255");
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  /* set but empty: refused at once, also where mpirun's job id could stand in */
  setenv("WS_RENDEZVOUS_KEY", "", 1);
  setenv("OMPI_MCA_ess_base_jobid", "4243", 1);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_MSG("WS_RENDEZVOUS_KEY is set but empty");
  time_t t0 = time(NULL);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK(time(NULL) - t0 < 2);
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_ERR_INVALID);
  unsetenv("OMPI_MCA_ess_base_jobid");
  CHECK(count_entries(dir) == 0);
  /* no key at all (ranks started by hand with a folder): the file is the bare name */
  unsetenv("WS_RENDEZVOUS_KEY");
  unsetenv("PMIX_NAMESPACE");
  CHECK(strcmp(ws_rendezvous_key(), "") == 0);
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
  snprintf(path, sizeof path, "%s/id", dir);
  struct stat st;
  CHECK(lstat(path, &st) == 0 && S_ISREG(st.st_mode));
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  setenv("WS_RENDEZVOUS_KEY", "job-keyed", 1); /* a keyed job does not take it */
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_ERR_TIMEOUT);
  unsetenv("WS_RENDEZVOUS_KEY");
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  CHECK(count_entries(dir) == 0);
  CHECK(rmdir(dir) == 0);
}

/* A FIFO where the id file should be: the reader must not block in open(). The read
 * runs in a child with an alarm, so a regression kills the child, not the test. */
static void fifo_as_id_file(void) {
  char dir[512], file[300], path[900];
  make_dir(dir, sizeof dir, "fifo");
  setenv("WS_RENDEZVOUS_KEY", "job-fifo", 1);
  test_set_knob(WS_RENDEZVOUS_TIMEOUT_ENV, "3000");
  CHECK(ws_rdv_file_name("id", "job-fifo", file, sizeof file) > 0);
  snprintf(path, sizeof path, "%s/%s", dir, file);
  CHECK(mkfifo(path, 0600) == 0);
  fflush(stdout);
  fflush(stderr);
  pid_t p = fork();
  if (p == 0) {
    alarm(5);
    char got[sizeof payload];
    const time_t t0 = time(NULL);
    const ws_status s = ws_rendezvous_get(dir, "id", got, sizeof got);
    const int fast = time(NULL) - t0 < 2;
    if (s != WS_ERR_INVALID || !strstr(ws_last_error(), "FIFO") || !fast)
      fprintf(stderr, "fifo: %s after %lds: %s\n", ws_strerror(s), (long)(time(NULL) - t0), ws_last_error());
    _exit(s == WS_ERR_INVALID && strstr(ws_last_error(), "FIFO") && fast ? 0 : 1);
  }
  int st = 0;
  CHECK(waitpid(p, &st, 0) == p);
  if (WIFSIGNALED(st)) fprintf(stderr, "fifo: the reader was killed by signal %d (blocked in open?)\n", WTERMSIG(st));
  CHECK(WIFEXITED(st) && WEXITSTATUS(st) == 0);
  /* rank 0's put replaces it with a real file, which then reads */
  char got[sizeof payload];
  CHECK_STATUS(ws_rendezvous_put(dir, "id", payload, sizeof payload), WS_OK);
  CHECK_STATUS(ws_rendezvous_get(dir, "id", got, sizeof got), WS_OK);
  CHECK_STATUS(ws_rendezvous_cleanup(dir, "id"), WS_OK);
  /* a FIFO where the folder should be: not a directory, at once */
  char fifo_dir[600];
  snprintf(fifo_dir, sizeof fifo_dir, "%s/fifo-folder", dir);
  CHECK(mkfifo(fifo_dir, 0600) == 0);
  CHECK_STATUS(ws_rendezvous_put(fifo_dir, "id", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_MSG("not a directory");
  CHECK_STATUS(ws_rendezvous_get(fifo_dir, "id", got, sizeof got), WS_ERR_INVALID);
  unlink(fifo_dir);
  CHECK(count_entries(dir) == 0);
  CHECK(rmdir(dir) == 0);
}

static void arguments(void) {
  char got[8];
  CHECK_STATUS(ws_rendezvous_put(base, "a/b", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_STATUS(ws_rendezvous_put(base, ".hidden", payload, sizeof payload), WS_ERR_INVALID);
  CHECK_STATUS(ws_rendezvous_put(base, "x", NULL, 1), WS_ERR_INVALID);
  CHECK_STATUS(ws_rendezvous_put(base, "x", payload, (2u << 20)), WS_ERR_INVALID);
  CHECK_STATUS(ws_rendezvous_cleanup(base, ""), WS_ERR_INVALID);
  unsetenv("WS_RENDEZVOUS_DIR");
  unsetenv("OMPI_MCA_ess_base_jobid");
  unsetenv("PMIX_NAMESPACE");
  CHECK(ws_rendezvous_dir() == NULL);
  CHECK_STATUS(ws_rendezvous_get(NULL, "id", got, sizeof got), WS_ERR_INVALID);
  CHECK_MSG("WS_RENDEZVOUS_DIR");
}

int main(void) {
  CHECK(mkdtemp(base) != NULL);
  unsetenv("WS_RENDEZVOUS_DIR");
  basic_and_cleanup();
  unsafe_folders();
  bad_files();
  timing_and_concurrency();
  early_exit();
  job_keys();
  fifo_as_id_file();
  arguments();
  const int left = count_entries(base);
  if (left != 0) printf("left behind in %s: %d entries\n", base, left);
  CHECK(left == 0);
  rmdir(base);
  return test_finish("test_rendezvous");
}
