/*
 * replay.c - mt-trace replay: what the pager would do under other budgets.
 *
 * The trace's allocations, frees and launches drive the library's own pager
 * (libmtalloc/pager.c, the same policy code) on the virtual-clock device:
 * kernels take their recorded time, copies take bytes / bandwidth on their
 * link, the host waits where the pager waits. What the recorded run's own
 * pager did (its COPY, FETCH, EVICT and STALL records) is ignored: those
 * are the decisions being re-made. Alongside, the chunk access sequence is
 * kept for the Belady bound (belady.c).
 *
 * Kernel times: dur_ns when the trace has it (synthetic and imported
 * traces); for a recorded trace (dur_ns 0), the time to the next record,
 * an upper bound on a kernel the host issued asynchronously.
 * The ideal time is the sum of kernel times on the busiest stream: the run
 * with unlimited GPU memory.
 *
 * What a launch writes (--writes): `all` replays what the library knows with
 * no hints, every launch writing its whole footprint, so every eviction
 * copies; `aware` uses the trace's access kinds (format version 2), as G10
 * does with its kernels' output lists: a span only read is made resident
 * for reading, so a chunk with a current host copy stays clean and is
 * evicted without a copy. Unknown kinds (recorded traces, version 1) count
 * as written in both modes.
 *
 * The host optimizer (synth's optimizer_placement = host): a launch of a
 * function named "mt_host_optimizer ..." is no kernel but a parameter
 * group's hand-off; hostopt.c runs it on the host pool (gradients to the
 * host, state through the NVMe drive, the update), the weights' device
 * copies are dropped stale (_mt_host_write with no bytes), and the first
 * launch that reads those weights again waits (on the host) for the
 * update's end, so their fetch brings the new weights.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "belady.h"
#include "commands.h"
#include "device_virtual.h"
#include "hostopt.h"
#include "internal.h"
#include "pager.h"
#include "pager_internal.h"
#include "predictor.h"
#include "readcheck.h"
#include "stats.h"
#include "trace_io.h"

#define MAX_STREAMS 64

typedef struct replay {
  mt_pager_t *p;
  mt_device_t *dev;
  belady_t *bel;
  uintptr_t *addr;         /* region id -> address (0: not live) */
  uint32_t *nchunks;       /* region id -> chunks (0: small, stays resident) */
  size_t nregions;
  uint64_t stream_kernel_ns[MAX_STREAMS];
  uint64_t launches, iterations;
  /* per iteration: the app streams' time at its start, and kernel time in it */
  uint64_t *iter_start, *iter_kernel;
  uint64_t *iter_idle, *iter_idle_host; /* the device's GPU idle counters when each began */
  size_t iter_cap;
  uint64_t stream0_end;    /* the app streams' time when the replay stopped */
  uint64_t *keys;          /* scratch: a launch's chunk keys */
  bool *keyw;              /* scratch: whether the launch may write each */
  size_t nkeys_cap;
  bool writes_aware;       /* --writes aware: spans only read leave chunks clean */
  bool belady;             /* compute the Belady bound (--no-belady: not, as plan's replays) */
  hostopt_t *ho;           /* the host optimizer pool */
  mt_handle_t *wev;        /* region id -> the update its weights wait for (0: none) */
  uint8_t *hfunc;          /* function id -> 0, or 1 + (wbytes << 2 | comp) for a hand-off */
  size_t nfunc;
  uint64_t handoffs;
  readcheck_t reads;       /* what kernels read, and where it was (readcheck.h) */
  uint64_t *sbytes;        /* scratch: a launch's span bytes */
  size_t nsbytes;
  char err[256];
} replay_t;

/* Iteration i ends where i+1 starts, the last one when the app streams finished. */
static uint64_t iter_end(const replay_t *r, uint64_t i) {
  return i + 1 < r->iterations && r->iter_start ? r->iter_start[i + 1] : r->stream0_end;
}

/* MT_HANDOFF=auto's measured choice (handoff.c): NULL where it does not
 * time, else timing, irregular (on, untimed), on or off; the last two
 * have both windows' times. */
static const char *trial_state(const mt_pager_t *p) {
  const mt_trial_t *tr = &p->ho_trial;
  if (!p->ho_trial_runs) return NULL;
  if (tr->decisions == 0) return "timing";
  if (tr->irregular) return "irregular";
  return tr->pick == MT_TRIAL_A ? "on" : "off";
}

/* Iteration i's GPU idle seconds (host: the part waiting for the host),
 * from the counters when it began to when the next began or the end (t). */
static double iter_idle_s(const replay_t *r, const mt_vdev_totals_t *t, uint64_t i, bool host) {
  const uint64_t *at = host ? r->iter_idle_host : r->iter_idle;
  uint64_t end = i + 1 < r->iterations ? at[i + 1] : host ? t->gpu_idle_host_ns : t->gpu_idle_ns;
  return (double)(end - at[i]) / 1e9;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mt-trace replay TRACE [options]\n"
          "\n"
          "Replays the trace's allocations, frees and launches through mtalloc's pager\n"
          "on a virtual-clock device and reports what it would cost.\n"
          "\n"
          "  --gpu-mem SIZE        GPU memory for the pager (default: the trace's budget)\n"
          "  --host-mem SIZE       pinned host memory (default: the trace's, else 1T)\n"
          "  --pcie-bw BYTES/S     each direction of the host link (default 25G)\n"
          "  --h2d-bw, --d2h-bw    one direction only\n"
          "  --nvme-mem SIZE       an NVMe tier of SIZE (default: none): host chunks past\n"
          "                        --host-mem spill to it, and come back through staging\n"
          "                        buffers (the library's tier code, with a simulated store)\n"
          "  --nvme-read-bw, --nvme-write-bw BYTES/S\n"
          "                        the drive (default 3.2G each); the pager waits for\n"
          "                        its NVMe transfers, so their time is the host's\n"
          "  --policy NAME         eviction policy: nextuse (default, as MT_POLICY) or lru\n"
          "  --spill-policy NAME   with --nvme-mem: the order host chunks spill to NVMe:\n"
          "                        auto (default, as MT_SPILL_POLICY: lru with the\n"
          "                        read-ahead, else --policy's), lru or nextuse\n"
          "  --predictor NAME      access-order predictor: correlation (default, as\n"
          "                        MT_PREDICTOR; prefetch.c: fetch what the next launches\n"
          "                        use while this one runs), context (the same, telling\n"
          "                        recomputed layers from first forwards) or none (demand\n"
          "                        fetching)\n"
          "  --predictor-mem SIZE  memory for the predictor's tables (default 32M, as\n"
          "                        MT_PREDICTOR_MEM; at least 64K)\n"
          "  --prefetch-depth N    predicted launches to prefetch for (default 8)\n"
          "  --prefetch-lead N     timeliness feedback: a region whose prefetch came late is\n"
          "                        prefetched up to N launches earlier next time (default 0,\n"
          "                        none, as MT_PREFETCH_LEAD)\n"
          "  --prefetch-free N     while the handoff is on, the regions of N predicted launches\n"
          "                        beyond --prefetch-depth are prefetched too, into free GPU\n"
          "                        memory only, except while NVMe holds chunks and host memory\n"
          "                        has room (default 32, as MT_PREFETCH_FREE; 0 = none;\n"
          "                        prefetches_free counts the chunks)\n"
          "  --runahead N          while the handoff is on, at most N launches queued ahead\n"
          "                        of the GPU (default 24, as MT_RUNAHEAD; 0 = no bound)\n"
          "  --prefetch-wait on|off  on (default, as MT_PREFETCH_WAIT): a prefetch that finds no\n"
          "                        room free of queued launches waits for the oldest, while\n"
          "                        over a quarter of --runahead stay queued (prefetch_waits);\n"
          "                        off: it stops there\n"
          "  --writebehind-horizon N  with a predictor and --policy nextuse: before each launch,\n"
          "                        write-behind copies out what the evictions of the next N\n"
          "                        launches copied one iteration ago, less its copies not\n"
          "                        used yet (default 256, as MT_WRITEBEHIND_HORIZON; 0 = only\n"
          "                        what the prefetch window lacks)\n"
          "  --prefetch-pace on|off  on: a prefetch starts only while the h2d link is idle\n"
          "                        (default on, as MT_PREFETCH_PACE)\n"
          "  --readahead-depth N   with a predictor, --nvme-mem and --prefetch-depth > 0: predicted\n"
          "                        launches to read NVMe chunks into host memory for,\n"
          "                        asynchronously\n"
          "                        (readahead.c; default 1024 as MT_READAHEAD_DEPTH, 0 = none)\n"
          "  --iterations N        replay only the first N iterations\n"
          "  --chunk SIZE          paging unit (default: the trace's, else 2M)\n"
          "  --host-map on|off     on (default, as MT_HOST_MAP=auto with host mappings): a\n"
          "                        launch larger than --gpu-mem runs with the rest of its\n"
          "                        footprint in host memory, whose bytes cross the h2d link\n"
          "                        during the kernel; off: such a launch cannot run (exit 1)\n"
          "  --writes all|aware    all (default): every launch writes its whole footprint, as\n"
          "                        the library assumes with no hints; aware: a span the\n"
          "                        trace marks read-only is made resident for reading, so\n"
          "                        its chunks stay clean and are evicted without a copy\n"
          "  --handoff auto|on|off as MT_HANDOFF; on: memory of a tensor freed while its\n"
          "                        last kernel is queued goes to the next fresh tensor on\n"
          "                        that stream in stream order; off: wait or evict; auto\n"
          "                        (default): on while chunks live on NVMe, and with the\n"
          "                        read-ahead (a predictor) from the first time host memory\n"
          "                        is full on\n"
          "  --unmap-sync on|off   on (default, as the library runs on the CUDA driver, whose\n"
          "                        cuMemUnmap may wait for the device): unmaps are ordered\n"
          "                        after the pager's in-flight fetch copies (unmap_waits);\n"
          "                        off: a driver whose unmaps never wait, no ordering\n"
          "  --host-opt-gparams-per-s P\n"
          "                        the host optimizer pool's throughput with FP32 state, in\n"
          "                        1e9 parameters/s (default 10); compressed state runs at\n"
          "                        P x 28 / (bytes it moves per parameter), see hostopt.c\n"
          "  --host-opt-mem SIZE   host memory for its FP32 masters and moments (default: all\n"
          "                        of them fit); the rest is read and written through the\n"
          "                        NVMe drive (--nvme-read-bw, --nvme-write-bw) every step\n"
          "  --state-compression none|8bit|4bit\n"
          "                        the host optimizer's state format instead of the one\n"
          "                        the trace's hand-offs name (no GPU kernel touches it)\n"
          "  --no-belady           skip the Belady bound (its keys: null): it is most of a\n"
          "                        large replay's time, and mt-trace plan does not use it\n"
          "  --json                one JSON object instead of text\n"
          "  -h, --help            this help\n"
          "\n"
          "SIZE takes binary suffixes (24G = 24 GiB); BYTES/S takes decimal ones\n"
          "(25G = 25e9 bytes/s).\n"
          "\n"
          "Output (JSON keys): writes (all|aware), sim_s (simulated time), ideal_s (unlimited GPU memory),\n"
          "pct_of_ideal (ideal/sim, %%), stall_s (sim - ideal), bytes_h2d, bytes_d2h,\n"
          "bytes_nvme_read, bytes_nvme_write, fetches, evictions_dirty, evictions_clean,\n"
          "unmap_waits (host waits that ordered an unmap after fetch copies), runahead_waits\n"
          "(host waits that kept it MT_RUNAHEAD launches ahead of the GPU), prefetch_waits (host\n"
          "waits for a queued launch, to make room for a prefetch), prefetches_free (chunks\n"
          "prefetched into free memory beyond --prefetch-depth), handoff_trial\n"
          "(--handoff auto with next-use estimates: on or off as timed, \"timing\" before it\n"
          "decided, \"irregular\" when it kept it on because no period ran the same launches\n"
          "as the one before it, null where it does not time) with handoff_trial_on_s and _off_s (one\n"
          "period's GPU time each),\n"
          "stream_wait_s (time the application's streams waited for fetch copies),\n"
          "belady_bytes (bytes MIN eviction with perfect knowledge moves within the same\n"
          "GPU memory, writing back what --writes says is dirty), launches, launches_host_mapped, host_mapped_bytes, iterations, coverage/accuracy/timeliness (null: no\n"
          "prefetcher), replay_wall_s, replay_max_rss_bytes, and per iteration (ITER\n"
          "records) iter_sim_s and iter_ideal_s, iter_gpu_idle_s (gaps with no kernel running)\n"
          "and iter_gpu_idle_host_s (of it, the next kernel not yet issued: the host was late;\n"
          "the rest its stream waited for copies); h2d_busy_s, d2h_busy_s, nvme_busy_s (bytes /\n"
          "bandwidth); host_wait_s (host time spent waiting), of it nvme_read_wait_s and\n"
          "nvme_write_wait_s (synchronous NVMe transfers) and readahead_wait_s (fetches that\n"
          "waited for a read-ahead) and spill_wait_s (host room that waited for a spill\n"
          "write in flight); readahead, readahead_used, readahead_late, readahead_spilled\n"
          "(chunks read ahead from NVMe, fetched after, fetched before the read was done,\n"
          "spilled back unused); spill_async,\n"
          "spill_async_waits (spill writes started ahead of need, room requests that waited);\n"
          "peak_live_host_bytes, peak_live_nvme_bytes (the pager's tiers),\n"
          "peak_host_bytes, peak_nvme_bytes (the same plus the optimizer state there); host_opt_* (hand-offs, params, grad_bytes, groups, complete_iterations:\n"
          "iterations in which every group reached the pool exactly once, state_bytes,\n"
          "state_nvme_bytes, state_read, state_written, state_nvme_read, state_nvme_written,\n"
          "busy_s, nvme_wait_s, conserved_iterations: complete iterations whose state read = state\n"
          "written = the whole state and gradients in = weights handed off); kernel_read_bytes\n"
          "(spans kernels read) = kernel_read_on_device_bytes + kernel_read_host_mapped_bytes +\n"
          "kernel_read_missing_bytes (where each byte was when its kernel was issued; missing is\n"
          "a pager bug), kernel_written_only_bytes.\n"
          "Exit: 0 ok, 2 bad option or trace, 1 the workload cannot run in that memory.\n");
}

/* 25G -> 25e9; plain numbers and exponents too */
static int parse_bw(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end);
  double mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = 1e3; end++; break;
    case 'm': case 'M': mul = 1e6; end++; break;
    case 'g': case 'G': mul = 1e9; end++; break;
    case 't': case 'T': mul = 1e12; end++; break;
    default: break;
  }
  if (end == s || *end != '\0' || !(v > 0) || !isfinite(v)) return -EINVAL;
  *out = v * mul;
  return 0;
}

static int grow_regions(replay_t *r, uint64_t id) {
  if (id < r->nregions) return 0;
  size_t n = r->nregions ? r->nregions : 1024;
  while (n <= id) n *= 2;
  uintptr_t *a = realloc(r->addr, n * sizeof(*a));
  if (a == NULL) return -ENOMEM;
  r->addr = a;
  uint32_t *c = realloc(r->nchunks, n * sizeof(*c));
  if (c == NULL) return -ENOMEM;
  r->nchunks = c;
  mt_handle_t *w = realloc(r->wev, n * sizeof(*w));
  if (w == NULL) return -ENOMEM;
  r->wev = w;
  memset(r->addr + r->nregions, 0, (n - r->nregions) * sizeof(*a));
  memset(r->nchunks + r->nregions, 0, (n - r->nregions) * sizeof(*c));
  memset(r->wev + r->nregions, 0, (n - r->nregions) * sizeof(*w));
  r->nregions = n;
  return 0;
}

typedef struct kctx {
  mt_device_t *dev;
  mt_handle_t s;
  uint64_t dur;
  /* the footprint, for the read check at the moment the kernel is issued */
  mt_pager_t *p;
  const uintptr_t *addrs;
  const uint64_t *bytes;
  const uint8_t *kinds;       /* NULL: unknown (every span counts as read) */
  uint32_t n;
  readcheck_t *rc;
} kctx_t;

static int run_kernel(void *vctx) {
  kctx_t *k = vctx;
  readcheck_launch(k->p, k->addrs, k->bytes, k->kinds, k->n, k->rc);
  return _mt_vdev_kernel(k->dev, k->s, k->dur);
}

static int do_launch(replay_t *r, const mt_trace_launch_t *l, uint64_t dur, uint64_t off) {
  const mt_trace_span_t *foot = mt_trace_launch_spans(l);
  const uint8_t *kinds = r->writes_aware ? mt_trace_launch_kinds(l) : NULL;
  uintptr_t stackbuf[64];
  bool stackw[64];
  uintptr_t *addrs = l->nfoot <= 64 ? stackbuf : malloc(l->nfoot * sizeof(uintptr_t));
  bool *write = l->nfoot <= 64 ? stackw : malloc(l->nfoot * sizeof(bool));
  if (addrs == NULL || write == NULL) {
    if (addrs != stackbuf) free(addrs);
    if (write != stackw) free(write);
    return -ENOMEM;
  }
  uint32_t n = 0;
  size_t nk = 0;
  if (l->nfoot > r->nsbytes) {
    uint64_t *b = realloc(r->sbytes, l->nfoot * sizeof(uint64_t));
    if (b == NULL) {
      if (addrs != stackbuf) free(addrs);
      if (write != stackw) free(write);
      return -ENOMEM;
    }
    r->sbytes = b;
    r->nsbytes = l->nfoot;
  }
  for (uint32_t i = 0; i < l->nfoot; i++) {
    r->sbytes[i] = foot[i].bytes;
    uint64_t id = foot[i].region;
    if (id >= r->nregions || r->addr[id] == 0) {
      snprintf(r->err, sizeof(r->err), "byte %" PRIu64 ": launch uses region %" PRIu64 ", which is not allocated",
               off, id);
      if (addrs != stackbuf) free(addrs);
      if (write != stackw) free(write);
      return -EINVAL;
    }
    if (r->wev[id] != 0) {
      /* the host optimizer's new weights: issue nothing that reads them before they exist */
      r->dev->ops->event_sync(r->dev, r->wev[id]);
      r->wev[id] = 0;
    }
    write[n] = kinds == NULL || kinds[i] != MT_ACC_READ;
    addrs[n++] = r->addr[id] + foot[i].offset;
    for (uint32_t c = 0; r->belady && c < r->nchunks[id]; c++) {
      if (nk == r->nkeys_cap) {
        size_t cap = r->nkeys_cap ? r->nkeys_cap * 2 : 4096;
        uint64_t *nkeys = realloc(r->keys, cap * sizeof(uint64_t));
        if (nkeys != NULL) r->keys = nkeys;
        bool *nkeyw = nkeys ? realloc(r->keyw, cap * sizeof(bool)) : NULL;
        if (nkeyw == NULL) {
          if (addrs != stackbuf) free(addrs);
          if (write != stackw) free(write);
          return -ENOMEM;
        }
        r->keyw = nkeyw;
        r->nkeys_cap = cap;
      }
      r->keyw[nk] = write[n - 1];
      r->keys[nk++] = id << 24 | c;
    }
  }
  int rc = r->belady ? belady_launch(r->bel, r->keys, r->keyw, (uint32_t)nk) : 0;
  uint32_t s = l->stream % MAX_STREAMS;
  kctx_t k = {r->dev, s, dur, r->p, addrs, r->sbytes, mt_trace_launch_kinds(l), n, &r->reads};
  if (rc == 0) {
    pthread_mutex_lock(&r->p->lock);
    mt_stat_add(launches, 1);
    rc = _mt_launch_regions(r->p, addrs, write, n, s, l->func ? l->func : 1, run_kernel, &k, "replayed launch");
    pthread_mutex_unlock(&r->p->lock);
  }
  if (addrs != stackbuf) free(addrs);
  if (write != stackw) free(write);
  if (rc < 0) {
    snprintf(r->err, sizeof(r->err), "byte %" PRIu64 ": launch %" PRIu64 " cannot run: %s", off, r->launches,
             rc == -E2BIG || rc == -ENOMEM ? "its footprint does not fit in --gpu-mem (see above)" : strerror(-rc));
    return rc;
  }
  r->stream_kernel_ns[s] += dur;
  r->launches++;
  if (r->iterations > 0) r->iter_kernel[r->iterations - 1] += dur;
  return 0;
}

/* A hand-off to the host optimizer (hostopt.h): the read spans are the
 * gradients, the written ones the weights. */
static int do_handoff(replay_t *r, const mt_trace_launch_t *l, unsigned code, uint64_t off) {
  const mt_trace_span_t *foot = mt_trace_launch_spans(l);
  const uint8_t *kinds = mt_trace_launch_kinds(l);
  unsigned wb = code >> 2, comp = code & 3;
  uint64_t gbytes = 0, wbytes = 0, group = 0;
  uintptr_t gaddr = 0;
  for (uint32_t i = 0; i < l->nfoot; i++) {
    uint64_t id = foot[i].region;
    if (id >= r->nregions || r->addr[id] == 0 || kinds == NULL ||
        (kinds[i] != MT_ACC_READ && kinds[i] != MT_ACC_WRITE)) {
      snprintf(r->err, sizeof(r->err), "byte %" PRIu64 ": host optimizer hand-off with a span that is %s", off,
               kinds == NULL ? "of no access kind (a version 1 trace)" : "not allocated, or neither read nor written");
      return -EINVAL;
    }
    if (kinds[i] == MT_ACC_READ) {
      gbytes += foot[i].bytes;
      if (gaddr == 0) gaddr = r->addr[id] + foot[i].offset;
    } else {
      wbytes += foot[i].bytes;
      if (group == 0) group = id;
    }
  }
  if (group == 0 || gbytes != wbytes) {
    snprintf(r->err, sizeof(r->err), "byte %" PRIu64 ": host optimizer hand-off of %" PRIu64 " gradient bytes "
             "for %" PRIu64 " weight bytes (they must match)", off, gbytes, wbytes);
    return -EINVAL;
  }
  mt_handle_t done;
  uint64_t iter = r->iterations ? r->iterations - 1 : 0;
  int rc = hostopt_step(r->ho, group, iter, wbytes / wb, wb, comp, gaddr, gbytes, &done, r->err, sizeof(r->err));
  if (rc < 0) return rc;
  for (uint32_t i = 0; i < l->nfoot; i++) {
    if (kinds[i] != MT_ACC_WRITE) continue;
    uint64_t id = foot[i].region;
    if ((rc = _mt_host_write(r->addr[id] + foot[i].offset, NULL, foot[i].bytes)) < 0) {
      snprintf(r->err, sizeof(r->err), "byte %" PRIu64 ": the host optimizer's write-back of region %" PRIu64
               " fails: %s", off, id, strerror(-rc));
      return rc;
    }
    r->wev[id] = done;
  }
  hostopt_weights(r->ho, wbytes);
  r->handoffs++;
  return 0;
}

int mt_cmd_replay(int argc, char **argv) {
  static const struct option opts[] = {
    {"gpu-mem", required_argument, 0, 'g'},  {"host-mem", required_argument, 0, 'm'},
    {"pcie-bw", required_argument, 0, 'b'},  {"h2d-bw", required_argument, 0, 'H'},
    {"d2h-bw", required_argument, 0, 'D'},   {"nvme-read-bw", required_argument, 0, 'r'},
    {"nvme-write-bw", required_argument, 0, 'w'}, {"policy", required_argument, 0, 'p'},
    {"spill-policy", required_argument, 0, 'Y'},
    {"predictor", required_argument, 0, 'P'}, {"iterations", required_argument, 0, 'i'},
    {"prefetch-depth", required_argument, 0, 'F'},
    {"predictor-mem", required_argument, 0, 'K'},
    {"prefetch-lead", required_argument, 0, 'L'},
    {"prefetch-free", required_argument, 0, 'T'},
    {"runahead", required_argument, 0, 'Q'},
    {"writebehind-horizon", required_argument, 0, 'V'},
    {"prefetch-pace", required_argument, 0, 'E'},
    {"prefetch-wait", required_argument, 0, 'X'},
    {"readahead-depth", required_argument, 0, 'R'},
    {"chunk", required_argument, 0, 'c'},    {"json", no_argument, 0, 'j'},
    {"host-map", required_argument, 0, 'M'},
    {"unmap-sync", required_argument, 0, 'U'},
    {"handoff", required_argument, 0, 'A'},
    {"nvme-mem", required_argument, 0, 'N'},
    {"writes", required_argument, 0, 'W'},
    {"host-opt-gparams-per-s", required_argument, 0, 'O'},
    {"host-opt-mem", required_argument, 0, 'S'},
    {"state-compression", required_argument, 0, 'Z'},
    {"no-belady", no_argument, 0, 'B'},
    {"help", no_argument, 0, 'h'},           {0, 0, 0, 0},
  };
  uint64_t gpu = 0, host = 0, chunk = 0, iters = UINT64_MAX, nvme_mem = 0, opt_mem = UINT64_MAX;
  uint64_t pred_mem = MT_PREDICTOR_MEM_DEFAULT;
  double opt_rate = 10;
  int opt_comp = -1;          /* --state-compression: -1 the trace's, else 0 none, 1 8bit, 2 4bit */
  double h2d = 25e9, d2h = 25e9, nvme_rd = 3.2e9, nvme_wr = 3.2e9;
  const char *policy = "nextuse", *spill_policy = "auto", *predictor = "correlation";
  unsigned depth = 8, ra_depth = 1024, lead = 0, spare = 32, runahead = 24, wb_horizon = 256;
  bool json = false, no_belady = false, host_map = true, unmap_sync = true, writes_aware = false;
  bool pace = true, pf_wait = true;
  int handoff = 0; /* auto */
  optind = 1;
  int c;
  while ((c = getopt_long(argc, argv, "h", opts, NULL)) != -1) {
    int64_t iv;
    int bad = 0;
    switch (c) {
      case 'g': bad = _mt_parse_size(optarg, &gpu); break;
      case 'm': bad = _mt_parse_size(optarg, &host); break;
      case 'c': bad = _mt_parse_size(optarg, &chunk); break;
      case 'b': bad = parse_bw(optarg, &h2d); d2h = h2d; break;
      case 'H': bad = parse_bw(optarg, &h2d); break;
      case 'D': bad = parse_bw(optarg, &d2h); break;
      case 'r': bad = parse_bw(optarg, &nvme_rd); break;
      case 'w': bad = parse_bw(optarg, &nvme_wr); break;
      case 'N': bad = _mt_parse_size(optarg, &nvme_mem) || nvme_mem == 0; break;
      case 'O': {
        char *end;
        opt_rate = strtod(optarg, &end);
        bad = end == optarg || *end || !(opt_rate > 0) || !isfinite(opt_rate) || opt_rate > 1e6;
        break;
      }
      case 'S': bad = _mt_parse_size(optarg, &opt_mem); break;
      case 'K':
        if (_mt_parse_size(optarg, &pred_mem) != 0 || pred_mem < MT_PREDICTOR_MEM_MIN || pred_mem > SIZE_MAX / 2) {
          fprintf(stderr, "mt-trace replay: --predictor-mem '%s' is not a size of at least 64K\n", optarg);
          return 2;
        }
        break;
      case 'Z':
        opt_comp = strcmp(optarg, "none") == 0 ? 0 : strcmp(optarg, "8bit") == 0 ? 1 : strcmp(optarg, "4bit") == 0 ? 2 : -1;
        bad = opt_comp < 0;
        break;
      case 'p':
        policy = optarg;
        if (_mt_policy_find(policy) == NULL) {
          fprintf(stderr, "mt-trace replay: unknown policy '%s' (available: lru, nextuse)\n", optarg);
          return 2;
        }
        break;
      case 'Y':
        spill_policy = optarg;
        if (strcmp(spill_policy, "auto") != 0 && _mt_policy_find(spill_policy) == NULL) {
          fprintf(stderr, "mt-trace replay: unknown spill policy '%s' (available: auto, lru, nextuse)\n", optarg);
          return 2;
        }
        break;
      case 'P':
        if (_mt_predictor_find(optarg) == NULL) {
          fprintf(stderr, "mt-trace replay: unknown predictor '%s' (available: none, correlation, context)\n",
                  optarg);
          return 2;
        }
        predictor = optarg;
        break;
      case 'F':
        bad = _mt_parse_int(optarg, 0, 1024, &iv);
        if (!bad) depth = (unsigned)iv;
        break;
      case 'L':
        bad = _mt_parse_int(optarg, 0, 255, &iv);
        if (!bad) lead = (unsigned)iv;
        break;
      case 'T':
        bad = _mt_parse_int(optarg, 0, 255, &iv);
        if (!bad) spare = (unsigned)iv;
        break;
      case 'Q':
        bad = _mt_parse_int(optarg, 0, 256, &iv);
        if (!bad) runahead = (unsigned)iv;
        break;
      case 'V':
        bad = _mt_parse_int(optarg, 0, 65536, &iv);
        if (!bad) wb_horizon = (unsigned)iv;
        break;
      case 'R':
        bad = _mt_parse_int(optarg, 0, 4096, &iv);
        if (!bad) ra_depth = (unsigned)iv;
        break;
      case 'i':
        bad = _mt_parse_int(optarg, 1, INT64_MAX, &iv);
        if (!bad) iters = (uint64_t)iv;
        break;
      case 'j': json = true; break;
      case 'B': no_belady = true; break;
      case 'M':
        if (strcmp(optarg, "on") == 0) host_map = true;
        else if (strcmp(optarg, "off") == 0) host_map = false;
        else bad = 1;
        break;
      case 'W':
        if (strcmp(optarg, "all") == 0) writes_aware = false;
        else if (strcmp(optarg, "aware") == 0) writes_aware = true;
        else bad = 1;
        break;
      case 'A':
        if (strcmp(optarg, "auto") == 0) handoff = 0;
        else if (strcmp(optarg, "on") == 0) handoff = 1;
        else if (strcmp(optarg, "off") == 0) handoff = 2;
        else bad = 1;
        break;
      case 'E':
        if (strcmp(optarg, "on") == 0) pace = true;
        else if (strcmp(optarg, "off") == 0) pace = false;
        else bad = 1;
        break;
      case 'X':
        if (strcmp(optarg, "on") == 0) pf_wait = true;
        else if (strcmp(optarg, "off") == 0) pf_wait = false;
        else bad = 1;
        break;
      case 'U':
        if (strcmp(optarg, "on") == 0) unmap_sync = true;
        else if (strcmp(optarg, "off") == 0) unmap_sync = false;
        else bad = 1;
        break;
      case 'h': usage(stdout); return 0;
      default: usage(stderr); return 2;
    }
    if (bad) {
      const char *name = "?";
      for (const struct option *o = opts; o->name; o++)
        if (o->val == c) name = o->name;
      fprintf(stderr, "mt-trace replay: bad value '%s' for --%s (see --help)\n", optarg, name);
      return 2;
    }
  }
  if (optind + 1 != argc) {
    usage(stderr);
    return 2;
  }
  const char *path = argv[optind];
  char err[512];
  mt_trace_reader_t *tr;
  if (mt_trace_open(path, &tr, err, sizeof(err)) < 0) {
    fprintf(stderr, "mt-trace replay: %s\n", err);
    return 2;
  }
  const mt_trace_header_t *th = mt_trace_header(tr);
  if (gpu == 0) gpu = th->gpu_budget;
  if (gpu == 0) {
    fprintf(stderr, "mt-trace replay: the trace records no GPU budget; give --gpu-mem\n");
    mt_trace_close(tr);
    return 2;
  }
  if (host == 0) host = th->host_budget ? th->host_budget : (uint64_t)1 << 40;
  if (chunk == 0) chunk = th->chunk_bytes ? th->chunk_bytes : (uint64_t)2 << 20;
  if (chunk < ((uint64_t)2 << 20) || (chunk & (chunk - 1))) {
    fprintf(stderr, "mt-trace replay: --chunk must be a power of two of at least 2M\n");
    mt_trace_close(tr);
    return 2;
  }
  struct timespec w0, w1;
  clock_gettime(CLOCK_MONOTONIC, &w0);
  _mt_log_configure(MT_LOG_ERROR, -2);

  mt_vdev_config_t vc = {.gpu_mem = gpu, .h2d_bw = h2d, .d2h_bw = d2h, .copy_latency_ns = 2000,
                        .unmap_syncs = unmap_sync, .nvme_read_bw = nvme_rd, .nvme_write_bw = nvme_wr};
  replay_t r = {0};
  r.writes_aware = writes_aware;
  r.belady = !no_belady;
  r.dev = _mt_vdev_new(&vc);
  /* the library's NVMe tier over a store that keeps pages but moves nothing */
  _mt_nvme_cfg_t nvc = {.simulate = true, .max_bytes = nvme_mem};
  mt_pager_config_t pc = {.budget = gpu, .host_budget = host, .chunk = chunk,
                          .small_limit = (size_t)1 << 20, .policy = policy,
                          .spill_policy = spill_policy, .host_map = host_map,
                          .handoff = handoff,
                          .nvme = nvme_mem ? &nvc : NULL, .predictor = predictor,
                          .prefetch_depth = depth, .readahead_depth = ra_depth,
                          .predictor_mem = (size_t)pred_mem,
                          .prefetch_lead = lead, .prefetch_free = spare, .prefetch_pace = pace,
                          .runahead = runahead,
                          .prefetch_nowait = !pf_wait,
                          .writebehind_horizon = wb_horizon};
  int rc = r.dev ? _mt_pager_create(r.dev, &pc, &r.p) : -ENOMEM;
  if (rc == 0 && nvme_mem && r.p->nv == NULL) rc = -ENOMEM; /* logged: the host budget is too small */
  if (rc < 0) {
    fprintf(stderr, "mt-trace replay: cannot set up the pager: %s\n", strerror(-rc));
    mt_trace_close(tr);
    return 1;
  }
  _mt_pager_install(r.p);
  r.bel = belady_new(r.p->budget / r.p->chunk, r.p->chunk);
  hostopt_cfg_t hc = {.gparams_per_s = opt_rate, .state_mem = opt_mem};
  r.ho = hostopt_new(r.dev, &hc);
  if (r.ho == NULL || r.bel == NULL) {
    fprintf(stderr, "mt-trace replay: out of memory\n");
    mt_trace_close(tr);
    return 1;
  }

  int exit_code = 0;
  const mt_trace_rec_t *rec;
  /* a recorded launch without a duration waits for the next record's time */
  static char pending_buf[MT_TRACE_REC_MAX];
  bool pending = false;
  uint64_t pending_off = 0, nrec = 0;
  while ((rc = mt_trace_next(tr, &rec)) == 1) {
    uint64_t off = mt_trace_offset(tr);
    if (pending) {
      const mt_trace_launch_t *pl = (const mt_trace_launch_t *)pending_buf;
      uint64_t dur = rec->t_ns > pl->h.t_ns ? rec->t_ns - pl->h.t_ns : 0;
      pending = false;
      if ((rc = do_launch(&r, pl, dur, pending_off)) < 0) break;
    }
    if ((++nrec & 0xfff) == 0) mt_progress("replay", off, mt_trace_size(tr));
    switch (rec->type) {
      case MT_TR_ALLOC: {
        const mt_trace_alloc_t *a = (const mt_trace_alloc_t *)rec;
        uintptr_t va;
        if ((rc = grow_regions(&r, a->region)) < 0) break;
        if (r.addr[a->region] != 0) {
          snprintf(r.err, sizeof(r.err), "byte %" PRIu64 ": region %" PRIu64 " allocated twice", off, a->region);
          rc = -EINVAL;
          break;
        }
        if ((rc = _mt_alloc(a->bytes, &va)) < 0) {
          snprintf(r.err, sizeof(r.err), "byte %" PRIu64 ": allocation of %" PRIu64 " bytes fails: GPU and host "
                   "memory are full (%s)", off, a->bytes, strerror(-rc));
          break;
        }
        r.addr[a->region] = va;
        r.nchunks[a->region] = a->bytes >= pc.small_limit ? (uint32_t)((a->bytes + r.p->chunk - 1) / r.p->chunk) : 0;
        break;
      }
      case MT_TR_FREE: {
        const mt_trace_free_t *f = (const mt_trace_free_t *)rec;
        if (f->region >= r.nregions || r.addr[f->region] == 0) {
          snprintf(r.err, sizeof(r.err), "byte %" PRIu64 ": free of region %" PRIu64 ", which is not allocated",
                   off, f->region);
          rc = -EINVAL;
          break;
        }
        bool async = f->h.flags & MT_TRF_ASYNC;
        rc = _mt_free(r.addr[f->region], async ? f->stream % MAX_STREAMS : 0, async);
        if (rc == 0 && r.belady && r.nchunks[f->region]) rc = belady_free_region(r.bel, f->region, r.nchunks[f->region]);
        r.addr[f->region] = 0;
        break;
      }
      case MT_TR_NAME: {
        const mt_trace_name_t *nm = (const mt_trace_name_t *)rec;
        unsigned wb, comp;
        int k = hostopt_parse_name((const char *)(nm + 1), nm->len, &wb, &comp);
        if (k < 0) {
          snprintf(r.err, sizeof(r.err), "byte %" PRIu64 ": malformed host optimizer name '%.*s' (want "
                   "'mt_host_optimizer w=2|4 state=none|8bit|4bit')", off, (int)(nm->len < 80 ? nm->len : 80),
                   (const char *)(nm + 1));
          rc = -EINVAL;
          break;
        }
        if (k == 0 || nm->id > 1u << 20) break;
        if (opt_comp >= 0) comp = (unsigned)opt_comp; /* the state is the pool's alone: no kernel reads it */
        if (nm->id >= r.nfunc) {
          size_t n = (size_t)nm->id * 2 + 16;
          uint8_t *f = realloc(r.hfunc, n);
          if (f == NULL) {
            rc = -ENOMEM;
            break;
          }
          memset(f + r.nfunc, 0, n - r.nfunc);
          r.hfunc = f;
          r.nfunc = n;
        }
        r.hfunc[nm->id] = (uint8_t)(1 + (wb << 2 | comp));
        break;
      }
      case MT_TR_LAUNCH: {
        const mt_trace_launch_t *l = (const mt_trace_launch_t *)rec;
        if (l->func < r.nfunc && r.hfunc[l->func]) {
          rc = do_handoff(&r, l, r.hfunc[l->func] - 1u, off);
        } else if (l->dur_ns == 0 && th->clock == MT_TRACE_CLOCK_MONOTONIC) {
          memcpy(pending_buf, rec, rec->size);
          pending = true;
          pending_off = off;
        } else {
          rc = do_launch(&r, l, l->dur_ns, off);
        }
        break;
      }
      case MT_TR_ITER: {
        if (r.iterations > 0) hostopt_end_iteration(r.ho, r.iterations - 1);
        if (r.iterations >= iters) goto done;
        if (r.iterations == r.iter_cap) {
          r.iter_cap = r.iter_cap ? r.iter_cap * 2 : 16;
          uint64_t *a = realloc(r.iter_start, r.iter_cap * sizeof(uint64_t));
          uint64_t *b = a ? realloc(r.iter_kernel, r.iter_cap * sizeof(uint64_t)) : NULL;
          if (a) r.iter_start = a;
          if (b) r.iter_kernel = b;
          uint64_t *c = b ? realloc(r.iter_idle, r.iter_cap * sizeof(uint64_t)) : NULL;
          if (c) r.iter_idle = c;
          uint64_t *e = c ? realloc(r.iter_idle_host, r.iter_cap * sizeof(uint64_t)) : NULL;
          if (e == NULL) {
            rc = -ENOMEM;
            break;
          }
          r.iter_idle_host = e;
        }
        mt_vdev_totals_t now;
        _mt_vdev_totals(r.dev, &now);
        r.iter_start[r.iterations] = _mt_vdev_app_time(r.dev);
        r.iter_kernel[r.iterations] = 0;
        r.iter_idle[r.iterations] = now.gpu_idle_ns;
        r.iter_idle_host[r.iterations] = now.gpu_idle_host_ns;
        r.iterations++;
        break;
      }
      default:
        break; /* the recorded run's own moves, names, optimizer steps */
    }
    if (rc < 0) break;
  }
done:
  mt_progress_end();
  if (rc == 0 && r.iterations > 0) hostopt_end_iteration(r.ho, r.iterations - 1); /* the last one, read whole */
  if (rc == 0 && pending) rc = do_launch(&r, (const mt_trace_launch_t *)pending_buf, 0, pending_off);
  if (rc < 0 && r.err[0] == 0) snprintf(r.err, sizeof(r.err), "%s", mt_trace_error(tr));
  if (rc < 0) {
    fprintf(stderr, "mt-trace replay: %s: %s\n", path, r.err);
    exit_code = rc == -EINVAL || rc == -EIO ? 2 : 1;
  }
  r.stream0_end = _mt_vdev_app_time(r.dev);
  if (r.iterations == 0) r.iterations = 1;

  belady_result_t br = {0};
  if (exit_code == 0 && r.belady && belady_finish(r.bel, &br) < 0) {
    fprintf(stderr, "mt-trace replay: out of memory computing the Belady bound\n");
    exit_code = 1;
  }
  mt_vdev_totals_t t;
  _mt_vdev_totals(r.dev, &t);
  clock_gettime(CLOCK_MONOTONIC, &w1);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  uint64_t niter_marked = r.iter_start ? r.iterations : 0;
  if (exit_code == 0) {
    uint64_t ideal = 0;
    for (int s = 0; s < MAX_STREAMS; s++)
      if (r.stream_kernel_ns[s] > ideal) ideal = r.stream_kernel_ns[s];
    double sim_s = (double)t.now_ns / 1e9, ideal_s = (double)ideal / 1e9;
    double pct = t.now_ns ? 100.0 * (double)ideal / (double)t.now_ns : 100.0;
    double stall_s = sim_s > ideal_s ? sim_s - ideal_s : 0;
    double wall = (double)(w1.tv_sec - w0.tv_sec) + (double)(w1.tv_nsec - w0.tv_nsec) / 1e9;
    uint64_t rss = (uint64_t)ru.ru_maxrss * 1024;
    uint64_t bel = br.fetch_bytes + br.writeback_bytes;
    char belj[3][24] = {"null", "null", "null"}; /* --no-belady: not computed */
    if (r.belady) {
      snprintf(belj[0], sizeof belj[0], "%" PRIu64, bel);
      snprintf(belj[1], sizeof belj[1], "%" PRIu64, br.fetches);
      snprintf(belj[2], sizeof belj[2], "%" PRIu64, br.writebacks);
    }
    /* prefetch: coverage = fetches made ahead / all fetches; accuracy = of
     * those, used before leaving the GPU; timeliness = of the uses, the
     * ones whose stream did not wait for the copy */
    char cov[32] = "null", acc[32] = "null", tim[32] = "null";
    uint64_t pfs = mt_stat_get(prefetches), used = mt_stat_get(prefetch_used), late = mt_stat_get(prefetch_late);
    uint64_t all = mt_stat_get(fetches);
    if (strcmp(predictor, "none") != 0) { /* not when next-use eviction alone keeps keys */
      if (all) snprintf(cov, sizeof cov, "%.4f", (double)pfs / (double)all);
      if (pfs) snprintf(acc, sizeof acc, "%.4f", (double)used / (double)pfs);
      if (used) snprintf(tim, sizeof tim, "%.4f", used > late ? (double)(used - late) / (double)used : 0.0);
    }
    hostopt_totals_t ht;
    hostopt_totals(r.ho, &ht);
    if (json) {
      printf("{\"trace\":\"%s\",\"gpu_mem\":%" PRIu64 ",\"host_mem\":%" PRIu64 ",\"h2d_bw\":%.0f,\"d2h_bw\":%.0f,"
             "\"policy\":\"%s\",\"spill_policy\":\"%s\",\"handoff\":\"%s\",\"predictor\":\"%s\",\"prefetch_depth\":%u,\"prefetch_lead\":%u,\"prefetch_free\":%u,\"prefetch_pace\":%s,\"prefetch_wait\":%s,\"readahead_depth\":%u,\"runahead\":%u,\"writebehind_horizon\":%u,\"writes\":\"%s\",\"sim_s\":%.6f,\"ideal_s\":%.6f,\"pct_of_ideal\":%.2f,"
             "\"stall_s\":%.6f,\"bytes_h2d\":%" PRIu64 ",\"bytes_d2h\":%" PRIu64 ",\"nvme_mem\":%" PRIu64 ","
             "\"nvme_read_bw\":%.0f,\"nvme_write_bw\":%.0f,\"bytes_nvme_read\":%" PRIu64 ","
             "\"bytes_nvme_write\":%" PRIu64 ",\"nvme_spills\":%llu,\"nvme_loads\":%llu,\"nvme_drops\":%llu,\"fetches\":%llu,\"evictions_dirty\":%llu,\"evictions_clean\":%llu,"
             "\"unmap_waits\":%llu,\"runahead_waits\":%llu,\"prefetch_waits\":%llu,\"prefetches_free\":%llu,\"handoffs\":%llu,\"belady_bytes\":%s,\"belady_fetches\":%s,\"belady_writebacks\":%s,"
             "\"launches\":%" PRIu64 ",\"launches_host_mapped\":%" PRIu64 ",\"host_mapped_bytes\":%" PRIu64 ","
             "\"iterations\":%" PRIu64 ",\"prefetches\":%llu,\"write_behind\":%llu,\"write_behind_used\":%llu,\"coverage\":%s,\"accuracy\":%s,"
             "\"timeliness\":%s,\"stream_wait_s\":%.6f,\"replay_wall_s\":%.3f,\"replay_max_rss_bytes\":%" PRIu64 ",",
             path, (uint64_t)r.p->budget, (uint64_t)r.p->host_budget, h2d, d2h, policy, r.p->hpol_ops->name, handoff == 0 ? "auto" : handoff == 1 ? "on" : "off",
             predictor, depth, lead, spare, pace ? "true" : "false", pf_wait ? "true" : "false", ra_depth, runahead, wb_horizon,
             writes_aware ? "aware" : "all", sim_s, ideal_s, pct,
             stall_s, t.bytes_h2d, t.bytes_d2h, nvme_mem, nvme_rd, nvme_wr, t.bytes_nvme_read, t.bytes_nvme_write,
             (unsigned long long)mt_stat_get(nvme_spills), (unsigned long long)mt_stat_get(nvme_loads),
             (unsigned long long)mt_stat_get(nvme_drops), (unsigned long long)mt_stat_get(fetches),
             (unsigned long long)mt_stat_get(evictions_dirty), (unsigned long long)mt_stat_get(evictions_clean),
             (unsigned long long)mt_stat_get(unmap_waits), (unsigned long long)mt_stat_get(runahead_waits),
             (unsigned long long)mt_stat_get(prefetch_waits), (unsigned long long)mt_stat_get(prefetches_free),
             (unsigned long long)mt_stat_get(handoffs), belj[0], belj[1], belj[2], r.launches, t.host_mapped_kernels, t.host_mapped_bytes, r.iterations,
             (unsigned long long)pfs, (unsigned long long)mt_stat_get(write_behind),
             (unsigned long long)mt_stat_get(write_behind_used), cov, acc, tim, (double)t.stream_wait_ns / 1e9,
             wall, rss);
      if (r.p->pf == NULL || strcmp(predictor, "none") == 0)
        printf("\"predictor_mem\":%" PRIu64 ",\"predictor_hit_rate\":null,\"predictor_evictions\":null,"
               "\"predictor_fp_dropped\":null,", pred_mem);
      else
        printf("\"predictor_mem\":%" PRIu64 ",\"predictor_hit_rate\":%.4f,\"predictor_evictions\":%llu,"
               "\"predictor_fp_dropped\":%llu,", pred_mem,
               r.launches ? (double)mt_stat_get(predictor_hits) / (double)r.launches : 0.0,
               (unsigned long long)mt_stat_get(predictor_evictions),
               (unsigned long long)mt_stat_get(predictor_fp_dropped));
      const char *ts = trial_state(r.p);
      if (ts == NULL)
        printf("\"handoff_trial\":null,\"handoff_trial_on_s\":null,\"handoff_trial_off_s\":null,");
      else if (strcmp(ts, "on") != 0 && strcmp(ts, "off") != 0)
        printf("\"handoff_trial\":\"%s\",\"handoff_trial_on_s\":null,\"handoff_trial_off_s\":null,", ts);
      else
        printf("\"handoff_trial\":\"%s\",\"handoff_trial_on_s\":%.6f,\"handoff_trial_off_s\":%.6f,", ts,
               (double)r.p->ho_trial.a_ns / 1e9, (double)r.p->ho_trial.b_ns / 1e9);
      /* per iteration (from ITER records): simulated and ideal seconds */
      printf("\"iter_sim_s\":[");
      for (uint64_t i = 0; i < niter_marked; i++)
        printf("%s%.6f", i ? "," : "", (double)(iter_end(&r, i) - r.iter_start[i]) / 1e9);
      printf("],\"iter_ideal_s\":[");
      for (uint64_t i = 0; i < niter_marked; i++) printf("%s%.6f", i ? "," : "", (double)r.iter_kernel[i] / 1e9);
      printf("],\"iter_gpu_idle_s\":[");
      for (uint64_t i = 0; i < niter_marked; i++) printf("%s%.6f", i ? "," : "", iter_idle_s(&r, &t, i, false));
      printf("],\"iter_gpu_idle_host_s\":[");
      for (uint64_t i = 0; i < niter_marked; i++) printf("%s%.6f", i ? "," : "", iter_idle_s(&r, &t, i, true));
      printf("],");
      /* how long each resource was busy: the one nearest sim_s binds */
      /* peak host and NVMe bytes: the pager's tiers at their fullest plus the optimizer's state */
      printf("\"peak_live_host_bytes\":%llu,\"peak_live_nvme_bytes\":%llu,\"peak_host_bytes\":%llu,"
             "\"peak_nvme_bytes\":%llu,", (unsigned long long)mt_stat_get(peak_live_host_bytes),
             (unsigned long long)mt_stat_get(peak_live_nvme_bytes),
             (unsigned long long)(mt_stat_get(peak_live_host_bytes) + ht.state_bytes - ht.state_nvme_bytes),
             (unsigned long long)(mt_stat_get(peak_live_nvme_bytes) + ht.state_nvme_bytes));
      printf("\"host_wait_s\":%.6f,\"nvme_read_wait_s\":%.6f,\"nvme_write_wait_s\":%.6f,\"readahead_wait_s\":%.6f,"
             "\"spill_wait_s\":%.6f,\"readahead\":%llu,\"readahead_used\":%llu,\"readahead_late\":%llu,"
             "\"readahead_spilled\":%llu,"
             "\"spill_async\":%llu,\"spill_async_waits\":%llu,",
             (double)t.host_wait_ns / 1e9, (double)t.nvme_read_wait_ns / 1e9, (double)t.nvme_write_wait_ns / 1e9,
             (double)t.nvme_async_wait_ns / 1e9, (double)t.nvme_spill_wait_ns / 1e9,
             (unsigned long long)mt_stat_get(readahead), (unsigned long long)mt_stat_get(readahead_used),
             (unsigned long long)mt_stat_get(readahead_late), (unsigned long long)mt_stat_get(readahead_spilled),
             (unsigned long long)mt_stat_get(spill_async),
             (unsigned long long)mt_stat_get(spill_async_waits));
      printf("\"h2d_busy_s\":%.6f,\"d2h_busy_s\":%.6f,\"nvme_busy_s\":%.6f,", (double)t.bytes_h2d / h2d,
             (double)t.bytes_d2h / d2h, (double)t.bytes_nvme_read / nvme_rd + (double)t.bytes_nvme_write / nvme_wr);
      printf("\"host_opt_handoffs\":%" PRIu64 ",\"host_opt_gparams_per_s\":%.3f,\"host_opt_mem\":%.0f,"
             "\"host_opt_params\":%" PRIu64 ",\"host_opt_grad_bytes\":%" PRIu64 ",\"host_opt_groups\":%" PRIu64 ","
             "\"host_opt_complete_iterations\":%" PRIu64 ",\"host_opt_state_bytes\":%" PRIu64 ","
             "\"host_opt_state_nvme_bytes\":%" PRIu64 ",\"host_opt_state_read\":%" PRIu64 ","
             "\"host_opt_state_written\":%" PRIu64 ",\"host_opt_state_nvme_read\":%" PRIu64 ","
             "\"host_opt_state_nvme_written\":%" PRIu64 ",\"host_opt_busy_s\":%.6f,\"host_opt_nvme_wait_s\":%.6f,"
             "\"host_opt_conserved_iterations\":%" PRIu64 ",\"kernel_read_bytes\":%" PRIu64 ","
             "\"kernel_read_on_device_bytes\":%" PRIu64 ",\"kernel_read_host_mapped_bytes\":%" PRIu64 ","
             "\"kernel_read_missing_bytes\":%" PRIu64 ",\"kernel_written_only_bytes\":%" PRIu64 "}\n",
             ht.steps, opt_rate, opt_mem == UINT64_MAX ? -1.0 : (double)opt_mem, ht.params, ht.grad_bytes,
             ht.groups, ht.groups_complete, ht.state_bytes, ht.state_nvme_bytes, ht.state_read, ht.state_written,
             ht.state_nvme_read, ht.state_nvme_written, (double)ht.busy_ns / 1e9, (double)ht.nvme_wait_ns / 1e9,
             ht.iters_conserved, r.reads.read, r.reads.on_device, r.reads.host_mapped, r.reads.missing,
             r.reads.written_only);
    } else {
      printf("replay of %s: %" PRIu64 " launches, %" PRIu64 " iteration(s)\n", path, r.launches, r.iterations);
      printf("  GPU memory %.2f GiB, host %.2f GiB, link %.1f/%.1f GB/s, policy %s, predictor %s, writes %s\n",
             (double)r.p->budget / (1 << 30), (double)r.p->host_budget / (1 << 30), h2d / 1e9, d2h / 1e9, policy,
             predictor,
             writes_aware ? "aware (the trace's access kinds)" : "all (every launch writes its footprint)");
      printf("  simulated time   %12.3f s\n", sim_s);
      printf("  ideal time       %12.3f s   (unlimited GPU memory)\n", ideal_s);
      printf("  of ideal         %12.1f %%\n", pct);
      printf("  stall time       %12.3f s\n", stall_s);
      printf("  host-to-device   %12.3f GB   (%llu chunk fetches)\n", (double)t.bytes_h2d / 1e9,
             (unsigned long long)mt_stat_get(fetches));
      printf("  device-to-host   %12.3f GB   (%llu dirty, %llu clean evictions)\n", (double)t.bytes_d2h / 1e9,
             (unsigned long long)mt_stat_get(evictions_dirty), (unsigned long long)mt_stat_get(evictions_clean));
      printf("  host-mapped      %12.3f GB   (%" PRIu64 " launches larger than GPU memory, reached over the link)\n",
             (double)t.host_mapped_bytes / 1e9, t.host_mapped_kernels);
      if (nvme_mem)
        printf("  NVMe read/write  %6.3f / %.3f GB   (%.2f GiB drive at %.1f/%.1f GB/s; %llu spills, %llu loads, "
               "%llu clean drops)\n", (double)t.bytes_nvme_read / 1e9, (double)t.bytes_nvme_write / 1e9,
               (double)nvme_mem / (1 << 30), nvme_rd / 1e9, nvme_wr / 1e9,
               (unsigned long long)mt_stat_get(nvme_spills), (unsigned long long)mt_stat_get(nvme_loads),
               (unsigned long long)mt_stat_get(nvme_drops));
      else
        printf("  NVMe read/write  %12.3f GB   (no NVMe tier: give --nvme-mem)\n", 0.0);
      if (!r.belady)
        printf("  Belady bound     not computed (--no-belady)\n");
      else
        printf("  Belady bound     %12.3f GB   (%" PRIu64 " fetches, %" PRIu64 " write-backs%s)\n", (double)bel / 1e9,
               br.fetches, br.writebacks, br.infeasible ? "; some launch alone exceeds the memory" : "");
      const char *ts = trial_state(r.p);
      if (ts != NULL && strcmp(ts, "timing") == 0)
        printf("  handoff (auto)   still timing on against off (no window of each that repeats the one "
               "before it yet)\n");
      else if (ts != NULL && strcmp(ts, "irregular") == 0)
        printf("  handoff (auto)   on, untimed: no window of %" PRIu64 " launches ran the same launches as the "
               "one before it\n", r.p->ho_trial.period);
      else if (ts != NULL)
        printf("  handoff (auto)   %s: one window took %.3f s on, %.3f s off (GPU time)\n", ts,
               (double)r.p->ho_trial.a_ns / 1e9, (double)r.p->ho_trial.b_ns / 1e9);
      if (r.p->pf == NULL)
        printf("  prefetch         n/a (no predictor)\n");
      else
        printf("  prefetch         %llu chunks; coverage %s, accuracy %s, timeliness %s; the predictor named "
               "%.1f%% of launches, its tables (%" PRIu64 " bytes at most) had no room for %llu keys and %llu "
               "footprints\n",
               (unsigned long long)pfs, cov, acc, tim,
               r.launches ? 100.0 * (double)mt_stat_get(predictor_hits) / (double)r.launches : 0.0, pred_mem,
               (unsigned long long)mt_stat_get(predictor_evictions),
               (unsigned long long)mt_stat_get(predictor_fp_dropped));
      for (uint64_t i = 0; i < niter_marked; i++) {
        double is = (double)(iter_end(&r, i) - r.iter_start[i]) / 1e9, ii = (double)r.iter_kernel[i] / 1e9;
        printf("  iteration %-4" PRIu64 " %10.3f s simulated, %10.3f s ideal, %5.1f %% of ideal; GPU idle %.3f s, "
               "%.3f s of it waiting for the host\n", i, is, ii, is > 0 ? 100 * ii / is : 100.0,
               iter_idle_s(&r, &t, i, false), iter_idle_s(&r, &t, i, true));
      }
      if (ht.steps)
        printf("  host optimizer   %" PRIu64 " hand-offs, %.3g params, %.3f GB of gradients in; state %.3f GB "
               "(%.3f GB on NVMe); pool busy %.3f s (%.4g G params/s FP32), waited %.3f s for NVMe\n",
               ht.steps, (double)ht.params, (double)ht.grad_bytes / 1e9, (double)ht.state_bytes / 1e9,
               (double)ht.state_nvme_bytes / 1e9, (double)ht.busy_ns / 1e9, opt_rate, (double)ht.nvme_wait_ns / 1e9);
      printf("  kernels read     %12.3f GB   (%.3f on the device, %.3f host-mapped, %.3f missing)\n",
             (double)r.reads.read / 1e9, (double)r.reads.on_device / 1e9, (double)r.reads.host_mapped / 1e9,
             (double)r.reads.missing / 1e9);
      printf("  replay took %.2f s, %.1f MiB peak memory\n", wall, (double)rss / (1 << 20));
    }
  }
  belady_free(r.bel);
  hostopt_free(r.ho);
  free(r.wev);
  free(r.hfunc);
  free(r.addr);
  free(r.nchunks);
  free(r.keys);
  free(r.keyw);
  free(r.sbytes);
  free(r.iter_start);
  free(r.iter_kernel);
  free(r.iter_idle);
  free(r.iter_idle_host);
  mt_trace_close(tr);
  return exit_code;
}
