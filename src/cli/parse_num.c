/* parse_num.c - numbers on the command line, read in full and range-checked. */
#include "parse_num.h"
#include "../core/internal.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdlib.h>

/* strtoll and strtod skip leading white space, so "-n ' 2'" would pass; a number on the
 * command line is the whole argument. */
static int starts_like_number(const char *text) {
  return text[0] != '\0' && !isspace((unsigned char)text[0]);
}

ws_status cli_parse_int(const char *option, const char *text, long long min, long long max, long long *out) {
  if (!option) option = "a number";
  WS_REQUIRE(text != NULL && out != NULL, "%s: no value given (accepted: %lld..%lld)", option, min, max);
  char *end = NULL;
  errno = 0;
  const long long v = starts_like_number(text) ? strtoll(text, &end, 10) : 0;
  WS_REQUIRE(end != NULL && end != text && *end == '\0', "%s: '%s' is not a whole number (accepted: %lld..%lld)", option,
             text, min, max);
  WS_REQUIRE(errno != ERANGE && v >= min && v <= max, "%s: %s is out of range (accepted: %lld..%lld)", option, text, min,
             max);
  *out = v;
  return WS_OK;
}

ws_status cli_parse_real(const char *option, const char *text, double min, double max, double *out) {
  if (!option) option = "a number";
  WS_REQUIRE(text != NULL && out != NULL, "%s: no value given (accepted: %g..%g)", option, min, max);
  char *end = NULL;
  errno = 0;
  const double v = starts_like_number(text) ? strtod(text, &end) : 0.0;
  WS_REQUIRE(end != NULL && end != text && *end == '\0' && isfinite(v), "%s: '%s' is not a finite number (accepted: %g..%g)",
             option, text, min, max);
  /* ERANGE on underflow still gives a usable value (0 or a denormal); on overflow v is
   * HUGE_VAL, which isfinite already refused */
  WS_REQUIRE(v >= min && v <= max, "%s: %s is out of range (accepted: %g..%g)", option, text, min, max);
  *out = v;
  return WS_OK;
}
