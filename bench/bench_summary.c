/* bench_summary.c - the headlines a run of the benchmarks collects, printed at its end
 * (`warpspec demo`, i.e. `make bench`): a newcomer's last screen says what ran and how it
 * compares, the tables above it the rest. */
#include "bench.h"

#include <stdarg.h>
#include <stdio.h>

#define BENCH_HEADLINES 16
static char headlines[BENCH_HEADLINES][160];
static int nheadlines;

void bench_headline(const char *fmt, ...) {
  if (nheadlines >= BENCH_HEADLINES) return;
  va_list ap;
  va_start(ap, fmt);
  vsnprintf(headlines[nheadlines++], sizeof headlines[0], fmt, ap);
  va_end(ap);
}

void bench_headlines_print(const char *title) {
  if (nheadlines == 0) return;
  printf("\n%s\n", title);
  for (int i = 0; i < nheadlines; i++) printf("  - %s\n", headlines[i]);
}
