/*
 * nvme_bench - the NVMe store against fio on the same file system, in the
 * same run (issue 8). Run by hand; it is not a test.
 *
 *   build/tools/bench/nvme_bench --dir DIR [--size 4G] [--qd N] [--request B]
 *                                [--reps N] [--no-fio] [--json FILE]
 *
 * Four phases, each first through fio, then through the store, so a noisy
 * neighbour hurts both alike: sequential write, sequential read, random-order
 * write, random-order read, of 1 MiB units over a working set of --size
 * bytes (default 4 GiB). fio runs exactly
 *   --ioengine=io_uring --direct=1 --bs=1M --iodepth=32 --numjobs=1 --size=4G
 * (--size follows --size) with --rw=write|read|randwrite|randread on a file
 * preallocated with fallocate. The store moves 1 MiB chunks from 4 KiB-
 * aligned staging buffers with --qd requests of --request bytes in flight,
 * checksumming every page both ways. After each store phase the benchmark
 * checks that none of the store's file is in the page cache (mincore on a
 * mapping of it) and reports /proc/meminfo's Cached growth. --reps N runs
 * each fio/store pair N times, back to back, and reports medians (a shared
 * disk is noisy: single runs swing by tens of percent). Prints a table
 * in GB/s (10^9 bytes/s) with store/fio ratios, and the same as one JSON
 * object (stdout's last line, and --json FILE).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "nvme_store.h"

#define UNIT ((uint64_t)1 << 20)

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + ts.tv_nsec * 1e-9;
}

static long long meminfo_cached_kb(void) {
  FILE *f = fopen("/proc/meminfo", "r");
  if (!f) return -1;
  char line[256];
  long long v = -1;
  while (fgets(line, sizeof(line), f))
    if (sscanf(line, "Cached: %lld kB", &v) == 1) break;
  fclose(f);
  return v;
}

/* Pages of fd's first len bytes in the page cache, or -errno. */
static long long cached_pages(int fd, uint64_t len) {
  void *p = mmap(NULL, len, PROT_READ, MAP_SHARED, fd, 0);
  if (p == MAP_FAILED) return -errno;
  size_t n = (len + 4095) / 4096;
  unsigned char *vec = malloc(n);
  long long c = 0;
  if (!vec || mincore(p, len, vec) != 0) c = -errno;
  else
    for (size_t i = 0; i < n; i++) c += vec[i] & 1;
  free(vec);
  munmap(p, len);
  return c;
}

/* Runs one fio job; returns its bandwidth in bytes/s, or -1. */
static double run_fio(const char *file, const char *rw, const char *size) {
  char cmd[8192];
  snprintf(cmd, sizeof(cmd),
           "fio --name=mtbench --filename='%s' --ioengine=io_uring --direct=1 --bs=1M --iodepth=32 "
           "--numjobs=1 --size=%s --rw=%s --output-format=json 2>&1", file, size, rw);
  FILE *p = popen(cmd, "r");
  if (!p) return -1;
  static char out[1 << 20];
  size_t n = fread(out, 1, sizeof(out) - 1, p);
  out[n] = '\0';
  int st = pclose(p);
  if (st != 0) {
    fprintf(stderr, "nvme_bench: fio failed (%d):\n%s\n", st, out);
    return -1;
  }
  const char *dir = strncmp(rw, "rand", 4) == 0 ? rw + 4 : rw;
  char key[32];
  snprintf(key, sizeof(key), "\"%s\" : {", dir);
  const char *k = strstr(out, key);
  const char *b = k ? strstr(k, "\"bw_bytes\" : ") : NULL;
  if (!b) {
    fprintf(stderr, "nvme_bench: no %s bandwidth in fio's output\n", dir);
    return -1;
  }
  return strtod(b + 13, NULL);
}

static int cmp_double(const void *a, const void *b) {
  double x = *(const double *)a, y = *(const double *)b;
  return (x > y) - (x < y);
}

static double median(double *v, int n) {
  qsort(v, (size_t)n, sizeof(double), cmp_double);
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

typedef struct slot {
  _mt_nvme_op_t op;
  void *buf;
  int *free_stack;
  int *nfree;
  int idx;
  int err;
} slot_t;

static void on_done(_mt_nvme_op_t *op) {
  slot_t *sl = op->arg;
  if (op->result < 0 && !sl->err) sl->err = op->result;
  sl->free_stack[(*sl->nfree)++] = sl->idx;
}

/* One pass over the chunks in order[]; returns bytes/s or -1. */
static double run_store(_mt_nvme_t *s, _mt_nvme_chunk_t **c, const uint32_t *order, uint32_t n,
                        bool write, slot_t *sl, int nslots, int *free_stack, int *nfree) {
  double t0 = now_s();
  uint32_t next = 0, done = 0;
  int err = 0;
  while (done < n && !err) {
    while (next < n && *nfree > 0) {
      slot_t *x = &sl[free_stack[--*nfree]];
      int rc = write ? _mt_nvme_write(s, c[order[next]], x->buf, &x->op)
                     : _mt_nvme_read(s, c[order[next]], x->buf, &x->op);
      if (rc < 0) {
        fprintf(stderr, "nvme_bench: submit: %s\n", strerror(-rc));
        return -1;
      }
      next++;
    }
    int before = *nfree;
    int rc = _mt_nvme_poll(s, 1, 10000);
    if (rc < 0) {
      fprintf(stderr, "nvme_bench: poll: %s\n", strerror(-rc));
      return -1;
    }
    done += (uint32_t)(*nfree - before);
    for (int i = 0; i < nslots; i++)
      if (sl[i].err) err = sl[i].err;
  }
  if (err) {
    fprintf(stderr, "nvme_bench: I/O error: %s\n", strerror(-err));
    return -1;
  }
  return (double)n * UNIT / (now_s() - t0);
}

int main(int argc, char **argv) {
  const char *dir = NULL, *json_path = NULL;
  uint64_t size = (uint64_t)4 << 30, req = 0;
  unsigned qd = 0;
  bool fio = true;
  int reps = 1;
  for (int i = 1; i < argc; i++) {
    if (!strcmp(argv[i], "--dir") && i + 1 < argc) dir = argv[++i];
    else if (!strcmp(argv[i], "--size") && i + 1 < argc) _mt_parse_size(argv[++i], &size);
    else if (!strcmp(argv[i], "--request") && i + 1 < argc) _mt_parse_size(argv[++i], &req);
    else if (!strcmp(argv[i], "--qd") && i + 1 < argc) qd = (unsigned)atoi(argv[++i]);
    else if (!strcmp(argv[i], "--no-fio")) fio = false;
    else if (!strcmp(argv[i], "--reps") && i + 1 < argc) reps = atoi(argv[++i]);
    else if (!strcmp(argv[i], "--json") && i + 1 < argc) json_path = argv[++i];
    else {
      fprintf(stderr, "usage: %s --dir DIR [--size 4G] [--qd N] [--request BYTES] [--reps N] [--no-fio] [--json FILE]\n",
              argv[0]);
      return 2;
    }
  }
  if (reps < 1 || reps > 99) reps = 1;
  if (!dir || size < UNIT) {
    fprintf(stderr, "nvme_bench: --dir is required, --size at least 1M\n");
    return 2;
  }
  size = size / UNIT * UNIT;
  uint32_t n = (uint32_t)(size / UNIT);
  char size_arg[32];
  snprintf(size_arg, sizeof(size_arg), "%lluM", (unsigned long long)(size / UNIT));

  _mt_log_configure(MT_LOG_INFO, -1);
  _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = size + 64 * UNIT, .queue_depth = qd, .request_bytes = req,
                        .numa_node = -1};
  unsigned qd_eff = qd ? qd : 32;
  uint64_t req_eff = req ? req : UNIT;
  /* Enough 1 MiB ops in flight to fill the queue. */
  int nslots = (int)((qd_eff * req_eff + UNIT - 1) / UNIT);
  if (nslots < 1) nslots = 1;
  cfg.staging_bytes = (uint64_t)nslots * UNIT;
  _mt_nvme_t *s;
  int rc = _mt_nvme_open(&cfg, &s);
  if (rc < 0) return 1;
  _mt_nvme_chunk_t **c = calloc(n, sizeof(*c));
  uint32_t *seq = malloc(n * sizeof(uint32_t)), *rnd = malloc(n * sizeof(uint32_t));
  slot_t *sl = calloc((size_t)nslots, sizeof(slot_t));
  int *free_stack = calloc((size_t)nslots, sizeof(int)), nfree = 0;
  for (uint32_t i = 0; i < n; i++) {
    if (_mt_nvme_chunk_alloc(s, UNIT, 0, (uint64_t)i * UNIT, &c[i]) < 0) return 1;
    seq[i] = rnd[i] = i;
  }
  uint64_t x = 0x9e3779b97f4a7c15ull;
  for (uint32_t i = n - 1; i > 0; i--) {
    x ^= x << 13, x ^= x >> 7, x ^= x << 17;
    uint32_t j = (uint32_t)(x % (i + 1));
    uint32_t t = rnd[i];
    rnd[i] = rnd[j];
    rnd[j] = t;
  }
  for (int i = 0; i < nslots; i++) {
    if (_mt_nvme_staging_alloc(s, UNIT, &sl[i].buf) < 0) return 1;
    for (uint64_t k = 0; k < UNIT; k++) ((uint8_t *)sl[i].buf)[k] = (uint8_t)(k * 31 + (uint64_t)i);
    sl[i].op.done = on_done;
    sl[i].op.arg = &sl[i];
    sl[i].free_stack = free_stack;
    sl[i].nfree = &nfree;
    sl[i].idx = i;
    free_stack[nfree++] = i;
  }

  char fio_file[4200] = "";
  if (fio) {
    snprintf(fio_file, sizeof(fio_file), "%s/mtalloc-bench-fio.XXXXXX", dir);
    int fd = mkstemp(fio_file);
    if (fd < 0 || fallocate(fd, 0, 0, (off_t)size) != 0) {
      fprintf(stderr, "nvme_bench: cannot preallocate %s: %s\n", fio_file, strerror(errno));
      return 1;
    }
    close(fd);
  }

  static const struct { const char *rw; bool write, random; } ph[4] = {
    {"write", true, false}, {"read", false, false}, {"randwrite", true, true}, {"randread", false, true}};
  double st_bw[4], fio_bw[4];
  long long cache_pages = 0, cached_growth_kb = 0;
  printf("working set %llu MiB, store: queue depth %u, requests %llu KiB, %d ops of 1 MiB in flight; "
         "median of %d run%s\n", (unsigned long long)(size / UNIT), qd_eff, (unsigned long long)(req_eff >> 10),
         nslots, reps, reps > 1 ? "s" : "");
  printf("%-10s %10s %10s %7s\n", "phase", "fio GB/s", "store GB/s", "ratio");
  for (int p = 0; p < 4; p++) {
    double fr[99], sr[99];
    for (int k = 0; k < reps; k++) {
      fr[k] = fio ? run_fio(fio_file, ph[p].rw, size_arg) : 0;
      long long before = meminfo_cached_kb();
      sr[k] = run_store(s, c, ph[p].random ? rnd : seq, n, ph[p].write, sl, nslots, free_stack, &nfree);
      long long growth = meminfo_cached_kb() - before;
      if (growth > cached_growth_kb) cached_growth_kb = growth;
      for (unsigned f = 0; f < _mt_nvme_nfiles(s); f++) {
        long long cp = cached_pages(_mt_nvme_fd(s, f), size);
        if (cp < 0) fprintf(stderr, "nvme_bench: mincore: %s\n", strerror((int)-cp));
        else cache_pages += cp;
      }
      if (sr[k] < 0) return 1;
      if (reps > 1) fprintf(stderr, "  %s run %d: fio %.3f store %.3f GB/s\n", ph[p].rw, k + 1, fr[k] / 1e9, sr[k] / 1e9);
    }
    fio_bw[p] = median(fr, reps);
    st_bw[p] = median(sr, reps);
    printf("%-10s %10.3f %10.3f %7.3f\n", ph[p].rw, fio_bw[p] / 1e9, st_bw[p] / 1e9,
           fio_bw[p] > 0 ? st_bw[p] / fio_bw[p] : 0.0);
  }
  _mt_nvme_stats_t stats;
  _mt_nvme_get_stats(s, &stats);
  printf("page cache: %lld pages of the store's file resident (must be 0); Cached grew by at most %lld KiB "
         "during a store phase (other processes count too)\n", cache_pages, cached_growth_kb);
  printf("checksum errors %llu, I/O errors %llu, retries %llu\n", (unsigned long long)stats.checksum_errors,
         (unsigned long long)stats.io_errors, (unsigned long long)stats.retries);
  char json[2048];
  int len = snprintf(json, sizeof(json),
                     "{\"working_set_bytes\":%llu,\"reps\":%d,\"queue_depth\":%u,\"request_bytes\":%llu,"
                     "\"store_page_cache_pages\":%lld,\"cached_growth_kib\":%lld",
                     (unsigned long long)size, reps, qd_eff, (unsigned long long)req_eff, cache_pages, cached_growth_kb);
  for (int p = 0; p < 4; p++)
    len += snprintf(json + len, sizeof(json) - (size_t)len,
                    ",\"%s\":{\"fio_gbps\":%.4f,\"store_gbps\":%.4f,\"ratio\":%.4f}", ph[p].rw, fio_bw[p] / 1e9,
                    st_bw[p] / 1e9, fio_bw[p] > 0 ? st_bw[p] / fio_bw[p] : 0.0);
  snprintf(json + len, sizeof(json) - (size_t)len, "}");
  printf("%s\n", json);
  if (json_path) {
    FILE *f = fopen(json_path, "w");
    if (f) {
      fprintf(f, "%s\n", json);
      fclose(f);
    }
  }
  if (fio_file[0]) unlink(fio_file);
  _mt_nvme_close(s);
  return cache_pages == 0 ? 0 : 3;
}
