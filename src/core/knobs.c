/* knobs.c - every environment knob of config.h's list, parsed in one place.
 *
 * Each knob is one row of the table below: its name, the deprecated spelling still read
 * when the name is unset, how its text is parsed and which values it accepts, and its
 * default. Why a table and not a getenv at each use: every use then parsed in its own way
 * (atoi read "abc" as 0, a first-character test read "0x" as 0) and some on every call;
 * here a value is either accepted whole or reported, once, on stderr with the accepted
 * values, and the default is used. Never an exit: a mistyped variable must not end a
 * process that would run correctly without it. */
#define _POSIX_C_SOURCE 200809L /* strcasecmp, also under -std=c11 */
#include "knobs.h"

#include "warpspec/config.h"

#include <errno.h>
#include <limits.h>
#include <pthread.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

typedef enum { KNOB_BOOL, KNOB_INT, KNOB_LLONG, KNOB_WORD } knob_kind;

typedef struct {
  const char *word;
  int value;
} knob_word;

typedef struct {
  const char *name;       /* WARPSPEC_...                                          */
  const char *alias;      /* the old spelling, read when name is unset; or NULL    */
  knob_kind kind;
  size_t offset;          /* of its field in ws_knobs (an int, or long long: LLONG) */
  long long dflt;
  long long lo, hi;       /* KNOB_INT, KNOB_LLONG: the accepted range              */
  const knob_word *words; /* KNOB_WORD: the accepted words, {NULL, 0} last         */
  const char *dflt_text;  /* the default in words, where the number says little    */
} knob_desc;

static const knob_word attn_schedules[] = {{"plain", WS_ATTN_SCHED_PLAIN},
                                           {"pingpong", WS_ATTN_SCHED_PINGPONG},
                                           {"overlap", WS_ATTN_SCHED_OVERLAP},
                                           {"overlap-pingpong", WS_ATTN_SCHED_OVERLAP_PINGPONG},
                                           {NULL, 0}};
static const knob_word attn_grids[] = {{"persistent", 1}, {"tiles", 0}, {NULL, 0}};
static const knob_word attn_o_stores[] = {{"tma", 1}, {"rows", 0}, {NULL, 0}};
static const knob_word attn_wg_blocks[] = {{"tile", 0}, {"own", 1}, {NULL, 0}};
static const knob_word attn_tile_rows[] = {{"128", 128}, {"192", 192}, {NULL, 0}};
static const knob_word fp8_tiles[] = {{"auto", 0}, {"128", 128}, {"192", 192}, {NULL, 0}};
static const knob_word ep_combines[] = {{"kernels", 0}, {"fused", 1}, {NULL, 0}};
static const knob_word moe_tiles[] = {{"64", 64}, {"128", 128}, {NULL, 0}};
static const knob_word moe_scheds[] = {{"claimed", 0}, {"static", 1}, {NULL, 0}};

#define AT(field) offsetof(ws_knobs, field)
#define BOOL_KNOB(name, alias, field, dflt, text) {name, alias, KNOB_BOOL, AT(field), dflt, 0, 1, NULL, text}
#define INT_KNOB(name, alias, field, dflt, lo, hi, text) {name, alias, KNOB_INT, AT(field), dflt, lo, hi, NULL, text}
#define WORD_KNOB(name, alias, field, dflt, words, text) {name, alias, KNOB_WORD, AT(field), dflt, 0, 0, words, text}

static const knob_desc table[] = {
    INT_KNOB(WS_TIMEOUT_ENV, NULL, timeout_ms, WS_TIMEOUT_MS_DEFAULT, 1, WS_TIMEOUT_MS_MAX, NULL),
    BOOL_KNOB(WS_CHECK_ENV, NULL, check, 0, NULL),
    INT_KNOB(WS_HOST_THREADS_ENV, NULL, host_threads, 0, 1, INT_MAX, "the online CPUs"),
    BOOL_KNOB(WS_PDL_ENV, NULL, pdl, 1, NULL),
    WORD_KNOB(WS_ATTN_SCHEDULE_ENV, NULL, attn_schedule, WS_ATTN_SCHED_AUTO, attn_schedules,
              "chosen per head dim and length"),
    WORD_KNOB(WS_ATTN_GRID_ENV, NULL, attn_persistent, 1, attn_grids, "persistent"),
    INT_KNOB(WS_ATTN_HEAD_GROUP_ENV, NULL, attn_head_group, 0, 1, INT_MAX, "chosen from the L2 size"),
    WORD_KNOB(WS_ATTN_O_STORE_ENV, NULL, attn_o_tma, 1, attn_o_stores, "tma"),
    WORD_KNOB(WS_ATTN_WG_BLOCKS_ENV, NULL, attn_wg_blocks, 0, attn_wg_blocks, "tile"),
    WORD_KNOB(WS_ATTN_TILE_ROWS_ENV, NULL, attn_tile_rows, 0, attn_tile_rows, "chosen per mask and length"),
    BOOL_KNOB(WS_MLA_GATHER_AHEAD_ENV, NULL, mla_gather_ahead, 1, NULL),
    BOOL_KNOB(WS_MLA_FP8_F16_ENV, NULL, mla_fp8_f16, 1, NULL),
    INT_KNOB(WS_GEMM_SPLITS_ENV, "WS_GEMM_SPLITS", gemm_splits, 0, 1, INT_MAX, "chosen per problem"),
    WORD_KNOB(WS_GEMM_FP8_TILE_ENV, "WS_GEMM_FP8_TILE", gemm_fp8_tile, 0, fp8_tiles, "chosen per problem"),
    BOOL_KNOB(WS_GEMM_PAIR_ENV, NULL, gemm_pair, 1, NULL),
    BOOL_KNOB(WS_GEMM_SKINNY_ENV, NULL, gemm_skinny, 1, NULL),
    BOOL_KNOB(WS_GEMM_FP8_SKINNY_ENV, NULL, gemm_fp8_skinny, 1, NULL),
    INT_KNOB(WS_GEMM_SKINNY_ROWS_ENV, NULL, gemm_skinny_rows, WS_GEMM_SKINNY_ROWS_DEFAULT, 16, 128, NULL),
    INT_KNOB(WS_GEMM_CLUSTER_K_ENV, NULL, gemm_cluster_k, WS_GEMM_CLUSTER_K_DEFAULT, 0, 8, NULL),
    BOOL_KNOB(WS_MOE_GATHER_ENV, NULL, moe_gather, WS_MOE_GATHER_DEFAULT, NULL),
    BOOL_KNOB(WS_EP_OVERLAP_ENV, NULL, ep_overlap, WS_EP_OVERLAP_DEFAULT, "chosen per call"),
    WORD_KNOB(WS_EP_COMBINE_ENV, NULL, ep_combine, -1, ep_combines, "fused from 4 ranks, else kernels"),
    BOOL_KNOB(WS_EP_RECORDS_ENV, NULL, ep_records, 0, NULL),
    WORD_KNOB(WS_MOE_TILE_ENV, NULL, moe_tile, 0, moe_tiles, "chosen per layer"),
    BOOL_KNOB(WS_MOE_PAIR_ENV, NULL, moe_pair, -1, "chosen per layer"),
    WORD_KNOB(WS_MOE_SCHED_ENV, NULL, moe_static_walk, 0, moe_scheds, "claimed"),
    BOOL_KNOB(WS_MOE_SELF_ROUTE_ENV, NULL, moe_self_route, 1, NULL),
    BOOL_KNOB(WS_MOE_SLICE_COMBINE_ENV, NULL, moe_slice_combine, 1, NULL),
    BOOL_KNOB(WS_MOE_FEW_DECODE_ENV, NULL, moe_few_decode, 1, NULL),
    BOOL_KNOB(WS_MOE_ROUTE_AT_ONCE_ENV, NULL, moe_route_at_once, 1, NULL),
    BOOL_KNOB(WS_MOE_W1_GATE_UP_ENV, NULL, moe_w1_gate_up, 1, NULL),
    {WS_SR_CE_MIN_BYTES_ENV, "WS_SR_CE_MIN_BYTES", KNOB_LLONG, AT(sr_ce_min_bytes), WS_SR_CE_MIN_BYTES, 0, LLONG_MAX,
     NULL, NULL},
    {WS_AG_DIRECT_MAX_BYTES_ENV, NULL, KNOB_LLONG, AT(ag_direct_max_bytes), WS_AG_DIRECT_MAX_BYTES, 0, LLONG_MAX, NULL,
     NULL},
    {WS_AG_ZC_MIN_BYTES_ENV, NULL, KNOB_LLONG, AT(ag_zc_min_bytes), WS_AG_ZC_MIN_BYTES, 0, LLONG_MAX, NULL, NULL},
    INT_KNOB(WS_RENDEZVOUS_TIMEOUT_ENV, "WS_RENDEZVOUS_TIMEOUT_MS", rendezvous_timeout_ms, WS_RENDEZVOUS_TIMEOUT_MS, 1,
             INT_MAX, NULL),
    BOOL_KNOB(WS_SHARE_GPU_ENV, NULL, share_gpu, 0, NULL),
    BOOL_KNOB(WS_DEBUG_NVML_ENV, "WS_DEBUG_NVML", debug_nvml, 0, NULL),
};
enum { NKNOBS = sizeof table / sizeof table[0] };

static ws_knobs g_knobs;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;
static pthread_mutex_t g_lock = PTHREAD_MUTEX_INITIALIZER; /* the table's reads, and the flags below */
static unsigned char g_reported[NKNOBS];                   /* its current bad value was reported   */
static unsigned char g_alias_noted[NKNOBS];                /* its old spelling was noted            */

static const char *const bool_words[2][4] = {{"0", "off", "no", "false"}, {"1", "on", "yes", "true"}};

/* The knob's text and the variable it came from: its name, else (noted once) its old
 * spelling; NULL when both are unset or empty, which means the default, as an unset
 * variable always did. */
static const char *knob_text(size_t i, const char **from) {
  const knob_desc *d = &table[i];
  const char *v = getenv(d->name);
  *from = d->name;
  if (v && *v) return v;
  if (!d->alias) return NULL;
  const char *old = getenv(d->alias);
  if (!old || !*old) return NULL;
  if (!g_alias_noted[i])
    fprintf(stderr, "warpspec: %s is deprecated, read as %s; rename it (docs/knobs.md)\n", d->alias, d->name);
  g_alias_noted[i] = 1;
  *from = d->alias;
  return old;
}

/* A decimal number, the whole text, within lo .. hi. */
static int parse_number(const char *s, long long lo, long long hi, long long *out) {
  char *end = NULL;
  errno = 0;
  const long long v = strtoll(s, &end, 10);
  if (errno != 0 || end == s || *end != '\0' || v < lo || v > hi) return 0;
  *out = v;
  return 1;
}

static int parse(const knob_desc *d, const char *s, long long *out) {
  switch (d->kind) {
  case KNOB_BOOL:
    for (int b = 0; b < 2; b++)
      for (int w = 0; w < 4; w++)
        if (strcasecmp(s, bool_words[b][w]) == 0) {
          *out = b;
          return 1;
        }
    return 0;
  case KNOB_INT:
  case KNOB_LLONG:
    return parse_number(s, d->lo, d->hi, out);
  case KNOB_WORD:
    for (const knob_word *w = d->words; w->word; w++)
      if (strcmp(s, w->word) == 0) {
        *out = w->value;
        return 1;
      }
    return 0;
  }
  return 0;
}

/* What a knob accepts, for its message: "1, on, yes, true or 0, off, no, false",
 * "a whole number from 1 to 3600000", "plain or overlap", ... */
static void describe(const knob_desc *d, char *buf, size_t len) {
  int n = 0;
  if (d->kind == KNOB_BOOL) {
    snprintf(buf, len, "1, on, yes, true or 0, off, no, false");
  } else if (d->kind == KNOB_WORD) {
    buf[0] = '\0';
    for (const knob_word *w = d->words; w->word && n >= 0 && (size_t)n < len; w++)
      n += snprintf(buf + n, len - (size_t)n, "%s%s", w == d->words ? "" : w[1].word ? ", " : " or ", w->word);
  } else if (d->hi == INT_MAX || d->hi == LLONG_MAX) { /* no bound of its own: the type's */
    snprintf(buf, len, "a whole number, at least %lld", d->lo);
  } else {
    snprintf(buf, len, "a whole number from %lld to %lld", d->lo, d->hi);
  }
}

static void report(const knob_desc *d, const char *from, const char *text) {
  char accepted[160], dflt[32];
  describe(d, accepted, sizeof accepted);
  snprintf(dflt, sizeof dflt, "%lld", d->dflt);
  fprintf(stderr, "warpspec: %s=\"%.64s\" is not accepted (%s); the default, %s, is used (docs/knobs.md)\n", from,
          text, accepted, d->dflt_text ? d->dflt_text : dflt);
}

/* Knob i from the environment into k; the caller holds g_lock. */
static void read_knob(size_t i, ws_knobs *k) {
  const knob_desc *d = &table[i];
  const char *from = NULL;
  const char *text = knob_text(i, &from);
  long long v = d->dflt;
  if (text && !parse(d, text, &v)) {
    v = d->dflt;
    if (!g_reported[i]) report(d, from, text);
    g_reported[i] = 1;
  } else {
    g_reported[i] = 0; /* a later bad value is reported again */
  }
  char *field = (char *)k + d->offset;
  if (d->kind == KNOB_LLONG)
    *(long long *)field = v;
  else
    *(int *)field = (int)v;
}

static void read_all(void) {
  ws_knobs k;
  memset(&k, 0, sizeof k);
  (void)pthread_mutex_lock(&g_lock); /* fails only on a broken mutex object; this one is static */
  for (size_t i = 0; i < NKNOBS; i++) read_knob(i, &k);
  g_knobs = k;
  (void)pthread_mutex_unlock(&g_lock);
}

const ws_knobs *ws_knobs_get(void) {
  (void)pthread_once(&g_once, read_all); /* fails only on an invalid once object */
  return &g_knobs;
}

ws_status ws_knobs_reload(void) {
  (void)ws_knobs_get(); /* the first read, if it has not happened: then this one reads again */
  read_all();
  return WS_OK;
}

void ws_knobs_reread(const char *name) {
  (void)ws_knobs_get();
  (void)pthread_mutex_lock(&g_lock);
  for (size_t i = 0; i < NKNOBS; i++)
    if (strcmp(table[i].name, name) == 0) read_knob(i, &g_knobs);
  (void)pthread_mutex_unlock(&g_lock);
}
