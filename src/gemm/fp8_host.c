/* fp8_host.c - E4M3 and bf16 conversions and block quantisation on the host: the
 * definitions the GPU kernels and the tests are checked against. */
#include "../core/internal.h"
#include "warpspec/fp8.h"

#include <math.h>
#include <string.h>

double ws_fp8_e4m3_decode(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  if (exp == 15 && man == 7) return NAN;
  const double mag = exp == 0 ? ldexp(man / 8.0, -6) : ldexp(1.0 + man / 8.0, exp - 7);
  return sign ? -mag : mag;
}

uint8_t ws_fp8_e4m3_encode(float x) {
  if (isnan(x)) return 0x7F;
  const uint8_t sign = signbit(x) ? 0x80 : 0x00;
  const double a = fabs((double)x);
  if (a >= WS_FP8_E4M3_MAX) return sign | 0x7E; /* saturate (infinities too) */
  int e;
  frexp(a, &e); /* a = f * 2^e, f in [0.5, 1) */
  e -= 1;       /* a = g * 2^e, g in [1, 2) */
  if (a == 0.0 || e < -6) {
    /* subnormal range: steps of 2^-9; 8 steps is the smallest normal, which still encodes */
    const long m = (long)nearbyint(a * 512.0); /* ties to even (default rounding mode) */
    return sign | (uint8_t)m;
  }
  long m = (long)nearbyint((ldexp(a, -e) - 1.0) * 8.0);
  if (m == 8) { m = 0; e++; }
  const int biased = e + 7;
  if (biased > 15 || (biased == 15 && m == 7)) return sign | 0x7E;
  return sign | (uint8_t)(biased << 3 | m);
}

float ws_bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, sizeof f);
  return f;
}

uint16_t ws_float_to_bf16(float x) {
  uint32_t u;
  memcpy(&u, &x, sizeof u);
  if (isnan(x)) return (uint16_t)((u >> 16) | 0x40);
  u += 0x7FFF + ((u >> 16) & 1); /* round to nearest even */
  return (uint16_t)(u >> 16);
}

static float block_scale(float amax) { return amax > 0.0f ? amax / WS_FP8_E4M3_MAX : 1.0f; }

ws_status ws_fp8_quantize_1x128_host(const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale) {
  WS_REQUIRE(x && q && scale, "ws_fp8_quantize_1x128_host: x, q or scale is NULL");
  WS_REQUIRE(cols % WS_FP8_BLOCK == 0, "ws_fp8_quantize_1x128_host: cols %zu is not a multiple of 128", cols);
  WS_REQUIRE(ld >= cols, "ws_fp8_quantize_1x128_host: ld %zu < cols %zu", ld, cols);
  const size_t kb = cols / WS_FP8_BLOCK;
  for (size_t r = 0; r < rows; r++)
    for (size_t b = 0; b < kb; b++) {
      float amax = 0.0f;
      for (size_t c = b * WS_FP8_BLOCK; c < (b + 1) * WS_FP8_BLOCK; c++) amax = fmaxf(amax, fabsf(x[r * ld + c]));
      const float s = block_scale(amax);
      scale[r * kb + b] = s;
      for (size_t c = b * WS_FP8_BLOCK; c < (b + 1) * WS_FP8_BLOCK; c++) q[r * cols + c] = ws_fp8_e4m3_encode(x[r * ld + c] / s);
    }
  return WS_OK;
}

ws_status ws_fp8_quantize_128x128_host(const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale) {
  WS_REQUIRE(x && q && scale, "ws_fp8_quantize_128x128_host: x, q or scale is NULL");
  WS_REQUIRE(cols % WS_FP8_BLOCK == 0, "ws_fp8_quantize_128x128_host: cols %zu is not a multiple of 128", cols);
  WS_REQUIRE(ld >= cols, "ws_fp8_quantize_128x128_host: ld %zu < cols %zu", ld, cols);
  const size_t kb = cols / WS_FP8_BLOCK, rb = (rows + WS_FP8_BLOCK - 1) / WS_FP8_BLOCK;
  for (size_t i = 0; i < rb; i++)
    for (size_t b = 0; b < kb; b++) {
      const size_t r1 = (i + 1) * WS_FP8_BLOCK < rows ? (i + 1) * WS_FP8_BLOCK : rows;
      float amax = 0.0f;
      for (size_t r = i * WS_FP8_BLOCK; r < r1; r++)
        for (size_t c = b * WS_FP8_BLOCK; c < (b + 1) * WS_FP8_BLOCK; c++) amax = fmaxf(amax, fabsf(x[r * ld + c]));
      const float s = block_scale(amax);
      scale[i * kb + b] = s;
      for (size_t r = i * WS_FP8_BLOCK; r < r1; r++)
        for (size_t c = b * WS_FP8_BLOCK; c < (b + 1) * WS_FP8_BLOCK; c++)
          q[r * cols + c] = ws_fp8_e4m3_encode(x[r * ld + c] / s);
    }
  return WS_OK;
}
