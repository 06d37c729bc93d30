/*
 * pool.c - a fixed set of pinned worker threads that run a bounded queue of
 * jobs.
 *
 * The concept: an optimizer step is one or more jobs of many independent
 * tasks (a task is one cache-sized range of one parameter, optim.c). Jobs
 * queue in submission order (at most QCAP; a submitter finding the queue
 * full sleeps until a job completes, never spins), so per-parameter steps
 * started from a post-accumulate-grad hook queue behind each other while
 * backward goes on. Workers take the next task of the oldest job that
 * still has tasks to hand out, so a job of one task and a job of a
 * thousand mix without idling anyone. The thread that submits does not take
 * part: in mtalloc it is the framework's launching thread, which must keep
 * launching while the step overlaps backward. That is also why the default
 * leaves one CPU of the node free.
 *
 * Invariants (all under the lock): jobs [head, tail) are live, slot =
 * number % QCAP; take (head <= take <= tail) is the first job with tasks
 * not yet handed out; a job's next counts tasks handed out, done tasks
 * finished. head advances over jobs with done == ntasks, in order, so
 * "head > t" means job t and all before it are over (a job's ticket is its
 * number). Tasks are handed out under the lock: a task is 64K elements of
 * Adam, so the lock is taken once per hundreds of microseconds of work.
 * Empty jobs are never queued. work_ns sums the time workers spent inside
 * finished tasks (the optimizer reports it as overlap).
 *
 * Threading: submitters, waiters and _mt_pool_destroy may be different
 * threads but calls must not overlap (optim.c's owner rule); fn runs
 * concurrently on the workers.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "pool.h"

#define QCAP 256 /* jobs queued at most: one per parameter of a layer-sized group */

typedef struct job {
  _mt_pool_fn fn;
  void *arg;
  size_t ntasks, next, done;
} job_t;

struct _mt_pool {
  pthread_mutex_t lock;
  pthread_cond_t work;  /* a job queued, or stop */
  pthread_cond_t idle;  /* head advanced: a job completed, a slot freed */
  job_t jobs[QCAP];
  uint64_t head, take, tail;
  uint64_t work_ns;     /* nanoseconds inside finished tasks, all workers */
  bool stop;
  int nthreads;
  pthread_t *threads;
};

/* CPUs of node (from sysfs, so no libnuma call is needed) that this process
 * may run on. Fills set; returns how many, 0 if the node is unknown. */
static int node_cpus(int node, cpu_set_t *set) {
  cpu_set_t allowed;
  CPU_ZERO(set);
  if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0)
    return 0;
  if (node < 0) {
    int cpu = sched_getcpu();
    node = 0;
    char path[96];
    for (int n = 0; cpu >= 0 && n < 1024; n++) {
      snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpu%d", n, cpu);
      FILE *f = fopen(path, "r");
      if (f != NULL) {
        fclose(f);
        node = n;
        break;
      }
      snprintf(path, sizeof(path), "/sys/devices/system/node/node%d", n);
      if ((f = fopen(path, "r")) == NULL && n > 0 && errno == ENOENT)
        break;
      if (f != NULL)
        fclose(f);
    }
  }
  char path[96], list[4096];
  snprintf(path, sizeof(path), "/sys/devices/system/node/node%d/cpulist", node);
  FILE *f = fopen(path, "r");
  if (f == NULL) { /* no NUMA in sysfs: every allowed CPU is on "the" node */
    *set = allowed;
    return CPU_COUNT(set);
  }
  size_t len = fread(list, 1, sizeof(list) - 1, f);
  fclose(f);
  list[len] = '\0';
  for (char *s = list; *s != '\0' && *s != '\n';) {
    char *e;
    long a = strtol(s, &e, 10), b = a;
    if (e == s)
      break;
    if (*e == '-')
      b = strtol(e + 1, &e, 10);
    for (long c = a; c <= b && c < CPU_SETSIZE; c++)
      if (CPU_ISSET(c, &allowed))
        CPU_SET(c, set);
    s = *e == ',' ? e + 1 : e;
  }
  return CPU_COUNT(set);
}

int _mt_pool_default_threads(int node) {
  cpu_set_t set;
  int n = node_cpus(node, &set) - 1;
  return n < 1 ? 1 : n;
}

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker(void *p) {
  _mt_pool_t *pool = p;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (!pool->stop && pool->take == pool->tail)
      pthread_cond_wait(&pool->work, &pool->lock);
    if (pool->stop)
      break;
    job_t *j = &pool->jobs[pool->take % QCAP];
    size_t t = j->next++;
    if (j->next == j->ntasks)
      pool->take++;
    _mt_pool_fn fn = j->fn;
    void *arg = j->arg;
    pthread_mutex_unlock(&pool->lock);
    uint64_t t0 = now_ns();
    fn(arg, t);
    uint64_t dt = now_ns() - t0;
    pthread_mutex_lock(&pool->lock);
    pool->work_ns += dt;
    /* the slot stays j's until head passes it, which needs this task done */
    if (++j->done == j->ntasks) {
      uint64_t h = pool->head;
      while (h < pool->take && pool->jobs[h % QCAP].done == pool->jobs[h % QCAP].ntasks)
        h++;
      if (h != pool->head) {
        pool->head = h;
        pthread_cond_broadcast(&pool->idle);
      }
    }
  }
  pthread_mutex_unlock(&pool->lock);
  return NULL;
}

int _mt_pool_create(int nthreads, int node, _mt_pool_t **out) {
  cpu_set_t cpus;
  int ncpus = node_cpus(node, &cpus);
  if (nthreads <= 0)
    nthreads = ncpus - 1 < 1 ? 1 : ncpus - 1;
  _mt_pool_t *pool = calloc(1, sizeof(*pool));
  if (pool == NULL)
    return -ENOMEM;
  pool->threads = calloc((size_t)nthreads, sizeof(pthread_t));
  if (pool->threads == NULL) {
    free(pool);
    return -ENOMEM;
  }
  pthread_mutex_init(&pool->lock, NULL);
  pthread_cond_init(&pool->work, NULL);
  pthread_cond_init(&pool->idle, NULL);
  int cpu_list[CPU_SETSIZE], nlist = 0;
  for (int c = 0; c < CPU_SETSIZE && nlist < ncpus; c++)
    if (CPU_ISSET(c, &cpus))
      cpu_list[nlist++] = c;
  for (int i = 0; i < nthreads; i++) {
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    if (nlist > 0) {
      cpu_set_t one;
      CPU_ZERO(&one);
      CPU_SET(cpu_list[i % nlist], &one);
      /* pinned: a worker keeps its L1/L2 and its node's memory */
      pthread_attr_setaffinity_np(&attr, sizeof(one), &one);
    }
    int rc = pthread_create(&pool->threads[i], &attr, worker, pool);
    pthread_attr_destroy(&attr);
    if (rc != 0) {
      pool->nthreads = i;
      _mt_pool_destroy(pool);
      return -rc;
    }
    pool->nthreads = i + 1;
  }
  *out = pool;
  return 0;
}

void _mt_pool_wait(_mt_pool_t *pool) {
  pthread_mutex_lock(&pool->lock);
  while (pool->head != pool->tail)
    pthread_cond_wait(&pool->idle, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
}

void _mt_pool_wait_ticket(_mt_pool_t *pool, uint64_t ticket) {
  if (ticket == _MT_POOL_NO_TICKET)
    return;
  pthread_mutex_lock(&pool->lock);
  while (pool->head <= ticket && pool->head != pool->tail)
    pthread_cond_wait(&pool->idle, &pool->lock);
  pthread_mutex_unlock(&pool->lock);
}

int _mt_pool_done(_mt_pool_t *pool, uint64_t ticket) {
  if (ticket == _MT_POOL_NO_TICKET)
    return 1;
  pthread_mutex_lock(&pool->lock);
  int done = pool->head > ticket || pool->head == pool->tail;
  pthread_mutex_unlock(&pool->lock);
  return done;
}

uint64_t _mt_pool_enqueue(_mt_pool_t *pool, size_t ntasks, _mt_pool_fn fn, void *arg) {
  pthread_mutex_lock(&pool->lock);
  if (ntasks == 0) {
    pthread_mutex_unlock(&pool->lock);
    return _MT_POOL_NO_TICKET;
  }
  while (pool->tail - pool->head == QCAP)
    pthread_cond_wait(&pool->idle, &pool->lock);
  pool->jobs[pool->tail % QCAP] = (job_t){.fn = fn, .arg = arg, .ntasks = ntasks};
  uint64_t ticket = pool->tail++;
  pthread_cond_broadcast(&pool->work);
  pthread_mutex_unlock(&pool->lock);
  return ticket;
}

void _mt_pool_submit(_mt_pool_t *pool, size_t ntasks, _mt_pool_fn fn, void *arg) {
  (void)_mt_pool_enqueue(pool, ntasks, fn, arg);
}

uint64_t _mt_pool_work_ns(_mt_pool_t *pool) {
  pthread_mutex_lock(&pool->lock);
  uint64_t ns = pool->work_ns;
  pthread_mutex_unlock(&pool->lock);
  return ns;
}

int _mt_pool_threads(const _mt_pool_t *pool) {
  return pool->nthreads;
}

void _mt_pool_destroy(_mt_pool_t *pool) {
  if (pool == NULL)
    return;
  _mt_pool_wait(pool);
  pthread_mutex_lock(&pool->lock);
  pool->stop = true;
  pthread_cond_broadcast(&pool->work);
  pthread_mutex_unlock(&pool->lock);
  for (int i = 0; i < pool->nthreads; i++)
    pthread_join(pool->threads[i], NULL);
  pthread_cond_destroy(&pool->idle);
  pthread_cond_destroy(&pool->work);
  pthread_mutex_destroy(&pool->lock);
  free(pool->threads);
  free(pool);
}
