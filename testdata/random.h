/* random.h - the random stream the GPU tests and the benchmarks draw their data from,
 * written once (testdata/: generators both tests/ and bench/ include, neither owning
 * them; docs/architecture.md). A xorshift64 state the caller keeps: the tests seed
 * theirs from the time (tests/gpu/gpu_test.h), a benchmark keeps TD_RNG_START so that
 * two runs time the same data. Plain C, no CUDA: a CPU test may include it too. */
#ifndef WARPSPEC_TESTDATA_RANDOM_H
#define WARPSPEC_TESTDATA_RANDOM_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define TD_RNG_START 0x2545F4914F6CDD1Dull

/* One xorshift64 step of *state; the new state, all 64 bits. */
static inline uint64_t td_rng_next(uint64_t *state) {
  uint64_t s = *state;
  s ^= s << 13;
  s ^= s >> 7;
  s ^= s << 17;
  *state = s;
  return s;
}

/* The next 32 bits of the stream in *state (bits 16..47 of the new state). */
static inline uint32_t td_rng_u32(uint64_t *state) { return (uint32_t)(td_rng_next(state) >> 16); }

/* A token's k-th expert of n, distinct from its first k (chosen[0 .. k - 1]): states drawn
 * until one (mod n) is new; the MoE benchmarks' uniform top-k routing. */
static inline int td_draw_distinct(uint64_t *state, const int *chosen, int k, int n) {
  for (;;) {
    const int e = (int)(td_rng_next(state) % (uint64_t)n);
    int dup = 0;
    for (int j = 0; j < k; j++) dup |= chosen[j] == e;
    if (!dup) return e;
  }
}

/* f rounded to the nearest BF16, ties to even (finite f: what the fills below produce). */
static inline uint16_t td_bf16(float f) {
  uint32_t u;
  memcpy(&u, &f, 4);
  u += 0x7FFFu + ((u >> 16) & 1u);
  return (uint16_t)(u >> 16);
}

/* n BF16 values uniform in [-amp, amp], one draw each, in order. */
static inline void td_fill_uniform(uint64_t *state, uint16_t *x, size_t n, float amp) {
  for (size_t i = 0; i < n; i++) x[i] = td_bf16(amp * ((float)(td_rng_u32(state) % 2000001u) / 1000000.0f - 1.0f));
}

#endif
