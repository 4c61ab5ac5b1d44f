/* ep_overlap.h - when a dispatch runs its expand beside a phased send (dispatch.cu;
 * config.h's WS_EP_OVERLAP_* give the measurements behind the thresholds). Host code,
 * plain C, tested without a GPU (tests/cpu/test_moe_host.c). */
#ifndef WARPSPEC_EP_OVERLAP_H
#define WARPSPEC_EP_OVERLAP_H

#include "warpspec/config.h"

/* 1: overlapped. Never in low-latency mode (a row is quantised once for all its ranks,
 * and decode's few rows are one round of the copy either way); knob (WARPSPEC_EP_OVERLAP)
 * 0 or 1 forces it, -1 chooses: from WS_EP_OVERLAP_MIN_SMS SMs (the handle's, split
 * between the two kernels) and WS_EP_OVERLAP_MIN_TOKENS tokens, where the expand it hides
 * outweighs the phased send's cost. */
static inline int ep_overlap_rule(int low_latency, int knob, int sms, int tokens) {
  if (low_latency) return 0;
  if (knob >= 0) return knob != 0;
  return sms >= WS_EP_OVERLAP_MIN_SMS && tokens >= WS_EP_OVERLAP_MIN_TOKENS;
}

#endif
