/*
 * tensormap.c - the tensor each CUtensorMap descriptor names.
 *
 * Concept: Hopper kernels (cuBLASLt sm90, cuDNN attention, CUTLASS) take
 * 128-byte CUtensorMap descriptors by value, and the tensor's address
 * inside is in the driver's own encoding, not necessarily a plain 8-byte
 * word the parameter scan would find. The descriptor is only ever made by
 * the driver's encoders (cuTensorMapEncodeTiled, ...Im2col, ...Im2colWide)
 * and changed by cuTensorMapReplaceAddress, which the preload layer hooks:
 * each result is remembered here by its bytes, with the address it was
 * asked to encode. A launch parameter whose bytes match a remembered
 * descriptor names that address (launch.c adds its region to the
 * footprint). Bytes, not the descriptor's host address, are the key: the
 * descriptor is copied by value into the launch, and copied again by
 * frameworks that cache it.
 *
 * Invariants: at most MT_TMAP_CAP descriptors are kept; beyond that the
 * oldest is forgotten (a program that encodes one per GEMM call would
 * otherwise grow without bound; the ones in use are the recent ones). The
 * address is stored, not a region: a launch looks the region up at launch
 * time, so a freed tensor is simply not found.
 *
 * Threading: one mutex over the table; taken inside the pager lock during
 * a launch's scan, never the other way round. The "any" flag is an atomic
 * so launches of programs without descriptors never take the lock.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"

#include "internal.h"
#include "tensormap.h"

#define MT_TMAP_CAP 8192      /* descriptors kept */
#define MT_TMAP_BUCKETS 16384 /* power of two */

typedef struct tmap_ent {
  uint64_t hash;
  int32_t next;              /* chain, -1 = end */
  bool used;
  uintptr_t addr;
  unsigned char desc[MT_TMAP_BYTES];
} tmap_ent_t;

static pthread_mutex_t tmap_lock = PTHREAD_MUTEX_INITIALIZER;
static tmap_ent_t *ents;      /* MT_TMAP_CAP, allocated at the first note */
static int32_t *heads;        /* MT_TMAP_BUCKETS chain heads */
static uint32_t ring;         /* next entry to (re)use */
static atomic_bool any;

static uint64_t hash_of(const void *desc) { return XXH3_64bits(desc, MT_TMAP_BYTES); }

static int32_t lookup(const void *desc, uint64_t h) {
  for (int32_t i = heads[h & (MT_TMAP_BUCKETS - 1)]; i >= 0; i = ents[i].next)
    if (ents[i].hash == h && memcmp(ents[i].desc, desc, MT_TMAP_BYTES) == 0) return i;
  return -1;
}

static void unlink_ent(int32_t e) {
  int32_t *pi = &heads[ents[e].hash & (MT_TMAP_BUCKETS - 1)];
  while (*pi >= 0 && *pi != e) pi = &ents[*pi].next;
  if (*pi == e) *pi = ents[e].next;
}

void _mt_tmap_note(const void *desc, uintptr_t addr) {
  if (desc == NULL) return;
  pthread_mutex_lock(&tmap_lock);
  if (ents == NULL) {
    ents = calloc(MT_TMAP_CAP, sizeof(*ents));
    heads = malloc(MT_TMAP_BUCKETS * sizeof(*heads));
    if (ents == NULL || heads == NULL) {
      free(ents);
      free(heads);
      ents = NULL;
      heads = NULL;
      pthread_mutex_unlock(&tmap_lock);
      mt_warn("out of memory for the tensor-map table: kernels reaching a tensor only through a "
              "CUtensorMap will not have it made resident");
      return;
    }
    memset(heads, 0xff, MT_TMAP_BUCKETS * sizeof(*heads));
  }
  uint64_t h = hash_of(desc);
  int32_t e = lookup(desc, h);
  if (e < 0) {
    e = (int32_t)ring;
    ring = (ring + 1) % MT_TMAP_CAP;
    if (ents[e].used) unlink_ent(e);
    ents[e].hash = h;
    ents[e].used = true;
    memcpy(ents[e].desc, desc, MT_TMAP_BYTES);
    ents[e].next = heads[h & (MT_TMAP_BUCKETS - 1)];
    heads[h & (MT_TMAP_BUCKETS - 1)] = e;
  }
  ents[e].addr = addr;
  atomic_store_explicit(&any, true, memory_order_release);
  pthread_mutex_unlock(&tmap_lock);
}

bool _mt_tmap_any(void) { return atomic_load_explicit(&any, memory_order_acquire); }

void _mt_tmap_each(const char *buf, size_t first, size_t size, void (*fn)(void *, uintptr_t), void *arg) {
  if (!_mt_tmap_any()) return;
  pthread_mutex_lock(&tmap_lock);
  for (size_t o = first; o + MT_TMAP_BYTES <= size; o += 64) {
    int32_t e = lookup(buf + o, hash_of(buf + o));
    if (e >= 0) fn(arg, ents[e].addr);
  }
  pthread_mutex_unlock(&tmap_lock);
}

bool _mt_tmap_find(const void *desc, uintptr_t *addr) {
  if (!_mt_tmap_any()) return false;
  uint64_t h = hash_of(desc);
  pthread_mutex_lock(&tmap_lock);
  int32_t e = lookup(desc, h);
  if (e >= 0) *addr = ents[e].addr;
  pthread_mutex_unlock(&tmap_lock);
  return e >= 0;
}
