/* moe_common.cuh - test_moe: what every area of the test draws its data from. Every
 * rank draws every rank's routing and input rows from one shared seed (comm_test_start
 * hands rank 0's to the others), so each rank can compute its own reference without
 * exchanging data; the routings cover the shapes the transfers must survive (uniform,
 * one hot expert, all to the next rank, none leave, -1 slots).
 *
 * Part of the single translation unit test_moe.cu: test.h's failure counter is per
 * translation unit, so the area files are included, not linked. */
#ifndef WARPSPEC_TEST_MOE_COMMON_CUH
#define WARPSPEC_TEST_MOE_COMMON_CUH

#include "../comm_test.h"
#include "../moe_test_data.h"
#include "warpspec/comm.h"
#include "warpspec/fp8.h"
#include "warpspec/moe.h"

#include <math.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

/* this rank, the number of ranks, and the seed they share (main sets them through
 * comm_test_start) */
static int rank, nranks;
static uint64_t seed;

/* ROUTE_NONE: every slot -1 (no expert at all: the output is zeros); ROUTE_REPEATS: each odd
 * slot names the expert of the slot before it (a token's expert in two slots, which the
 * layer's contract allows: two rows of its block, each weighted) */
typedef enum { ROUTE_UNIFORM, ROUTE_ONE_EXPERT, ROUTE_OTHER_RANK, ROUTE_STAY, ROUTE_HOLES, ROUTE_NONE, ROUTE_REPEATS } routing;

/* Rank r's routing: [T][K] ids (distinct per token but for ROUTE_REPEATS), and weights. */
static void make_routing(const ws_ep_config *cfg, int r, int T, routing how, int *idx, float *w, uint64_t salt) {
  const int E = cfg->experts, K = cfg->topk, L = E / nranks;
  for (int t = 0; t < T; t++)
    for (int k = 0; k < K; k++) {
      const uint64_t h = seed ^ salt ^ ((uint64_t)r << 48) ^ ((uint64_t)t << 8) ^ (uint64_t)k;
      int e;
      switch (how) {
      case ROUTE_ONE_EXPERT: e = k == 0 ? 0 : (int)((mix(h) % (uint32_t)(E - 1)) + 1); break;
      case ROUTE_OTHER_RANK: e = ((r + 1) % nranks) * L + (int)(mix(h) % (uint32_t)L); break;
      case ROUTE_STAY: e = r * L + (int)(mix(h) % (uint32_t)L); break;
      default: e = (int)(mix(h) % (uint32_t)E); break;
      }
      /* distinct experts per token (a token picks each expert once), unless repeating */
      if (how == ROUTE_REPEATS && k % 2 == 1) e = idx[t * K + k - 1];
      else
        for (int j = 0; j < k; j++)
          if (idx[t * K + j] == e) { e = -2; break; }
      if (e == -2 || (how == ROUTE_HOLES && mix(h ^ 7) % 4 == 0) || how == ROUTE_NONE) e = -1;
      idx[t * K + k] = e;
      w[t * K + k] = 0.25f + 0.5f * (unit(h ^ 99) + 1.0f) / 2.0f;
    }
}

/* Rank r's input rows: FP8 bytes + row-major scales, or bf16. */
static void make_x(const ws_ep_config *cfg, int r, int T, uint8_t *x, float *scale, uint64_t salt) {
  const int H = cfg->hidden;
  for (int t = 0; t < T; t++)
    for (int c = 0; c < H; c++) {
      const float v = unit(seed ^ salt ^ 0xABCDull ^ ((uint64_t)r << 50) ^ ((uint64_t)t << 20) ^ (uint64_t)c) * 3.0f;
      if (cfg->payload == WS_EP_FP8) x[(size_t)t * H + c] = ws_fp8_e4m3_encode(v);
      else ((uint16_t *)x)[(size_t)t * H + c] = ws_float_to_bf16(v);
    }
  if (cfg->payload == WS_EP_FP8)
    for (int t = 0; t < T; t++)
      for (int b = 0; b < H / 128; b++) scale[t * (H / 128) + b] = 0.5f + (float)(mix(seed ^ salt ^ (uint64_t)(t * 131 + b)) % 100) / 64.0f;
}

/* monotonic seconds: how long a bounded wait took */
static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

#endif
