/* warpspec/check.h - the validation mode: index tensors checked on the device.
 *
 * The fast paths trust their index tensors (varlen offsets, a paged cache's block table
 * and lengths, grouped-GEMM offsets, MoE expert ids), as FlashAttention and DeepGEMM do:
 * reading them on the host would cost a synchronisation per call. A bad entry then reads
 * out of bounds or gives silent garbage. The validation mode finds it: before each kernel
 * that takes index tensors, a small kernel scans them on the device, the host waits for
 * it, and a bad entry is WS_ERR_INVALID naming the tensor, the first bad position, its
 * value and the rule it broke, before the kernel is launched.
 *
 * On with WARPSPEC_CHECK=1 in the environment or ws_set_check_mode(1) (Python: the
 * check=True keyword of each op, or the same variable). It synchronises the stream, so a
 * call inside CUDA graph capture is refused (WS_ERR_INVALID) while the mode is on: capture
 * with it off. Each op's own ws_*_validate function runs the same scan once, whatever the
 * mode. What each op checks is written next to it (attention.h, gemm.h, moe.h) and in
 * docs/reliability.md. */
#ifndef WARPSPEC_CHECK_H
#define WARPSPEC_CHECK_H

#include <cuda_runtime_api.h>

#include "attention.h"
#include "config.h"
#include "gemm.h"
#include "status.h"

#ifdef __cplusplus
extern "C" {
#endif

/* 1: validate index tensors before every kernel that reads them; 0: trust them (the
 * default); -1: back to what WARPSPEC_CHECK (WS_CHECK_ENV, config.h) says, read again
 * now and then kept: the ops ask on their fast path. */
ws_status ws_set_check_mode(int mode);
/* Whether the validation mode is on for this process. */
int ws_check_mode(void);

/* Each op's scan, run once whatever the mode (they wait for the stream; WS_OK or
 * WS_ERR_INVALID naming the first bad entry). With the mode on the ops run them first.
 *   ws_attn_forward, varlen: cu_seqlens_q / _k start at 0, never decrease, end at most at
 *     total_q / total_k, and no sequence is longer than seqlen_q / seqlen_k (the kernel's
 *     grid covers that many rows: a longer one would lose its tail). Dense: nothing.
 *   ws_mla_decode_forward: seqlens[b] in 0 .. max_pages x page_size (and <= max_seqlen when
 *     given); block_table[b][p] in 0 .. num_pages - 1 for the pages a sequence uses
 *     (p < ceil(seqlens[b] / page_size); the rest of a row is never read).
 *   ws_mla_sparse_decode_forward: every indices[b][i][j] is -1 (masked) or a cache row
 *     0 .. num_pages x page_size - 1 (the kernel masks others; the scan names them).
 *   ws_gemm, grouped contiguous: group_offsets[0] >= 0, never decreasing, the last <= m;
 *     grouped masked: group_rows[g] in 0 .. m. Dense: nothing.
 *   ws_ep_dispatch and ws_moe_layer_forward (mode on only): every topk_idx entry is -1 or
 *     an expert id 0 .. experts - 1 (without the mode, others are skipped and counted:
 *     ws_ep_check reports them).
 * The sparse MLA prefill's and NSA's indices need no scan: any value is defined (out of
 * range = masked, attention.h). */
ws_status ws_attn_validate(const ws_attn_problem *p, cudaStream_t stream);
ws_status ws_mla_decode_validate(const ws_mla_decode_problem *p, cudaStream_t stream);
ws_status ws_mla_sparse_decode_validate(const ws_mla_sparse_decode_problem *p, cudaStream_t stream);
ws_status ws_gemm_validate(const ws_gemm_problem *p, cudaStream_t stream);

#ifdef __cplusplus
}
#endif
#endif
