/* index_check.h - the device scans behind the validation mode (warpspec/check.h). Each
 * scans an int32 index tensor in device memory, waits for the stream, and returns
 * WS_ERR_INVALID naming `fn`, the tensor, the first bad position and its value, or
 * WS_OK. Refused inside CUDA graph capture (they wait for the stream). Not installed. */
#ifndef WARPSPEC_INDEX_CHECK_H
#define WARPSPEC_INDEX_CHECK_H

#include <cuda_runtime_api.h>

#include "warpspec/status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* Offsets off[0 .. n]: off[0] == first (-1: any value >= 0), non-decreasing, off[n] <=
 * total, and each step off[i + 1] - off[i] <= max_step (-1: no bound). */
ws_status ws_index_check_offsets(const char *fn, const char *name, const int *off, int n, int first, long long total,
                                 long long max_step, cudaStream_t stream);

/* Values a[0 .. n - 1] in lo .. hi - 1, or equal to `allowed` (e.g. -1 for "no expert"). */
ws_status ws_index_check_range(const char *fn, const char *name, const int *a, long long n, int lo, int hi, int allowed,
                               cudaStream_t stream);

/* Index lists a[batch][s_q][n]: each entry -1 or in 0 .. hi - 1; a bad one is named by
 * its sequence, query token and position. */
ws_status ws_index_check_lists(const char *fn, const char *name, const int *a, int batch, int s_q, int n, int hi,
                               cudaStream_t stream);

/* A paged cache: lens[b] in 0 .. max_len for every b < batch, and the page ids
 * table[b][p] in 0 .. num_pages - 1 for every page p < ceil(lens[b] / page_size) in use. */
ws_status ws_index_check_paged(const char *fn, const int *lens, const int *table, int batch, int max_pages, int page_size,
                               int num_pages, long long max_len, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
