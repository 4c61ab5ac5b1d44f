/* warpspec/fp8.h - FP8 E4M3 (the OCP "E4M3FN" format the Hopper tensor cores read) and
 * the block scales DeepSeek-style FP8 GEMMs use, on the host.
 *
 * E4M3: 1 sign bit, 4 exponent bits (bias 7), 3 mantissa bits. No infinities; the one
 * NaN pattern per sign is S.1111.111; the largest finite value is 448 (S.1111.110);
 * exponent 0 holds the subnormals m/8 * 2^-6. Encoding rounds to nearest, ties to even,
 * and saturates to +-448 (what `cvt.rn.satfinite.e4m3x2.f32` does on the device).
 *
 * Scales: activations carry one fp32 scale per 1 x 128 block of a row (scale[m][k/128]),
 * weights one per 128 x 128 block (scale[n/128][k/128]); a value is q * scale. */
#ifndef WARPSPEC_FP8_H
#define WARPSPEC_FP8_H

#include <stddef.h>
#include <stdint.h>

#include <cuda_runtime_api.h>

#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

#define WS_FP8_E4M3_MAX 448.0f
#define WS_FP8_BLOCK 128 /* scale block edge along K (and N for weights) */

/* The value of an E4M3 byte (NaN for the two NaN patterns). */
double ws_fp8_e4m3_decode(uint8_t byte);

/* The E4M3 byte nearest to x (ties to even), saturated to +-448; NaN stays NaN. */
uint8_t ws_fp8_e4m3_encode(float x);

/* bf16 <-> float on the host (bf16 as its 16-bit pattern; round to nearest even). */
float ws_bf16_to_float(uint16_t b);
uint16_t ws_float_to_bf16(float x);

/* Host quantisation, the reference for the GPU kernels: x is rows x cols (row stride
 * ld, elements), cols a multiple of 128. q gets the E4M3 bytes (row stride cols),
 * scale[r * (cols / 128) + c / 128] = amax of the block / 448 (1 if the block is 0). */
ws_status ws_fp8_quantize_1x128_host(const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale);

/* Same with 128 x 128 blocks: scale[(r / 128) * (cols / 128) + c / 128]; rows need not
 * be a multiple of 128 (the last block row is partial). */
ws_status ws_fp8_quantize_128x128_host(const float *x, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale);

/* The same on the GPU from bf16 input (x: rows x cols bf16 values, row stride ld
 * elements), stream-ordered; results equal the host versions bit for bit. */
ws_status ws_fp8_quantize_1x128(const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale,
                                cudaStream_t stream);
ws_status ws_fp8_quantize_128x128(const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale,
                                  cudaStream_t stream);

/* 1 x 128 with the scales K-block-major: scale[(c / 128) * scale_ld + r] (scale_ld >= rows,
 * a multiple of 4): ws_gemm's a_scale with a_scale_ld = scale_ld, its faster layout. */
ws_status ws_fp8_quantize_1x128_kmajor(const void *x_bf16, size_t rows, size_t cols, size_t ld, uint8_t *q, float *scale,
                                       size_t scale_ld, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
