/*
 * pool.h - the host optimizer's thread pool (pool.c).
 */
#ifndef MT_OPTIM_POOL_H
#define MT_OPTIM_POOL_H

#include <stddef.h>

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
/* Hands the workers a job of ntasks tasks and returns at once; a job still
 * in flight is waited for first. fn and arg must stay valid until
 * _mt_pool_wait returns. */
void _mt_pool_submit(_mt_pool_t *pool, size_t ntasks, _mt_pool_fn fn, void *arg);
/* Returns when every task of the last submitted job has returned. */
void _mt_pool_wait(_mt_pool_t *pool);
/* The default worker count for node (see _mt_pool_create), >= 1. */
int _mt_pool_default_threads(int node);

#endif
