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
#define WS_RDV_VERSION 2u               /* 2: the whole key in the header              */
/* Longest job key: PMIx namespaces (mpirun's PMIX_NAMESPACE) reach 255 bytes. Longer
 * keys are refused, never cut: a cut key would let two jobs read each other's id. */
#define WS_RDV_KEY_MAX 255
#define WS_RDV_KEY_PREFIX 32            /* key bytes readable in the file name          */
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
  char key[WS_RDV_KEY_MAX + 1]; /* the whole job key, NUL-padded */
} ws_rdv_header;

#ifdef __cplusplus
extern "C" {
#endif
/* Files older than this (CLOCK_REALTIME ns) are stale: the start of the process that
 * launched this one (warpspec run, mpirun), less the slack. */
uint64_t ws_rdv_not_before_ns(void);
/* The file that holds `name` for job `key` ("" for none), written into out; its length,
 * or -1 if it does not fit. name.<readable prefix of the key>.<64-bit hash of the whole
 * key, hex>: short and safe whatever the key holds, and different for keys that differ
 * anywhere (the reader still compares the whole key in the header). Without a key: name. */
int ws_rdv_file_name(const char *name, const char *key, char *out, size_t len);
#ifdef __cplusplus
}
#endif

#endif
