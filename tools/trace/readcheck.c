/*
 * readcheck.c - see readcheck.h. Reads the pager's chunk states (it runs
 * inside the launch, under the pager's lock, between the residency
 * guarantee and the kernel) and changes nothing.
 */
#include "readcheck.h"

#include "trace_format.h"

void readcheck_launch(mt_pager_t *p, const uintptr_t *addrs, const uint64_t *bytes, const uint8_t *kinds, uint32_t n,
                      readcheck_t *t) {
  for (uint32_t i = 0; i < n; i++) {
    if (kinds != NULL && kinds[i] == MT_ACC_WRITE) {
      t->written_only += bytes[i];
      continue;
    }
    t->read += bytes[i];
    mt_region_t *r = _mt_region_of(p, addrs[i]);
    if (r == NULL) {
      t->missing += bytes[i];
      continue;
    }
    if (r->kind == REG_SMALL) {
      t->on_device += bytes[i];
      continue;
    }
    uint64_t off = addrs[i] - r->addr, end = off + bytes[i];
    while (off < end) {
      uint64_t ci = off / p->chunk, cend = (ci + 1) * p->chunk;
      uint64_t part = (cend < end ? cend : end) - off;
      if (ci >= r->nchunks) {
        t->missing += end - off;
        break;
      }
      const mt_chunk_t *c = &r->chunks[ci];
      if (c->state == CH_DEVICE) t->on_device += part;
      else if (c->state == CH_HOST && c->host_addr != 0 && p->host_reach) t->host_mapped += part;
      else t->missing += part;
      off += part;
    }
  }
}
