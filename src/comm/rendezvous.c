/* rendezvous.c - processes of one node meet through files in a folder.
 *
 * Rank 0 writes `name` atomically (a temporary file renamed into place); the others
 * poll for it, bounded by WS_RENDEZVOUS_TIMEOUT_MS. The launcher (`warpspec run`)
 * creates a fresh folder per job; under mpirun the folder is named after the job. */
#define _GNU_SOURCE
#include "../core/internal.h"
#include "warpspec/comm.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

const char *ws_rendezvous_dir(void) {
  static char dir[512];
  const char *d = getenv("WS_RENDEZVOUS_DIR");
  if (d && d[0]) return d;
  const char *job = getenv("OMPI_MCA_ess_base_jobid");
  if (!job) job = getenv("PMIX_NAMESPACE");
  if (!job) return NULL;
  snprintf(dir, sizeof dir, "/tmp/warpspec-rdv-%s", job);
  for (char *c = dir + 5; *c; c++)
    if (*c == '/' || *c == ' ') *c = '_';
  return dir;
}

static ws_status check_args(const char *fn, const char **dir, const char *name, const void *data) {
  if (*dir == NULL) *dir = ws_rendezvous_dir();
  WS_REQUIRE(*dir != NULL, "%s: no rendezvous folder: set WS_RENDEZVOUS_DIR or start under `warpspec run` or mpirun", fn);
  WS_REQUIRE(name != NULL && name[0] != '\0' && strchr(name, '/') == NULL, "%s: name must be a plain file name", fn);
  WS_REQUIRE(data != NULL, "%s: data is NULL", fn);
  return WS_OK;
}

ws_status ws_rendezvous_put(const char *dir, const char *name, const void *data, size_t bytes) {
  ws_status s = check_args("ws_rendezvous_put", &dir, name, data);
  if (s != WS_OK) return s;
  if (mkdir(dir, 0700) != 0 && errno != EEXIST)
    return ws_fail(WS_ERR_INVALID, "ws_rendezvous_put: cannot create folder %s: %s", dir, strerror(errno));
  char tmp[1024], path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  snprintf(tmp, sizeof tmp, "%s/.%s.%d", dir, name, (int)getpid());
  FILE *f = fopen(tmp, "wb");
  if (!f) return ws_fail(WS_ERR_INVALID, "ws_rendezvous_put: cannot write %s: %s", tmp, strerror(errno));
  const size_t n = fwrite(data, 1, bytes, f);
  if (fclose(f) != 0 || n != bytes) return ws_fail(WS_ERR_INVALID, "ws_rendezvous_put: short write to %s", tmp);
  if (rename(tmp, path) != 0) return ws_fail(WS_ERR_INVALID, "ws_rendezvous_put: rename to %s: %s", path, strerror(errno));
  return WS_OK;
}

ws_status ws_rendezvous_get(const char *dir, const char *name, void *data, size_t bytes) {
  ws_status s = check_args("ws_rendezvous_get", &dir, name, data);
  if (s != WS_OK) return s;
  char path[1024];
  snprintf(path, sizeof path, "%s/%s", dir, name);
  const struct timespec nap = {0, 1000000};
  const char *env = getenv("WS_RENDEZVOUS_TIMEOUT_MS");
  const long limit = env && atol(env) > 0 ? atol(env) : WS_RENDEZVOUS_TIMEOUT_MS;
  for (long waited_ms = 0; waited_ms <= limit; waited_ms++) {
    FILE *f = fopen(path, "rb");
    if (f) {
      size_t n = fread(data, 1, bytes, f);
      char extra;
      n += fread(&extra, 1, 1, f); /* a longer file is as wrong as a shorter one */
      fclose(f);
      if (n == bytes) return WS_OK;
      return ws_fail(WS_ERR_INVALID, "ws_rendezvous_get: %s holds %s%zu bytes, expected %zu", path, n > bytes ? "more than " : "",
                     n > bytes ? bytes : n, bytes);
    }
    nanosleep(&nap, NULL);
  }
  return ws_fail(WS_ERR_TIMEOUT, "ws_rendezvous_get: '%s' did not appear in %s within %ld ms: did rank 0 start?", name, dir,
                 limit);
}
