/* status.c - status names and the thread-local error message. */
#include "internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

static _Thread_local char last_error[1024];

const char *ws_strerror(ws_status s) {
  switch (s) {
  case WS_OK: return "WS_OK";
  case WS_ERR_INVALID: return "WS_ERR_INVALID";
  case WS_ERR_BUDGET: return "WS_ERR_BUDGET";
  case WS_ERR_MISMATCH: return "WS_ERR_MISMATCH";
  case WS_ERR_NO_DEVICE: return "WS_ERR_NO_DEVICE";
  case WS_ERR_CUDA: return "WS_ERR_CUDA";
  case WS_ERR_TIMEOUT: return "WS_ERR_TIMEOUT";
  case WS_ERR_NOMEM: return "WS_ERR_NOMEM";
  case WS_ERR_UNSUPPORTED: return "WS_ERR_UNSUPPORTED";
  }
  return "WS_ERR_UNKNOWN";
}

const char *ws_last_error(void) { return last_error; }

void ws_clear_error(void) { last_error[0] = '\0'; }

const char *ws_version(void) { return WS_VERSION_STRING; }

ws_status ws_fail(ws_status s, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(last_error, sizeof last_error, fmt, ap);
  va_end(ap);
  return s;
}

ws_status ws_fail_cuda(int err, const char *what) {
  return ws_fail(WS_ERR_CUDA, "%s failed: %s (%d)", what,
                 cudaGetErrorString((cudaError_t)err), err);
}
