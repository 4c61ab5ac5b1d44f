/* test_gemm_sched.cu - the persistent GEMM tile schedule, walked on the host exactly as
 * every CTA walks it on the device: for dense, grouped-contiguous (ragged, empty groups)
 * and grouped-masked problems and several grid sizes, every (group, tile row, tile
 * column) is visited exactly once over all CTAs (also with 256-300 groups, most of them
 * empty, which the cursor skips 32 at a time), tiles lie inside their group, and each
 * CTA's tile numbers only grow (contiguous groups with counts: only the rows in use);
 * under split-K every tile's K slices are visited once
 * each and together cover its K steps without gap or overlap. CTA pairs (PAIR = 2): the
 * two CTAs of every cluster walk the same work items in lockstep, get the same group,
 * tile row and K slice and tiles 2c and 2c + 1, and together visit every tile exactly
 * once; the only phantom tiles are the second halves of odd column counts. Host code only. */
#include "../test.h"
#include "../../src/gemm/gemm_sched.cuh"

#include <stdlib.h>
#include <string.h>

static uint64_t rng = 88172645463325252ull;
static unsigned next(void) { rng ^= rng << 13; rng ^= rng >> 7; rng ^= rng << 17; return (unsigned)(rng >> 32); }

template <int PAIR = 1>
static void check_schedule(const gemm_shape *s, int grid, const char *what) {
  const int tiles_n = (s->n + s->bn - 1) / s->bn;
  long long expect = 0;
  for (int g = 0; g < s->groups; g++) {
    int row0, count;
    gemm_group_rows(s, g, &row0, &count);
    expect += (long long)((count + s->bm - 1) / s->bm) * tiles_n;
  }
  /* steps[g][tm][tn]: K steps covered so far; seen counts (tile, slice) visits */
  const int max_tm = 4096;
  if (s->groups < 1 || tiles_n < 1) {
    printf("FAIL %s: shape with %d groups, %d column tiles\n", what, s->groups, tiles_n);
    test_failures++;
    return;
  }
  const size_t cells = (size_t)s->groups * (size_t)max_tm * (size_t)tiles_n;
  int *steps = (int *)calloc(cells, sizeof(int));
  int *slices = (int *)calloc(cells, sizeof(int));
  if (!steps || !slices) {
    printf("FAIL %s: calloc of %zu cells\n", what, cells);
    exit(1);
  }
  long long visited = 0;
  int bad = 0;
  /* pairs: grid / PAIR clusters (the launcher makes grids even), the ranks walked in lockstep */
  const int clusters = grid / PAIR > 0 ? grid / PAIR : 1;
  for (int cta = 0; cta < clusters * PAIR; cta++) {
    const int cl = cta / PAIR, rank = cta % PAIR;
    gemm_cursor cur = gemm_cursor_start<PAIR>(s), peer = gemm_cursor_start<PAIR>(s);
    gemm_tile t, u;
    for (int i = cl; gemm_tile_at<PAIR>(s, &cur, i, &t, rank); i += clusters) {
      if (PAIR > 1) { /* the partner's tile of the same item */
        if (!gemm_tile_at<PAIR>(s, &peer, i, &u, rank ^ 1) || u.g != t.g || u.tm != t.tm || u.split != t.split ||
            u.k0 != t.k0 || u.k1 != t.k1 || u.tn != (t.tn ^ 1))
          bad++;
        const int phantom = gemm_tile_phantom(s, &t);
        if (phantom != (t.tn >= tiles_n) || (phantom && (t.tn != tiles_n || rank != 1))) bad++;
        if (phantom) continue;
      }
      if (t.tm < 0 || t.tm * s->bm >= t.count || t.tn < 0 || t.tn >= tiles_n || t.tm >= max_tm) { bad++; continue; }
      if (t.split < 0 || t.split >= s->splits || t.k0 >= t.k1 || t.k0 < 0 || t.k1 > s->ksteps) { bad++; continue; }
      /* slices are disjoint and ordered by number, so the covered total must add up */
      if (t.k0 != (int)((long long)t.split * s->ksteps / s->splits)) bad++;
      const size_t cell = ((size_t)t.g * max_tm + t.tm) * tiles_n + t.tn;
      steps[cell] += t.k1 - t.k0;
      slices[cell]++;
      if (slices[cell] == s->splits) {
        bad += steps[cell] != s->ksteps;
        visited++;
      }
      bad += slices[cell] > s->splits;
    }
  }
  if (bad || visited != expect) {
    fprintf(stderr, "%s, grid %d, pair %d: %lld tiles visited, %lld expected, %d out of place or twice\n", what, grid, PAIR,
            visited, expect, bad);
    test_failures++;
  }
  free(steps);
  free(slices);
}

/* Every shape once per CTA and once in CTA pairs. */
static void check_both(const gemm_shape *s, int grid, const char *what) {
  check_schedule<1>(s, grid, what);
  check_schedule<2>(s, grid, what);
}

int main(void) {
  const int grids[] = {1, 7, 132, 1000};
  gemm_shape s;
  memset(&s, 0, sizeof s);
  s.bm = 128;
  s.bn = 256;
  s.splits = 1;
  s.ksteps = 7;
  /* dense, ragged edges */
  s.layout = WS_GEMM_DENSE; s.groups = 1; s.m = 1000; s.n = 7000;
  for (int i = 0; i < 4; i++) check_both(&s, grids[i], "dense");
  s.m = 1; s.n = 8;
  for (int i = 0; i < 4; i++) check_both(&s, grids[i], "dense 1 x 8");
  /* dense split-K: slices of uneven length (7 or 112 steps over 2..16 slices) */
  for (int sp = 2; sp <= 16; sp *= 2) {
    s.splits = sp; s.ksteps = sp <= 4 ? 7 : 112; s.m = 64; s.n = 4096;
    for (int i = 0; i < 4; i++) check_both(&s, grids[i], "dense split-K");
    s.m = 300; s.n = 264;
    for (int i = 0; i < 4; i++) check_both(&s, grids[i], "dense split-K ragged");
  }
  s.splits = 1; s.ksteps = 7;
  /* contiguous: random expert sizes, some empty, some a single row */
  for (int rep = 0; rep < 20; rep++) {
    int groups = 1 + (int)(next() % 64), off[65];
    off[0] = 0;
    for (int g = 0; g < groups; g++) {
      const unsigned r = next() % 5;
      off[g + 1] = off[g] + (r == 0 ? 0 : r == 1 ? 1 : (int)(next() % 1500));
    }
    s.layout = WS_GEMM_GROUPED_CONTIGUOUS; s.groups = groups; s.m = off[groups]; s.n = 128 * (1 + (int)(next() % 40));
    s.offsets = off;
    s.bm = 128; s.bn = rep % 2 ? 128 : 256;
    for (int i = 0; i < 4; i++) check_both(&s, grids[i], "contiguous");
  }
  /* many groups, most of them empty (an MoE layer at decode: 256 experts, a few with
   * rows), and 300 with random sizes: the cursor's skip over 32 groups per step must
   * land where the one-group walk does, also across several windows and at the end */
  for (int rep = 0; rep < 12; rep++) {
    static int off[301];
    const int groups = rep < 6 ? 256 : 300;
    off[0] = 0;
    for (int g = 0; g < groups; g++) {
      const unsigned r = next() % (rep < 6 ? 32 : 3);
      off[g + 1] = off[g] + (r == 0 ? 1 + (int)(next() % 64) : rep < 6 ? 0 : (int)(next() % 300));
    }
    s.layout = WS_GEMM_GROUPED_CONTIGUOUS; s.groups = groups; s.m = off[groups] > 0 ? off[groups] : 1; s.n = 256;
    s.offsets = off;
    s.bm = rep % 2 ? 64 : 128; s.bn = 128;
    for (int i = 0; i < 4; i++) check_both(&s, grids[i], "contiguous, many groups");
  }
  /* contiguous with counts (ws_ep's receive layout: each expert's rows, then padding up to
   * a multiple of 128): only the rows in use get tiles; a count past its span is cut to it */
  for (int rep = 0; rep < 12; rep++) {
    static int off[257], counts[256];
    const int groups = rep < 6 ? 256 : 1 + (int)(next() % 64);
    off[0] = 0;
    for (int g = 0; g < groups; g++) {
      const int used = next() % 4 == 0 ? 0 : (int)(next() % 400);
      off[g + 1] = off[g] + (used + 127) / 128 * 128;
      counts[g] = next() % 8 == 0 ? used + 1 + (int)(next() % 200) : used; /* some past the span */
    }
    s.layout = WS_GEMM_GROUPED_CONTIGUOUS; s.groups = groups; s.m = off[groups] > 0 ? off[groups] : 1; s.n = 512;
    s.offsets = off;
    s.rows = counts;
    s.bm = rep % 2 ? 192 : 128; s.bn = 128;
    for (int g = 0; g < groups; g++) {
      int row0, count;
      gemm_group_rows(&s, g, &row0, &count);
      const int span = off[g + 1] - off[g];
      CHECK(row0 == off[g] && count == (counts[g] < span ? counts[g] : span));
    }
    for (int i = 0; i < 4; i++) check_both(&s, grids[i], "contiguous with counts");
    s.rows = NULL;
  }
  /* masked: counts up to m, some zero, some over m (clamped) */
  for (int rep = 0; rep < 20; rep++) {
    int groups = 1 + (int)(next() % 32), rows[32];
    s.layout = WS_GEMM_GROUPED_MASKED; s.groups = groups; s.m = 64 * (1 + (int)(next() % 16)); s.n = 512;
    for (int g = 0; g < groups; g++) rows[g] = (int)(next() % (s.m + 100));
    s.rows = rows;
    for (int i = 0; i < 4; i++) check_both(&s, grids[i], "masked");
  }
  return test_finish("test_gemm_sched");
}
