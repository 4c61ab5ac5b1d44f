/* warpspec/trace.h - role timelines: what each role of one block did and waited on.
 *
 * Between ws_trace_start and ws_trace_stop, the library kernels launched on this device
 * record events of one block (ws_trace_start's `block`), or of all: lane 0 of warp 0 of each role
 * replica marks when a work item begins and ends and when a wait begins and ends, with
 * %globaltimer (ns). Kernels that have no marks record nothing; the marks cost one
 * predicated branch when tracing is off. ws_trace_stop waits for the device, and writes
 * the events as CSV (one row per event, times from the first one) for
 * bench/plot_trace.py, which draws one lane per role replica. Not thread-safe; one
 * device at a time. */
#ifndef WARPSPEC_TRACE_H
#define WARPSPEC_TRACE_H

#include <stddef.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* What an event marks; `arg` says which item or what is waited for. */
enum {
  WS_TRACE_ITEM_BEGIN = 0, /* arg: the work item                                        */
  WS_TRACE_ITEM_END = 1,   /* arg: the work item, or -1 where the role does not keep it    */
  WS_TRACE_WAIT_BEGIN = 2, /* arg: a WS_TRACE_ON_* code: what the role waits for          */
  WS_TRACE_WAIT_END = 3,
  WS_TRACE_PROBE = 4       /* arg: a probe point's number (device/trace.cuh, WS_PROBES)   */
};

/* What a wait is for (arg of WS_TRACE_WAIT_*). */
enum {
  WS_TRACE_ON_STAGE = 0,   /* a reader: the writer's commit of the next pipe stage        */
  WS_TRACE_ON_SLOT = 1,    /* a writer: a free pipe slot                                  */
  WS_TRACE_ON_ROWS = 2,    /* input rows another block produces (e.g. L1 outputs for L2)  */
  WS_TRACE_ON_PEER = 3,    /* another rank                                                 */
  WS_TRACE_ON_SCHEDULE = 4, /* reading and decoding the work schedule another block wrote  */
  WS_TRACE_ON_EPILOGUE = 5  /* not a wait: the item's epilogue, its results going out       */
};

#define WS_TRACE_NAME_LEN 12

typedef struct {
  unsigned long long t_ns; /* %globaltimer                                               */
  int role, replica;       /* the kernel's role index and replica                        */
  int kind, arg;           /* WS_TRACE_ITEM_* / WS_TRACE_WAIT_*, and its argument         */
  int sm;                  /* %smid of the block                                          */
  char name[WS_TRACE_NAME_LEN]; /* the role's name from the role table (cut to 11)       */
} ws_trace_event;

struct ws_trace_buf {
  unsigned int count;      /* events claimed (may exceed capacity: the rest are dropped) */
  unsigned int capacity;
  ws_trace_event ev[1];    /* capacity of them                                            */
};

/* ws_trace_start's block: every block of the grid (the CSV's sm column tells them apart;
 * the persistent kernels run one block per SM). */
#define WS_TRACE_ALL_BLOCKS (-1)

/* Record the roles of `block` (0 .. grid - 1, or WS_TRACE_ALL_BLOCKS) in up to max_events
 * events. */
ws_status ws_trace_start(int block, size_t max_events);
/* Wait for the device, write the events to `csv_path` (NULL: write nothing) and stop.
 * *events (if not NULL) gets the number recorded. */
ws_status ws_trace_stop(const char *csv_path, size_t *events);

#ifdef __cplusplus
}
#endif
#endif
