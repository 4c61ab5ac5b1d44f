/* validate.c - each op's index scan for the validation mode (warpspec/check.h says what
 * each checks and why): the op's host checks first, then the device scans. */
#include "internal.h"
#include "index_check.h"
#include "warpspec/check.h"

ws_status ws_attn_validate(const ws_attn_problem *p, cudaStream_t stream) {
  ws_status s = ws_attn_check(p);
  if (s != WS_OK || (p->cu_seqlens_q == NULL && p->cu_seqlens_k == NULL)) return s;
  const char *fn = "ws_attn_forward (validation)";
  s = ws_index_check_offsets(fn, "cu_seqlens_q", p->cu_seqlens_q, p->batch, 0, p->total_q, p->seqlen_q, stream);
  if (s == WS_OK)
    s = ws_index_check_offsets(fn, "cu_seqlens_k", p->cu_seqlens_k, p->batch, 0, p->total_k, p->seqlen_k, stream);
  return s;
}

ws_status ws_mla_decode_validate(const ws_mla_decode_problem *p, cudaStream_t stream) {
  ws_status s = ws_mla_decode_check(p);
  if (s != WS_OK) return s;
  long long max_len = (long long)p->max_pages * p->page_size;
  if (p->max_seqlen > 0 && p->max_seqlen < max_len) max_len = p->max_seqlen;
  return ws_index_check_paged("ws_mla_decode_forward (validation)", p->seqlens, p->block_table, p->batch, p->max_pages,
                              p->page_size, p->num_pages, max_len, stream);
}

ws_status ws_mla_sparse_decode_validate(const ws_mla_sparse_decode_problem *p, cudaStream_t stream) {
  ws_status s = ws_mla_sparse_decode_check(p);
  if (s != WS_OK) return s;
  return ws_index_check_lists("ws_mla_sparse_decode_forward (validation)", "indices", p->indices, p->batch, p->s_q,
                              p->topk, p->num_pages * p->page_size, stream); /* rows: an int (the check) */
}

ws_status ws_gemm_validate(const ws_gemm_problem *p, cudaStream_t stream) {
  ws_status s = ws_gemm_check(p);
  if (s != WS_OK) return s;
  const char *fn = "ws_gemm (validation)";
  if (p->a_rows && (s = ws_index_check_range(fn, "a_rows", p->a_rows, (long long)ws_gemm_rows(p), 0, p->a_rows_total, -1,
                                             stream)) != WS_OK)
    return s;
  if (p->layout == WS_GEMM_GROUPED_CONTIGUOUS) {
    s = ws_index_check_offsets(fn, "group_offsets", p->group_offsets, p->groups, -1, p->m, -1, stream);
    if (s == WS_OK && p->group_rows) /* rows in use: a count past its span is cut to it */
      s = ws_index_check_range(fn, "group_rows", p->group_rows, p->groups, 0, p->m + 1, 0, stream);
    return s;
  }
  if (p->layout == WS_GEMM_GROUPED_MASKED)
    return ws_index_check_range(fn, "group_rows", p->group_rows, p->groups, 0, p->m + 1, 0, stream);
  return WS_OK;
}
