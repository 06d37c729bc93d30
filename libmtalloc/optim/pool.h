/*
 * pool.h - the host optimizer's thread pool (pool.c).
 */
#ifndef MT_OPTIM_POOL_H
#define MT_OPTIM_POOL_H

#include <stddef.h>
#include <stdint.h>

typedef struct _mt_pool _mt_pool_t;

/* fn(arg, task) runs once for every task in [0, ntasks), on some worker. */
typedef void (*_mt_pool_fn)(void *arg, size_t task);

/* Starts a pool of nthreads workers (0 = the default: the CPUs of NUMA node
 * `node` this process may run on, less one, at least one; node -1 = the
 * node of the calling CPU), each pinned to one CPU of that node (round
 * robin when there are more threads than CPUs). 0 or -errno; the caller
 * owns *out and frees it with _mt_pool_destroy. */
int _mt_pool_create(int nthreads, int node, _mt_pool_t **out);
/* Waits for the job in flight, stops and joins the workers, frees. */
void _mt_pool_destroy(_mt_pool_t *pool);
int _mt_pool_threads(const _mt_pool_t *pool);
/* A ticket that is always over (an empty job's). */
#define _MT_POOL_NO_TICKET UINT64_MAX
/* Queues a job of ntasks tasks behind the jobs in flight and returns its
 * ticket at once; when QCAP (256) jobs are queued it sleeps until one
 * completes. Workers may run tasks of this job and earlier ones at the same
 * time: jobs that touch the same memory must be ordered by the caller
 * (_mt_pool_wait_ticket). fn and arg must stay valid until the job is over.
 * ntasks 0 queues nothing and returns _MT_POOL_NO_TICKET. */
uint64_t _mt_pool_enqueue(_mt_pool_t *pool, size_t ntasks, _mt_pool_fn fn, void *arg);
/* _mt_pool_enqueue without the ticket. */
void _mt_pool_submit(_mt_pool_t *pool, size_t ntasks, _mt_pool_fn fn, void *arg);
/* Returns when every queued job is over. */
void _mt_pool_wait(_mt_pool_t *pool);
/* Returns when job `ticket` and every job queued before it are over. */
void _mt_pool_wait_ticket(_mt_pool_t *pool, uint64_t ticket);
/* Whether job `ticket` (and every earlier one) is over; does not wait. */
int _mt_pool_done(_mt_pool_t *pool, uint64_t ticket);
/* Nanoseconds the workers have spent inside finished tasks, summed over
 * workers, since the pool started. */
uint64_t _mt_pool_work_ns(_mt_pool_t *pool);
/* The default worker count for node (see _mt_pool_create), >= 1. */
int _mt_pool_default_threads(int node);

#endif
