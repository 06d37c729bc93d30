/*
 * hostmem.h - the host optimizer's own memory (hostmem.c).
 */
#ifndef MT_OPTIM_HOSTMEM_H
#define MT_OPTIM_HOSTMEM_H

#include <stddef.h>

/* bytes of zeroed memory, 64-byte aligned, on the GPU's NUMA node and
 * counted in MT_MAX_HOST; NULL when the budget or the system has no room
 * (the budget's refusal is logged). Free with _mt_optim_mem_free. */
void *_mt_optim_mem_alloc(size_t bytes);
void _mt_optim_mem_free(void *p);
/* Bytes of it allocated now, in this process. */
size_t _mt_optim_mem_bytes(void);

#endif
