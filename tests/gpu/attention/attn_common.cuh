/* attn_common.cuh - test_attention: what every area of the test shares. BF16 values
 * drawn uniformly from the test's random stream (gpu_test.h: seeded from the time, the
 * seed printed), which testdata/attention.h's generators (shared with the kernel
 * benchmarks) draw from too, and the verdict of a case against its float64 reference:
 * the relative error of o and of the finite lse entries, both <= 1e-2 (BF16 operands, P
 * rounded to BF16 before P V as every flash kernel does); outputs are poisoned (NaN)
 * before each launch, so an unwritten element fails, and an lse of -inf must match
 * exactly.
 *
 * Part of the single translation unit test_attention.cu: the random stream and test.h's
 * state are per translation unit, so the area files are included, not linked. */
#ifndef WARPSPEC_TEST_ATTN_COMMON_CUH
#define WARPSPEC_TEST_ATTN_COMMON_CUH

#include <math.h>
#include <string.h>
#include <time.h>

#include "../../../testdata/attention.h"
#include "../gpu_test.h"
#include "warpspec/warpspec.h"

static float float_of(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}
static void fill_uniform(uint16_t *x, size_t n, float amp) { td_fill_uniform(&rng_state, x, n, amp); }

/* When a case fails: where the error sits, to tell a layout bug from a numeric one in
 * one GPU run. Relative error per block of 8 output columns (a wrong MN-major / swizzle
 * offset shows in some column blocks only) and per 16-row slice of the CTA's tile (rows
 * (r / div) % tile_rows: a wrong warp / warpgroup row mapping shows in some slices). */
static void explain_errors(const uint16_t *got, const double *ref, size_t rows, int cols, size_t div, int tile_rows) {
  double ce[64] = {0}, cr[64] = {0}, re[16] = {0}, rr[16] = {0};
  const int cb = cols / 8 < 64 ? cols / 8 : 64;
  for (size_t r = 0; r < rows; r++)
    for (int c = 0; c < cols; c++) {
      const double g = float_of(got[r * cols + c]), x = ref[r * cols + c];
      const double d = isfinite(g) ? (g - x) * (g - x) : 1e30;
      if (c / 8 < 64) { ce[c / 8] += d; cr[c / 8] += x * x; }
      const int sl = (int)(((r / div) % (size_t)tile_rows) / 16) % 16;
      re[sl] += d; rr[sl] += x * x;
    }
  printf("    rel err per 8-column block:");
  for (int b = 0; b < cb; b++) printf(" %.0e", cr[b] > 0 ? sqrt(ce[b] / cr[b]) : sqrt(ce[b]));
  printf("\n    rel err per 16-row slice of the tile:");
  for (int b = 0; b < tile_rows / 16 && b < 16; b++) printf(" %.0e", rr[b] > 0 ? sqrt(re[b] / rr[b]) : sqrt(re[b]));
  printf("\n");
}

/* The case's verdict: ||o - ref|| / ||ref|| and the same over the finite lse entries,
 * both <= 1e-2; an unwritten (NaN) element, or an lse of -inf where the reference has
 * none (or the reverse), is bad. Prints one line; on a failure, where the error sits
 * (explain_errors with rows (r / div) % tile_rows of `cols` columns). */
static int compare(const char *name, const char *extra, const uint16_t *ho, const double *ro, size_t no, int cols,
                   const float *hl, const double *rl, size_t nl, size_t div, int tile_rows) {
  double e2 = 0, r2 = 0, le2 = 0, lr2 = 0;
  size_t bad = 0;
  for (size_t i = 0; i < no; i++) {
    const double g = float_of(ho[i]);
    if (!isfinite(g)) { if (bad++ < 3) printf("  o[%zu] = %g (unwritten or NaN)\n", i, g); continue; }
    e2 += (g - ro[i]) * (g - ro[i]);
    r2 += ro[i] * ro[i];
  }
  for (size_t i = 0; i < nl; i++) {
    const double g = hl[i], r = rl[i];
    if (isinf(r) || isinf(g)) {
      if (!(isinf(r) && isinf(g) && r < 0 && g < 0)) { if (bad++ < 3) printf("  lse[%zu] = %g, want %g\n", i, g, r); }
      continue;
    }
    if (!isfinite(g)) { if (bad++ < 3) printf("  lse[%zu] = %g\n", i, g); continue; }
    le2 += (g - r) * (g - r);
    lr2 += r * r;
  }
  const double eo = r2 > 0 ? sqrt(e2 / r2) : sqrt(e2), el = lr2 > 0 ? sqrt(le2 / lr2) : sqrt(le2);
  const int ok = bad == 0 && eo <= 1e-2 && el <= 1e-2;
  printf("%-40s o rel err %.2e, lse rel err %.2e, %zu bad%s: %s\n", name, eo, el, bad, extra, ok ? "ok" : "FAILED");
  if (!ok) explain_errors(ho, ro, no / (size_t)cols, cols, div, tile_rows);
  return ok;
}

#endif
