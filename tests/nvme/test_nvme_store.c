/*
 * Description: the NVMe store (libmtalloc/nvme_store.c): page allocator,
 * striping, checksum path, every injected fault (EIO, short transfers,
 * ENOSPC, bit flips, a device that does not answer), bad offload
 * directories, and cleanup (nothing left in the directory, also after
 * SIGKILL).
 *
 * nvme_store.c is compiled into this program with -DMT_FAULT_INJECT (see
 * meson.build); the library is never built with it. The store needs
 * O_DIRECT, which tmpfs lacks, so the files go under MT_NVME_TEST_DIR (the
 * build directory, set by meson); every test is skipped with a message if
 * that file system refuses O_DIRECT. Working sets are a few MiB: the suite
 * runs under ASan and TSan on two cores.
 */
#include <criterion/criterion.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <sys/wait.h>
#include <unistd.h>

#include "internal.h"
#include "nvme_store.h"

#define PG MT_NVME_PAGE
#define MiB ((uint64_t)1 << 20)

static char dir[4096];     /* this test's own directory, empty at start */
static char dir2[4096];    /* a second one, for striping */
static int logfd = -1;

/* Each test gets fresh directories and a log captured in a memfd. */
static void setup(void) {
  const char *base = getenv("MT_NVME_TEST_DIR");
  if (!base) base = ".";
  snprintf(dir, sizeof(dir), "%s/nvme-test.XXXXXX", base);
  cr_assert_not_null(mkdtemp(dir), "mkdtemp in %s: %s", base, strerror(errno));
  snprintf(dir2, sizeof(dir2), "%s/nvme-test2.XXXXXX", base);
  cr_assert_not_null(mkdtemp(dir2));
  char probe[4200];
  snprintf(probe, sizeof(probe), "%s/probe", dir);
  int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
  int e = errno;
  if (fd >= 0) close(fd);
  unlink(probe);
  if (fd < 0) {
    rmdir(dir);
    rmdir(dir2);
    cr_skip_test("%s does not support O_DIRECT (%s): set MT_NVME_TEST_DIR to a directory on a disk "
                 "file system", base, strerror(e));
  }
  logfd = memfd_create("nvme-log", 0);
  _mt_log_configure(MT_LOG_INFO, logfd);
  _mt_nvme_fault_reset();
}

static int entries(const char *d) {
  DIR *dp = opendir(d);
  if (!dp) return -1;
  int n = 0;
  for (struct dirent *de; (de = readdir(dp));)
    if (strcmp(de->d_name, ".") && strcmp(de->d_name, "..")) n++;
  closedir(dp);
  return n;
}

static void teardown(void) {
  _mt_log_configure(MT_LOG_WARN, -1);
  if (logfd >= 0) close(logfd);
  logfd = -1;
  _mt_nvme_fault_reset();
  /* Nothing of the store is ever left behind. */
  cr_expect_eq(entries(dir), 0, "%s is not empty after the test", dir);
  rmdir(dir);
  rmdir(dir2);
}

/* What was logged since the last call (and forget it). */
static const char *log_text(void) {
  static char buf[16384];
  ssize_t n = pread(logfd, buf, sizeof(buf) - 1, 0);
  buf[n > 0 ? n : 0] = '\0';
  /* The log writes at the fd's offset: rewind it with the truncation. */
  if (ftruncate(logfd, 0) != 0 || lseek(logfd, 0, SEEK_SET) != 0) buf[0] = '\0';
  return buf;
}

static _mt_nvme_t *open_store(const char *dirs, uint64_t max, uint64_t req) {
  _mt_nvme_cfg_t cfg = {.dirs = dirs, .max_bytes = max, .queue_depth = 8, .request_bytes = req,
                        .numa_node = -1, .wait_ms = 5000};
  _mt_nvme_t *s = NULL;
  int rc = _mt_nvme_open(&cfg, &s);
  cr_assert_eq(rc, 0, "open %s: %s\n%s", dirs, strerror(-rc), log_text());
  return s;
}

static void fill(uint8_t *p, size_t n, unsigned seed) {
  for (size_t i = 0; i < n; i++) p[i] = (uint8_t)(i * 131 + seed * 7 + (i >> 12));
}

static void *aligned(size_t n) {
  void *p = NULL;
  cr_assert_eq(posix_memalign(&p, PG, (n + PG - 1) / PG * PG + PG), 0);
  return p;
}

static int write_sync(_mt_nvme_t *s, _mt_nvme_chunk_t *c, const void *src) {
  _mt_nvme_op_t op = {0};
  int rc = _mt_nvme_write(s, c, src, &op);
  return rc < 0 ? rc : _mt_nvme_wait(s, &op, 0);
}

static int read_sync(_mt_nvme_t *s, _mt_nvme_chunk_t *c, void *dst) {
  _mt_nvme_op_t op = {0};
  int rc = _mt_nvme_read(s, c, dst, &op);
  return rc < 0 ? rc : _mt_nvme_wait(s, &op, 0);
}

/* Polls until the drive has nothing in flight (bounded: 2 s). */
static void drain(_mt_nvme_t *s) {
  for (int t = 0; t < 2000 && _mt_nvme_pending(s) > 0; t++) {
    (void)_mt_nvme_poll(s, 0, 0);
    usleep(1000);
  }
  cr_assert_eq(_mt_nvme_pending(s), 0, "the drive answered");
}

TestSuite(nvme, .init = setup, .fini = teardown, .timeout = 60);

/* ---- page allocator ----------------------------------------------------- */

Test(nvme, allocator_pages_unique_and_returned) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.pages_total, 1024);
  cr_assert_eq(st.pages_free, 1024);
  /* Fill the store with chunks of odd sizes; every page is owned once. */
  _mt_nvme_chunk_t *c[64];
  static uint8_t seen[1024];
  memset(seen, 0, sizeof(seen));
  int n = 0;
  uint64_t pages = 0;
  for (; n < 64; n++) {
    uint64_t bytes = (uint64_t)(n % 7 + 1) * 9000;  /* 3..17 pages, partial last page */
    if (_mt_nvme_chunk_alloc(s, bytes, 0x1000, (uint64_t)n * MiB, &c[n]) < 0) break;
    pages += (bytes + PG - 1) / PG;
  }
  cr_assert_gt(n, 20);
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.pages_free, 1024 - pages);
  for (int i = 0; i < n; i++) {
    unsigned f;
    uint64_t p;
    uint32_t np, got = 0;
    for (unsigned r = 0; _mt_nvme_chunk_run(c[i], r, &f, &p, &np); r++) {
      cr_assert_eq(f, 0);
      cr_assert_leq(np, 16, "a run is at most one request");
      for (uint32_t k = 0; k < np; k++) {
        cr_assert_eq(seen[p + k], 0, "page %llu owned twice", (unsigned long long)(p + k));
        seen[p + k] = 1;
      }
      got += np;
    }
    cr_assert_eq(got, (_mt_nvme_chunk_bytes(c[i]) + PG - 1) / PG);
  }
  for (int i = 0; i < n; i++) cr_assert_eq(_mt_nvme_chunk_free(s, c[i]), 0);
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.pages_free, 1024);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

Test(nvme, allocator_fragmented_pages_need_not_be_contiguous) {
  _mt_nvme_t *s = open_store(dir, 1 * MiB, 64 * 1024);  /* 256 pages */
  _mt_nvme_chunk_t *c[256];
  for (int i = 0; i < 256; i++) cr_assert_eq(_mt_nvme_chunk_alloc(s, PG, 0, (uint64_t)i * PG, &c[i]), 0);
  _mt_nvme_chunk_t *full;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, PG, 0xbeef, 42, &full), -ENOSPC);
  const char *log = log_text();
  cr_assert(strstr(log, "MT_MAX_NVME is full: region 0xbeef offset 42 needs 4096 bytes, 0 free"), "%s", log);
  /* Free every other page: 128 free pages, no two adjacent. */
  for (int i = 0; i < 256; i += 2) _mt_nvme_chunk_free(s, c[i]);
  _mt_nvme_chunk_t *big;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, 128 * PG - 100, 0, 0, &big), 0);
  unsigned runs = 0, f;
  uint64_t p;
  uint32_t np;
  while (_mt_nvme_chunk_run(big, runs, &f, &p, &np)) {
    cr_assert_eq(np, 1);
    runs++;
  }
  cr_assert_eq(runs, 128);
  /* And it round-trips through its scattered pages. */
  uint8_t *src = aligned(128 * PG), *dst = aligned(128 * PG);
  fill(src, 128 * PG - 100, 3);
  cr_assert_eq(write_sync(s, big, src), 0);
  cr_assert_eq(read_sync(s, big, dst), 0);
  cr_assert_eq(memcmp(src, dst, 128 * PG - 100), 0);
  free(src);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);  /* frees the chunks still allocated */
}

/* ---- striping ------------------------------------------------------------ */

Test(nvme, striping_alternates_directories) {
  char dirs[8300];
  snprintf(dirs, sizeof(dirs), "%s:%s", dir, dir2);
  _mt_nvme_t *s = open_store(dirs, 8 * MiB, 256 * 1024);
  cr_assert_eq(_mt_nvme_nfiles(s), 2);
  cr_assert_str_eq(_mt_nvme_dir(s, 1), dir2);
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.pages_total, 2048, "the cap is split across the directories");
  _mt_nvme_chunk_t *c;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, 2 * MiB, 0, 0, &c), 0);
  unsigned f, prev = 99, n = 0;
  uint64_t p;
  uint32_t np;
  while (_mt_nvme_chunk_run(c, n, &f, &p, &np)) {
    cr_assert_eq(np, 64, "one request per run");
    cr_assert_neq(f, prev, "consecutive runs go to the next directory");
    prev = f;
    n++;
  }
  cr_assert_eq(n, 8);
  uint8_t *src = aligned(2 * MiB), *dst = aligned(2 * MiB);
  fill(src, 2 * MiB, 9);
  cr_assert_eq(write_sync(s, c, src), 0);
  cr_assert_eq(read_sync(s, c, dst), 0);
  cr_assert_eq(memcmp(src, dst, 2 * MiB), 0);
  free(src);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
  cr_assert_eq(entries(dir2), 0);
}

/* ---- data path and checksums --------------------------------------------- */

Test(nvme, roundtrip_tail_padding_never_leaks) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  const uint64_t bytes = 5 * PG + 123;
  _mt_nvme_chunk_t *c;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, bytes, 0x7000, 0, &c), 0);
  uint8_t *src = aligned(6 * PG), *dst = aligned(6 * PG);
  memset(src, 0xEE, 6 * PG);  /* the bytes after the data must not reach the disk */
  fill(src, bytes, 1);
  cr_assert(!_mt_nvme_chunk_valid(c));
  uint8_t dummy[PG] __attribute__((aligned(4096)));
  cr_assert_eq(_mt_nvme_read(s, c, dummy, &(_mt_nvme_op_t){0}), -ENODATA, "no copy yet");
  cr_assert_eq(write_sync(s, c, src), 0);
  cr_assert(_mt_nvme_chunk_valid(c));
  memset(dst, 0x55, 6 * PG);  /* nor may reads write past the data */
  cr_assert_eq(read_sync(s, c, dst), 0);
  cr_assert_eq(memcmp(src, dst, bytes), 0);
  for (uint64_t i = bytes; i < 6 * PG; i++) cr_assert_eq(dst[i], 0x55, "read wrote byte %llu", (unsigned long long)i);
  /* On disk the last page is data then zeros. */
  unsigned f;
  uint64_t p;
  uint32_t np;
  cr_assert(_mt_nvme_chunk_run(c, 0, &f, &p, &np));
  cr_assert_eq(np, 6);
  uint8_t *raw = aligned(PG);
  cr_assert_eq(pread(_mt_nvme_fd(s, f), raw, PG, (off_t)((p + 5) * PG)), (ssize_t)PG);
  cr_assert_eq(memcmp(raw, src + 5 * PG, 123), 0);
  for (unsigned i = 123; i < PG; i++) cr_assert_eq(raw[i], 0, "padding byte %u is not zero", i);
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.bytes_written, bytes);
  cr_assert_eq(st.bytes_read, bytes);
  _mt_nvme_chunk_invalidate(c);
  cr_assert(!_mt_nvme_chunk_valid(c));
  free(raw);
  free(src);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

Test(nvme, reads_and_writes_in_flight_together) {
  _mt_nvme_t *s = open_store(dir, 16 * MiB, 64 * 1024);
  enum { N = 8 };
  _mt_nvme_chunk_t *c[2 * N];
  uint8_t *buf[2 * N];
  _mt_nvme_op_t op[2 * N];
  memset(op, 0, sizeof(op));
  for (int i = 0; i < 2 * N; i++) {
    cr_assert_eq(_mt_nvme_chunk_alloc(s, 512 * 1024 + 7, 0, (uint64_t)i, &c[i]), 0);
    buf[i] = aligned(512 * 1024 + 7);
    fill(buf[i], 512 * 1024 + 7, (unsigned)i);
  }
  for (int i = 0; i < N; i++) cr_assert_eq(write_sync(s, c[i], buf[i]), 0);
  /* N reads of the written chunks and N writes of new ones, all queued at once. */
  uint8_t *rd[N];
  for (int i = 0; i < N; i++) {
    rd[i] = aligned(512 * 1024 + 7);
    cr_assert_eq(_mt_nvme_read(s, c[i], rd[i], &op[i]), 0);
    cr_assert_eq(_mt_nvme_write(s, c[N + i], buf[N + i], &op[N + i]), 0);
  }
  cr_assert_eq(_mt_nvme_write(s, c[0], buf[0], &(_mt_nvme_op_t){0}), -EBUSY, "one op per chunk");
  cr_assert_eq(_mt_nvme_chunk_free(s, c[0]), -EBUSY);
  cr_assert_gt(_mt_nvme_pending(s), 1);
  for (int i = 0; i < 2 * N; i++) cr_assert_eq(_mt_nvme_wait(s, &op[i], 0), 0);
  cr_assert_eq(_mt_nvme_pending(s), 0);
  for (int i = 0; i < N; i++) {
    cr_assert_eq(memcmp(rd[i], buf[i], 512 * 1024 + 7), 0);
    cr_assert_eq(read_sync(s, c[N + i], rd[i]), 0);
    cr_assert_eq(memcmp(rd[i], buf[N + i], 512 * 1024 + 7), 0);
    free(rd[i]);
  }
  for (int i = 0; i < 2 * N; i++) free(buf[i]);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

static int done_calls;
static void on_done(_mt_nvme_op_t *op) {
  cr_assert(!op->busy);
  done_calls += op->result == 0;
}

Test(nvme, poll_runs_callbacks) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, MiB, 0, 0, &c), 0);
  uint8_t *src = aligned(MiB);
  fill(src, MiB, 5);
  done_calls = 0;
  _mt_nvme_op_t op = {.done = on_done};
  cr_assert_eq(_mt_nvme_write(s, c, src, &op), 0);
  while (op.busy) cr_assert_geq(_mt_nvme_poll(s, 1, 5000), 0);
  cr_assert_eq(done_calls, 1);
  cr_assert_eq(_mt_nvme_poll(s, 1, 5000), 0, "nothing pending: returns at once");
  free(src);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

/* ---- faults -------------------------------------------------------------- */

Test(nvme, fault_flip_detected_and_never_delivered) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  const uint64_t bytes = 64 * 1024;  /* one request */
  cr_assert_eq(_mt_nvme_chunk_alloc(s, bytes, 0xabc000, 2 * MiB, &c), 0);
  uint8_t *src = aligned(bytes), *dst = aligned(bytes);
  fill(src, bytes, 7);
  cr_assert_eq(write_sync(s, c, src), 0);
  _mt_nvme_fault_arm(MT_NVME_FAULT_FLIP, 0, 1);
  memset(dst, 0, bytes);
  cr_assert_eq(read_sync(s, c, dst), -EBADMSG);
  cr_assert_eq(_mt_nvme_fault_injected(MT_NVME_FAULT_FLIP), 1);
  const char *log = log_text();
  /* The flip lands in the middle of the request: page 8 of 16. */
  cr_assert(strstr(log, "checksum mismatch in region 0xabc000 at offset 2129920") != NULL, "%s", log);
  cr_assert(strstr(log, "not delivered") != NULL, "%s", log);
  for (uint64_t i = 8 * PG; i < 9 * PG; i++) cr_assert_eq(dst[i], 0, "corrupt byte %llu delivered", (unsigned long long)i);
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.checksum_errors, 1);
  /* The disk copy was fine: the next read is whole. */
  cr_assert_eq(read_sync(s, c, dst), 0);
  cr_assert_eq(memcmp(src, dst, bytes), 0);
  free(src);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

Test(nvme, fault_flip_in_partial_last_page) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, 100, 0x5000, 0, &c), 0);
  uint8_t *src = aligned(PG), *dst = aligned(PG);
  fill(src, 100, 2);
  cr_assert_eq(write_sync(s, c, src), 0);
  _mt_nvme_fault_arm(MT_NVME_FAULT_FLIP, 0, 1);
  memset(dst, 0x77, PG);
  cr_assert_eq(read_sync(s, c, dst), -EBADMSG);
  for (unsigned i = 0; i < PG; i++) cr_assert_eq(dst[i], 0x77, "byte %u of a bad tail page delivered", i);
  free(src);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

/* An EIO or short transfer within the retry budget is invisible; past it
 * the op fails naming file and offset, and nothing is lost: the source is
 * untouched, and a later write and read are whole. */
static void transient_then_hard(_mt_nvme_fault_t f, const char *what) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  const uint64_t bytes = 256 * 1024 + 5;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, bytes, 0x9000, 0, &c), 0);
  uint8_t *src = aligned(bytes), *copy = aligned(bytes), *dst = aligned(bytes);
  fill(src, bytes, 11);
  memcpy(copy, src, bytes);

  _mt_nvme_fault_arm(f, 1, 2);  /* 2 faults, within the default 3 retries */
  cr_assert_eq(write_sync(s, c, src), 0, "%s", log_text());
  _mt_nvme_fault_arm(f, 2, 2);
  cr_assert_eq(read_sync(s, c, dst), 0);
  cr_assert_eq(memcmp(dst, src, bytes), 0);
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.retries, 4);
  cr_assert_eq(st.io_errors, 0);
  log_text();

  _mt_nvme_fault_arm(f, 0, 100);  /* persistent */
  cr_assert_eq(write_sync(s, c, src), -EIO);
  const char *log = log_text();
  cr_assert(strstr(log, what) != NULL, "expected \"%s\" in: %s", what, log);
  cr_assert(strstr(log, "at byte 0 of ") != NULL && strstr(log, dir) != NULL, "names file and offset: %s", log);
  cr_assert(!_mt_nvme_chunk_valid(c), "a failed write leaves no valid copy");
  cr_assert_eq(read_sync(s, c, dst), -ENODATA);
  cr_assert_eq(memcmp(src, copy, bytes), 0, "the source is untouched");

  _mt_nvme_fault_reset();
  cr_assert_eq(write_sync(s, c, src), 0);
  _mt_nvme_fault_arm(f, 0, 100);
  cr_assert_eq(read_sync(s, c, dst), -EIO);
  log = log_text();
  cr_assert(strstr(log, "read of") != NULL && strstr(log, dir) != NULL, "%s", log);
  _mt_nvme_fault_reset();
  cr_assert_eq(read_sync(s, c, dst), 0);
  cr_assert_eq(memcmp(dst, copy, bytes), 0, "nothing lost");
  free(src);
  free(copy);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

Test(nvme, fault_eio_retried_then_reported) { transient_then_hard(MT_NVME_FAULT_EIO, "failed after 4 tries: Input/output error"); }
Test(nvme, fault_short_retried_then_reported) { transient_then_hard(MT_NVME_FAULT_SHORT, "still short after 3 retries"); }

Test(nvme, fault_enospc_loses_nothing) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  const uint64_t bytes = 256 * 1024;  /* four requests */
  cr_assert_eq(_mt_nvme_chunk_alloc(s, bytes, 0xd000, 4096, &c), 0);
  uint8_t *old = aligned(bytes), *src = aligned(bytes), *copy = aligned(bytes), *dst = aligned(bytes);
  fill(old, bytes, 1);
  fill(src, bytes, 2);
  memcpy(copy, src, bytes);
  cr_assert_eq(write_sync(s, c, old), 0);
  _mt_nvme_fault_arm(MT_NVME_FAULT_NOSPC, 0, 1);
  cr_assert_eq(write_sync(s, c, src), -ENOSPC);
  const char *log = log_text();
  cr_assert(strstr(log, "no space left in \"") != NULL && strstr(log, dir) != NULL, "%s", log);
  cr_assert(strstr(log, "more bytes were needed") != NULL, "%s", log);
  cr_assert(strstr(log, "region 0xd000 offset 4096 stays where it was") != NULL, "%s", log);
  _mt_nvme_stats_t st;
  _mt_nvme_get_stats(s, &st);
  cr_assert_eq(st.nospace_errors, 1);
  cr_assert(!_mt_nvme_chunk_valid(c), "a half-written copy is not valid");
  cr_assert_eq(read_sync(s, c, dst), -ENODATA);
  cr_assert_eq(memcmp(src, copy, bytes), 0, "the source is untouched");
  cr_assert_eq(write_sync(s, c, src), 0, "and can be written once there is room");
  cr_assert_eq(read_sync(s, c, dst), 0);
  cr_assert_eq(memcmp(dst, copy, bytes), 0);
  free(old);
  free(src);
  free(copy);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

Test(nvme, fault_stall_bounded_wait_with_diagnostic) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, 64 * 1024, 0xf000, 0, &c), 0);
  uint8_t *src = aligned(64 * 1024);
  fill(src, 64 * 1024, 4);
  _mt_nvme_fault_arm(MT_NVME_FAULT_STALL, 0, UINT32_MAX);
  _mt_nvme_op_t op = {0};
  cr_assert_eq(_mt_nvme_write(s, c, src, &op), 0);
  cr_assert_eq(_mt_nvme_wait(s, &op, 200), -ETIMEDOUT);
  const char *log = log_text();
  cr_assert(strstr(log, "write of region 0xf000 offset 0 not finished after 200 ms") != NULL, "%s", log);
  cr_assert(strstr(log, "requests in flight; the oldest, a write of 65536 bytes at byte 0 of ") != NULL, "%s", log);
  /* given up: the op is the caller's again, the chunk the drive's */
  cr_assert(!op.busy);
  cr_assert_eq(op.result, -ETIMEDOUT);
  cr_assert_eq(_mt_nvme_wait(s, &op, 0), -ETIMEDOUT, "a second wait returns at once");
  _mt_nvme_op_t op2 = {0};
  cr_assert_eq(_mt_nvme_write(s, c, src, &op2), -EBUSY);
  cr_assert(strstr(log_text(), "region 0xf000 offset 0: an earlier write of it, given up past its wait bound, "
                               "has not finished") != NULL, "%s", log_text());
  _mt_nvme_fault_reset();
  drain(s);
  cr_assert(!_mt_nvme_chunk_valid(c), "a given-up write never makes the copy valid");
  cr_assert_eq(_mt_nvme_write(s, c, src, &op2), 0, "the chunk is free once the device answers");
  cr_assert_eq(_mt_nvme_wait(s, &op2, 0), 0);
  cr_assert(_mt_nvme_chunk_valid(c));
  free(src);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

/* A given-up op's memory is the caller's at once: the store's stand-in
 * takes the requests still on the ring (ASan would see a write into the
 * freed op when the drive answers), and a chunk freed meanwhile gives its
 * pages back when it does. */
Test(nvme, fault_stall_given_up_op_memory_is_the_callers) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 64 * 1024);
  _mt_nvme_chunk_t *c;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, 256 * 1024, 0xf100, 0, &c), 0);
  uint8_t *src = aligned(256 * 1024), *dst = aligned(256 * 1024);
  fill(src, 256 * 1024, 5);
  cr_assert_eq(write_sync(s, c, src), 0);
  _mt_nvme_stats_t st0;
  _mt_nvme_get_stats(s, &st0);
  _mt_nvme_fault_arm(MT_NVME_FAULT_STALL, 0, UINT32_MAX);
  _mt_nvme_op_t *op = calloc(1, sizeof(*op));
  cr_assert_eq(_mt_nvme_read(s, c, dst, op), 0);
  cr_assert_eq(_mt_nvme_wait(s, op, 100), -ETIMEDOUT);
  cr_assert(!op->busy);
  free(op);
  cr_assert_eq(_mt_nvme_chunk_free(s, c), 0, "a free while the drive holds the pages is deferred");
  _mt_nvme_stats_t st1;
  _mt_nvme_get_stats(s, &st1);
  cr_assert_eq(st1.pages_free, st0.pages_free, "not yet");
  _mt_nvme_fault_reset();
  drain(s);
  _mt_nvme_get_stats(s, &st1);
  cr_assert_eq(st1.pages_free, st0.pages_free + 256 * 1024 / MT_NVME_PAGE, "the pages are back");
  free(src);
  free(dst);
  cr_assert_eq(_mt_nvme_close(s), 0);
}

/* ---- bad directories ----------------------------------------------------- */

static void refused(const char *dirs, int err, const char *msg) {
  _mt_nvme_cfg_t cfg = {.dirs = dirs, .max_bytes = 4 * MiB, .numa_node = -1};
  _mt_nvme_t *s = (void *)1;
  int rc = _mt_nvme_open(&cfg, &s);
  if (err) cr_assert_eq(rc, err, "%s: %d: %s", dirs, rc, log_text());
  else cr_assert_lt(rc, 0, "%s", dirs);
  cr_assert_null(s);
  const char *log = log_text();
  cr_assert(strstr(log, msg) != NULL, "expected \"%s\" in: %s", msg, log);
  cr_assert(strstr(log, "running without the NVMe tier") != NULL, "%s", log);
  int lines = 0;
  for (const char *p = log; *p; p++) lines += *p == '\n';
  cr_assert_eq(lines, 1, "one clear line: %s", log);
}

Test(nvme, bad_dir_missing) {
  char p[4200];
  snprintf(p, sizeof(p), "%s/nope", dir);
  char want[4300];
  snprintf(want, sizeof(want), "\"%s\" does not exist", p);
  refused(p, -ENOENT, want);
}

Test(nvme, bad_dir_not_a_directory) {
  char p[4200];
  snprintf(p, sizeof(p), "%s/file", dir);
  close(open(p, O_CREAT | O_WRONLY, 0600));
  char want[4300];
  snprintf(want, sizeof(want), "\"%s\" is not a directory", p);
  refused(p, -ENOTDIR, want);
  unlink(p);
}

Test(nvme, bad_dir_one_of_several) {
  char dirs[8400];
  snprintf(dirs, sizeof(dirs), "%s:%s/nope", dir, dir2);
  char want[4300];
  snprintf(want, sizeof(want), "\"%s/nope\" does not exist", dir2);
  refused(dirs, -ENOENT, want);
  cr_assert_eq(entries(dir), 0, "the good directory's file went with the refusal");
}

Test(nvme, bad_dir_not_writable) {
  if (geteuid() == 0) {
    /* root writes through permissions; a directory of a pseudo file system
     * refuses it anyway. */
    refused("/proc/self", 0, "\"/proc/self\" is not writable");
    return;
  }
  char p[4200];
  snprintf(p, sizeof(p), "%s/ro", dir);
  cr_assert_eq(mkdir(p, 0500), 0);
  char want[4300];
  snprintf(want, sizeof(want), "\"%s\" is not writable", p);
  refused(p, -EACCES, want);
  rmdir(p);
}

Test(nvme, bad_dir_tmpfs_has_no_o_direct) {
  struct statfs fs;
  if (statfs("/dev/shm", &fs) != 0 || fs.f_type != 0x01021994)
    cr_skip_test("no tmpfs at /dev/shm to try");
  refused("/dev/shm", -EOPNOTSUPP, "\"/dev/shm\" is on tmpfs");
}

Test(nvme, bad_request_size) {
  _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = 4 * MiB, .request_bytes = 5000, .numa_node = -1};
  _mt_nvme_t *s;
  cr_assert_eq(_mt_nvme_open(&cfg, &s), -EINVAL);
  cr_assert(strstr(log_text(), "MT_NVME_REQUEST=5000 is not a multiple of 4 KiB") != NULL);
}

Test(nvme, short_disk_reported_at_start) {
  _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = (uint64_t)1 << 60, .numa_node = -1};
  _mt_nvme_t *s;
  int rc = _mt_nvme_open(&cfg, &s);
  cr_assert(rc == -ENOSPC || rc == -EFBIG, "%d", rc);
  const char *log = log_text();
  cr_assert(strstr(log, "cannot reserve") != NULL && strstr(log, "lower MT_MAX_NVME") != NULL, "%s", log);
}

/* ---- staging, cleanup ---------------------------------------------------- */

Test(nvme, staging_bounded_and_counted) {
  _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = 4 * MiB, .queue_depth = 4, .staging_bytes = 3 * MiB,
                        .numa_node = 0};
  _mt_nvme_t *s;
  cr_assert_eq(_mt_nvme_open(&cfg, &s), 0, "%s", log_text());
  cr_assert_eq(_mt_nvme_staging_bytes(s), 4 * PG, "bounce pages count too");
  void *a, *b, *c;
  cr_assert_eq(_mt_nvme_staging_alloc(s, MiB, &a), 0);
  cr_assert_eq((uintptr_t)a % PG, 0);
  cr_assert_eq(_mt_nvme_staging_alloc(s, 2 * MiB - 1, &b), 0);
  cr_assert_eq(_mt_nvme_staging_bytes(s), 3 * MiB + 4 * PG);
  cr_assert_eq(_mt_nvme_staging_alloc(s, 1, &c), -ENOMEM, "past the bound");
  _mt_nvme_staging_free(s, a);
  cr_assert_eq(_mt_nvme_staging_bytes(s), 2 * MiB + 4 * PG);
  /* A staging buffer is what the pager writes from. */
  _mt_nvme_chunk_t *ch;
  cr_assert_eq(_mt_nvme_chunk_alloc(s, 2 * MiB - 1, 0, 0, &ch), 0);
  fill(b, 2 * MiB - 1, 8);
  cr_assert_eq(write_sync(s, ch, b), 0);
  cr_assert_eq(_mt_nvme_close(s), 0);  /* frees b too */
}

Test(nvme, cleanup_nothing_left_while_open_or_after_close) {
  _mt_nvme_t *s = open_store(dir, 4 * MiB, 0);
  cr_assert_eq(entries(dir), 0, "the file and its private directory are unlinked at open");
  struct stat sb;
  cr_assert_eq(fstat(_mt_nvme_fd(s, 0), &sb), 0);
  cr_assert_eq(sb.st_mode & 0777, 0600);
  cr_assert_eq(sb.st_nlink, 0);
  cr_assert_geq((uint64_t)sb.st_blocks * 512, 4 * MiB, "the cap is reserved");
  cr_assert_eq(_mt_nvme_close(s), 0);
  cr_assert_eq(entries(dir), 0);
}

Test(nvme, cleanup_after_sigkill) {
  pid_t pid = fork();
  cr_assert_geq(pid, 0);
  if (pid == 0) {
    _mt_nvme_cfg_t cfg = {.dirs = dir, .max_bytes = 4 * MiB, .numa_node = -1};
    _mt_nvme_t *s;
    if (_mt_nvme_open(&cfg, &s) != 0) _exit(3);
    _mt_nvme_chunk_t *c;
    void *buf;
    if (_mt_nvme_chunk_alloc(s, MiB, 0, 0, &c) || _mt_nvme_staging_alloc(s, MiB, &buf)) _exit(4);
    _mt_nvme_op_t op = {0};
    if (_mt_nvme_write(s, c, buf, &op)) _exit(5);
    raise(SIGKILL);  /* with a write in flight */
    _exit(6);
  }
  int st;
  cr_assert_eq(waitpid(pid, &st, 0), pid);
  cr_assert(WIFSIGNALED(st) && WTERMSIG(st) == SIGKILL, "child status %d", st);
  cr_assert_eq(entries(dir), 0, "nothing left after the process was killed");
}

/* ---- options -------------------------------------------------------------- */

Test(nvme, cfg_from_options) {
  char *none[] = {NULL};
  _mt_options_load(none);
  _mt_nvme_cfg_t cfg;
  cr_assert(!_mt_nvme_cfg_from_options(&cfg, 1), "no MT_OFFLOAD_DIR, no tier");
  cr_assert_eq(cfg.queue_depth, 32);
  cr_assert_eq(cfg.request_bytes, MiB);
  cr_assert_eq(cfg.max_bytes, 0);
  cr_assert_eq(cfg.numa_node, 1, "default: the GPU's node");
  char *env[] = {"MT_OFFLOAD_DIR=/a:/b", "MT_MAX_NVME=3G", "MT_NVME_QUEUE_DEPTH=64", "MT_NVME_REQUEST=256K",
                 "MT_NUMA_NODE=0", NULL};
  _mt_options_load(env);
  cr_assert(_mt_nvme_cfg_from_options(&cfg, 1));
  cr_assert_str_eq(cfg.dirs, "/a:/b");
  cr_assert_eq(cfg.max_bytes, (uint64_t)3 << 30);
  cr_assert_eq(cfg.queue_depth, 64);
  cr_assert_eq(cfg.request_bytes, 256 * 1024);
  cr_assert_eq(cfg.numa_node, 0);
  _mt_options_load(none);
  log_text();
}

/* ---- checksum ------------------------------------------------------------- */

Test(nvme, checksum_is_xxh3_whichever_build) {
  uint8_t *p = aligned(64 * PG);
  fill(p, 64 * PG, 13);
  for (unsigned i = 0; i < 64; i++) {
    uint64_t before = _mt_nvme_sum(p + i * PG, PG);
    cr_assert_eq(before, _mt_nvme_sum_portable(p + i * PG, PG), "page %u", i);
    p[i * PG + i * 61] ^= 1 << (i % 8);  /* one bit */
    cr_assert_neq(_mt_nvme_sum(p + i * PG, PG), before, "a flipped bit changes the sum");
  }
  /* xxHash's own reference value for 0 bytes, seed 0 */
  cr_assert_eq(_mt_nvme_sum(p, 0), 0x2D06800538D394C2ull);
  free(p);
}
