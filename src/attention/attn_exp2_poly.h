/* attn_exp2_poly.h - 2^x for x <= 0 on the FMA pipe, the softmax's second source of
 * exponentials beside the SFU (MUFU.EX2, 16 per clock per SM: at d 64 the SFU needs as
 * many cycles per key block as the tensor cores; FA4 offloads a share the same way).
 * n = round(x) from a 1.5 x 2^23 add, f = x - n in [-0.5, 0.5], 2^f by a cubic fitted for
 * relative error (7.5e-5 at most, P then rounds to BF16 at 3.9e-3), times 2^n built in the
 * exponent field. x is clamped below at -127 with NaN kept (max.NaN): -inf gives exactly 0
 * (2^-127 -> scale 0), NaN gives NaN, as ex2.approx does. The host form (tests) does the same
 * float operations in the same order. */
#ifndef WARPSPEC_ATTN_EXP2_POLY_H
#define WARPSPEC_ATTN_EXP2_POLY_H

#include <math.h>
#include <stdint.h>
#include <string.h>

#ifdef __CUDACC__
#define ATTN_EXP2_HD __host__ __device__
#else
#define ATTN_EXP2_HD
#endif

#define ATTN_EXP2_MAGIC 12582912.0f /* 1.5 x 2^23: x + it has round(x) in its low mantissa bits */
#define ATTN_EXP2_C0 0.999928117f
#define ATTN_EXP2_C1 0.693260968f
#define ATTN_EXP2_C2 0.242610544f
#define ATTN_EXP2_C3 0.0551713221f

/* 2^n for the n in r = x + ATTN_EXP2_MAGIC (x in [-127, 0]): r's bits are 0x4B400000 + n, so
 * their low 9 bits plus 127 are n + 127 in [0, 127], the exponent field (0 for n = -127). */
static inline ATTN_EXP2_HD uint32_t attn_exp2_scale_bits(uint32_t r_bits) { return (r_bits + 127u) << 23; }

static inline float attn_exp2_poly_host(float x) {
  const float xc = x != x ? x : (x > -127.0f ? x : -127.0f);
  const float r = xc + ATTN_EXP2_MAGIC;
  const float f = xc - (r - ATTN_EXP2_MAGIC);
  const float p = fmaf(fmaf(fmaf(ATTN_EXP2_C3, f, ATTN_EXP2_C2), f, ATTN_EXP2_C1), f, ATTN_EXP2_C0);
  uint32_t rb, sb;
  float scale;
  memcpy(&rb, &r, 4);
  sb = attn_exp2_scale_bits(rb);
  memcpy(&scale, &sb, 4);
  return p * scale;
}

#endif
