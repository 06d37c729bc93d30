/*
 * verify.c - MT_VERIFY_CLEAN: catching a kernel that wrote memory it was
 * promised not to.
 *
 * A clean DEVICE chunk is evicted by dropping its device memory: its host
 * copy is current, as far as the pager knows. The pager knows only what it
 * saw: copies and sets, and launches, which count as writing every region
 * they reach unless the region was advised read-mostly (mt_advise). A
 * kernel that writes such a region anyway leaves a clean chunk whose device
 * copy is newer, and dropping it loses the write. With the option on, the
 * pager asks here before it drops a clean chunk: both copies are read back
 * into host buffers and compared (xxh3 of each, then the first differing
 * byte for the message). A difference is an error naming the region and
 * the offset, and the pager then treats the chunk as dirty and copies it,
 * so the data is kept: a debug run finds the broken promise without losing
 * the result.
 *
 * Costs: two chunk copies and a host wait per clean eviction, so it is a
 * debug option (off by default). Nothing is checked where nothing can be:
 * on the virtual clock (no memory behind addresses), while a stream
 * capture is active (no copy may be waited for then, graph.c), and for a
 * chunk whose lower copy is not in host memory (none, or on NVMe once that
 * tier keeps clean copies there); those chunks are dropped unchecked.
 *
 * Both copies are read through the device's copy, not by dereferencing the
 * host copy's address: with host mappings that address is where the pager
 * copies to and from, which the CPU need not be able to read.
 *
 * Threading: under the pager lock (make_room_ex, pager.c).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "hash.h"
#include "pager_internal.h"


int _mt_verify_clean(mt_pager_t *p, mt_chunk_t *c) {
  if (!_mt_opt_int(MT_OPT_VERIFY_CLEAN)) return 0;
  if (p->dev->info.models_host_reach || _mt_capture_active(p) || c->host_addr == 0) return 0;
  mt_region_t *r = c->region;
  uintptr_t va = r->addr + (uintptr_t)c->index * p->chunk;
  uint8_t *dev = malloc(p->chunk), *host = malloc(p->chunk);
  int rc = dev && host ? 0 : -ENOMEM;
  if (rc == 0) rc = _mt_copy_wait(p, (uintptr_t)dev, va, p->chunk, p->d2h);
  if (rc == 0) rc = _mt_copy_wait(p, (uintptr_t)host, c->host_addr, p->chunk, p->d2h);
  if (rc < 0) {
    mt_warn("MT_VERIFY_CLEAN: could not read back chunk %u of region %llu (%s); copying it to host as if "
            "dirty", c->index, (unsigned long long)r->id, strerror(-rc));
  } else if (XXH3_64bits(dev, p->chunk) != XXH3_64bits(host, p->chunk)) {
    size_t off = 0;
    while (off < p->chunk && dev[off] == host[off]) off++;
    size_t at = (size_t)c->index * p->chunk + off;
    mt_error("MT_VERIFY_CLEAN: region %llu (allocation at 0x%llx, %zu bytes%s) was written on the device "
             "while it counted as clean: first difference at offset %zu (chunk %u). A kernel wrote memory "
             "advised read-mostly (mt_advise), whose writes are lost at a clean eviction; this chunk is "
             "copied to host instead, so nothing is lost in this run",
             (unsigned long long)r->id, (unsigned long long)r->addr, r->size,
             r->readmostly ? ", advised read-mostly" : "", at, c->index);
    rc = 1;
  }
  free(dev);
  free(host);
  return rc;
}
