/*
 * advise.c - mt_advise: what the application promises about its buffers.
 *
 * The only advice so far is read-mostly: no kernel writes the allocation
 * until the advice is withdrawn. It is kept as one flag per region
 * (mt_region_t.readmostly); launch.c reads it when it builds a footprint
 * and makes such a region resident for reading, so the pager keeps the
 * chunks that have a current host copy clean and evicts them without a
 * copy. The flag changes nothing else: copies and sets still dirty what
 * they write, and chunks already dirty stay dirty until their next
 * eviction. What a broken promise costs is spelled out in mtalloc.h; the
 * check for it is verify.c's (MT_VERIFY_CLEAN).
 *
 * The advice is per allocation because that is what the pager keeps: a
 * range that covers an allocation only in part cannot be honoured for that
 * part, so it advises nothing there (advising the whole allocation would
 * extend the promise to bytes the program never promised).
 *
 * Threading: under the pager lock, like every region field.
 */
#include <errno.h>

#include "mtalloc.h"
#include "pager.h"
#include "pager_internal.h"

MT_API int mt_advise(const void *ptr, size_t bytes, int advice) {
  if (advice != MT_ADVISE_NONE && advice != MT_ADVISE_READ_MOSTLY) return -EINVAL;
  uintptr_t a = (uintptr_t)ptr, end = a + bytes;
  if (bytes == 0 || end < a) return -EINVAL;
  mt_pager_t *p = _mt_pager_if_started();
  if (p == NULL) return 0; /* no allocation is mtalloc's yet */
  int n = 0;
  pthread_mutex_lock(&p->lock);
  uintptr_t st;
  size_t sz;
  for (uintptr_t at = a; at < end; at = st + sz) {
    mt_region_t *r = _mt_rmap_next(p->rmap, at, end, &st, &sz);
    if (r == NULL) break;
    if (r->addr < a || r->size > end - r->addr) continue; /* only partly inside */
    r->readmostly = advice == MT_ADVISE_READ_MOSTLY;
    n++;
  }
  pthread_mutex_unlock(&p->lock);
  return n;
}
