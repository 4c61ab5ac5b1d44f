/* mla_decode.cu - DeepSeek MLA decode over a paged latent cache (BF16 or FP8 rows): the
 * sparse MLA kernel (mla_sparse.cu) with each query's keys taken from its sequence's page
 * table instead of an index list, the keys split over enough CTAs for one wave of the
 * GPU (split-KV: fp32 partials and their lse in a workspace), then a merge kernel. */
#include "../core/internal.h"
#include "../core/size_check.h"
#include "warpspec/attention.h"
#include "warpspec/check.h"
#include "attn_device.cuh"
#include "mla_internal.h"

#include <math.h>
#include <string.h>

/* The problem's argument check (no GPU): shapes, the cache's geometry, pointers. */
extern "C" ws_status ws_mla_decode_check(const ws_mla_decode_problem *p) {
  WS_REQUIRE(p != NULL, "ws_mla_decode: problem is NULL");
  WS_REQUIRE(p->batch >= 1 && p->s_q >= 1 && p->heads >= 1, "ws_mla_decode: batch %d, s_q %d, heads %d: all >= 1",
             p->batch, p->s_q, p->heads);
  WS_REQUIRE(p->dim_qk >= 64 && p->dim_qk % 64 == 0 && p->dim_v >= 64 && p->dim_v % 64 == 0 && p->dim_v <= p->dim_qk,
             "ws_mla_decode: dims %d/%d (qk/v): multiples of 64, dim_v <= dim_qk (DeepSeek-V3: 576/512)", p->dim_qk,
             p->dim_v);
  WS_REQUIRE(p->page_size >= 1 && p->num_pages >= 1 && p->max_pages >= 1,
             "ws_mla_decode: page_size %d, num_pages %d, max_pages %d: all >= 1", p->page_size, p->num_pages,
             p->max_pages);
  WS_REQUIRE(isfinite(p->softmax_scale) && p->softmax_scale >= 0.0f, "ws_mla_decode: softmax_scale %g",
             (double)p->softmax_scale);
  /* the kernels count keys, cache rows and query rows in int */
  const int64_t keys = ws_mul_sat(p->max_pages, p->page_size), cache_rows = ws_mul_sat(p->num_pages, p->page_size),
                rows = ws_mul3_sat(p->batch, p->s_q, p->heads);
  WS_REQUIRE(keys <= WS_EXTENT_MAX, "ws_mla_decode: max_pages %d x page_size %d = %lld keys per sequence, at most 2^30",
             p->max_pages, p->page_size, (long long)keys);
  WS_REQUIRE(cache_rows <= WS_INDEX_MAX, "ws_mla_decode: num_pages %d x page_size %d = %lld cache rows, at most 2^31 - 1",
             p->num_pages, p->page_size, (long long)cache_rows);
  WS_REQUIRE(ws_mul_sat(p->batch, p->max_pages) <= WS_INDEX_MAX,
             "ws_mla_decode: batch %d x max_pages %d = %lld block_table entries, at most 2^31 - 1", p->batch, p->max_pages,
             (long long)ws_mul_sat(p->batch, p->max_pages));
  WS_REQUIRE(rows <= WS_INDEX_MAX, "ws_mla_decode: batch %d x s_q %d x heads %d = %lld query rows, at most 2^31 - 1",
             p->batch, p->s_q, p->heads, (long long)rows);
  WS_REQUIRE(p->max_seqlen >= 0 && p->max_seqlen <= keys,
             "ws_mla_decode: max_seqlen %d, must be 0..max_pages x page_size = %lld", p->max_seqlen, (long long)keys);
  WS_REQUIRE(p->q && p->kv_cache && p->block_table && p->seqlens && p->o,
             "ws_mla_decode: q, kv_cache, block_table, seqlens or o is NULL");
  WS_REQUIRE(attn_aligned16(p->q) && attn_aligned16(p->kv_cache) && attn_aligned16(p->o), "ws_mla_decode: q, kv_cache and o must be "
             "16-byte aligned");
  WS_REQUIRE(p->kv_fp8 == 0 || p->kv_fp8 == 1, "ws_mla_decode: kv_fp8 %d, 0 (bf16 rows) or 1 (FP8 rows)", p->kv_fp8);
  WS_REQUIRE(!p->kv_fp8 || (p->dim_qk == 576 && p->dim_v == 512), "ws_mla_decode: the FP8 cache rows hold dims 576/512 "
             "(512 latent + 64 rope), not %d/%d", p->dim_qk, p->dim_v);
  return WS_OK;
}

/* Split-KV merge: one warp per (query row, head): lse = log sum_z exp(lse_z), o = sum_z
 * exp(lse_z - lse) o_z (an empty split has lse -inf and weighs 0). A NaN lse (a split that
 * met a NaN key or value) makes the row NaN, as in one pass: the max becomes NaN (fmaxf
 * alone would drop it) and every weight with it. */
__global__ void mla_merge_kernel(const float *o_part, const float *lse_part, int splits, int rows, uint16_t *o,
                                 float *lse) {
  ws_griddepcontrol_wait(); /* chained to the decode kernel: its partials are complete from here */
  const int row = (int)(blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32), lane = (int)(threadIdx.x % 32);
  if (row >= rows) return;
  float mx = -INFINITY;
  bool nan = false;
  for (int z = 0; z < splits; z++) {
    const float lz = lse_part[(size_t)z * rows + row];
    mx = fmaxf(mx, lz);
    nan |= isnan(lz);
  }
  if (nan) mx = __int_as_float(0x7FC00000);
  float acc[MLA_DV / 32];
#pragma unroll
  for (int i = 0; i < MLA_DV / 32; i++) acc[i] = 0.0f;
  float den = 0.0f;
  if (mx != -INFINITY)
    for (int z = 0; z < splits; z++) {
      const float lz = lse_part[(size_t)z * rows + row];
      if (lz == -INFINITY) continue;
      const float wz = expf(lz - mx);
      den += wz;
      const float4 *src = (const float4 *)(o_part + ((size_t)z * rows + row) * MLA_DV);
#pragma unroll
      for (int i = 0; i < MLA_DV / 128; i++) {
        const float4 v = src[i * 32 + lane];
        acc[4 * i] += wz * v.x; acc[4 * i + 1] += wz * v.y; acc[4 * i + 2] += wz * v.z; acc[4 * i + 3] += wz * v.w;
      }
    }
  const float inv = den == 0.0f ? 0.0f : 1.0f / den;
  uint2 *dst = (uint2 *)(o + (size_t)row * MLA_DV);
#pragma unroll
  for (int i = 0; i < MLA_DV / 128; i++)
    dst[i * 32 + lane] = make_uint2(attn_pack_bf16(acc[4 * i] * inv, acc[4 * i + 1] * inv),
                                    attn_pack_bf16(acc[4 * i + 2] * inv, acc[4 * i + 3] * inv));
  if (lse && lane == 0) lse[row] = den == 0.0f ? -INFINITY : mx + logf(den);
}

/* ---- the split of each query's keys over CTAs, shared by both decodes -------------- */
/* Splits of each query's maxlen keys when `ctas` CTAs (query tokens x head groups) would
 * run unsplit: as many as fit one wave of the GPU (a CTA per SM), each at least one block
 * of keys; chunk = keys per split (a multiple of the block). Rounded down: rounded up, 16
 * CTAs x 9 splits = 144 CTAs ran as two waves on 132 SMs, and 128 CTAs were split in 2
 * for nothing. maxlen is at most 2^30 (the checks), so maxlen + chunk stays an int here
 * and in the kernel's mla_keys. From shapes only: the same split on every call, so a
 * captured graph replays correctly. */
static int mla_splits(long long ctas, int maxlen, int sms, int *chunk) {
  int splits = ctas >= sms ? 1 : (int)(sms / ctas);
  const int blocks = (maxlen + MLA_BN - 1) / MLA_BN;
  if (splits > blocks) splits = blocks > 0 ? blocks : 1;
  if (splits > 65535) splits = 65535;
  *chunk = ((maxlen + splits - 1) / splits + MLA_BN - 1) / MLA_BN * MLA_BN;
  if (*chunk < MLA_BN) *chunk = MLA_BN;
  return (maxlen + *chunk - 1) / *chunk > 0 ? (maxlen + *chunk - 1) / *chunk : 1;
}

/* The workspace of a split: fp32 partial O [split][row][512] and lse [split][row]. */
static size_t mla_split_need(size_t rows, int splits) {
  return splits > 1 ? (size_t)splits * rows * (MLA_DV + 1) * sizeof(float) + 256 : 0;
}

/* The workspace's checks, the kernel over `tokens` query tokens (a filled in but for the
 * partials) and, split, the merge chained behind it. `fn` and `sizer` name the call and
 * its workspace-size function in messages. */
static ws_status mla_run_split(const char *fn, const char *sizer, const void *q, int tokens, mla_args *a, int splits,
                               void *workspace, size_t workspace_bytes, float softmax_scale, cudaStream_t stream) {
  const int rows = tokens * a->heads; /* int: the problems' checks */
  const size_t need = mla_split_need((size_t)rows, splits);
  WS_REQUIRE(workspace_bytes >= need && (need == 0 || workspace != NULL),
             "%s: the key split (%d ways) needs a workspace of %zu bytes, got %zu (%s)", fn, splits, need, workspace_bytes,
             sizer);
  WS_REQUIRE(((uintptr_t)workspace & 15u) == 0, "%s: workspace %p is not 16-byte aligned", fn, workspace);
  if (splits > 1) {
    a->o_part = (float *)workspace;
    a->lse_part = a->o_part + (size_t)splits * rows * MLA_DV;
  }
  ws_status s = mla_launch(q, tokens, a, splits, softmax_scale, stream);
  if (s != WS_OK || splits == 1) return s;
  /* chained: the merge's launch hides behind the decode kernel's tail (design_mla.md 5.7) */
  const float *op = a->o_part, *lp = a->lse_part;
  void *args[] = {(void *)&op, (void *)&lp, (void *)&splits, (void *)&rows, (void *)&a->o, (void *)&a->lse};
  return ws_launch_chained((const void *)mla_merge_kernel, dim3((unsigned)((rows + 7) / 8), 1, 1), dim3(256, 1, 1), stream,
                           args);
}

/* ---- MLA decode: the same kernel over page-table rows, split-KV, merge --------------- */
static int mla_decode_splits(const ws_mla_decode_problem *p, int sms, int *chunk) {
  const int maxlen = p->max_seqlen > 0 ? p->max_seqlen : p->max_pages * p->page_size;
  return mla_splits((long long)p->batch * MLA_ROW_TILES(p->s_q, p->heads), maxlen, sms, chunk);
}

static size_t mla_decode_need(const ws_mla_decode_problem *p, int splits) {
  return mla_split_need((size_t)p->batch * p->s_q * p->heads, splits);
}

extern "C" ws_status ws_mla_decode_workspace_size(const ws_mla_decode_problem *p, size_t *bytes) {
  WS_REQUIRE(bytes != NULL, "ws_mla_decode_workspace_size: bytes is NULL");
  ws_status s = ws_mla_decode_check(p);
  if (s != WS_OK) return s;
  /* the kernel's shape rules before the split arithmetic (heads it has no CTA shape for) */
  if ((s = mla_shape_check("ws_mla_decode_workspace_size", p->dim_qk, p->dim_v, p->heads)) != WS_OK) return s;
  int sms = 0, chunk = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  *bytes = mla_decode_need(p, mla_decode_splits(p, sms, &chunk));
  return WS_OK;
}

extern "C" ws_status ws_mla_decode_forward(const ws_mla_decode_problem *p, void *workspace, size_t workspace_bytes,
                                           cudaStream_t stream) {
  ws_status s = ws_check_mode() ? ws_mla_decode_validate(p, stream) : ws_mla_decode_check(p);
  if (s != WS_OK) return s;
  if ((s = mla_shape_check("ws_mla_decode_forward", p->dim_qk, p->dim_v, p->heads)) != WS_OK) return s;
  WS_REQUIRE(((uintptr_t)p->kv_cache & 15u) == 0, "ws_mla_decode_forward: kv_cache %p is not 16-byte aligned",
             p->kv_cache);
  WS_REQUIRE(((uintptr_t)p->block_table & 3u) == 0 && ((uintptr_t)p->seqlens & 3u) == 0 && ((uintptr_t)p->lse & 3u) == 0,
             "ws_mla_decode_forward: block_table, seqlens and lse must be 4-byte aligned");
  int sms = 0, chunk = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  const int splits = mla_decode_splits(p, sms, &chunk);
  mla_args a;
  memset(&a, 0, sizeof a);
  a.heads = p->heads;
  a.s_kv = p->num_pages * p->page_size;
  if (p->kv_fp8) a.kv8 = (const uint8_t *)p->kv_cache;
  else a.kv = (const uint16_t *)p->kv_cache;
  a.block_table = p->block_table;
  a.seqlens = p->seqlens;
  a.s_q = p->s_q;
  a.page_size = p->page_size;
  a.max_pages = p->max_pages;
  a.chunk = splits > 1 ? chunk : 0x7FFFFFFF / 2;
  a.o = (uint16_t *)p->o;
  a.lse = p->lse;
  return mla_run_split("ws_mla_decode_forward", "ws_mla_decode_workspace_size", p->q, p->batch * p->s_q, &a, splits,
                       workspace, workspace_bytes, p->softmax_scale, stream);
}

/* ---- sparse MLA decode: the sparse kernel over cache rows, split over CTAs, merge ----- */
/* The problem's argument check (no GPU): shapes, the cache's geometry, pointers. */
extern "C" ws_status ws_mla_sparse_decode_check(const ws_mla_sparse_decode_problem *p) {
  WS_REQUIRE(p != NULL, "ws_mla_sparse_decode: problem is NULL");
  WS_REQUIRE(p->batch >= 1 && p->s_q >= 1 && p->heads >= 1 && p->topk >= 1,
             "ws_mla_sparse_decode: batch %d, s_q %d, heads %d, topk %d: all >= 1", p->batch, p->s_q, p->heads, p->topk);
  WS_REQUIRE(p->topk <= WS_EXTENT_MAX, "ws_mla_sparse_decode: topk %d, at most 2^30", p->topk);
  WS_REQUIRE(p->dim_qk >= 64 && p->dim_qk % 64 == 0 && p->dim_v >= 64 && p->dim_v % 64 == 0 && p->dim_v <= p->dim_qk,
             "ws_mla_sparse_decode: dims %d/%d (qk/v): multiples of 64, dim_v <= dim_qk (DeepSeek-V3.2: 576/512)",
             p->dim_qk, p->dim_v);
  WS_REQUIRE(p->page_size >= 1 && p->num_pages >= 1, "ws_mla_sparse_decode: page_size %d, num_pages %d: both >= 1",
             p->page_size, p->num_pages);
  WS_REQUIRE(isfinite(p->softmax_scale) && p->softmax_scale >= 0.0f, "ws_mla_sparse_decode: softmax_scale %g",
             (double)p->softmax_scale);
  /* the kernel counts cache rows and query rows in int (the indices are int32 anyway) */
  const int64_t cache_rows = ws_mul_sat(p->num_pages, p->page_size), rows = ws_mul3_sat(p->batch, p->s_q, p->heads);
  WS_REQUIRE(cache_rows <= WS_INDEX_MAX,
             "ws_mla_sparse_decode: num_pages %d x page_size %d = %lld cache rows, at most 2^31 - 1", p->num_pages,
             p->page_size, (long long)cache_rows);
  WS_REQUIRE(rows <= WS_INDEX_MAX, "ws_mla_sparse_decode: batch %d x s_q %d x heads %d = %lld query rows, at most 2^31 - 1",
             p->batch, p->s_q, p->heads, (long long)rows);
  WS_REQUIRE(p->q && p->kv_cache && p->indices && p->o, "ws_mla_sparse_decode: q, kv_cache, indices or o is NULL");
  WS_REQUIRE(attn_aligned16(p->q) && attn_aligned16(p->kv_cache) && attn_aligned16(p->o),
             "ws_mla_sparse_decode: q, kv_cache and o must be 16-byte aligned");
  WS_REQUIRE(p->kv_fp8 == 0 || p->kv_fp8 == 1, "ws_mla_sparse_decode: kv_fp8 %d, 0 (bf16 rows) or 1 (FP8 rows)",
             p->kv_fp8);
  WS_REQUIRE(!p->kv_fp8 || (p->dim_qk == 576 && p->dim_v == 512), "ws_mla_sparse_decode: the FP8 cache rows hold dims "
             "576/512 (512 latent + 64 rope), not %d/%d", p->dim_qk, p->dim_v);
  return WS_OK;
}

/* Each token's index list is one sequence of topk keys, split like the decode's keys. */
static int mla_sparse_decode_splits(const ws_mla_sparse_decode_problem *p, int sms, int *chunk) {
  return mla_splits((long long)p->batch * p->s_q * MLA_ROW_TILES(1, p->heads), p->topk, sms, chunk);
}

extern "C" ws_status ws_mla_sparse_decode_workspace_size(const ws_mla_sparse_decode_problem *p, size_t *bytes) {
  WS_REQUIRE(bytes != NULL, "ws_mla_sparse_decode_workspace_size: bytes is NULL");
  ws_status s = ws_mla_sparse_decode_check(p);
  if (s != WS_OK) return s;
  if ((s = mla_shape_check("ws_mla_sparse_decode_workspace_size", p->dim_qk, p->dim_v, p->heads)) != WS_OK) return s;
  int sms = 0, chunk = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  *bytes = mla_split_need((size_t)p->batch * p->s_q * p->heads, mla_sparse_decode_splits(p, sms, &chunk));
  return WS_OK;
}

extern "C" ws_status ws_mla_sparse_decode_forward(const ws_mla_sparse_decode_problem *p, void *workspace,
                                                  size_t workspace_bytes, cudaStream_t stream) {
  ws_status s = ws_check_mode() ? ws_mla_sparse_decode_validate(p, stream) : ws_mla_sparse_decode_check(p);
  if (s != WS_OK) return s;
  if ((s = mla_shape_check("ws_mla_sparse_decode_forward", p->dim_qk, p->dim_v, p->heads)) != WS_OK) return s;
  WS_REQUIRE(((uintptr_t)p->indices & 3u) == 0 && ((uintptr_t)p->lse & 3u) == 0,
             "ws_mla_sparse_decode_forward: indices and lse must be 4-byte aligned");
  int sms = 0, chunk = 0;
  if ((s = ws_device_sms(&sms)) != WS_OK) return s;
  const int splits = mla_sparse_decode_splits(p, sms, &chunk);
  mla_args a;
  memset(&a, 0, sizeof a);
  a.heads = p->heads;
  a.s_kv = p->num_pages * p->page_size; /* the flat rows the indices address */
  a.topk = p->topk;
  if (p->kv_fp8) a.kv8 = (const uint8_t *)p->kv_cache;
  else a.kv = (const uint16_t *)p->kv_cache;
  a.indices = p->indices;               /* [batch x s_q][topk]: the prefill's [s_q'][topk] */
  a.chunk = splits > 1 ? chunk : p->topk; /* unsplit: the prefill kernel, which reads no chunk */
  a.o = (uint16_t *)p->o;
  a.lse = p->lse;
  return mla_run_split("ws_mla_sparse_decode_forward", "ws_mla_sparse_decode_workspace_size", p->q, p->batch * p->s_q,
                       &a, splits, workspace, workspace_bytes, p->softmax_scale, stream);
}
