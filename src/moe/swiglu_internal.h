/* swiglu_internal.h - the L1 epilogue pass with a device-side row count (the MoE layer's
 * rows in use are expert_offsets[local experts], known only on the device). */
#ifndef WARPSPEC_SWIGLU_INTERNAL_H
#define WARPSPEC_SWIGLU_INTERNAL_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "warpspec/status.h"

#ifdef __cplusplus
extern "C" {
#endif
/* ws_moe_swiglu_quant over min(rows, *live_rows) rows (live_rows NULL: all rows). */
ws_status moe_swiglu_quant_live(const void *h, size_t rows, const int *live_rows, size_t inter, uint8_t *q,
                                float *scale, size_t scale_ld, cudaStream_t stream);
#ifdef __cplusplus
}
#endif
#endif
