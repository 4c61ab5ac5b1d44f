/* parse_num.h - numbers on the command line, read in full and range-checked.
 *
 * atoi and friends read "2abc" as 2 and wrap "4294967298" to 2; these read the whole
 * text or fail, with a message naming the option, the text and the accepted range
 * (ws_last_error), which the caller prints before exiting with status 2. */
#ifndef WARPSPEC_CLI_PARSE_NUM_H
#define WARPSPEC_CLI_PARSE_NUM_H

#include "warpspec/status.h"

/* A whole decimal number in min..max: optional sign, digits, nothing else (no spaces). */
ws_status cli_parse_int(const char *option, const char *text, long long min, long long max, long long *out);

/* A finite decimal number in min..max (strtod's syntax, no spaces, no nan or inf). */
ws_status cli_parse_real(const char *option, const char *text, double min, double max, double *out);

#endif
