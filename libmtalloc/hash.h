/*
 * hash.h - xxHash, compiled into each file that hashes (XXH_INLINE_ALL).
 *
 * Every file that hashes includes this header instead of <xxhash.h>. With
 * XXH_INLINE_ALL every XXH function is static inline here, so nothing links
 * libxxhash: libmtalloc.so carries no NEEDED entry for it and runs on a
 * machine without the package (a GPU box where nothing can be installed).
 * The values are xxHash's own (same algorithm, same seeds), so launch ids
 * in traces do not change. The build needs xxhash.h (libxxhash-dev) only.
 */
#ifndef MT_HASH_H
#define MT_HASH_H

#define XXH_INLINE_ALL
#include <xxhash.h>

#endif
