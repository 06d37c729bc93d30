/*
 * torch.c - PyTorch's pluggable-allocator entry points, for
 * torch.cuda.memory.CUDAPluggableAllocator(libmtalloc.so, "mt_torch_malloc",
 * "mt_torch_free"). Freeing is stream-ordered, as PyTorch expects of a
 * stream-aware allocator.
 */
#include "hooks.h"
#include "internal.h"
#include "pager.h"

MT_API void *mt_torch_malloc(size_t size, int device, void *stream) {
  (void)device; /* one device: the current context's */
  (void)stream; /* fresh address space: nothing to order */
  if (size == 0 || !_mt_hooks_init() || _mt_pager_start() == NULL) return NULL;
  uintptr_t a;
  return _mt_alloc(size, &a) == 0 ? (void *)a : NULL;
}

MT_API void mt_torch_free(void *ptr, size_t size, int device, void *stream) {
  (void)size;
  (void)device;
  if (ptr == NULL) return;
  int rc = _mt_free((uintptr_t)ptr, (mt_handle_t)(uintptr_t)stream, true);
  if (rc < 0) mt_error("mt_torch_free(%p): not an allocation of mtalloc", ptr);
}
