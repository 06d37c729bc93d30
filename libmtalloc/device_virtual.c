/*
 * device_virtual.c - the device interface on a virtual clock (see
 * device_virtual.h). Nothing here allocates device or host memory: reserve
 * and host_alloc hand out addresses from two disjoint ranges, physical
 * handles are counters, and copies are classified by range (host range to
 * device range: host-to-device) to pick their link.
 *
 * Events hold the time their stream reached when recorded; a query says
 * "done" when the host clock has passed it, a sync moves the host clock
 * there. A stream that waits for an event cannot start its next work
 * before the event's time.
 *
 * Host-mapped launches (a footprint larger than the budget, launch.c):
 * the device says it models host reach, so the pager runs them as it would
 * with host mappings, without mapping anything; the bytes the kernel
 * reaches in host memory cross the host-to-device link while it runs, so
 * the kernel takes bytes / h2d bandwidth longer and holds that link.
 *
 * NVMe (tier_nvme.c): one drive link, on which every transfer queues in
 * issue order and takes copy latency + bytes / the drive's read or write
 * bandwidth. A synchronous transfer (spills, demand reads: the host waits
 * for them under its lock) is charged to the host: it starts when the host
 * and the drive are both free and the host goes on when it ends. An
 * asynchronous transfer (the read-ahead, readahead.c; the spill writes,
 * spillwrite.c; nvme_issue) occupies the
 * drive from max(issue time, drive busy-until) for the same duration and
 * charges the host nothing; the host waits for it (nvme_wait, a stall)
 * only when it needs the transfer done before that completion time (a
 * fetch of a chunk being read, host room from a write).
 *
 * Threading: none; replay is single-threaded.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "device_virtual.h"
#include "internal.h"

#define VA_BASE ((uintptr_t)1 << 40)     /* device addresses: 1 TiB .. */
#define HOST_BASE ((uintptr_t)1 << 46)   /* host addresses: 64 TiB .. */

typedef struct vdev {
  mt_device_t base;
  mt_vdev_config_t cfg;
  uintptr_t next_va, next_host;
  uint64_t next_handle;
  size_t next_stream;        /* streams the pager creates: 64 and up */
  uint64_t host_ns;          /* the host's clock */
  uint64_t link_ns[3];       /* when each link is free: 0 h2d, 1 d2h, 2 the NVMe drive */
  uint64_t *stream_ns;       /* per stream (index = handle - 1; handle 0 = stream 0 too) */
  size_t nstreams;
  uint64_t *event_ns;        /* per event */
  size_t nevents;
  uint64_t dev_bytes;
  uint64_t host_pending;     /* bytes the next kernel reaches in host memory */
  uint64_t gpu_end;          /* when the last kernel issued so far ends, on any stream */
  mt_vdev_totals_t t;
} vdev_t;

#define V(d) ((vdev_t *)(d))

static uint64_t *stream_slot(vdev_t *v, mt_handle_t s) {
  size_t i = (size_t)s; /* 0 is the default stream */
  if (i >= v->nstreams) {
    size_t n = v->nstreams ? v->nstreams : 4;
    while (n <= i) n *= 2;
    uint64_t *ns = realloc(v->stream_ns, n * sizeof(*ns));
    if (ns == NULL) return NULL;
    memset(ns + v->nstreams, 0, (n - v->nstreams) * sizeof(*ns));
    v->stream_ns = ns;
    v->nstreams = n;
  }
  return &v->stream_ns[i];
}

static void seen(vdev_t *v, uint64_t t) {
  if (t > v->t.now_ns) v->t.now_ns = t;
}

static int vd_reserve(mt_device_t *d, size_t size, size_t align, uintptr_t *va) {
  vdev_t *v = V(d);
  uintptr_t a = (v->next_va + align - 1) / align * align;
  if (a + size < a || a + size >= HOST_BASE) return -ENOMEM;
  *va = a;
  v->next_va = a + size;
  return 0;
}

static void vd_unreserve(mt_device_t *d, uintptr_t va, size_t size) {
  (void)d, (void)va, (void)size;
}

static int vd_phys_create(mt_device_t *d, size_t size, bool on_host, mt_handle_t *h) {
  vdev_t *v = V(d);
  if (!on_host) {
    if (v->dev_bytes + size > v->cfg.gpu_mem) return -ENOMEM;
    v->dev_bytes += size;
    if (v->dev_bytes > v->t.device_peak) v->t.device_peak = v->dev_bytes;
  }
  /* the size rides in the handle so release can give it back */
  *h = (++v->next_handle << 40) | ((uint64_t)size >> 21) << 1 | (on_host ? 1 : 0);
  return 0;
}

static void vd_phys_release(mt_device_t *d, mt_handle_t h) {
  vdev_t *v = V(d);
  if (h & 1) return;
  uint64_t size = ((h & (((uint64_t)1 << 40) - 1)) >> 1) << 21;
  v->dev_bytes -= size;
}

static int vd_map(mt_device_t *d, uintptr_t va, size_t size, mt_handle_t h, size_t off) {
  (void)d, (void)va, (void)size, (void)h, (void)off;
  return 0;
}

static int vd_set_access(mt_device_t *d, uintptr_t va, size_t size) {
  (void)d, (void)va, (void)size;
  return 0;
}

static int vd_unmap(mt_device_t *d, uintptr_t va, size_t size) {
  (void)d, (void)va, (void)size;
  return 0;
}

static int vd_host_alloc(mt_device_t *d, size_t size, void **p) {
  vdev_t *v = V(d);
  *p = (void *)v->next_host;
  v->next_host += (size + 4095) & ~(size_t)4095;
  return 0;
}

static void vd_host_free(mt_device_t *d, void *p) {
  (void)d, (void)p;
}

static int vd_copy(mt_device_t *d, uintptr_t dst, uintptr_t src, size_t n, mt_handle_t s) {
  vdev_t *v = V(d);
  uint64_t *sn = stream_slot(v, s);
  if (sn == NULL) return -ENOMEM;
  int link = src >= HOST_BASE ? 0 : dst >= HOST_BASE ? 1 : -1;
  uint64_t start = *sn > v->host_ns ? *sn : v->host_ns;
  uint64_t dur = 0;
  if (link >= 0) {
    if (v->link_ns[link] > start) start = v->link_ns[link];
    double bw = link == 0 ? v->cfg.h2d_bw : v->cfg.d2h_bw;
    dur = v->cfg.copy_latency_ns + (uint64_t)((double)n / bw * 1e9);
    v->link_ns[link] = start + dur;
    if (link == 0) v->t.bytes_h2d += n;
    else v->t.bytes_d2h += n;
  }
  *sn = start + dur;
  seen(v, *sn);
  return 0;
}

static int vd_stream_create(mt_device_t *d, mt_handle_t *s) {
  vdev_t *v = V(d);
  /* the trace's own streams are small numbers: ours start above them */
  size_t i = v->next_stream++;
  if (stream_slot(v, i) == NULL) return -ENOMEM;
  v->stream_ns[i] = v->host_ns;
  *s = (mt_handle_t)i;
  return 0;
}

static int vd_event_create(mt_device_t *d, mt_handle_t *e) {
  vdev_t *v = V(d);
  uint64_t *ne = realloc(v->event_ns, (v->nevents + 1) * sizeof(*ne));
  if (ne == NULL) return -ENOMEM;
  v->event_ns = ne;
  v->event_ns[v->nevents] = 0;
  *e = (mt_handle_t)++v->nevents; /* handle = index + 1, never 0 */
  return 0;
}

static void vd_event_destroy(mt_device_t *d, mt_handle_t e) {
  (void)d, (void)e;
}

static int vd_event_record(mt_device_t *d, mt_handle_t e, mt_handle_t s) {
  vdev_t *v = V(d);
  uint64_t *sn = stream_slot(v, s);
  if (sn == NULL || e == 0 || e > v->nevents) return -EINVAL;
  /* work issued now cannot have finished before the host issued it */
  v->event_ns[e - 1] = *sn > v->host_ns ? *sn : v->host_ns;
  return 0;
}

static int vd_event_query(mt_device_t *d, mt_handle_t e) {
  vdev_t *v = V(d);
  return v->event_ns[e - 1] <= v->host_ns;
}

static int vd_event_sync(mt_device_t *d, mt_handle_t e) {
  vdev_t *v = V(d);
  uint64_t t = v->event_ns[e - 1];
  if (t > v->host_ns) {
    v->t.host_wait_ns += t - v->host_ns;
    v->host_ns = t;
    seen(v, t);
  }
  return 0;
}

static int vd_stream_wait(mt_device_t *d, mt_handle_t s, mt_handle_t e) {
  vdev_t *v = V(d);
  uint64_t *sn = stream_slot(v, s);
  if (sn == NULL) return -ENOMEM;
  uint64_t t = v->event_ns[e - 1];
  uint64_t ready = *sn > v->host_ns ? *sn : v->host_ns;
  if (t > ready) v->t.stream_wait_ns += t - ready;
  if (t > *sn) *sn = t;
  return 0;
}

static int vd_stream_capturing(mt_device_t *d, mt_handle_t s) {
  (void)d, (void)s;
  return 0;
}

/* The next kernel reaches bytes of host memory through host mappings:
 * they cross the host link while it runs (_mt_vdev_kernel). Replay issues
 * one kernel at a time, so one pending count is enough. */
static void vd_kernel_host_bytes(mt_device_t *d, mt_handle_t s, size_t bytes) {
  (void)s;
  V(d)->host_pending += bytes;
}

/* The pager moved bytes to or from NVMe and waited (tier_nvme.c): one
 * drive, reads and writes queue on it, the host waits for the transfer. */
static void vd_nvme_io(mt_device_t *d, bool write, size_t bytes) {
  vdev_t *v = V(d);
  double bw = write ? v->cfg.nvme_write_bw : v->cfg.nvme_read_bw;
  if (!(bw > 0)) bw = 3.2e9;
  uint64_t start = v->link_ns[2] > v->host_ns ? v->link_ns[2] : v->host_ns;
  uint64_t end = start + v->cfg.copy_latency_ns + (uint64_t)((double)bytes / bw * 1e9);
  v->link_ns[2] = end;
  v->t.host_wait_ns += end - v->host_ns;
  if (write) v->t.nvme_write_wait_ns += end - v->host_ns;
  else v->t.nvme_read_wait_ns += end - v->host_ns;
  v->host_ns = end;
  seen(v, end);
  if (write) v->t.bytes_nvme_write += bytes;
  else v->t.bytes_nvme_read += bytes;
}

/* An asynchronous read (readahead.c) or write (spillwrite.c): on the drive
 * link, not on the host. */
static uint64_t vd_nvme_issue(mt_device_t *d, bool write, size_t bytes) {
  vdev_t *v = V(d);
  double bw = write ? v->cfg.nvme_write_bw : v->cfg.nvme_read_bw;
  if (!(bw > 0)) bw = 3.2e9;
  uint64_t start = v->link_ns[2] > v->host_ns ? v->link_ns[2] : v->host_ns;
  uint64_t end = start + v->cfg.copy_latency_ns + (uint64_t)((double)bytes / bw * 1e9);
  v->link_ns[2] = end;
  if (write) v->t.bytes_nvme_write += bytes;
  else v->t.bytes_nvme_read += bytes;
  return end;
}

static int vd_nvme_done(mt_device_t *d, uint64_t t) {
  return t <= V(d)->host_ns;
}

static void vd_nvme_wait(mt_device_t *d, bool write, uint64_t t) {
  vdev_t *v = V(d);
  if (t <= v->host_ns) return;
  v->t.host_wait_ns += t - v->host_ns;
  if (write) v->t.nvme_spill_wait_ns += t - v->host_ns;
  else v->t.nvme_async_wait_ns += t - v->host_ns;
  v->host_ns = t;
  seen(v, t);
}

uint64_t _mt_vdev_nvme_async(mt_device_t *d, bool write, uint64_t bytes, uint64_t not_before) {
  vdev_t *v = V(d);
  if (bytes == 0) return not_before;
  double bw = write ? v->cfg.nvme_write_bw : v->cfg.nvme_read_bw;
  if (!(bw > 0)) bw = 3.2e9;
  uint64_t start = v->link_ns[2] > not_before ? v->link_ns[2] : not_before;
  uint64_t end = start + v->cfg.copy_latency_ns + (uint64_t)((double)bytes / bw * 1e9);
  v->link_ns[2] = end;
  seen(v, end);
  if (write) v->t.bytes_nvme_write += bytes;
  else v->t.bytes_nvme_read += bytes;
  return end;
}

int _mt_vdev_stream_wait_until(mt_device_t *d, mt_handle_t s, uint64_t t) {
  uint64_t *sn = stream_slot(V(d), s);
  if (sn == NULL) return -ENOMEM;
  if (*sn < t) *sn = t;
  seen(V(d), t);
  return 0;
}

/* every event here has a time: the device's clock when its work ends */
static int vd_timer_elapsed(mt_device_t *d, mt_handle_t a, mt_handle_t b, uint64_t *ns) {
  vdev_t *v = V(d);
  if (a == 0 || b == 0 || a > v->nevents || b > v->nevents) return -EINVAL;
  uint64_t ta = v->event_ns[a - 1], tb = v->event_ns[b - 1];
  if (ta > v->host_ns || tb > v->host_ns) return -EAGAIN; /* as a query would say */
  *ns = tb > ta ? tb - ta : 0;
  return 0;
}

static const mt_device_ops_t vdev_ops = {
  .reserve = vd_reserve,
  .unreserve = vd_unreserve,
  .phys_create = vd_phys_create,
  .phys_release = vd_phys_release,
  .map = vd_map,
  .set_access = vd_set_access,
  .unmap = vd_unmap,
  .host_alloc = vd_host_alloc,
  .host_free = vd_host_free,
  .copy = vd_copy,
  .stream_create = vd_stream_create,
  .event_create = vd_event_create,
  .event_destroy = vd_event_destroy,
  .event_record = vd_event_record,
  .event_query = vd_event_query,
  .event_sync = vd_event_sync,
  .stream_wait = vd_stream_wait,
  .stream_capturing = vd_stream_capturing,
  .kernel_host_bytes = vd_kernel_host_bytes,
  .nvme_io = vd_nvme_io,
  .nvme_issue = vd_nvme_issue,
  .nvme_done = vd_nvme_done,
  .nvme_wait = vd_nvme_wait,
  .timer_create = vd_event_create,
  .timer_elapsed = vd_timer_elapsed,
};

mt_device_t *_mt_vdev_new(const mt_vdev_config_t *cfg) {
  vdev_t *v = calloc(1, sizeof(*v));
  if (v == NULL) return NULL;
  v->base.ops = &vdev_ops;
  v->cfg = *cfg;
  v->next_va = VA_BASE;
  v->next_host = HOST_BASE;
  v->next_stream = 64;
  mt_device_info_t *in = &v->base.info;
  in->total_bytes = cfg->gpu_mem;
  in->free_bytes = cfg->gpu_mem;
  in->granularity = (size_t)2 << 20;
  in->host_mappable = false; /* host copies in host memory: copies are classified by range */
  in->models_host_reach = true;
  in->host_numa_node = -1;
  in->unmap_syncs = cfg->unmap_syncs;
  strcpy(in->name, "virtual clock");
  return &v->base;
}

void _mt_vdev_free(mt_device_t *d) {
  vdev_t *v = V(d);
  free(v->stream_ns);
  free(v->event_ns);
  free(v);
}

int _mt_vdev_kernel(mt_device_t *d, mt_handle_t s, uint64_t dur_ns) {
  vdev_t *v = V(d);
  uint64_t *sn = stream_slot(v, s);
  if (sn == NULL) return -ENOMEM;
  uint64_t start = *sn > v->host_ns ? *sn : v->host_ns;
  if (v->host_pending > 0) {
    /* Host-mapped bytes cross the host-to-device link during the kernel:
     * it lasts that much longer, and holds the link until it ends. */
    if (v->link_ns[0] > start) start = v->link_ns[0];
    dur_ns += (uint64_t)((double)v->host_pending / v->cfg.h2d_bw * 1e9);
    v->t.host_mapped_bytes += v->host_pending;
    v->t.host_mapped_kernels++;
    v->host_pending = 0;
    v->link_ns[0] = start + dur_ns;
  }
  /* The GPU idle before it: from the end of all earlier kernels to its
   * start, the host's share up to when it issued the kernel. */
  if (v->t.kernels > 0 && start > v->gpu_end) {
    v->t.gpu_idle_ns += start - v->gpu_end;
    if (v->host_ns > v->gpu_end) v->t.gpu_idle_host_ns += v->host_ns - v->gpu_end;
  }
  if (start + dur_ns > v->gpu_end) v->gpu_end = start + dur_ns;
  *sn = start + dur_ns;
  v->t.kernels++;
  v->t.kernel_ns += dur_ns;
  seen(v, *sn);
  return 0;
}

uint64_t _mt_vdev_app_time(mt_device_t *d) {
  vdev_t *v = V(d);
  uint64_t t = 0;
  for (size_t i = 0; i < v->nstreams && i < 64; i++)
    if (v->stream_ns[i] > t) t = v->stream_ns[i];
  return t;
}

uint64_t _mt_vdev_stream_time(mt_device_t *d, mt_handle_t s) {
  vdev_t *v = V(d);
  uint64_t *sn = stream_slot(v, s);
  return sn ? *sn : 0;
}

void _mt_vdev_totals(mt_device_t *d, mt_vdev_totals_t *out) {
  vdev_t *v = V(d);
  *out = v->t;
}
