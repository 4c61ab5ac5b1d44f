/* ep_overlap.h - when a dispatch runs its expand beside a phased send (dispatch.cu;
 * config.h's WS_EP_OVERLAP_* give the measurements behind the thresholds). Host code,
 * plain C, tested without a GPU (tests/cpu/test_moe_host.c). */
#ifndef WARPSPEC_EP_OVERLAP_H
#define WARPSPEC_EP_OVERLAP_H

#include "warpspec/config.h"

/* 1: overlapped. Never in low-latency mode (a row is quantised once for all its ranks,
 * and decode's few rows are one round of the copy either way); knob (WARPSPEC_EP_OVERLAP)
 * 0 or 1 forces it, -1 chooses: the copy receive (index 0) from WS_EP_OVERLAP_MIN_SMS SMs
 * (the handle's, split between the two kernels) and WS_EP_OVERLAP_MIN_TOKENS tokens, where
 * the expand it hides outweighs the phased send's cost. The index receive's expand copies
 * no rows (it writes the index): nothing to hide, so only where the phased send is itself
 * the faster send, from WS_EP_OVERLAP_INDEX_MIN_SMS SMs and WS_EP_OVERLAP_INDEX_MIN_RANKS
 * ranks (config.h has the measurements). */
static inline int ep_overlap_rule(int low_latency, int knob, int sms, int tokens, int index, int nranks) {
  if (low_latency) return 0;
  if (knob >= 0) return knob != 0;
  if (index && (sms < WS_EP_OVERLAP_INDEX_MIN_SMS || nranks < WS_EP_OVERLAP_INDEX_MIN_RANKS)) return 0;
  return sms >= WS_EP_OVERLAP_MIN_SMS && tokens >= WS_EP_OVERLAP_MIN_TOKENS;
}

#endif
