/*
 * tensormap.h - which region each CUtensorMap descriptor names. See
 * tensormap.c.
 */
#ifndef MT_TENSORMAP_H
#define MT_TENSORMAP_H

#include <stdbool.h>
#include <stdint.h>

#define MT_TMAP_BYTES 128 /* sizeof(CUtensorMap) */

/* An encoder (or cuTensorMapReplaceAddress) wrote desc, MT_TMAP_BYTES
 * bytes, naming the tensor at addr. */
void _mt_tmap_note(const void *desc, uintptr_t addr);
/* True once any descriptor was noted (launches skip the lookups before). */
bool _mt_tmap_any(void);
/* The address the descriptor whose bytes are at desc names: true and *addr,
 * or false for bytes no encoder produced. */
bool _mt_tmap_find(const void *desc, uintptr_t *addr);
/* fn(arg, address) for every descriptor among the 64-byte-spaced windows of
 * buf from offset first to size, under one lock for all of them (a
 * launch's parameters may hold many windows). fn must not call back here. */
void _mt_tmap_each(const char *buf, size_t first, size_t size, void (*fn)(void *, uintptr_t), void *arg);

#endif
