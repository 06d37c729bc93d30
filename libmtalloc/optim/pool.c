/*
 * pool.c - a fixed set of pinned worker threads that run one job at a time.
 *
 * The concept: the optimizer step is a job of many independent tasks (a
 * task is one cache-sized range of one parameter, optim.c); workers take
 * tasks in order from a shared atomic counter, so a slow task never holds
 * up the others and there is no per-task queueing. The thread that submits
 * does not take part: in mtalloc it is the framework's launching thread,
 * which must keep launching while the step overlaps backward. That is also
 * why the default leaves one CPU of the node free.
 *
 * Invariants: at most one job is in flight. A job is described by
 * (gen, fn, arg, ntasks) under the lock; `next` hands out task indices
 * (fetch-add, may overshoot ntasks), `done` counts finished tasks and
 * `active` the workers between taking the job and reporting back. The job
 * is over when done == ntasks and active == 0: waiting for `active` too
 * means no worker can still be about to fetch-add `next` when the owner
 * resets it for the next job. The worker that ends it broadcasts `idle`.
 * Workers sleep on `work` until gen changes.
 *
 * Threading: _mt_pool_submit/_mt_pool_wait/_mt_pool_destroy from one owner
 * thread at a time; fn runs concurrently on the workers.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "pool.h"

struct _mt_pool {
  pthread_mutex_t lock;
  pthread_cond_t work; /* gen changed or stop */
  pthread_cond_t idle; /* a job finished */
  unsigned long gen;   /* job number, under lock */
  bool stop;           /* under lock */
  _mt_pool_fn fn;      /* the job, under lock; read by workers after gen */
  void *arg;
  size_t ntasks;
  atomic_size_t next; /* next task index to take */
  size_t done;        /* tasks finished, under lock */
  int active;         /* workers inside the job, under lock */
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

static void *worker(void *p) {
  _mt_pool_t *pool = p;
  unsigned long seen = 0;
  pthread_mutex_lock(&pool->lock);
  for (;;) {
    while (!pool->stop && pool->gen == seen)
      pthread_cond_wait(&pool->work, &pool->lock);
    if (pool->stop)
      break;
    seen = pool->gen;
    pool->active++;
    _mt_pool_fn fn = pool->fn;
    void *arg = pool->arg;
    size_t ntasks = pool->ntasks;
    pthread_mutex_unlock(&pool->lock);
    size_t finished = 0;
    for (size_t t; (t = atomic_fetch_add(&pool->next, 1)) < ntasks;) {
      fn(arg, t);
      finished++;
    }
    pthread_mutex_lock(&pool->lock);
    pool->done += finished;
    if (--pool->active == 0)
      pthread_cond_broadcast(&pool->idle);
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

/* Under the lock: until the job in flight is over (all tasks done, no
 * worker inside it). */
static void wait_locked(_mt_pool_t *pool) {
  while (pool->done < pool->ntasks || pool->active > 0)
    pthread_cond_wait(&pool->idle, &pool->lock);
}

void _mt_pool_wait(_mt_pool_t *pool) {
  pthread_mutex_lock(&pool->lock);
  wait_locked(pool);
  pthread_mutex_unlock(&pool->lock);
}

void _mt_pool_submit(_mt_pool_t *pool, size_t ntasks, _mt_pool_fn fn, void *arg) {
  pthread_mutex_lock(&pool->lock);
  wait_locked(pool); /* and hold the lock: no late worker can enter the old job now */
  if (ntasks == 0) {
    pthread_mutex_unlock(&pool->lock);
    return;
  }
  pool->fn = fn;
  pool->arg = arg;
  pool->ntasks = ntasks;
  atomic_store(&pool->next, 0);
  pool->done = 0;
  pool->gen++;
  pthread_cond_broadcast(&pool->work);
  pthread_mutex_unlock(&pool->lock);
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
