/* warpspec/diag.h - how a device-side wait that ran out of time reaches the host.
 *
 * Kernels take a ws_diag by value. A wait that exceeds diag.timeout_ns claims the one
 * fault record of the device (first thread wins), fills it in host-mapped memory, and
 * traps. The host (ws_sync) sees the launch fail, reads the record, and returns
 * WS_ERR_TIMEOUT with a message naming block, role, replica, object, stage and phase.
 * A trap ends the CUDA context: the process must reset the device to use it again. */
#ifndef WARPSPEC_DIAG_H
#define WARPSPEC_DIAG_H

#include "config.h"

#ifdef __cplusplus
extern "C" {
#endif

enum {
  WS_FAULT_NONE = 0,
  WS_FAULT_TIMEOUT = 1,   /* a bounded wait ran out                                  */
  WS_FAULT_MISMATCH = 2   /* the two sides of a transfer disagree (sizes, blocks)     */
};

/* What a timed-out wait was waiting for. */
enum {
  WS_EDGE_FULL = 0,   /* reader waiting for the writer's commit of a pipe slot  */
  WS_EDGE_EMPTY = 1,  /* writer waiting for every reader to release a slot       */
  WS_EDGE_FLAG = 2,   /* a wait on a flag in memory                              */
  WS_EDGE_PEER_DATA = 3,   /* receiver waiting for a peer's data (tail signal)        */
  WS_EDGE_PEER_CREDIT = 4  /* sender waiting for a peer to free a slot (head signal) */
};

typedef struct {
  volatile int code;           /* WS_FAULT_*; written last                      */
  int block;                   /* linear block index                            */
  int thread;                  /* threadIdx.x                                   */
  int role;                    /* role index, -1 outside roles                  */
  int replica;
  int edge;                    /* WS_EDGE_*                                     */
  int stage;
  int phase;
  int peer;                    /* communication: the other rank, else -1        */
  int rank;                    /* communication: this rank, else -1             */
  unsigned long long step;     /* communication: protocol step waited for       */
  long long value[4];          /* mismatch: what each side has                   */
  unsigned long long waited_ns;
  unsigned long long timeout_ns;
  char role_name[WS_NAME_LEN];
  char object[WS_NAME_LEN];    /* pipe or peer name                             */
} ws_fault;

struct ws_trace_buf; /* trace.h: role timelines, NULL unless ws_trace_start */

/* Passed to every library kernel. */
typedef struct {
  ws_fault *fault;             /* device pointer to host-mapped memory          */
  unsigned int *claim;         /* device memory: first timed-out thread sets it */
  unsigned long long timeout_ns;
  struct ws_trace_buf *trace;  /* device memory, or NULL: no timeline recorded  */
  int trace_block;             /* the block whose roles record their timeline   */
} ws_diag;

#ifdef __cplusplus
}
#endif
#endif
