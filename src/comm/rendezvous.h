/* rendezvous.h - the rendezvous file format, shared by rendezvous.c and its tests.
 *
 * A file is a header and the payload. The header says whose file it is (the job key),
 * when it was written and how long the payload is, so that a reader can tell a file of
 * this run from one left by an earlier job with the same name, and a torn or foreign
 * file from a good one. */
#ifndef WARPSPEC_RENDEZVOUS_H
#define WARPSPEC_RENDEZVOUS_H

#include <stddef.h>
#include <stdint.h>

#define WS_RDV_MAGIC "wsrdv\x01\x02\x03" /* 8 bytes, no NUL inside */
#define WS_RDV_VERSION 2u
#define WS_RDV_KEY_LEN 256              /* the whole job key (at most 255 bytes) and its NUL */
#define WS_RDV_MAX_PAYLOAD (1u << 20)   /* a rendezvous carries ids, not data            */
/* A file written before the job's launcher started (less this slack, for the second
 * granularity of the boot time the start is computed from) is from an earlier job. */
#define WS_RDV_START_SLACK_NS 1000000000ull

typedef struct {
  char magic[8];
  uint32_t version;
  uint32_t header_bytes;   /* sizeof(ws_rdv_header) */
  uint64_t created_ns;     /* CLOCK_REALTIME when rank 0 wrote it */
  uint64_t payload_bytes;
  int64_t writer_pid;
  char key[WS_RDV_KEY_LEN];
} ws_rdv_header;

#ifdef __cplusplus
extern "C" {
#endif
/* Files older than this (CLOCK_REALTIME ns) are stale: the start of the process that
 * launched this one (warpspec run, mpirun), less the slack. */
uint64_t ws_rdv_not_before_ns(void);
/* The file of `name` for job `key`: name.<up to 24 characters of the key, made safe>-
 * <64-bit FNV-1a of the whole key, hex>. The readable part tells a person whose file it
 * is; the hash keeps keys apart that share a prefix or differ only in unsafe characters
 * ("job/A", "job_A"). The full key is in the header and compared whole. 0: too long. */
int ws_rdv_file_name(const char *name, const char *key, char *out, size_t len);
#ifdef __cplusplus
}
#endif

#endif
