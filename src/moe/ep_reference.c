/* ep_reference.c - what dispatch should deliver, computed on the host from every rank's
 * routing: the tests' reference for the counts, the padded offsets and the rows. */
#include "../core/internal.h"
#include "warpspec/moe.h"

ws_status ws_ep_reference_layout(const ws_ep_config *cfg, int nranks, int me, const int *const *topk_idx,
                                 const int *num_tokens, int *counts, int *offsets, int *rows) {
  ws_status s = ws_ep_config_check(cfg, nranks);
  if (s != WS_OK) return s;
  WS_REQUIRE(me >= 0 && me < nranks, "ws_ep_reference_layout: rank %d of %d", me, nranks);
  WS_REQUIRE(topk_idx && num_tokens && counts && offsets, "ws_ep_reference_layout: a NULL argument");
  const int L = cfg->experts / nranks, K = cfg->topk;
  for (int l = 0; l < L; l++) counts[l] = 0;
  for (int r = 0; r < nranks; r++)
    for (int t = 0; t < num_tokens[r]; t++)
      for (int k = 0; k < K; k++) {
        const int e = topk_idx[r][(size_t)t * K + k];
        if (e >= 0 && e < cfg->experts && e / L == me) counts[e % L]++;
      }
  offsets[0] = 0;
  for (int l = 0; l < L; l++) offsets[l + 1] = offsets[l] + (counts[l] + cfg->row_align - 1) / cfg->row_align * cfg->row_align;
  if (!rows) return WS_OK;
  for (int l = 0; l < L; l++) {
    int at = offsets[l];
    for (int r = 0; r < nranks; r++)
      for (int t = 0; t < num_tokens[r]; t++)
        for (int k = 0; k < K; k++) {
          const int e = topk_idx[r][(size_t)t * K + k];
          if (e >= 0 && e < cfg->experts && e / L == me && e % L == l) {
            rows[(size_t)3 * at] = r; rows[(size_t)3 * at + 1] = t; rows[(size_t)3 * at + 2] = k;
            at++;
          }
        }
    for (; at < offsets[l + 1]; at++) rows[(size_t)3 * at] = rows[(size_t)3 * at + 1] = rows[(size_t)3 * at + 2] = -1;
  }
  return WS_OK;
}
