/*
 * hostmem.c - the host optimizer's own memory: FP32 masters, Adam state
 * (FP32 moments, or the 8/4-bit codes and block scales), and the host
 * buffers of parameters that live on the GPU.
 *
 * Two promises (DESIGN.md step 6: the state lives next to the pool that
 * updates it):
 *   - inside MT_MAX_HOST. Each block is taken out of the pager's host
 *     budget first (_mt_host_reserve, hostbudget.c), so pinned host copies, the
 *     NVMe tier's staging and the optimizer share one budget: host copies
 *     give way (device chunks drop theirs, host chunks spill to NVMe) or
 *     the allocation fails with a message that says what to raise. With no
 *     pager (the C API used alone, as the optimizer's own tests do)
 *     nothing is counted;
 *   - on the GPU's NUMA node (MT_NUMA_NODE, else the node the device
 *     reports), where the pool's threads run and the gradients and weights
 *     cross to and from the GPU. Blocks of BIG bytes or more are mappings
 *     of their own, bound to the node before the first touch (mbind:
 *     preferred, so a full node falls back rather than fails); smaller
 *     ones come from malloc (a model's many biases and norms: a mapping
 *     each would cost a page or more apiece), placed where the allocating
 *     thread runs.
 * A 64-byte header before each block keeps its size (for the budget) and
 * how it was made.
 *
 * Threading: any thread; the counter is atomic, the budget under the
 * pager's lock.
 */
#include <stdatomic.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "hostmem.h"
#include "internal.h"
#include "pager.h"

#define HDR 64
#define BIG ((size_t)256 << 10)

typedef struct hdr {
  size_t bytes;  /* asked for */
  size_t mapped; /* length of the mapping, 0 = malloc */
} hdr_t;

static _Atomic size_t g_bytes;

void *_mt_optim_mem_alloc(size_t bytes) {
  if (bytes == 0) bytes = 1;
  if (_mt_host_reserve(bytes) < 0) return NULL;
  size_t total = HDR + bytes;
  uint8_t *base;
  size_t mapped = 0;
  if (bytes >= BIG) {
    mapped = (total + 4095) & ~(size_t)4095;
    void *m = mmap(NULL, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    base = m == MAP_FAILED ? NULL : m;
    if (base != NULL) (void)_mt_mem_place_on_node(base, mapped, _mt_host_numa_node()); /* best effort */
  } else {
    total = (total + 63) & ~(size_t)63;
    base = aligned_alloc(64, total);
    if (base != NULL) memset(base, 0, total);
  }
  if (base == NULL) {
    _mt_host_unreserve(bytes);
    return NULL;
  }
  *(hdr_t *)(void *)base = (hdr_t){bytes, mapped};
  atomic_fetch_add(&g_bytes, bytes);
  return base + HDR; /* mmap'ed memory is zero already */
}

void _mt_optim_mem_free(void *p) {
  if (p == NULL) return;
  uint8_t *base = (uint8_t *)p - HDR;
  hdr_t h = *(hdr_t *)(void *)base;
  if (h.mapped) munmap(base, h.mapped);
  else free(base);
  atomic_fetch_sub(&g_bytes, h.bytes);
  _mt_host_unreserve(h.bytes);
}

size_t _mt_optim_mem_bytes(void) {
  return atomic_load(&g_bytes);
}
