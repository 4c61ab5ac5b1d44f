/* warpspec/sendrecv_geometry.h - how a sendrecv message is cut into blocks and steps.
 *
 * The sender decides: `blocks` CTAs each own a contiguous, 16-byte aligned span of the
 * message and move it in steps of at most `stride` bytes through WS_SR_DEPTH staging
 * slots on the receiver. Every block takes at least one step, also for 0 bytes: the
 * step's header tells the receiver what the sender sends, so mismatched sizes are
 * detected instead of waited on. Adaptive stride: a block's span goes in one step up to
 * WS_SR_ONE_STEP_BYTES, otherwise in about two (fewer system fences per byte), never
 * more than WS_SR_MAX_STRIDE. Blocks of at most WS_SR_LL_BYTES use the low-latency
 * protocol: 16-byte lines of 8 data bytes and two copies of the step number, written
 * and polled line by line, no fence and no separate signal. Shared by host
 * (validation, tests) and device. */
#ifndef WARPSPEC_SENDRECV_GEOMETRY_H
#define WARPSPEC_SENDRECV_GEOMETRY_H

#include <stdint.h>

#include "layout.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct {
  uint64_t bytes;      /* message size                                  */
  uint32_t blocks;     /* CTAs that carry it                            */
  uint32_t stride;     /* payload bytes per step (multiple of 16)       */
  uint64_t per_block;  /* span of each block (multiple of 16)           */
  uint32_t ll;         /* 1: low-latency lines (one step per block)      */
} ws_sr_geometry;

/* Tuned default CTA count for a message size (docs/benchmarks.md). */
WS_CX uint32_t ws_sr_default_blocks(uint64_t bytes) {
  /* best eager CTA count per size on 2 x H200 (docs/benchmarks.md, sendrecv sweep) */
  return bytes <= (4u << 10) ? 1u : bytes <= (16u << 10) ? 4u : bytes <= (64u << 10) ? 16u : bytes <= (256u << 10) ? 32u
       : bytes <= (512u << 10) ? 48u : 64u;
}

WS_CX uint64_t ws_sr_align16(uint64_t x) { return (x + 15u) & ~(uint64_t)15u; }

/* blocks: 0 picks the default; otherwise 1..WS_SR_MAX_BLOCKS (checked by the caller). */
WS_CX ws_sr_geometry ws_sr_geometry_make(uint64_t bytes, uint32_t blocks) {
  ws_sr_geometry g = WS_ZERO_INIT;
  g.bytes = bytes;
  g.blocks = blocks ? blocks : ws_sr_default_blocks(bytes);
  g.per_block = ws_sr_align16((bytes + g.blocks - 1) / g.blocks);
  uint64_t stride = g.per_block <= WS_SR_ONE_STEP_BYTES ? g.per_block : ws_sr_align16((g.per_block + 1) / 2);
  if (stride > WS_SR_MAX_STRIDE) stride = WS_SR_MAX_STRIDE;
  if (stride < 16) stride = 16;
  g.stride = (uint32_t)stride;
  g.ll = g.per_block <= WS_SR_LL_BYTES;
  return g;
}

WS_CX uint64_t ws_sr_block_begin(const ws_sr_geometry *g, uint32_t b) {
  const uint64_t x = (uint64_t)b * g->per_block;
  return x < g->bytes ? x : g->bytes;
}

WS_CX uint64_t ws_sr_block_bytes(const ws_sr_geometry *g, uint32_t b) {
  return ws_sr_block_begin(g, b + 1) - ws_sr_block_begin(g, b);
}

/* Steps block b takes: at least one. */
WS_CX uint64_t ws_sr_block_steps(const ws_sr_geometry *g, uint32_t b) {
  const uint64_t n = ws_sr_block_bytes(g, b);
  return n == 0 ? 1 : (n + g->stride - 1) / g->stride;
}

#ifdef __cplusplus
}
#endif
#endif
