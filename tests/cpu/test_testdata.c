/* test_testdata.c - testdata/ (the generators the GPU tests and the benchmarks share) on
 * the CPU: the draws pinned by a hash, so a change that would silently give the
 * benchmarks other data than the rows in docs/benchmarks.md were timed on (or the tests
 * other cases) fails here first; and what each generator promises: NSA selections start
 * with block 0 and the token's own block, shared ones copy their block's first token;
 * key ids lie in range without holes; a page table uses each page once, in range, -1
 * past a sequence's end, with the lengths asked for. td_qkv_make needs a GPU: not here. */
#include "../../testdata/attention.h"
#include "../test.h"

static uint64_t hash = 0xcbf29ce484222325ull; /* FNV-1a over every value drawn */
static void eat(const void *p, size_t n) {
  for (size_t i = 0; i < n; i++) hash = (hash ^ ((const unsigned char *)p)[i]) * 0x100000001b3ull;
}

int main(void) {
  uint64_t s = TD_RNG_START;
  uint16_t x[1000];
  td_fill_uniform(&s, x, 1000, 1.0f);
  eat(x, sizeof x);
  for (int i = 0; i < 1000; i++) CHECK(ws_bf16_to_float(x[i]) >= -1.0f && ws_bf16_to_float(x[i]) <= 1.0f);

  static const nsa_case nsa[] = {{"random", 300, 32, 2, 128, 128, 6, 0}, {"shared", 1000, 32, 2, 192, 128, 8, 1}};
  static int sel[1000 * 2 * 8];
  for (int k = 0; k < 2; k++) {
    const nsa_case *c = &nsa[k];
    td_nsa_select(&s, c, sel);
    eat(sel, (size_t)c->tokens * c->heads_kv * c->topn * sizeof(int));
    for (int i = 0; i < c->tokens; i++)
      for (int g = 0; g < c->heads_kv; g++) {
        const int *e = sel + ((size_t)i * c->heads_kv + g) * c->topn, *first = sel + ((size_t)(i - i % 64) * c->heads_kv + g) * c->topn;
        CHECK(e[0] == 0 && e[1] == i / 64);
        if (c->shared) CHECK(memcmp(e, first, (size_t)c->topn * sizeof(int)) == 0);
      }
  }

  static int idx[64 * 128];
  for (int holes = 0; holes < 2; holes++) {
    td_mla_indices(&s, idx, 64, 128, 1000, holes);
    eat(idx, sizeof idx);
    for (int i = 0; i < 64 * 128 && !holes; i++) CHECK(idx[i] >= 0 && idx[i] < 1000);
    for (int j = 0; j < 128 && holes; j++) CHECK(idx[63 * 128 + j] == -1 || idx[63 * 128 + j] == 1000);
  }

  for (int fixed = 0; fixed < 2; fixed++) {
    enum { B = 9, LEN = 1000, P = 64, MAXP = (LEN + P - 1) / P };
    int lens[B], table[B * MAXP], used[B * MAXP + 3] = {0};
    const int pages = td_mla_pages(&s, B, LEN, fixed, P, lens, table);
    eat(lens, sizeof lens);
    eat(table, sizeof table);
    REQUIRE(pages > 3 && pages <= B * MAXP + 3);
    for (int b = 0; b < B; b++) {
      CHECK(lens[b] >= 0 && lens[b] <= LEN && ((b > 0 && !fixed) || lens[b] == LEN));
      for (int g = 0; g < MAXP; g++) {
        const int t = table[b * MAXP + g];
        CHECK(g < (lens[b] + P - 1) / P ? t >= 0 && t < pages && !used[t]++ : t == -1);
      }
    }
  }
  eat(&s, sizeof s);
  printf("testdata draws: hash %016llx\n", (unsigned long long)hash);
  CHECK(hash == 0xb522081986230af3ull); /* pinned: what the copies testdata/ replaced drew (session 20) */
  return test_finish("test_testdata");
}
