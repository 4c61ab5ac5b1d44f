/* layer_auto.h - WS_MOE_AUTO's rule: the path a call takes from the rank count and the
 * rows a local expert is expected to get (config.h's thresholds and the measurements
 * behind them). Host code, tested without a GPU (tests/cpu/test_moe_host.c). */
#ifndef WARPSPEC_MOE_LAYER_AUTO_H
#define WARPSPEC_MOE_LAYER_AUTO_H

#include "warpspec/moe_layer.h"

#ifdef __cplusplus
extern "C" {
#endif

ws_moe_path moe_layer_auto_path(int nranks, double rows_per_expert);

#ifdef __cplusplus
}
#endif

#endif
