/*
 * device_virtual.h - the virtual-clock device of mt-trace replay.
 *
 * It implements the device interface (device.h) without touching memory:
 * copies take bytes / bandwidth on their link, kernels take their recorded
 * time on their stream, and the host waits only where the pager waits
 * (event_sync). Three timelines: the host, each stream, and each link
 * (host-to-device and device-to-host run at once, like a PCIe link's two
 * directions; copies on one link queue).
 */
#ifndef MT_DEVICE_VIRTUAL_H
#define MT_DEVICE_VIRTUAL_H

#include <stdbool.h>
#include <stdint.h>

#include "device.h"

typedef struct mt_vdev_config {
  uint64_t gpu_mem;       /* bytes the device has */
  double h2d_bw, d2h_bw;  /* bytes per second */
  double nvme_read_bw, nvme_write_bw; /* the NVMe drive, bytes per second; 0 = 3.2e9 */
  uint64_t copy_latency_ns; /* fixed cost of each copy */
  bool unmap_syncs;       /* as mt_device_info_t: the pager orders unmaps after its copies;
                           * the clock itself charges nothing for an unmap */
} mt_vdev_config_t;

typedef struct mt_vdev_totals {
  uint64_t now_ns;        /* the latest any timeline reached */
  uint64_t host_wait_ns;  /* host time spent waiting: event_sync, NVMe transfers */
  uint64_t nvme_read_wait_ns, nvme_write_wait_ns; /* of it: synchronous NVMe reads, writes */
  uint64_t nvme_async_wait_ns; /* of it: waits for asynchronous reads (nvme_wait) */
  uint64_t nvme_spill_wait_ns; /* of it: waits for asynchronous spill writes (nvme_wait) */
  uint64_t stream_wait_ns;/* time streams waited for copies (stream_wait) */
  uint64_t bytes_h2d, bytes_d2h;
  uint64_t bytes_nvme_read, bytes_nvme_write;
  uint64_t kernels;
  uint64_t kernel_ns;     /* sum of kernel run times */
  uint64_t gpu_idle_ns;   /* gaps between kernels with none running (after the first) */
  uint64_t gpu_idle_host_ns; /* of them: the next kernel not issued yet (the host was late;
                             * the rest its stream waited for copies) */
  uint64_t device_peak;   /* device bytes created at once, at most */
  uint64_t host_mapped_kernels; /* kernels that reached host memory (host-mapped launches) */
  uint64_t host_mapped_bytes;   /* bytes they reached there, over the h2d link */
} mt_vdev_totals_t;

mt_device_t *_mt_vdev_new(const mt_vdev_config_t *cfg);
void _mt_vdev_free(mt_device_t *d);
/* Runs a kernel of dur_ns on stream s: it starts when the stream is free
 * and the host has issued it; when the pager said it reaches host memory
 * (kernel_host_bytes), also when the h2d link is free, and it lasts the
 * time those bytes take on the link longer. Returns 0. */
int _mt_vdev_kernel(mt_device_t *d, mt_handle_t s, uint64_t dur_ns);
/* When the application's streams (0..63) have finished all issued work. */
uint64_t _mt_vdev_app_time(mt_device_t *d);
/* When stream s has finished everything issued on it so far. */
uint64_t _mt_vdev_stream_time(mt_device_t *d, mt_handle_t s);
/* A transfer on the NVMe drive that the host does not wait for (the host
 * optimizer's state, mt-trace replay's hostopt.c): it queues with the
 * pager's NVMe transfers, starts no earlier than not_before, and counts in
 * bytes_nvme_read / bytes_nvme_write. Returns when it ends. */
uint64_t _mt_vdev_nvme_async(mt_device_t *d, bool write, uint64_t bytes, uint64_t not_before);
/* Stream s starts its next work no earlier than t (virtual ns). 0 or -ENOMEM. */
int _mt_vdev_stream_wait_until(mt_device_t *d, mt_handle_t s, uint64_t t);
/* Finishes every timeline and returns the totals. */
void _mt_vdev_totals(mt_device_t *d, mt_vdev_totals_t *out);

#endif
