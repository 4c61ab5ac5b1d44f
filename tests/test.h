/* test.h - the few macros the tests share. Each test counts failures and returns
 * non-zero if any; GPU tests return 77 (CTest: skipped) without an sm_90 GPU. */
#ifndef WARPSPEC_TEST_H
#define WARPSPEC_TEST_H

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "warpspec/warpspec.h"

static int test_failures;

#define CHECK(cond)                                                                  \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: CHECK failed: %s\n", __FILE__, __LINE__, #cond);       \
      test_failures++;                                                               \
    }                                                                                \
  } while (0)

/* A precondition the rest of the test relies on: stop here if it does not hold (also
 * tells the compiler the range, so sizes derived from it cannot wrap). */
#define REQUIRE(cond)                                                                \
  do {                                                                               \
    if (!(cond)) {                                                                   \
      fprintf(stderr, "%s:%d: REQUIRE failed: %s\n", __FILE__, __LINE__, #cond);     \
      exit(1);                                                                       \
    }                                                                                \
  } while (0)

/* A call must return `want`; on WS_OK expected, print the message if it failed. */
#define CHECK_STATUS(call, want)                                                     \
  do {                                                                               \
    ws_status got_ = (call);                                                         \
    if (got_ != (want)) {                                                            \
      fprintf(stderr, "%s:%d: %s returned %s, expected %s: %s\n", __FILE__, __LINE__, #call, \
              ws_strerror(got_), ws_strerror(want), ws_last_error());                \
      test_failures++;                                                               \
    }                                                                                \
  } while (0)

/* The last message must contain `text`. */
#define CHECK_MSG(text)                                                              \
  do {                                                                               \
    if (!strstr(ws_last_error(), (text))) {                                          \
      fprintf(stderr, "%s:%d: message lacks \"%s\": %s\n", __FILE__, __LINE__, (text), ws_last_error()); \
      test_failures++;                                                               \
    }                                                                                \
  } while (0)

#define TEST_SKIP 77

/* Set an environment knob (value NULL: unset it) and have the library read its knobs
 * again: it reads them once (docs/knobs.md), so a test that switches a variant between
 * two calls goes through here. */
static inline void test_set_knob(const char *name, const char *value) {
  REQUIRE((value ? setenv(name, value, 1) : unsetenv(name)) == 0);
  REQUIRE(ws_knobs_reload() == WS_OK);
}

static inline int test_finish(const char *name) {
  if (test_failures) fprintf(stderr, "%s: %d failure(s)\n", name, test_failures);
  else printf("%s: all checks passed\n", name);
  return test_failures ? 1 : 0;
}

#endif
