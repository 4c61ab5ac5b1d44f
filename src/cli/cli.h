/* cli.h - pieces of the `warpspec` command. */
#ifndef WARPSPEC_CLI_H
#define WARPSPEC_CLI_H

#include "warpspec/warpspec.h"

/* Active NVLinks from device a to device b; -1 if NVML is unavailable. *unknown:
 * active links of device a whose remote end NVML does not report. */
int cli_nvlinks(int dev_a, int dev_b, int *unknown);

/* Parse "name:warps:regs[xreplicas]"; regs is a number, "rest" or "entry".
 * The name is copied into name_buf, which out->name then points to. */
ws_status cli_parse_role(const char *spec, ws_role *out, char *name_buf, size_t name_len);

/* Example plans the CLI knows by name: the library's kernels and the seed pair. */
ws_status cli_named_plan(const char *name, ws_plan *plan);

/* `warpspec run -n N -- prog ...`: the single-node launcher. Returns an exit status. */
#define WS_RUN_MAX_RANKS 64
int cli_run(int argc, char **argv);

#endif
