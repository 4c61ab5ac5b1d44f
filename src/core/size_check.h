/* size_check.h - arithmetic for the argument checks that cannot wrap.
 *
 * Shape fields are ints, and a check that multiplies two of them in int compares a
 * wrapped value with its limit: 2^26 pages of 64 rows is 0 in 32 bits. The checks form
 * such products here, in 64 bits and saturating, and compare them with the limits below
 * (docs/reliability.md, "Size checks and integer overflow"). */
#ifndef WARPSPEC_SIZE_CHECK_H
#define WARPSPEC_SIZE_CHECK_H

#include <stddef.h>
#include <stdint.h>

/* Kernels index rows, keys and tiles with 32-bit ints: every such count is at most this. */
#define WS_INDEX_MAX INT32_MAX
/* One extent (a sequence, a key list, a GEMM's m or n) is at most 2^30, so that rounding
 * it up to a tile, or a tile's start plus its size, cannot pass WS_INDEX_MAX. */
#define WS_EXTENT_MAX (1 << 30)

/* a x b for a, b >= 0, saturated at INT64_MAX. */
static inline int64_t ws_mul_sat(int64_t a, int64_t b) { return a != 0 && b > INT64_MAX / a ? INT64_MAX : a * b; }
static inline int64_t ws_mul3_sat(int64_t a, int64_t b, int64_t c) { return ws_mul_sat(ws_mul_sat(a, b), c); }

/* a x b x c in size_t: 1 and *out, or 0 when it does not fit. */
static inline int ws_size_mul3(size_t a, size_t b, size_t c, size_t *out) {
  if ((a != 0 && b > SIZE_MAX / a) || (a * b != 0 && c > SIZE_MAX / (a * b))) return 0;
  *out = a * b * c;
  return 1;
}

/* 1 when [p, p + bytes) does not run past the end of the address space. */
static inline int ws_span_fits(const void *p, size_t bytes) { return bytes <= UINTPTR_MAX - (uintptr_t)p; }

#endif
