/* fp8_host.c - E4M3 and bf16 conversions and block quantisation on the host: the
 * definitions the GPU kernels and the tests are checked against. */
#define _POSIX_C_SOURCE 200809L /* pthread_once under -std=c11 */
#include "../core/internal.h"
#include "warpspec/fp8.h"

#include <limits.h>
#include <math.h>
#include <pthread.h>
#include <string.h>

/* The definition of an E4M3 byte's value. */
static double e4m3_value(uint8_t b) {
  const int sign = b >> 7, exp = (b >> 3) & 15, man = b & 7;
  if (exp == 15 && man == 7) return NAN;
  const double mag = exp == 0 ? ldexp(man / 8.0, -6) : ldexp(1.0 + man / 8.0, exp - 7);
  return sign ? -mag : mag;
}

/* All 256 values, made once: the float64 references decode every operand of every product
 * (two ldexp calls each took most of a GEMM reference's time). */
static double e4m3_table[256];
static pthread_once_t e4m3_once = PTHREAD_ONCE_INIT;
static void e4m3_fill(void) {
  for (int v = 0; v < 256; v++) e4m3_table[v] = e4m3_value((uint8_t)v);
}

double ws_fp8_e4m3_decode(uint8_t b) {
  pthread_once(&e4m3_once, e4m3_fill);
  return e4m3_table[b];
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

/* One block quantiser's work: row blocks of `block_rows` rows (1 or 128), each on its own
 * thread (ws_parallel_for): every block does the same arithmetic whichever thread takes
 * it, so the bits do not depend on the threads. A 4096 x 7168 matrix took about a second
 * on one core, most of the GEMM test's host time on the GPU machine. */
typedef struct {
  const float *x;
  size_t rows, cols, ld, block_rows;
  uint8_t *q;
  float *scale;
} quant_job;

static void quant_rows(void *ctx, int item, int worker) {
  (void)worker;
  const quant_job *j = (const quant_job *)ctx;
  const size_t kb = j->cols / WS_FP8_BLOCK, r0 = (size_t)item * j->block_rows;
  const size_t r1 = r0 + j->block_rows < j->rows ? r0 + j->block_rows : j->rows;
  for (size_t b = 0; b < kb; b++) {
    float amax = 0.0f;
    for (size_t r = r0; r < r1; r++)
      for (size_t c = b * WS_FP8_BLOCK; c < (b + 1) * WS_FP8_BLOCK; c++) amax = fmaxf(amax, fabsf(j->x[r * j->ld + c]));
    const float s = block_scale(amax);
    j->scale[(size_t)item * kb + b] = s;
    for (size_t r = r0; r < r1; r++)
      for (size_t c = b * WS_FP8_BLOCK; c < (b + 1) * WS_FP8_BLOCK; c++)
        j->q[r * j->cols + c] = ws_fp8_e4m3_encode(j->x[r * j->ld + c] / s);
  }
}

static ws_status quantize_host(const char *what, const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q,
                               float *scale, size_t block_rows) {
  WS_REQUIRE(x && q && scale, "%s: x, q or scale is NULL", what);
  WS_REQUIRE(cols % WS_FP8_BLOCK == 0, "%s: cols %zu is not a multiple of 128", what, cols);
  WS_REQUIRE(ld >= cols, "%s: ld %zu < cols %zu", what, ld, cols);
  const size_t blocks = (rows + block_rows - 1) / block_rows;
  WS_REQUIRE(blocks <= (size_t)INT_MAX, "%s: %zu rows, at most %zu", what, rows, (size_t)INT_MAX * block_rows);
  const quant_job j = {x, rows, cols, ld, block_rows, q, scale};
  /* threads only where they pay for their start: about 30 ms of work per million values */
  ws_parallel_for((int)blocks, rows * cols >= ((size_t)1 << 20) ? ws_host_workers() : 1, quant_rows, (void *)&j);
  return WS_OK;
}

ws_status ws_fp8_quantize_1x128_host(const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale) {
  return quantize_host("ws_fp8_quantize_1x128_host", x, rows, cols, ld, q, scale, 1);
}

ws_status ws_fp8_quantize_128x128_host(const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale) {
  return quantize_host("ws_fp8_quantize_128x128_host", x, rows, cols, ld, q, scale, WS_FP8_BLOCK);
}
