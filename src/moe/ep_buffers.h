/* ep_buffers.h - where each object of the dispatch/combine handle's symmetric buffer lives:
 * one allocation on the communicator's heap per handle, every rank the same layout, so a
 * peer's copy of any object is at our offset in its buffer. Plain C, usable on the host,
 * in kernels and in the CPU tests (tests/cpu/test_moe_host.c checks alignment, order,
 * sizes and that no two objects overlap, for the configs the library accepts).
 *
 *   counts[src][L + 1]          routing counts src sends us (per local expert, then tokens)
 *   count_flag[src]             dispatch epoch of those counts (release store by src)
 *   inbox[src][max_tokens]      a token row src sends us: payload, FP8 scales, then the
 *                               meta block {token, entries} + K x {local, pos, slot, weight}
 *   data_flag[src][sms]         dispatch epoch each of src's sender CTAs has finished writing
 *   ack[dst]                    dispatch epoch dst has finished reading from us
 *   comb_inbox[dst][max_tokens] the BF16 partial sum dst returns for each token we sent it
 *   comb_flag[dst][sms]         combine epoch each of dst's CTAs has finished writing
 *   comb_ack[src]               combine epoch src has finished reading from us
 *   comb_prog[dst][sms x EP_PROG_WARPS]  the fused combine: (epoch << 32) | rounds each of
 *                               dst's reducer warps has pushed (ep_comb_prog)
 *   comb_done[dst]              the fused combine: epoch dst's reduce has pushed every row
 *   rec[src][L][max_tokens]     WARPSPEC_EP_RECORDS (else empty): the 16-byte record of each
 *                               entry src sends us, at [its local expert][its position]: what
 *                               the receive's bookkeeping needs, read without a dependent load */
#ifndef WARPSPEC_EP_BUFFERS_H
#define WARPSPEC_EP_BUFFERS_H

#include <stddef.h>
#include <stdint.h>

#ifdef __CUDACC__
#define EP_HD __host__ __device__
#else
#define EP_HD
#endif

#define EP_META_ENTRY_BYTES 16
#define EP_ALIGN16(x) (((x) + 15) / 16 * 16)
#define EP_OBJECT_ALIGN 256 /* every object starts on this: flags never share a line with rows */

/* Inbox rows start on 128-byte lines. At 16-byte alignment (DeepSeek-V3: 7536-byte rows,
 * 112 past a line each) every 128-byte K block of a row straddled two lines: the sender's
 * 16-byte stores wrote a partial line more per 512 bytes over NVLink, and the gathered L1
 * GEMM (gemm_load_gathered) read 5 sectors per K block instead of 4. The padding is
 * never sent (ep_send_unit writes the payload, scales and meta only): memory, not bytes on
 * the wire. */
#define EP_ROW_ALIGN 128

/* Progress flags per transfer CTA slot: one per reducer warp of the fused combine (at most
 * its WS_EP_WARPS warps; combine.cu checks). */
#define EP_PROG_WARPS 16

/* Bytes of one row's payload and scales, of the meta block, of an inbox row. */
static inline EP_HD size_t ep_payload_bytes(int hidden, int fp8) { return (size_t)hidden * (fp8 ? 1 : 2); }
static inline EP_HD size_t ep_scale_bytes(int hidden, int fp8) { return fp8 ? (size_t)(hidden / 128) * 4 : 0; }
static inline EP_HD size_t ep_meta_bytes(int topk) { return (size_t)EP_META_ENTRY_BYTES * (1 + topk); }
static inline EP_HD size_t ep_inbox_row_bytes(int hidden, int fp8, int topk) {
  const size_t b = EP_ALIGN16(ep_payload_bytes(hidden, fp8) + ep_scale_bytes(hidden, fp8)) + ep_meta_bytes(topk);
  return (b + EP_ROW_ALIGN - 1) / EP_ROW_ALIGN * EP_ROW_ALIGN;
}

/* The byte offset of each object, and the whole buffer's size. */
typedef struct {
  size_t counts, count_flag, inbox, data_flag, ack, comb_inbox, comb_flag, comb_ack, comb_prog, comb_done, rec;
  size_t bytes;
  size_t inbox_row; /* bytes of an inbox row (a multiple of EP_ROW_ALIGN) */
} ep_buffers;

static inline EP_HD size_t ep_buffers_align(size_t x) { return (x + EP_OBJECT_ALIGN - 1) / EP_OBJECT_ALIGN * EP_OBJECT_ALIGN; }

/* Bytes of an entry record (ep_record, ep_internal.h). */
#define EP_RECORD_BYTES 16

/* The layout for nranks ranks, L local experts, max_tokens, hidden, the payload (fp8),
 * topk and sms transfer CTAs (the config's, checked by ws_ep_config_check first), and
 * whether the senders write entry records (records: WARPSPEC_EP_RECORDS). */
static inline EP_HD ep_buffers ep_buffers_make(int nranks, int L, int max_tokens, int hidden, int fp8, int topk, int sms,
                                               int records) {
  ep_buffers b;
  const size_t N = (size_t)nranks, T = (size_t)max_tokens, G = (size_t)sms;
  size_t at = 0;
  b.inbox_row = ep_inbox_row_bytes(hidden, fp8, topk);
  b.counts = at;     at = ep_buffers_align(at + N * ((size_t)L + 1) * sizeof(int));
  b.count_flag = at; at = ep_buffers_align(at + N * sizeof(uint64_t));
  b.inbox = at;      at = ep_buffers_align(at + N * T * b.inbox_row);
  b.data_flag = at;  at = ep_buffers_align(at + N * G * sizeof(uint64_t));
  b.ack = at;        at = ep_buffers_align(at + N * sizeof(uint64_t));
  b.comb_inbox = at; at = ep_buffers_align(at + N * T * (size_t)hidden * 2);
  b.comb_flag = at;  at = ep_buffers_align(at + N * G * sizeof(uint64_t));
  b.comb_ack = at;   at = ep_buffers_align(at + N * sizeof(uint64_t));
  b.comb_prog = at;  at = ep_buffers_align(at + N * G * EP_PROG_WARPS * sizeof(uint64_t));
  b.comb_done = at;  at = ep_buffers_align(at + N * sizeof(uint64_t));
  b.rec = at;        at = ep_buffers_align(at + (records ? N * (size_t)L * T * EP_RECORD_BYTES : 0));
  b.bytes = at;
  return b;
}

/* The receive layout read backwards (the entry records' bookkeeping, ep_book_records):
 * layout row r's local expert *l (the last group start off[l] <= r: groups of no rows
 * before it are passed over), its source (returned; nranks for a padding row) and *p, its
 * position among that source's rows for *l. rc: [nranks][L + 1] counts (per local expert,
 * then tokens), off: [L + 1] group starts, as ep_layout makes them; r < off[L]. The
 * inverse of r = off[l] + sum over q < s of rc[q][l] + p (ep_layout_row). */
static inline EP_HD int ep_row_source(const int *rc, const int *off, int L, int nranks, int r, int *l, int *p) {
  int lo = 0, hi = L - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (off[mid] <= r) lo = mid;
    else hi = mid - 1;
  }
  int q = r - off[lo], s = 0;
  while (s < nranks && q >= rc[s * (L + 1) + lo]) q -= rc[(s++) * (L + 1) + lo];
  *l = lo;
  *p = q;
  return s;
}

#endif
