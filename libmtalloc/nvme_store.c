/*
 * nvme_store.c - the NVMe tier's store (nvme_store.h): chunks in 4 KiB pages
 * of O_DIRECT files, moved through io_uring, every page checksummed.
 *
 * Concept. One file per offload directory, created inside a private mkdtemp
 * directory and unlinked (with that directory) right after open, so nothing
 * outlives the process and nobody else can open it. The cap (MT_MAX_NVME) is
 * split evenly across the files and reserved with fallocate at open, so a
 * short disk shows at start rather than in the middle of a run. Each file's
 * pages are tracked by a bitmap (1 = used); a chunk takes pages in runs of at
 * most one request (cfg.request_bytes), each run from the next file in turn:
 * that is the striping, and runs need not be contiguous with each other.
 *
 * Invariants.
 *  - Every page of a chunk belongs to exactly that chunk; sum of the files'
 *    free counts == free_total (checked at debug level 3).
 *  - sum[i] is the xxh3-64 of page i as written, including the zeroed tail
 *    padding of the last page; a chunk is valid only after a write of all
 *    its pages completed without error. A read verifies every page before
 *    its op completes; a page that fails is cleared in the destination and
 *    the op fails with -EBADMSG, so corrupt bytes are never delivered.
 *  - The caller's buffers are touched only within the chunk's byte count: a
 *    partial last page travels through a private bounce page.
 *  - At most queue_depth requests are on the ring; an op with more pieces
 *    waits in a FIFO and its pieces are issued as requests complete, so
 *    reads and writes of different ops are in flight together.
 *  - No wait is unbounded: every wait has a deadline, past which a
 *    diagnostic names the oldest request and the call returns -ETIMEDOUT.
 *
 * Faults. EIO and short transfers are retried (cfg.retries times, the short
 * remainder from its last whole page, since O_DIRECT needs alignment), then
 * the op fails naming the file and byte offset. ENOSPC fails the op at once,
 * naming the directory and the bytes still to write. A failed write leaves
 * the chunk invalid and the caller's source untouched: nothing is lost. With
 * -DMT_FAULT_INJECT (test builds only) completions pass through
 * nvme_fault.c, which can turn them into any of these faults or flip a bit.
 *
 * Checksums are xxh3-64 (nvme_sum.c: AVX2 where the CPU has it).
 *
 * Threading: none of its own. One owner at a time; done() callbacks run on
 * the owner's thread, inside poll or wait.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/magic.h>
#include <linux/mempolicy.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/vfs.h>
#include <time.h>
#include <unistd.h>

#include <liburing.h>

#include "internal.h"
#include "nvme_store.h"

#define PAGE ((uint64_t)MT_NVME_PAGE)
#define DEFAULT_QD 32u
#define DEFAULT_REQUEST ((uint64_t)1 << 20)
#define DEFAULT_RETRIES 3u
#define DEFAULT_WAIT_MS 10000u
/* Default cap: free space less 5% (at least 1 GiB) for everything else. */
#define MARGIN_MIN ((uint64_t)1 << 30)

typedef struct ext {
  uint32_t file;
  uint32_t npages;
  uint64_t page;  /* first page in the file */
} ext_t;

struct _mt_nvme_chunk {
  uint64_t bytes;
  uint32_t npages;
  uint32_t next, cap;     /* runs used, allocated */
  ext_t *ext;
  uint64_t *sum;          /* xxh3-64 of each page as written */
  uint64_t region, offset;
  bool valid;
  bool doomed;            /* freed while a given-up op's requests are in flight:
                           * its pages go back when they finish */
  _mt_nvme_op_t *busy;    /* the op in flight on it, or NULL */
  _mt_nvme_chunk_t *prev_c, *next_c;  /* all chunks, for close */
};

typedef struct file {
  int fd;
  char *dir;              /* as given in cfg.dirs */
  char path[PATH_MAX];    /* the unlinked file's former name, for messages */
  uint64_t npages, nfree, cursor;
  uint64_t *bits;         /* 1 = page used */
  dev_t dev;              /* file system, so two directories on one disk share its free space */
  uint64_t free_bytes;    /* free space of that file system at open */
} file_t;

typedef struct req {
  _mt_nvme_op_t *op;      /* NULL when free */
  uint32_t file;
  uint64_t off;           /* byte offset in the file */
  uint8_t *buf;           /* data (the caller's buffer or a bounce page) */
  uint32_t len, done;     /* bytes of the request, bytes transferred */
  uint32_t page, npages;  /* chunk pages it carries */
  uint32_t tail;          /* data bytes in a bounce page; 0 = direct */
  uint32_t tries;
  uint64_t t_ns;          /* when first submitted */
  struct req *next_free;
} req_t;

typedef struct staging {
  void *p;
  size_t len;
} staging_t;

struct _mt_nvme {
  _mt_nvme_cfg_t cfg;
  uint32_t req_pages;
  file_t *files;
  unsigned nfiles, stripe;
  uint64_t free_total;
  struct io_uring ring;
  bool ring_ok;
  req_t *reqs, *free_reqs;
  unsigned inflight, prepared;
  /* Checksum work kept off the path between a completion and the next
   * submission (the queue must not drain while the CPU hashes): writes are
   * hashed right after io_uring_submit, reads verified after their
   * replacements are submitted. Both hold at most queue_depth entries. */
  req_t **hashq;          /* write requests submitted, not hashed yet */
  unsigned nhash;
  req_t *verq;            /* copies of read requests done, not verified yet */
  unsigned nver;
  uint8_t *bounce;        /* queue_depth pages */
  uint8_t **bounce_free;
  unsigned nbounce_free;
  _mt_nvme_op_t *qhead, *qtail;
  /* Stand-ins for given-up ops (_mt_nvme_abandon): each has a request on
   * the ring, so queue_depth of them always suffice. */
  _mt_nvme_op_t *orphans;
  unsigned norphans;      /* in use */
  staging_t *stg;
  size_t nstg, stg_cap;
  uint64_t stg_used;      /* bytes of staging buffers handed out */
  _mt_nvme_chunk_t *chunks;
  _mt_nvme_stats_t st;
};

/* Anonymous, page-aligned, on the node, faulted in now (so its placement and
 * its cost are paid at allocation, not in the middle of a transfer). */
static void *map_on_node(size_t len, int node, int *err) {
  void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
  if (p == MAP_FAILED) {
    *err = -errno;
    return NULL;
  }
  int rc = _mt_mem_place_on_node(p, len, node);
  if (rc < 0) mt_warn("nvme: cannot place staging memory on NUMA node %d (%s); using the local node", node, strerror(-rc));
  memset(p, 0, len);
  (void)mlock(p, len);  /* best effort: the caller pins it for DMA anyway */
  return p;
}

/* ---- page allocator -------------------------------------------------------- */

static bool page_used(const file_t *f, uint64_t p) {
  return (f->bits[p / 64] >> (p % 64)) & 1;
}

/* Takes a run of 1..want free pages from f, starting at the first free page
 * at or after the cursor (wrapping once). f must have a free page. Returns
 * the run's length and its first page. */
static uint32_t take_run(file_t *f, uint32_t want, uint64_t *first) {
  uint64_t p = f->cursor % f->npages;
  for (uint64_t scanned = 0;; ) {
    uint64_t w = f->bits[p / 64] | ((p % 64) ? ((1ull << (p % 64)) - 1) : 0);
    if (w == ~0ull) {   /* the rest of this word is used: skip it */
      uint64_t nxt = (p / 64 + 1) * 64;
      scanned += nxt - p;
      p = nxt >= f->npages ? 0 : nxt;
    } else {
      p = (p / 64) * 64 + (uint64_t)__builtin_ctzll(~w);
      if (p < f->npages) break;
      scanned += f->npages - p;
      p = 0;
    }
    mt_assert(scanned <= f->npages + 64);
  }
  /* the run, a word of the bitmap at a time (a 256 MiB chunk is 65,536
   * pages: bit by bit, this loop was most of a large replay's time) */
  uint32_t n = 0;
  while (n < want && p + n < f->npages) {
    uint64_t q = p + n, b = q % 64, lim = 64 - b;
    if (lim > want - n) lim = want - n;
    if (lim > f->npages - q) lim = f->npages - q;
    uint64_t fr = ~f->bits[q / 64] >> b; /* bit i: page q + i is free */
    uint64_t run = fr == ~0ull ? 64 : (uint64_t)__builtin_ctzll(~fr);
    uint64_t take = run < lim ? run : lim;
    if (take == 0) break;
    f->bits[q / 64] |= (take == 64 ? ~0ull : ((1ull << take) - 1)) << b;
    n += (uint32_t)take;
    if (take < lim) break;
  }
  f->nfree -= n;
  f->cursor = p + n;
  *first = p;
  return n;
}

static void put_run(file_t *f, uint64_t p, uint32_t n) {
  for (uint64_t q = p, end = p + n; q < end;) {
    uint64_t b = q % 64, k = 64 - b < end - q ? 64 - b : end - q;
    uint64_t mask = (k == 64 ? ~0ull : ((1ull << k) - 1)) << b;
    mt_assert_internal((f->bits[q / 64] & mask) == mask);
    f->bits[q / 64] &= ~mask;
    q += k;
  }
  f->nfree += n;
}

static void check_invariants(const _mt_nvme_t *s) {
  if (!MT_CHECK_INVARIANTS) return;
  uint64_t sum = 0;
  for (unsigned i = 0; i < s->nfiles; i++) {
    uint64_t used = 0;
    for (uint64_t p = 0; p < s->files[i].npages; p++) used += page_used(&s->files[i], p);
    mt_assert(used + s->files[i].nfree == s->files[i].npages);
    sum += s->files[i].nfree;
  }
  mt_assert(sum == s->free_total);
}

/* ---- open / close ---------------------------------------------------------- */

/* Opens one directory's file, or says in one line why not. */
static int open_dir(file_t *f, const char *dir) {
  struct stat sb;
  if (stat(dir, &sb) != 0) {
    int e = errno;
    mt_error("MT_OFFLOAD_DIR: \"%s\" %s; running without the NVMe tier", dir,
             e == ENOENT ? "does not exist" : strerror(e));
    return -e;
  }
  if (!S_ISDIR(sb.st_mode)) {
    mt_error("MT_OFFLOAD_DIR: \"%s\" is not a directory; running without the NVMe tier", dir);
    return -ENOTDIR;
  }
  struct statfs fs;
  if (statfs(dir, &fs) == 0 && (fs.f_type == TMPFS_MAGIC || fs.f_type == RAMFS_MAGIC)) {
    /* tmpfs is memory: its "disk" would double-count host RAM, and before
     * Linux 6.6 it refuses O_DIRECT anyway. */
    mt_error("MT_OFFLOAD_DIR: \"%s\" is on tmpfs (memory, no O_DIRECT): give a directory on an NVMe "
             "file system; running without the NVMe tier", dir);
    return -EOPNOTSUPP;
  }
  if (access(dir, W_OK | X_OK) != 0) {
    int e = errno;
    mt_error("MT_OFFLOAD_DIR: \"%s\" is not writable (%s); running without the NVMe tier", dir, strerror(e));
    return -e;
  }
  char tmpl[PATH_MAX - 16];  /* room left in f->path for "/store" */
  if (snprintf(tmpl, sizeof(tmpl), "%s/mtalloc-nvme.XXXXXX", dir) >= (int)sizeof(tmpl)) {
    mt_error("MT_OFFLOAD_DIR: \"%s\" is too long a path; running without the NVMe tier", dir);
    return -ENAMETOOLONG;
  }
  if (!mkdtemp(tmpl)) {
    int e = errno;
    mt_error("MT_OFFLOAD_DIR: \"%s\" is not writable: cannot create a private directory in it (%s); "
             "running without the NVMe tier", dir, strerror(e));
    return -e;
  }
  snprintf(f->path, sizeof(f->path), "%s/store", tmpl);
  f->fd = open(f->path, O_RDWR | O_CREAT | O_EXCL | O_DIRECT | O_CLOEXEC, 0600);
  int e = errno;
  if (f->fd >= 0) unlink(f->path);
  rmdir(tmpl);
  if (f->fd < 0) {
    if (e == EINVAL)
      mt_error("MT_OFFLOAD_DIR: \"%s\" is on a file system without O_DIRECT; running without the NVMe tier", dir);
    else
      mt_error("MT_OFFLOAD_DIR: cannot create a file in \"%s\" (%s); running without the NVMe tier", dir, strerror(e));
    return -e;
  }
  struct statvfs vfs;
  f->free_bytes = statvfs(dir, &vfs) == 0 ? (uint64_t)vfs.f_bavail * vfs.f_frsize : 0;
  f->dev = sb.st_dev;
  return 0;
}

bool _mt_nvme_cfg_from_options(_mt_nvme_cfg_t *cfg, int gpu_node) {
  int64_t node = _mt_opt_int(MT_OPT_NUMA_NODE);
  *cfg = (_mt_nvme_cfg_t){
      .dirs = _mt_opt_str(MT_OPT_OFFLOAD_DIR),
      .max_bytes = (uint64_t)_mt_opt_int(MT_OPT_MAX_NVME),
      .queue_depth = (uint32_t)_mt_opt_int(MT_OPT_NVME_QUEUE_DEPTH),
      .request_bytes = (uint64_t)_mt_opt_int(MT_OPT_NVME_REQUEST),
      .numa_node = node >= 0 ? (int)node : gpu_node,
  };
  return cfg->dirs[0] != '\0';
}

/* The simulated store of mt-trace replay: one file without a descriptor. */
static int open_simulated(_mt_nvme_t *s) {
  uint64_t pages = s->cfg.max_bytes / PAGE;
  s->files = calloc(1, sizeof(file_t));
  if (!s->files || pages == 0) return s->files ? -EINVAL : -ENOMEM;
  file_t *f = &s->files[0];
  f->fd = -1;
  f->dir = strdup("(simulated)");
  snprintf(f->path, sizeof(f->path), "(simulated)");
  f->npages = f->nfree = pages;
  f->bits = calloc((pages + 63) / 64, sizeof(uint64_t));
  s->nfiles = 1;
  if (!f->dir || !f->bits) return -ENOMEM;
  s->free_total = s->st.pages_total = pages;
  if (!s->cfg.staging_bytes) s->cfg.staging_bytes = s->cfg.queue_depth * s->cfg.request_bytes;
  return 0;
}

int _mt_nvme_open(const _mt_nvme_cfg_t *cfg, _mt_nvme_t **out) {
  *out = NULL;
  if (!cfg->simulate && (!cfg->dirs || !cfg->dirs[0])) return -EINVAL;
  _mt_nvme_t *s = calloc(1, sizeof(*s));
  if (!s) return -ENOMEM;
  s->cfg = *cfg;
  if (!s->cfg.queue_depth) s->cfg.queue_depth = DEFAULT_QD;
  if (!s->cfg.request_bytes) s->cfg.request_bytes = DEFAULT_REQUEST;
  if (!s->cfg.retries) s->cfg.retries = DEFAULT_RETRIES;
  if (!s->cfg.wait_ms) s->cfg.wait_ms = DEFAULT_WAIT_MS;
  if (s->cfg.request_bytes % PAGE || s->cfg.request_bytes > ((uint64_t)1 << 30)) {
    mt_error("MT_NVME_REQUEST=%llu is not a multiple of 4 KiB up to 1 GiB; running without the NVMe tier",
             (unsigned long long)s->cfg.request_bytes);
    free(s);
    return -EINVAL;
  }
  s->req_pages = (uint32_t)(s->cfg.request_bytes / PAGE);
  s->cfg.dirs = NULL;  /* the caller's string: copied below, not kept */
  int rc = 0;
  if (cfg->simulate) {
    if ((rc = open_simulated(s)) < 0) goto fail;
    *out = s;
    return 0;
  }

  char *list = strdup(cfg->dirs);
  if (!list) {
    free(s);
    return -ENOMEM;
  }
  unsigned n = 1;
  for (const char *p = list; *p; p++) n += *p == ':';
  s->files = calloc(n, sizeof(file_t));
  if (!s->files) rc = -ENOMEM;
  char *save = NULL;
  for (char *d = strtok_r(list, ":", &save); d && rc == 0; d = strtok_r(NULL, ":", &save)) {
    file_t *f = &s->files[s->nfiles];
    f->fd = -1;
    rc = open_dir(f, d);
    if (rc < 0) break;
    f->dir = strdup(d);
    s->nfiles++;
    if (!f->dir) rc = -ENOMEM;
  }
  free(list);
  if (rc == 0 && s->nfiles == 0) rc = -EINVAL;
  if (rc < 0) goto fail;

  /* The cap, split evenly: a striped chunk uses every file alike. By
   * default each file gets an equal part of its file system's free space
   * less the margin (directories on one disk split it), and the smallest
   * part bounds them all. */
  uint64_t cap = cfg->max_bytes, free_sum = 0;
  if (cap == 0) {
    uint64_t part_min = UINT64_MAX;
    for (unsigned i = 0; i < s->nfiles; i++) {
      unsigned same = 0;
      bool first = true;
      for (unsigned j = 0; j < s->nfiles; j++) {
        same += s->files[j].dev == s->files[i].dev;
        if (j < i && s->files[j].dev == s->files[i].dev) first = false;
      }
      uint64_t fb = s->files[i].free_bytes;
      if (first) free_sum += fb;
      uint64_t margin = fb / 20 > MARGIN_MIN ? fb / 20 : MARGIN_MIN;
      uint64_t part = (fb > margin ? fb - margin : 0) / same;
      if (part < part_min) part_min = part;
    }
    cap = part_min * s->nfiles;
  }
  uint64_t share = cap / s->nfiles / s->cfg.request_bytes * s->cfg.request_bytes;
  if (share == 0) {
    mt_error("MT_OFFLOAD_DIR: no room for the NVMe tier (MT_MAX_NVME %llu bytes, %llu free in the "
             "directories, less 5%% or 1 GiB kept free); running without it", (unsigned long long)cap,
             (unsigned long long)free_sum);
    rc = -ENOSPC;
    goto fail;
  }
  for (unsigned i = 0; i < s->nfiles; i++) {
    file_t *f = &s->files[i];
    if (fallocate(f->fd, 0, 0, (off_t)share) != 0) {
      int e = errno;
      if (e == EOPNOTSUPP) {
        mt_warn("nvme: \"%s\" cannot reserve space (no fallocate): a full disk will show as ENOSPC on write", f->dir);
      } else {
        mt_error("MT_OFFLOAD_DIR: \"%s\" cannot reserve %llu bytes for MT_MAX_NVME (%s): lower MT_MAX_NVME "
                 "or free space; running without the NVMe tier", f->dir, (unsigned long long)share, strerror(e));
        rc = -e;
        goto fail;
      }
    }
    f->npages = share / PAGE;
    f->nfree = f->npages;
    f->bits = calloc((f->npages + 63) / 64, sizeof(uint64_t));
    if (!f->bits) {
      rc = -ENOMEM;
      goto fail;
    }
    s->free_total += f->npages;
  }
  s->st.pages_total = s->free_total;

  rc = io_uring_queue_init(s->cfg.queue_depth, &s->ring, 0);
  if (rc < 0) {
    mt_error("nvme: io_uring is not available (%s); running without the NVMe tier", strerror(-rc));
    goto fail;
  }
  s->ring_ok = true;
  unsigned qd = s->cfg.queue_depth;
  s->reqs = calloc(qd, sizeof(req_t));
  s->bounce_free = calloc(qd, sizeof(uint8_t *));
  s->hashq = calloc(qd, sizeof(req_t *));
  s->verq = calloc(qd, sizeof(req_t));
  s->orphans = calloc(qd, sizeof(_mt_nvme_op_t));
  if (!s->reqs || !s->bounce_free || !s->hashq || !s->verq || !s->orphans) {
    rc = -ENOMEM;
    goto fail;
  }
  for (unsigned i = 0; i < qd; i++) {
    s->reqs[i].next_free = s->free_reqs;
    s->free_reqs = &s->reqs[i];
  }
  int err = 0;
  s->bounce = map_on_node(qd * PAGE, cfg->numa_node, &err);
  if (!s->bounce) {
    rc = err;
    goto fail;
  }
  for (unsigned i = 0; i < qd; i++) s->bounce_free[s->nbounce_free++] = s->bounce + i * PAGE;
  if (!s->cfg.staging_bytes) s->cfg.staging_bytes = qd * s->cfg.request_bytes;
  mt_info("nvme: store of %llu bytes in %u director%s, queue depth %u, requests of %llu bytes",
          (unsigned long long)(s->free_total * PAGE), s->nfiles, s->nfiles == 1 ? "y" : "ies", qd,
          (unsigned long long)s->cfg.request_bytes);
  *out = s;
  return 0;
fail:
  _mt_nvme_close(s);
  return rc;
}

int _mt_nvme_close(_mt_nvme_t *s) {
  if (!s) return 0;
  int rc = 0;
  if (s->ring_ok && _mt_nvme_pending(s) > 0) {
    /* The buffers in flight are the callers'; the kernel must be done with
     * them before the ring goes. */
    uint64_t end = _mt_now_ns() + (uint64_t)s->cfg.wait_ms * 1000000u;
    while (_mt_nvme_pending(s) > 0 && rc == 0) {
      uint64_t t = _mt_now_ns();
      if (t >= end) {
        rc = -ETIMEDOUT;
        break;
      }
      int r = _mt_nvme_poll(s, 1, (uint32_t)((end - t) / 1000000u) + 1);
      if (r < 0) rc = r;
    }
  }
  while (s->chunks) {
    _mt_nvme_chunk_t *c = s->chunks;
    c->busy = NULL;
    _mt_nvme_chunk_free(s, c);
  }
  if (s->ring_ok) io_uring_queue_exit(&s->ring);
  for (size_t i = 0; i < s->nstg; i++) munmap(s->stg[i].p, s->stg[i].len);
  free(s->stg);
  if (s->bounce) munmap(s->bounce, s->cfg.queue_depth * PAGE);
  free(s->bounce_free);
  free(s->hashq);
  free(s->verq);
  free(s->orphans);
  free(s->reqs);
  for (unsigned i = 0; i < s->nfiles; i++) {
    if (s->files[i].fd >= 0) close(s->files[i].fd);
    free(s->files[i].dir);
    free(s->files[i].bits);
  }
  free(s->files);
  free(s);
  return rc;
}

/* ---- chunks ---------------------------------------------------------------- */

int _mt_nvme_chunk_alloc(_mt_nvme_t *s, uint64_t bytes, uint64_t region, uint64_t offset,
                         _mt_nvme_chunk_t **out) {
  *out = NULL;
  if (bytes == 0 || bytes / PAGE >= UINT32_MAX) return -EINVAL;
  uint64_t np = (bytes + PAGE - 1) / PAGE;
  if (np > s->free_total) {
    s->st.nospace_errors++;
    mt_error("nvme: MT_MAX_NVME is full: region 0x%llx offset %llu needs %llu bytes, %llu free; "
             "raise MT_MAX_NVME or add an offload directory", (unsigned long long)region,
             (unsigned long long)offset, (unsigned long long)(np * PAGE),
             (unsigned long long)(s->free_total * PAGE));
    return -ENOSPC;
  }
  _mt_nvme_chunk_t *c = calloc(1, sizeof(*c));
  if (!c) return -ENOMEM;
  /* a simulated store moves no bytes and so keeps no checksums */
  c->sum = s->cfg.simulate ? NULL : calloc(np, sizeof(uint64_t));
  c->cap = (uint32_t)((np + s->req_pages - 1) / s->req_pages + 1);
  c->ext = calloc(c->cap, sizeof(ext_t));
  if ((!c->sum && !s->cfg.simulate) || !c->ext) {
    free(c->sum);
    free(c->ext);
    free(c);
    return -ENOMEM;
  }
  c->bytes = bytes;
  c->npages = (uint32_t)np;
  c->region = region;
  c->offset = offset;
  for (uint64_t need = np; need > 0;) {
    unsigned k = 0;
    while (s->files[(s->stripe + k) % s->nfiles].nfree == 0) k++;
    unsigned fi = (s->stripe + k) % s->nfiles;
    s->stripe = fi + 1;
    if (c->next == c->cap) {
      ext_t *e = realloc(c->ext, 2 * c->cap * sizeof(ext_t));
      if (!e) {
        _mt_nvme_chunk_free(s, c);  /* c is not on the list yet: frees its runs only */
        return -ENOMEM;
      }
      c->ext = e;
      c->cap *= 2;
    }
    ext_t *e = &c->ext[c->next++];
    uint32_t want = need < s->req_pages ? (uint32_t)need : s->req_pages;
    e->file = fi;
    e->npages = take_run(&s->files[fi], want, &e->page);
    s->free_total -= e->npages;
    need -= e->npages;
  }
  c->next_c = s->chunks;
  if (s->chunks) s->chunks->prev_c = c;
  s->chunks = c;
  check_invariants(s);
  *out = c;
  return 0;
}

int _mt_nvme_chunk_free(_mt_nvme_t *s, _mt_nvme_chunk_t *c) {
  if (!c) return 0;
  if (c->busy && c->busy->orphan) { /* the drive still has its pages: freed when it answers */
    c->doomed = true;
    return 0;
  }
  if (c->busy) return -EBUSY;
  for (uint32_t i = 0; i < c->next; i++) {
    put_run(&s->files[c->ext[i].file], c->ext[i].page, c->ext[i].npages);
    s->free_total += c->ext[i].npages;
  }
  if (c->prev_c) c->prev_c->next_c = c->next_c;
  else if (s->chunks == c) s->chunks = c->next_c;
  if (c->next_c) c->next_c->prev_c = c->prev_c;
  free(c->ext);
  free(c->sum);
  free(c);
  check_invariants(s);
  return 0;
}

bool _mt_nvme_chunk_valid(const _mt_nvme_chunk_t *c) { return c->valid; }
void _mt_nvme_chunk_invalidate(_mt_nvme_chunk_t *c) { c->valid = false; }
uint64_t _mt_nvme_chunk_bytes(const _mt_nvme_chunk_t *c) { return c->bytes; }

bool _mt_nvme_chunk_run(const _mt_nvme_chunk_t *c, unsigned i, unsigned *file, uint64_t *page,
                        uint32_t *npages) {
  if (i >= c->next) return false;
  *file = c->ext[i].file;
  *page = c->ext[i].page;
  *npages = c->ext[i].npages;
  return true;
}

/* ---- requests -------------------------------------------------------------- */

static void prep(_mt_nvme_t *s, req_t *r) {
  struct io_uring_sqe *sqe = io_uring_get_sqe(&s->ring);
  mt_assert(sqe);  /* the ring has queue_depth entries and at most that many requests */
  uint32_t left = r->len - r->done;
  if (r->op->write) io_uring_prep_write(sqe, s->files[r->file].fd, r->buf + r->done, left, r->off + r->done);
  else io_uring_prep_read(sqe, s->files[r->file].fd, r->buf + r->done, left, r->off + r->done);
  io_uring_sqe_set_data(sqe, r);
  s->prepared++;
}

static void enqueue(_mt_nvme_t *s, _mt_nvme_op_t *op) {
  op->next = NULL;
  if (s->qtail) s->qtail->next = op;
  else s->qhead = op;
  s->qtail = op;
}

static void dequeue(_mt_nvme_t *s, _mt_nvme_op_t *op) {
  _mt_nvme_op_t **pp = &s->qhead, *prev = NULL;
  while (*pp && *pp != op) {
    prev = *pp;
    pp = &(*pp)->next;
  }
  if (!*pp) return;
  *pp = op->next;
  if (s->qtail == op) s->qtail = prev;
  op->next = NULL;
}

static bool op_issued_all(const _mt_nvme_op_t *op) {
  return op->result < 0 || op->page >= op->chunk->npages;
}

/* Issues op's next piece: up to one run, or the partial last page alone
 * through a bounce page. Returns false when it must wait for a bounce page. */
static bool issue_piece(_mt_nvme_t *s, _mt_nvme_op_t *op) {
  _mt_nvme_chunk_t *c = op->chunk;
  ext_t *e = &c->ext[op->ext];
  uint32_t n = e->npages - op->ext_page;
  uint32_t tail = (uint32_t)(c->bytes % PAGE);
  bool last = op->page + n == c->npages;
  uint8_t *bounce = NULL;
  if (last && tail) {
    if (n > 1) {
      n--;  /* whole pages first; the partial one is the next piece */
    } else {
      if (s->nbounce_free == 0) return false;
      bounce = s->bounce_free[--s->nbounce_free];
    }
  }
  req_t *r = s->free_reqs;
  s->free_reqs = r->next_free;
  uint8_t *data = op->buf + (uint64_t)op->page * PAGE;
  *r = (req_t){.op = op, .file = e->file, .off = (e->page + op->ext_page) * PAGE,
               .buf = bounce ? bounce : data, .len = (uint32_t)(n * PAGE), .page = op->page,
               .npages = n, .tail = bounce ? tail : 0, .t_ns = _mt_now_ns()};
  if (op->write) {
    if (bounce) {
      memcpy(bounce, data, tail);
      memset(bounce + tail, 0, PAGE - tail);  /* padding is zeros, never the caller's bytes */
    }
    s->hashq[s->nhash++] = r;
  }
  prep(s, r);
  s->inflight++;
  op->inflight++;
  op->page += n;
  op->ext_page += n;
  if (op->ext_page == e->npages) {
    op->ext++;
    op->ext_page = 0;
  }
  return true;
}

/* Moves queued pieces onto the ring while there is room, then submits. */
static void pump(_mt_nvme_t *s) {
  while (s->qhead && s->free_reqs) {
    _mt_nvme_op_t *op = s->qhead;
    if (!issue_piece(s, op)) break;
    if (op_issued_all(op)) dequeue(s, op);
  }
  if (s->prepared) {
    int rc = io_uring_submit(&s->ring);
    if (rc > 0) s->prepared -= (unsigned)rc > s->prepared ? s->prepared : (unsigned)rc;
  }
  /* The device reads the source while we do: both only read it, and the
   * caller keeps it unchanged until the op completes. Completions are only
   * handled in reap, after this. */
  for (unsigned k = 0; k < s->nhash; k++) {
    req_t *r = s->hashq[k];
    for (uint32_t i = 0; i < r->npages; i++)
      r->op->chunk->sum[r->page + i] = _mt_nvme_sum(r->buf + (uint64_t)i * PAGE, PAGE);
  }
  s->nhash = 0;
}

static void fail_op(_mt_nvme_t *s, _mt_nvme_op_t *op, int err) {
  if (op->result == 0) op->result = err;
  dequeue(s, op);  /* issue nothing more for it */
}

/* Finishes op if nothing of it is left; returns 1 if it finished. A
 * given-up op's stand-in goes back to the store, and takes its chunk's
 * pages with it when the chunk was freed meanwhile. */
static int maybe_finish(_mt_nvme_t *s, _mt_nvme_op_t *op) {
  if (op->inflight > 0 || !op_issued_all(op)) return 0;
  _mt_nvme_chunk_t *c = op->chunk;
  if (op->write) c->valid = op->result == 0;
  c->busy = NULL;
  op->busy = false;
  if (op->orphan) {
    mt_debug("nvme: a given-up %s of region 0x%llx offset %llu finished after all (%d)",
             op->write ? "write" : "read", (unsigned long long)c->region, (unsigned long long)c->offset,
             op->result);
    op->orphan = false;
    s->norphans--;
    if (c->doomed) (void)_mt_nvme_chunk_free(s, c);
    return 0;
  }
  if (op->done) op->done(op);
  return 1;
}

/* Verifies a read request's pages; clears any that fail. Returns 0 or -EBADMSG. */
static int verify(_mt_nvme_t *s, req_t *r) {
  _mt_nvme_op_t *op = r->op;
  _mt_nvme_chunk_t *c = op->chunk;
  int rc = 0;
  for (uint32_t i = 0; i < r->npages; i++) {
    uint8_t *p = r->buf + (uint64_t)i * PAGE;
    if (_mt_nvme_sum(p, PAGE) == c->sum[r->page + i]) continue;
    uint64_t at = (uint64_t)(r->page + i) * PAGE;
    mt_error("nvme: checksum mismatch in region 0x%llx at offset %llu (file %s, byte %llu): "
             "the page is not delivered", (unsigned long long)c->region,
             (unsigned long long)(c->offset + at), s->files[r->file].path,
             (unsigned long long)(r->off + (uint64_t)i * PAGE));
    s->st.checksum_errors++;
    if (!r->tail) memset(p, 0, PAGE);
    rc = -EBADMSG;
  }
  if (r->tail && rc == 0) memcpy(op->buf + (uint64_t)r->page * PAGE, r->buf, r->tail);
  return rc;
}

/* One completion. Returns the number of ops it finished (0 or 1). */
static int complete(_mt_nvme_t *s, req_t *r, int res) {
  _mt_nvme_op_t *op = r->op;
  uint32_t left = r->len - r->done;
#ifdef MT_FAULT_INJECT
  if (_mt_nvme_fault_take(MT_NVME_FAULT_STALL)) {
    prep(s, r);  /* not a retry: the request is simply still outstanding */
    return 0;
  }
  if (res == (int)left) {
    if (_mt_nvme_fault_take(MT_NVME_FAULT_EIO)) res = -EIO;
    else if (_mt_nvme_fault_take(MT_NVME_FAULT_SHORT)) res = (int)((left / 2) & ~(uint32_t)(PAGE - 1));
    else if (op->write && _mt_nvme_fault_take(MT_NVME_FAULT_NOSPC)) res = -ENOSPC;
    else if (!op->write && _mt_nvme_fault_take(MT_NVME_FAULT_FLIP))
      r->buf[r->done + (left / 2) + 3] ^= 0x10;
  }
#endif
  if (res >= 0 && (uint32_t)res < left) {
    /* Short: continue from the last whole page (O_DIRECT offsets stay aligned). */
    r->done = (r->done + (uint32_t)res) & ~(uint32_t)(PAGE - 1);
    res = -EIO;
    if (r->tries < s->cfg.retries) {
      r->tries++;
      s->st.retries++;
      prep(s, r);
      return 0;
    }
    mt_error("nvme: %s of %u bytes at byte %llu of %s still short after %u retries",
             op->write ? "write" : "read", r->len, (unsigned long long)r->off, s->files[r->file].path,
             s->cfg.retries);
    s->st.io_errors++;
    fail_op(s, op, -EIO);
  } else if (res < 0) {
    if ((res == -EIO || res == -EAGAIN || res == -EINTR) && r->tries < s->cfg.retries && op->result == 0) {
      r->tries++;
      s->st.retries++;
      prep(s, r);
      return 0;
    }
    if (res == -ENOSPC) {
      uint64_t more = (uint64_t)(r->len - r->done) + (uint64_t)(op->chunk->npages - op->page) * PAGE;
      mt_error("nvme: no space left in \"%s\": %llu more bytes were needed (region 0x%llx offset %llu "
               "stays where it was)", s->files[r->file].dir, (unsigned long long)more,
               (unsigned long long)op->chunk->region, (unsigned long long)op->chunk->offset);
      s->st.nospace_errors++;
    } else {
      mt_error("nvme: %s of %u bytes at byte %llu of %s failed after %u tries: %s",
               op->write ? "write" : "read", r->len, (unsigned long long)(r->off + r->done),
               s->files[r->file].path, r->tries + 1, strerror(-res));
      s->st.io_errors++;
    }
    fail_op(s, op, res);
  } else if (op->write) {
    s->st.bytes_written += r->tail ? r->tail : r->len;
  } else {
    /* Verified in reap once the slot's replacement is on the ring; the
     * copy keeps the bounce page and the op's count until then. */
    s->verq[s->nver++] = *r;
    r->op = NULL;
    r->next_free = s->free_reqs;
    s->free_reqs = r;
    s->inflight--;
    return 0;
  }
  if (r->tail) s->bounce_free[s->nbounce_free++] = r->buf;
  r->op = NULL;
  r->next_free = s->free_reqs;
  s->free_reqs = r;
  s->inflight--;
  op->inflight--;
  return maybe_finish(s, op);
}

static int start(_mt_nvme_t *s, _mt_nvme_chunk_t *c, uint8_t *buf, bool write, _mt_nvme_op_t *op) {
  if ((uintptr_t)buf % PAGE) return -EINVAL;
  if (c->busy && c->busy->orphan) {
    mt_error("nvme: region 0x%llx offset %llu: an earlier %s of it, given up past its wait bound, has not "
             "finished; the drive still holds its pages", (unsigned long long)c->region,
             (unsigned long long)c->offset, c->busy->write ? "write" : "read");
    return -EBUSY;
  }
  if (op->busy || c->busy) return -EBUSY;
  if (!write && !c->valid) return -ENODATA;
  if (write) c->valid = false;  /* until every page of the new copy is down */
  if (!s->ring_ok) { /* simulated: done at once, nothing touched */
    op->result = 0;
    op->chunk = c;
    op->write = write;
    if (write) {
      c->valid = true;
      s->st.bytes_written += c->bytes;
    } else {
      s->st.bytes_read += c->bytes;
    }
    if (op->done) op->done(op);
    return 0;
  }
  op->result = 0;
  op->busy = true;
  op->orphan = false; /* the caller's own, whatever its memory held */
  op->chunk = c;
  op->buf = buf;
  op->write = write;
  op->ext = op->ext_page = op->page = op->inflight = 0;
  c->busy = op;
  enqueue(s, op);
  pump(s);
  return 0;
}

int _mt_nvme_write(_mt_nvme_t *s, _mt_nvme_chunk_t *c, const void *src, _mt_nvme_op_t *op) {
  return start(s, c, (uint8_t *)(uintptr_t)src, true, op);
}

int _mt_nvme_read(_mt_nvme_t *s, _mt_nvme_chunk_t *c, void *dst, _mt_nvme_op_t *op) {
  return start(s, c, dst, false, op);
}

unsigned _mt_nvme_pending(const _mt_nvme_t *s) {
  unsigned n = s->inflight;
  for (const _mt_nvme_op_t *op = s->qhead; op; op = op->next) n++;
  return n;
}

/* The past-the-bound diagnostic: what is stuck, and since when. */
static void diagnose(const _mt_nvme_t *s, uint32_t waited_ms) {
  const req_t *old = NULL;
  for (unsigned i = 0; i < s->cfg.queue_depth; i++)
    if (s->reqs[i].op && (!old || s->reqs[i].t_ns < old->t_ns)) old = &s->reqs[i];
  if (!old) {
    mt_error("nvme: no completion after %u ms with nothing on the ring (%u ops queued)", waited_ms,
             _mt_nvme_pending(s));
    return;
  }
  mt_error("nvme: no completion after %u ms: %u requests in flight; the oldest, a %s of %u bytes at byte "
           "%llu of %s, was submitted %llu ms ago", waited_ms, s->inflight, old->op->write ? "write" : "read",
           old->len, (unsigned long long)old->off, s->files[old->file].path,
           (unsigned long long)((_mt_now_ns() - old->t_ns) / 1000000u));
}

static int reap(_mt_nvme_t *s) {
  int finished = 0;
  struct io_uring_cqe *cqe;
  while (io_uring_peek_cqe(&s->ring, &cqe) == 0) {
    req_t *r = io_uring_cqe_get_data(cqe);
    int res = cqe->res;
    io_uring_cqe_seen(&s->ring, cqe);
    finished += complete(s, r, res);
  }
  if (s->nver == 0) return finished;
  pump(s);
  for (unsigned k = 0; k < s->nver; k++) {
    req_t *r = &s->verq[k];
    _mt_nvme_op_t *op = r->op;
    int v = verify(s, r);
    if (v < 0) fail_op(s, op, v);
    else s->st.bytes_read += r->tail ? r->tail : r->len;
    if (r->tail) s->bounce_free[s->nbounce_free++] = r->buf;
    op->inflight--;
    finished += maybe_finish(s, op);
  }
  s->nver = 0;
  return finished;
}

int _mt_nvme_poll(_mt_nvme_t *s, unsigned min_ops, uint32_t timeout_ms) {
  if (!s->ring_ok) return 0; /* simulated: nothing is ever in flight */
  uint64_t t0 = _mt_now_ns(), end = t0 + (uint64_t)timeout_ms * 1000000u;
  int finished = 0;
  for (;;) {
    pump(s);
    finished += reap(s);
    pump(s);
    if ((unsigned)finished >= min_ops || s->inflight == 0) return finished;
    uint64_t t = _mt_now_ns();
    if (t >= end) {
      diagnose(s, (uint32_t)((t - t0) / 1000000u));
      return finished > 0 ? finished : -ETIMEDOUT;
    }
    uint64_t left = end - t;
    struct __kernel_timespec ts = {.tv_sec = (long long)(left / 1000000000u), .tv_nsec = (long long)(left % 1000000000u)};
    struct io_uring_cqe *cqe;
    int rc = io_uring_wait_cqe_timeout(&s->ring, &cqe, &ts);
    if (rc < 0 && rc != -ETIME && rc != -EINTR && rc != -EAGAIN) {
      mt_error("nvme: waiting on the ring failed: %s", strerror(-rc));
      return finished > 0 ? finished : rc;
    }
  }
}

int _mt_nvme_wait(_mt_nvme_t *s, _mt_nvme_op_t *op, uint32_t timeout_ms) {
  if (!timeout_ms) timeout_ms = s->cfg.wait_ms;
  uint64_t t0 = _mt_now_ns(), end = t0 + (uint64_t)timeout_ms * 1000000u;
  while (op->busy) {
    uint64_t t = _mt_now_ns();
    if (t >= end) {
      mt_error("nvme: %s of region 0x%llx offset %llu not finished after %u ms", op->write ? "write" : "read",
               (unsigned long long)op->chunk->region, (unsigned long long)op->chunk->offset, timeout_ms);
      diagnose(s, timeout_ms);
      _mt_nvme_abandon(s, op);
      return -ETIMEDOUT;
    }
    int rc = _mt_nvme_poll(s, 1, (uint32_t)((end - t + 999999u) / 1000000u));
    if (rc < 0 && rc != -ETIMEDOUT) return rc;
  }
  return op->result;
}

void _mt_nvme_abandon(_mt_nvme_t *s, _mt_nvme_op_t *op) {
  if (!op->busy) return;
  dequeue(s, op); /* no further piece */
  if (op->result == 0) op->result = -ETIMEDOUT;
  if (op->inflight > 0) {
    /* requests on the ring: a stand-in the store owns answers for them */
    _mt_nvme_op_t *o = NULL;
    for (unsigned i = 0; i < s->cfg.queue_depth && !o; i++)
      if (!s->orphans[i].orphan) o = &s->orphans[i];
    mt_assert(o != NULL); /* each stand-in has a request on the ring */
    *o = *op;
    o->orphan = true;
    o->done = NULL;
    o->arg = NULL;
    o->next = NULL;
    s->norphans++;
    for (unsigned i = 0; i < s->cfg.queue_depth; i++)
      if (s->reqs[i].op == op) s->reqs[i].op = o;
    for (unsigned i = 0; i < s->nver; i++)
      if (s->verq[i].op == op) s->verq[i].op = o;
    op->chunk->busy = o;
    op->inflight = 0;
    op->busy = false;
    if (op->write) op->chunk->valid = false;
    return;
  }
  /* nothing of it reached the ring: over now */
  (void)maybe_finish(s, op);
}

/* ---- staging --------------------------------------------------------------- */

int _mt_nvme_staging_alloc(_mt_nvme_t *s, size_t bytes, void **out) {
  *out = NULL;
  size_t len = (bytes + PAGE - 1) / PAGE * PAGE;
  if (len == 0) return -EINVAL;
  if (s->stg_used + len > s->cfg.staging_bytes) {
    mt_warn("nvme: staging buffers would exceed their bound of %llu bytes (%llu in use, %zu asked)",
            (unsigned long long)s->cfg.staging_bytes, (unsigned long long)s->stg_used, len);
    return -ENOMEM;
  }
  if (s->nstg == s->stg_cap) {
    size_t cap = s->stg_cap ? 2 * s->stg_cap : 16;
    staging_t *n = realloc(s->stg, cap * sizeof(*n));
    if (!n) return -ENOMEM;
    s->stg = n;
    s->stg_cap = cap;
  }
  int err = 0;
  void *p = map_on_node(len, s->cfg.numa_node, &err);
  if (!p) return err;
  s->stg[s->nstg++] = (staging_t){p, len};
  s->stg_used += len;
  *out = p;
  return 0;
}

void _mt_nvme_staging_free(_mt_nvme_t *s, void *buf) {
  for (size_t i = 0; i < s->nstg; i++) {
    if (s->stg[i].p != buf) continue;
    munmap(buf, s->stg[i].len);
    s->stg_used -= s->stg[i].len;
    s->stg[i] = s->stg[--s->nstg];
    return;
  }
  mt_assert(!"staging buffer not from this store");
}

uint64_t _mt_nvme_staging_bytes(const _mt_nvme_t *s) {
  return s->stg_used + (uint64_t)s->cfg.queue_depth * PAGE;
}

void _mt_nvme_get_stats(const _mt_nvme_t *s, _mt_nvme_stats_t *st) {
  *st = s->st;
  st->pages_free = s->free_total;
}

unsigned _mt_nvme_nfiles(const _mt_nvme_t *s) { return s->nfiles; }
int _mt_nvme_fd(const _mt_nvme_t *s, unsigned i) { return i < s->nfiles ? s->files[i].fd : -1; }
const char *_mt_nvme_dir(const _mt_nvme_t *s, unsigned i) { return i < s->nfiles ? s->files[i].dir : NULL; }
