/*
 * layout.c - the parameter layout of every kernel handle a program launches.
 *
 * Concept: a launch's footprint is found by scanning its parameters, and a
 * parameter can only be scanned when its offset and size are known. The
 * driver tells them per handle (cuFuncGetParamInfo for a CUfunction,
 * cuKernelGetParamInfo for a CUkernel); asking costs a driver call per
 * parameter, so the answer is kept per handle here, with the name.
 *
 * Handles come in two kinds. CUDA 12+ runtimes load kernels through the
 * library API and may launch the CUkernel itself where cuLaunchKernel takes
 * a CUfunction. Whether the cuFunc* queries accept a CUkernel is not
 * documented either way, so the answer must not depend on it: the hooks that
 * hand out handles (cuLibraryGetKernel, cuLibraryEnumerateKernels,
 * cuKernelGetFunction, cuModuleGetFunction) tell this file what each handle
 * is and where it came from, and each kind is asked with its own query
 * first, the other one second. A handle first seen at a launch (made
 * through a route no hook sees) is asked as a function, then as a kernel.
 *
 * Invariants:
 *   - An entry is "known" only when a query answered. INVALID_VALUE at
 *     parameter 0 reads as "no parameters" only when the same handle's name
 *     query of the same family succeeded (the driver accepted the handle as
 *     that kind, so the index was what it refused) and no other family
 *     reports parameters; otherwise the handle may simply be of the other
 *     kind, and guessing "none" would leave its buffers unmapped.
 *   - A layout that stays unknown is warned about once per handle and name
 *     (also across unloads), naming it, and every launch of it counts in
 *     launches_unknown_layout.
 *   - On cuModuleUnload / cuLibraryUnload the owner's entries are dropped,
 *     and so is every entry whose owner is unknown: a kernel loaded later
 *     may reuse the address, and a stale layout would scan the wrong bytes.
 *
 * Threading: one mutex over the table. A launch holds it from lookup to the
 * end of its scan (_mt_layout_acquire/_release) so an unload on another
 * thread cannot free the layout being read; it is taken inside the pager
 * lock and never the other way round.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>

#include "driver.h"
#include "internal.h"
#include "layout.h"
#include "stats.h"

static pthread_mutex_t layout_lock = PTHREAD_MUTEX_INITIALIZER;
static mt_layout_t **buckets;     /* chains by handle hash */
static size_t nbuckets, nentries; /* nbuckets: power of two or 0 */

static size_t bucket_of(uintptr_t h, size_t n) {
  return (size_t)(((h >> 4) * 0x9E3779B97F4A7C15ULL) >> 20) & (n - 1);
}

static mt_layout_t *find(uintptr_t h) {
  if (nbuckets == 0) return NULL;
  for (mt_layout_t *l = buckets[bucket_of(h, nbuckets)]; l; l = l->next)
    if (l->handle == h) return l;
  return NULL;
}

static void free_layout(mt_layout_t *l) {
  free(l->off);
  free(l->size);
  free(l);
}

/* Forgets what the driver said (the handle's kind and owner stay). */
static void reset(mt_layout_t *l) {
  free(l->off);
  free(l->size);
  l->off = l->size = NULL;
  l->n = 0;
  l->built = l->known = false;
  l->name = NULL;
}

/* A new entry for h, or NULL when out of memory. Caller holds the lock. */
static mt_layout_t *insert(uintptr_t h) {
  if (nentries >= nbuckets) {
    size_t cap = nbuckets ? nbuckets * 2 : 256;
    mt_layout_t **nb = calloc(cap, sizeof(*nb));
    if (nb == NULL) {
      if (nbuckets == 0) return NULL;
    } else {
      for (size_t i = 0; i < nbuckets; i++) {
        for (mt_layout_t *l = buckets[i], *next; l; l = next) {
          next = l->next;
          size_t b = bucket_of(l->handle, cap);
          l->next = nb[b];
          nb[b] = l;
        }
      }
      free(buckets);
      buckets = nb;
      nbuckets = cap;
    }
  }
  mt_layout_t *l = calloc(1, sizeof(*l));
  if (l == NULL) return NULL;
  l->handle = h;
  snprintf(l->anon, sizeof(l->anon), "(unnamed kernel %#lx)", (unsigned long)h);
  size_t b = bucket_of(h, nbuckets);
  l->next = buckets[b];
  buckets[b] = l;
  nentries++;
  return l;
}

void _mt_layout_note(uintptr_t handle, int kind, uintptr_t owner, uintptr_t kernel) {
  if (handle == 0) return;
  pthread_mutex_lock(&layout_lock);
  if (kernel != 0 && owner == 0) { /* a kernel's function belongs where the kernel does */
    mt_layout_t *k = find(kernel);
    if (k != NULL) owner = k->owner;
  }
  mt_layout_t *l = find(handle);
  if (l != NULL && !(l->vouched && l->kind == kind && l->owner == owner && l->kernel == kernel)) reset(l);
  if (l == NULL) l = insert(handle);
  if (l != NULL) {
    l->kind = (uint8_t)kind;
    l->owner = owner;
    l->kernel = kernel;
    l->vouched = true;
  }
  pthread_mutex_unlock(&layout_lock);
}

void _mt_layout_unload(uintptr_t owner) {
  pthread_mutex_lock(&layout_lock);
  for (size_t i = 0; i < nbuckets; i++) {
    for (mt_layout_t **pl = &buckets[i]; *pl;) {
      mt_layout_t *l = *pl;
      if (l->owner == owner || l->owner == 0) {
        *pl = l->next;
        free_layout(l);
        nentries--;
      } else {
        pl = &l->next;
      }
    }
  }
  pthread_mutex_unlock(&layout_lock);
}

/* ---- asking the driver ------------------------------------------------------ */

static CUresult query_param(int fam, uintptr_t h, size_t i, size_t *off, size_t *size) {
  const mt_driver_t *d = _mt_driver();
  if (fam == MT_FN_KERNEL)
    return d->cuKernelGetParamInfo ? d->cuKernelGetParamInfo((CUkernel)h, i, off, size) : CUDA_ERROR_NOT_SUPPORTED;
  return d->cuFuncGetParamInfo((CUfunction)h, i, off, size);
}

static CUresult query_name(int fam, uintptr_t h, const char **name) {
  const mt_driver_t *d = _mt_driver();
  *name = NULL;
  if (fam == MT_FN_KERNEL)
    return d->cuKernelGetName ? d->cuKernelGetName(name, (CUkernel)h) : CUDA_ERROR_NOT_SUPPORTED;
  return d->cuFuncGetName(name, (CUfunction)h);
}

typedef struct attempt {
  int fam;
  uintptr_t h;
  bool known;
  uint32_t n;
  uint32_t *off, *size;
  CUresult rc;               /* why not known */
} attempt_t;

/* Asks family a->fam for every parameter of a->h. */
static void ask(attempt_t *a) {
  uint32_t cap = 0;
  for (size_t i = 0;; i++) {
    size_t off = 0, size = 0;
    CUresult rc = query_param(a->fam, a->h, i, &off, &size);
    if (rc == CUDA_SUCCESS) {
      if (a->n == cap) {
        cap = cap ? cap * 2 : 8;
        uint32_t *no = realloc(a->off, cap * sizeof(uint32_t));
        if (no) a->off = no;
        uint32_t *ns = realloc(a->size, cap * sizeof(uint32_t));
        if (ns) a->size = ns;
        if (!no || !ns) {
          a->rc = CUDA_ERROR_OUT_OF_MEMORY; /* a partial layout would miss pointers: unknown */
          return;
        }
      }
      a->off[a->n] = (uint32_t)off;
      a->size[a->n] = (uint32_t)size;
      a->n++;
      continue;
    }
    if (rc == CUDA_ERROR_INVALID_VALUE && i > 0) { /* past the last parameter */
      a->known = true;
      return;
    }
    if (rc == CUDA_ERROR_INVALID_VALUE) { /* index 0: no parameters, or not this kind of handle */
      const char *name;
      a->known = query_name(a->fam, a->h, &name) == CUDA_SUCCESS;
    }
    a->rc = rc;
    return;
  }
}

static const char *fam_query(int fam) { return fam == MT_FN_KERNEL ? "cuKernelGetParamInfo" : "cuFuncGetParamInfo"; }

/* Kernels already warned about, by handle and name, kept across unloads:
 * an unload drops the layouts of unknown origin, and the same kernel must
 * not be warned about again at every library an autotuner unloads. A new
 * kernel at a reused handle has another name and is warned about. */
#define WARNED_MAX 256
static struct { uintptr_t h; uint64_t name; } warned[WARNED_MAX];
static unsigned nwarned;

static uint64_t name_hash(const char *s) {
  uint64_t h = 1469598103934665603ULL; /* FNV-1a */
  for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ULL;
  return h;
}

/* True the first time (handle, name) asks; caller holds the lock. */
static bool warn_first(uintptr_t h, const char *name) {
  uint64_t nh = name_hash(name);
  unsigned n = nwarned < WARNED_MAX ? nwarned : WARNED_MAX;
  for (unsigned i = 0; i < n; i++)
    if (warned[i].h == h && warned[i].name == nh) return false;
  warned[nwarned++ % WARNED_MAX] = (__typeof__(warned[0])){h, nh};
  return true;
}

/* Fills l from the driver. Caller holds the lock. */
static void build(mt_layout_t *l) {
  l->built = true;
  /* Which queries, in which order: the handle's own kind first; the other
   * kind second, unless a hook saw a CUfunction made by cuModuleGetFunction
   * (then a kernel query could only fail). A function made from a kernel
   * may also be described by that kernel. */
  attempt_t at[2] = {{.fam = l->kind, .h = l->handle}, {.fam = !l->kind, .h = l->handle}};
  int nat = 2;
  if (l->kind == MT_FN_FUNCTION && l->kernel) at[1].h = l->kernel;
  else if (l->kind == MT_FN_FUNCTION && l->vouched) nat = 1;
  int best = -1;
  for (int i = 0; i < nat; i++) {
    ask(&at[i]);
    if (!at[i].known) continue;
    if (best < 0 || (at[best].n == 0 && at[i].n > 0)) best = i;
    if (at[best].n > 0) break;
  }
  for (int i = 0; i < nat && l->name == NULL; i++) {
    const char *name;
    if (query_name(at[i].fam, at[i].h, &name) == CUDA_SUCCESS && name) l->name = name;
  }
  if (l->name == NULL) l->name = l->anon;
  if (best >= 0) {
    l->known = true;
    l->n = at[best].n;
    l->off = at[best].off;
    l->size = at[best].size;
    at[best].off = at[best].size = NULL;
  } else if (warn_first(l->handle, l->name)) {
    char why[160];
    int w = snprintf(why, sizeof(why), "%s: %s", fam_query(at[0].fam), _mt_cu_errname(at[0].rc));
    if (nat > 1 && w > 0 && (size_t)w < sizeof(why))
      snprintf(why + w, sizeof(why) - (size_t)w, ", %s: %s", fam_query(at[1].fam), _mt_cu_errname(at[1].rc));
    mt_warn("kernel %s: the driver gave no parameter layout (%s), so its pointer parameters cannot be "
            "found and its buffers are not made resident before it runs; each launch counts in "
            "launches_unknown_layout",
            l->name, why);
  }
  for (int i = 0; i < nat; i++) {
    free(at[i].off);
    free(at[i].size);
  }
}

mt_layout_t *_mt_layout_acquire(CUfunction f) {
  pthread_mutex_lock(&layout_lock);
  uintptr_t h = (uintptr_t)f;
  mt_layout_t *l = find(h);
  if (l == NULL) l = insert(h);
  if (l == NULL) return NULL;
  if (!l->built) build(l);
  if (!l->known) mt_stat_add(launches_unknown_layout, 1);
  return l;
}

void _mt_layout_release(void) { pthread_mutex_unlock(&layout_lock); }

const char *_mt_layout_name(CUfunction f) {
  pthread_mutex_lock(&layout_lock);
  mt_layout_t *l = find((uintptr_t)f);
  const char *name = l && l->name ? l->name : "(unnamed kernel)";
  pthread_mutex_unlock(&layout_lock);
  return name;
}
