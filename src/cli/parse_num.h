/* parse_num.h - numbers on the command line, read whole and range-checked: "2abc",
 * "4294967298" (which atoi wraps to 2), "nan" and "1e23" are errors that name the option,
 * the text and the range, never a silently different number. */
#ifndef WARPSPEC_CLI_PARSE_NUM_H
#define WARPSPEC_CLI_PARSE_NUM_H

/* 1 and *out set if `text` is a whole decimal integer in lo .. hi; else 0, with one line
 * on stderr naming `what` (the option). */
int cli_parse_long(const char *what, const char *text, long long lo, long long hi, long long *out);
/* The same for an int (lo and hi within int). */
int cli_parse_int(const char *what, const char *text, int lo, int hi, int *out);
/* A finite decimal number in lo .. hi (seconds, factors). */
int cli_parse_double(const char *what, const char *text, double lo, double hi, double *out);

#endif
