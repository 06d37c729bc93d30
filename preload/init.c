/*
 * init.c - the preload library's constructor.
 *
 * It runs inside someone else's process before main, so it does only what is
 * cheap and cannot fail badly: read the options (from environ, no
 * allocation) and, when asked, print them. Everything that touches the
 * driver starts lazily, on the first hooked call.
 */
#include "internal.h"

#include <stdlib.h>
#include <string.h>

/* PyTorch's caching allocator carves many tensors out of one large
 * cudaMalloc block; the pager would then see one region per block and page
 * whole blocks (and with expandable_segments:True it maps its own memory
 * with cuMemCreate, which mtalloc does not see at all: hook_bypass.c). With
 * the cudaMallocAsync backend every tensor is its own allocation, so
 * footprints are exact. PyTorch 2.11 reads PYTORCH_ALLOC_CONF first and
 * ignores PYTORCH_CUDA_ALLOC_CONF when it is set; older releases read only
 * PYTORCH_CUDA_ALLOC_CONF. So: neither set, both get the backend; one set,
 * the other gets the same value, so every release sees the user's choice;
 * both set, both stay (the user's setting always wins). */
static void alloc_conf(void) {
  const char *now = getenv("PYTORCH_ALLOC_CONF"), *old = getenv("PYTORCH_CUDA_ALLOC_CONF");
  if (now == NULL && old == NULL) {
    setenv("PYTORCH_ALLOC_CONF", "backend:cudaMallocAsync", 0);
    setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 0);
  } else if (now == NULL) {
    setenv("PYTORCH_ALLOC_CONF", old, 0);
  } else if (old == NULL) {
    setenv("PYTORCH_CUDA_ALLOC_CONF", now, 0);
  }
  const char *eff = getenv("PYTORCH_ALLOC_CONF");
  if (eff != NULL && strstr(eff, "cudaMallocAsync") == NULL)
    mt_info("PYTORCH_ALLOC_CONF=\"%s\" keeps PyTorch's own allocator: mtalloc pages its blocks whole, "
            "and cannot see expandable segments at all; backend:cudaMallocAsync pages per tensor", eff);
}

__attribute__((constructor)) static void mt_preload_init(void) {
  _mt_options_init();
  if (_mt_opt_int(MT_OPT_SHOW_CONFIG)) mt_show_config();
  alloc_conf();
}

MT_API int mt_version(void) {
  return MT_VERSION;
}
