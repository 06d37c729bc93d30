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

__attribute__((constructor)) static void mt_preload_init(void) {
  _mt_options_init();
  if (_mt_opt_int(MT_OPT_SHOW_CONFIG)) mt_show_config();
  /* PyTorch's caching allocator carves many tensors out of one large
   * cudaMalloc block; the pager would then see one region per block and
   * page whole blocks. With the cudaMallocAsync backend every tensor is its
   * own allocation, so footprints are exact. The user's setting wins. */
  if (getenv("PYTORCH_CUDA_ALLOC_CONF") == NULL) setenv("PYTORCH_CUDA_ALLOC_CONF", "backend:cudaMallocAsync", 0);
}

MT_API int mt_version(void) {
  return MT_VERSION;
}
