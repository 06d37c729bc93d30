/*
 * device.h - the one small interface through which the pager moves memory.
 *
 * The pager never calls the CUDA driver itself: it asks a device to create
 * and release physical chunks, map them at addresses, copy between
 * addresses, and order work with streams and events. Two implementations
 * (DESIGN.md): device_cuda.c, the real driver opened with dlopen (tested
 * against tests/fakecuda), and, with the trace issue, a virtual-clock device
 * where copies take simulated time and no memory is touched.
 *
 * Handles are opaque 64-bit values owned by the device. Every function
 * returns 0 or -errno (-ENOMEM for out-of-memory, -EIO for any other driver
 * failure, which the device logs with the driver's error name).
 */
#ifndef MT_DEVICE_H
#define MT_DEVICE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef uint64_t mt_handle_t;

typedef struct mt_device_info {
  size_t total_bytes;     /* device memory */
  size_t free_bytes;      /* free at open */
  size_t granularity;     /* mapping granularity (2 MiB on current GPUs) */
  bool host_mappable;     /* physical host memory can be mapped at a device address */
  bool models_host_reach; /* no memory behind addresses (virtual clock): a kernel reaching
                           * host copies is modelled, with no mapping, when the pager's
                           * host_map option is on */
  bool unmap_syncs;       /* cuMemUnmap and cuMemSetAccess may wait for the device, so
                           * the pager orders them after its own copies (unmapfence.c) */
  int host_numa_node;     /* the GPU's NUMA node, or -1 */
  int ordinal;            /* the device's ordinal (CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL) */
  uint64_t ctx;           /* the context the pager works in (CUcontext); 0 = none */
  char name[96];
} mt_device_info_t;

typedef struct mt_device mt_device_t;

typedef struct mt_device_ops {
  /* Address space: reserve/free a range of device virtual addresses. */
  int (*reserve)(mt_device_t *d, size_t size, size_t align, uintptr_t *va);
  void (*unreserve)(mt_device_t *d, uintptr_t va, size_t size);
  /* Physical memory of one chunk, on the device or (host_mappable) on the host. */
  int (*phys_create)(mt_device_t *d, size_t size, bool on_host, mt_handle_t *h);
  void (*phys_release)(mt_device_t *d, mt_handle_t h);
  /* Map size bytes of h, from byte offset off, at va (no access yet). The
   * CUDA driver takes off == 0 only (cuda.h: "currently must be zero"):
   * the pager always passes 0 (physpool.c). */
  int (*map)(mt_device_t *d, uintptr_t va, size_t size, mt_handle_t h, size_t off);
  /* Read/write access for the device to [va, va+size), which may span
   * several mappings: one call for a run of chunks mapped one by one. */
  int (*set_access)(mt_device_t *d, uintptr_t va, size_t size);
  /* Unmap [va, va+size): whole mappings, possibly several adjacent ones. */
  int (*unmap)(mt_device_t *d, uintptr_t va, size_t size);
  /* Pinned host buffers for devices without host mappings. */
  int (*host_alloc)(mt_device_t *d, size_t size, void **p);
  void (*host_free)(mt_device_t *d, void *p);
  /* An asynchronous copy on stream s; addresses are unified (device VA or
   * pinned host). */
  int (*copy)(mt_device_t *d, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s);
  /* Streams and events. Stream handles are the application's too. */
  int (*stream_create)(mt_device_t *d, mt_handle_t *s);
  int (*event_create)(mt_device_t *d, mt_handle_t *e);
  void (*event_destroy)(mt_device_t *d, mt_handle_t e);
  int (*event_record)(mt_device_t *d, mt_handle_t e, mt_handle_t s);
  /* 1 complete, 0 not yet, <0 error */
  int (*event_query)(mt_device_t *d, mt_handle_t e);
  int (*event_sync)(mt_device_t *d, mt_handle_t e);
  int (*stream_wait)(mt_device_t *d, mt_handle_t s, mt_handle_t e);
  /* 1 when s is capturing into a graph (no work runs), 0 otherwise. */
  int (*stream_capturing)(mt_device_t *d, mt_handle_t s);
  /* Optional (NULL: nothing to do). The next kernel issued on s reaches
   * bytes of host memory through host mappings: a real device just runs it
   * slower; the virtual clock adds the time those bytes take on the host
   * link. */
  void (*kernel_host_bytes)(mt_device_t *d, mt_handle_t s, size_t bytes);
  /* Optional (NULL: nothing to do). Pins [p, p+size), page-aligned host
   * memory mtalloc allocated itself (the NVMe tier's staging buffers), so
   * that copies from and to it are asynchronous DMA. 0 or -errno. */
  int (*host_register)(mt_device_t *d, void *p, size_t size);
  void (*host_unregister)(mt_device_t *d, void *p);
  /* Optional (NULL: nothing to do). The host just moved bytes to NVMe
   * (write) or from it and waited for the transfer: a real device has
   * nothing to add (the time was spent); the virtual clock charges it on
   * its NVMe link, to the host. */
  void (*nvme_io)(mt_device_t *d, bool write, size_t bytes);
  /* Optional, all three or none (NULL: a read's completion is the store's
   * own). An asynchronous NVMe read (or write) of bytes was just issued (the
   * pager's read-ahead, readahead.c; its spill writes, spillwrite.c) and the host does not wait for it: the
   * virtual clock queues it on its NVMe link and returns when it completes
   * (a time on the device's clock). nvme_done says whether that time has
   * passed for the host (1) or not (0); nvme_wait makes the host wait
   * until it has. */
  uint64_t (*nvme_issue)(mt_device_t *d, bool write, size_t bytes);
  int (*nvme_done)(mt_device_t *d, uint64_t t);
  void (*nvme_wait)(mt_device_t *d, bool write, uint64_t t);
  /* Optional, both or neither (NULL: the caller times on the host). An
   * event that can be timed (the others are created without timing, which
   * costs less), destroyed by event_destroy; and the device's time from a
   * to b, both recorded: 0 and *ns, -EAGAIN while either has not
   * completed, other -errno on error (timer_create: -ENOSYS where the
   * driver cannot time). */
  int (*timer_create)(mt_device_t *d, mt_handle_t *e);
  int (*timer_elapsed)(mt_device_t *d, mt_handle_t a, mt_handle_t b, uint64_t *ns);
} mt_device_ops_t;

struct mt_device {
  const mt_device_ops_t *ops;
  mt_device_info_t info;
};

/* device_cuda.c: opens the real driver (already initialised by the
 * application) on the calling thread's current context, or device 0's
 * primary context. Returns NULL with a logged reason on failure. */
mt_device_t *_mt_device_cuda_open(void);

#endif
