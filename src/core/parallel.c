/* parallel.c - the float64 host references on all of the machine's cores.
 *
 * A reference's items (query rows, tokens) are independent and each writes its own
 * outputs, so they can run on several threads and give the same bits as on one: every
 * item does the same arithmetic in the same order, whichever thread takes it. The GPU
 * tests spend most of their time in these references. */
#define _GNU_SOURCE
#include "internal.h"
#include "knobs.h"

#include <pthread.h>
#include <stdatomic.h>
#include <unistd.h>

int ws_host_workers(void) {
  const int forced = ws_knobs_get()->host_threads; /* WARPSPEC_HOST_THREADS, 0: unset */
  long n = forced > 0 ? forced : sysconf(_SC_NPROCESSORS_ONLN);
  if (n < 1) n = 1; /* sysconf failed */
  return n > WS_HOST_THREADS_MAX ? WS_HOST_THREADS_MAX : (int)n;
}

typedef struct {
  atomic_int next; /* the next item to take */
  int n;
  void (*body)(void *ctx, int item, int worker);
  void *ctx;
} par_job;

typedef struct {
  par_job *job;
  int worker;
} par_arg;

static void par_run(par_job *j, int worker) {
  for (int i; (i = atomic_fetch_add(&j->next, 1)) < j->n;) j->body(j->ctx, i, worker);
}

static void *par_thread(void *p) {
  const par_arg *a = (const par_arg *)p;
  par_run(a->job, a->worker);
  return NULL;
}

int ws_parallel_for(int n, int workers, void (*body)(void *ctx, int item, int worker), void *ctx) {
  if (n <= 0) return 1;
  if (workers > n) workers = n;
  if (workers < 1) workers = 1;
  par_job job = {0, n, body, ctx};
  pthread_t tid[WS_HOST_THREADS_MAX];
  par_arg arg[WS_HOST_THREADS_MAX];
  int started = 1; /* worker 0 is this thread */
  for (int w = 1; w < workers && w < WS_HOST_THREADS_MAX; w++) {
    arg[w].job = &job;
    arg[w].worker = w;
    if (pthread_create(&tid[w], NULL, par_thread, &arg[w]) != 0) break; /* the started ones take the rest */
    started++;
  }
  par_run(&job, 0);
  for (int w = 1; w < started; w++) pthread_join(tid[w], NULL);
  return started;
}
