/* warpspec/knobs.h - reading the WARPSPEC_* environment variables again.
 *
 * The library reads its environment variables (names in config.h, the table of values in
 * docs/knobs.md) once, at the first call that needs one, and keeps them: several are
 * consulted on an op's fast path, where a getenv per call costs time and lets a variable
 * changed mid-run switch kernels between two calls of one step. A program that changes
 * them inside one process with setenv (a benchmark comparing schedules, a test) calls
 * ws_knobs_reload() after. Settings made through the API (ws_set_timeout_ms,
 * ws_set_check_mode) keep their precedence over the environment. */
#ifndef WARPSPEC_KNOBS_H
#define WARPSPEC_KNOBS_H

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Parse every knob again from the environment; always WS_OK (a value outside the accepted
 * ones is reported once on stderr and the default is used, as at the first read). Like
 * setenv itself, call it while no other thread is inside the library. MoE layers keep the
 * knobs they read at creation (WARPSPEC_MOE_TILE, _PAIR, _GATHER). */
ws_status ws_knobs_reload(void);

#ifdef __cplusplus
}
#endif
#endif
