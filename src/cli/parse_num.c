/* parse_num.c - see parse_num.h. */
#include "parse_num.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

static int refuse(const char *what, const char *text, const char *kind, const char *range) {
  fprintf(stderr, "warpspec: %s '%s': %s %s\n", what, text ? text : "(missing)", kind, range);
  return 0;
}

int cli_parse_long(const char *what, const char *text, long long lo, long long hi, long long *out) {
  char range[96];
  snprintf(range, sizeof range, "%lld .. %lld", lo, hi);
  if (!text || !*text || isspace((unsigned char)text[0])) return refuse(what, text, "expected a whole number in", range);
  char *end = NULL;
  errno = 0;
  const long long v = strtoll(text, &end, 10);
  if (end == text || *end != '\0') return refuse(what, text, "expected a whole number in", range);
  if (errno == ERANGE || v < lo || v > hi) return refuse(what, text, "out of range: must be", range);
  *out = v;
  return 1;
}

int cli_parse_int(const char *what, const char *text, int lo, int hi, int *out) {
  long long v = 0;
  if (!cli_parse_long(what, text, lo, hi, &v)) return 0;
  *out = (int)v;
  return 1;
}

int cli_parse_double(const char *what, const char *text, double lo, double hi, double *out) {
  char range[96];
  snprintf(range, sizeof range, "%g .. %g", lo, hi);
  if (!text || !*text || isspace((unsigned char)text[0])) return refuse(what, text, "expected a number in", range);
  char *end = NULL;
  errno = 0;
  const double v = strtod(text, &end);
  if (end == text || *end != '\0') return refuse(what, text, "expected a number in", range);
  if (errno == ERANGE || !isfinite(v) || v < lo || v > hi) return refuse(what, text, "out of range: must be", range);
  *out = v;
  return 1;
}
