/* moe_test_data.h - what the MoE GPU tests draw and compare with, written once: the
 * deterministic hash every rank uses to draw every rank's data from one seed, the FP8
 * weights of all experts (the float64 reference needs them all; each rank uploads its
 * own), and the relative error of a BF16 output against a float64 reference. */
#ifndef WARPSPEC_MOE_TEST_DATA_H
#define WARPSPEC_MOE_TEST_DATA_H

#include "gpu_test.h"
#include "warpspec/fp8.h"

#include <math.h>

/* A small deterministic hash for the values every rank must agree on. */
static __host__ __device__ uint32_t mix(uint64_t a) {
  a ^= a >> 33; a *= 0xff51afd7ed558ccdull; a ^= a >> 33; a *= 0xc4ceb9fe1a85ec53ull; a ^= a >> 33;
  return (uint32_t)a;
}
static __host__ __device__ float unit(uint64_t a) { return (float)(mix(a) % 2001) / 1000.0f - 1.0f; } /* [-1, 1] */

/* Every expert's L1 ([E][2 I][H], scales [E][2 I / 128][H / 128]) and L2 ([E][H][I], scales
 * [E][H / 128][I / 128]) weights: values in [-0.1, 0.1] drawn from `seed`, quantised to
 * E4M3 with 128 x 128 block scales by the host quantiser. */
static void moe_test_weights(uint64_t seed, int E, int H, int I, uint8_t **w1, float **w1s, uint8_t **w2, float **w2s) {
  const int hb = H / 128, ib = I / 128;
  float *f = (float *)host_alloc((size_t)2 * I * H, sizeof(float), 0);
  *w1 = (uint8_t *)host_alloc((size_t)E * 2 * I * H, 1, 0);
  *w2 = (uint8_t *)host_alloc((size_t)E * H * I, 1, 0);
  *w1s = (float *)host_alloc((size_t)E * 2 * ib * hb, sizeof(float), 0);
  *w2s = (float *)host_alloc((size_t)E * hb * ib, sizeof(float), 0);
  for (int e = 0; e < E; e++) {
    for (size_t i = 0; i < (size_t)2 * I * H; i++) f[i] = unit(seed ^ 0xA1ull ^ ((uint64_t)e << 40) ^ i) * 0.1f;
    WS_OK_OR_DIE(ws_fp8_quantize_128x128_host(f, (size_t)2 * I, (size_t)H, (size_t)H, *w1 + (size_t)e * 2 * I * H,
                                              *w1s + (size_t)e * 2 * ib * hb));
    for (size_t i = 0; i < (size_t)H * I; i++) f[i] = unit(seed ^ 0xA2ull ^ ((uint64_t)e << 40) ^ i) * 0.1f;
    WS_OK_OR_DIE(ws_fp8_quantize_128x128_host(f, (size_t)H, (size_t)I, (size_t)I, *w2 + (size_t)e * H * I,
                                              *w2s + (size_t)e * hb * ib));
  }
  free(f);
}

/* ||got - ref|| / ||ref|| over the values that are not NaN (counted in *nan_count: a NaN
 * is a row the kernel never wrote, the outputs having been poisoned). */
static double rel_err_bf16(const uint16_t *got, const double *ref, size_t n, long *nan_count) {
  double num = 0, den = 0;
  for (size_t i = 0; i < n; i++) {
    const double g = ws_bf16_to_float(got[i]);
    if (isnan(g)) { (*nan_count)++; continue; }
    num += (g - ref[i]) * (g - ref[i]);
    den += ref[i] * ref[i];
  }
  return sqrt(num / (den > 0 ? den : 1));
}

#endif
