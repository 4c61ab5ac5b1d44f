/* warpspec/status.h - status codes and the thread-local error message.
 *
 * Every public function returns a ws_status. On failure, ws_last_error() holds one
 * sentence naming the argument or number that failed, its value and the limit. */
#ifndef WARPSPEC_STATUS_H
#define WARPSPEC_STATUS_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif

typedef enum {
  WS_OK = 0,
  WS_ERR_INVALID = 1,     /* an argument is out of range, null or misaligned            */
  WS_ERR_BUDGET = 2,      /* a role plan does not fit the hardware (threads, registers) */
  WS_ERR_MISMATCH = 3,    /* the compiled kernel disagrees with its plan                 */
  WS_ERR_NO_DEVICE = 4,   /* no CUDA device, or the device is not sm_90                  */
  WS_ERR_CUDA = 5,        /* a CUDA runtime or driver call failed                        */
  WS_ERR_TIMEOUT = 6,     /* a bounded wait on the device ran out                         */
  WS_ERR_NOMEM = 7,       /* an allocation failed                                         */
  WS_ERR_UNSUPPORTED = 8  /* valid request the library cannot serve yet                   */
} ws_status;

/* Short name of a status code ("WS_ERR_TIMEOUT"). Never NULL. */
const char *ws_strerror(ws_status s);

/* Message of the last failure on this thread; "" after a success reset. Never NULL. */
const char *ws_last_error(void);

/* Forget the last message (the next ws_last_error() returns ""). */
void ws_clear_error(void);

/* Library version as "major.minor.patch". */
const char *ws_version(void);

/* sizeof a public struct by its name ("ws_gemm_problem", "ws_plan", ...), 0 if unknown:
 * language bindings compare their mirrors of the structs with the library they load. */
size_t ws_abi_sizeof(const char *type);

#ifdef __cplusplus
}
#endif
#endif
