/* Description: the trace reader and writer (round trip of every record
 * type; every malformed input rejected with -EINVAL and its byte offset) and
 * the recorder (threads, order, names, iterations, flushing, errors). */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"
#include "trace.h"
#include "trace_io.h"

#define RC_CHECK(cond, ...) cr_assert((cond), __VA_ARGS__)
#include "recorder_check.h"

static char path[64];

static void make_path(void) {
  snprintf(path, sizeof(path), "/tmp/mt-trace-test-XXXXXX");
  int fd = mkstemp(path);
  cr_assert(fd >= 0);
  close(fd);
}

static void drop_path(void) {
  unlink(path);
}

TestSuite(trace_io, .init = make_path, .fini = drop_path);
TestSuite(recorder, .init = make_path, .fini = drop_path);

/* ---- helpers ------------------------------------------------------------------ */

static void write_file(const void *p, size_t n) {
  int fd = open(path, O_WRONLY | O_TRUNC);
  cr_assert(fd >= 0);
  cr_assert_eq(write(fd, p, n), (ssize_t)n);
  close(fd);
}

/* A raw trace: a valid header (header_bytes 160) followed by records. */
typedef struct raw {
  uint8_t b[4096];
  size_t n;
} raw_t;

static void raw_init(raw_t *r) {
  memset(r, 0, sizeof(*r));
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "test");
  memcpy(r->b, &h, sizeof(h));
  r->n = sizeof(h);
}

static void *raw_add(raw_t *r, uint8_t type, uint32_t size, size_t bytes) {
  uint8_t *p = r->b + r->n;
  p[0] = type;
  memcpy(p + 4, &size, 4);
  r->n += bytes;
  return p;
}

static void raw_alloc(raw_t *r) {
  mt_trace_alloc_t *a = raw_add(r, MT_TR_ALLOC, sizeof(mt_trace_alloc_t), sizeof(mt_trace_alloc_t));
  a->region = 1;
  a->bytes = 4096;
}

/* The file must open and yield `good` records, then fail with -EINVAL at
 * byte `off` with a message containing `what`. */
static void expect_bad_record(const raw_t *r, int good, uint64_t off, const char *what) {
  write_file(r->b, r->n);
  char err[512], want[256];
  mt_trace_reader_t *rd;
  cr_assert_eq(mt_trace_open(path, &rd, err, sizeof(err)), 0, "open: %s", err);
  const mt_trace_rec_t *rec;
  for (int i = 0; i < good; i++) cr_assert_eq(mt_trace_next(rd, &rec), 1, "record %d: %s", i, mt_trace_error(rd));
  cr_assert_eq(mt_trace_next(rd, &rec), -EINVAL);
  cr_assert_null(rec);
  snprintf(want, sizeof(want), "%s: byte %llu: ", path, (unsigned long long)off);
  cr_assert(strncmp(mt_trace_error(rd), want, strlen(want)) == 0, "'%s' starts with '%s'", mt_trace_error(rd), want);
  cr_assert(strstr(mt_trace_error(rd), what), "'%s' says '%s'", mt_trace_error(rd), what);
  cr_assert_eq(mt_trace_offset(rd), off);
  cr_assert_eq(mt_trace_next(rd, &rec), -EINVAL, "the error is sticky");
  mt_trace_close(rd);
}

/* The file must not open: -EINVAL, byte off, what. */
static void expect_bad_open(const void *p, size_t n, uint64_t off, const char *what) {
  write_file(p, n);
  char err[512], want[256];
  mt_trace_reader_t *rd = (void *)1;
  cr_assert_eq(mt_trace_open(path, &rd, err, sizeof(err)), -EINVAL);
  cr_assert_null(rd);
  snprintf(want, sizeof(want), "%s: byte %llu: ", path, (unsigned long long)off);
  cr_assert(strncmp(err, want, strlen(want)) == 0, "'%s' starts with '%s'", err, want);
  cr_assert(strstr(err, what), "'%s' says '%s'", err, what);
}

/* ---- round trip ------------------------------------------------------------------ */

Test(trace_io, round_trip_every_type) {
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_MONOTONIC, "mtalloc");
  h.start_ns = 123456789;
  h.chunk_bytes = 2 << 20;
  h.gpu_budget = 1ull << 34;
  h.host_budget = 1ull << 36;
  h.gpu_total = 80ull << 30;
  snprintf(h.device, sizeof(h.device), "NVIDIA H200");
  const char *opts = "MT_MAX_VRAM=16G\nMT_CHUNK=2M\n";
  mt_trace_writer_t *w;
  cr_assert_eq(mt_trace_writer_open(path, &h, opts, &w), 0);

  mt_trace_alloc_t alloc = {{MT_TR_ALLOC, MT_TRF_SMALL, 3, sizeof(alloc), 1000}, 7, 4096, 2, 0};
  mt_trace_free_t fr = {{MT_TR_FREE, MT_TRF_ASYNC, 3, sizeof(fr), 1001}, 7, 2, 0};
  mt_trace_copy_t copy = {{MT_TR_COPY, MT_TRF_PAGER, 4, sizeof(copy), 1002}, 1500, 1 << 20, MT_TR_D2H, 5};
  mt_trace_move_t fetch = {{MT_TR_FETCH, MT_TRF_PREFETCH, 4, sizeof(fetch), 1003}, 9, 12, MT_TIER_HOST, MT_TIER_GPU,
                           0, 2 << 20};
  mt_trace_move_t evict = {{MT_TR_EVICT, MT_TRF_DIRTY, 4, sizeof(evict), 1004}, 9, 13, MT_TIER_GPU, MT_TIER_HOST,
                           0, 2 << 20};
  mt_trace_stall_t stall = {{MT_TR_STALL, 0, 1, sizeof(stall), 1005}, 2005, MT_STALL_EVICT, 0};
  mt_trace_opt_step_t opt = {{MT_TR_OPT_STEP, 0, 1, sizeof(opt), 1006}, 3006, 1ull << 30};
  mt_trace_iter_t iter = {{MT_TR_ITER, MT_TRF_HEURISTIC, 1, sizeof(iter), 1007}, 42};
  mt_trace_launch_t launch = {{MT_TR_LAUNCH, MT_TRF_GRAPH, 2, 0, 1008}, 0xabcdef, 77, 350, 3, 3};
  mt_trace_span_t foot[3] = {{7, 0, 100}, {8, 64, 200}, {9, 128, 300}};
  mt_trace_launch_t launch0 = {{MT_TR_LAUNCH, 0, 2, 0, 1009}, 0x1234, 78, 0, 0, 0};
  const mt_trace_rec_t *fixed[] = {&alloc.h, &fr.h, &copy.h, &fetch.h, &evict.h, &stall.h, &opt.h, &iter.h};
  for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) cr_assert_eq(mt_trace_write(w, fixed[i]), 0);
  cr_assert_eq(mt_trace_write_name(w, 1010, 77, "void gemm<float>(int)"), 0);
  const uint8_t kinds[3] = {MT_ACC_READ, MT_ACC_WRITE, MT_ACC_RW};
  cr_assert_eq(mt_trace_write_launch(w, &launch, foot, kinds), 0);
  cr_assert_eq(mt_trace_write_launch(w, &launch0, NULL, NULL), 0);
  cr_assert_eq(mt_trace_write_name(w, 1011, 78, ""), 0);
  /* The largest launch a reader accepts: bigger than both buffers' halves. */
  mt_trace_span_t *big = calloc(MT_TRACE_FOOT_MAX, sizeof(*big));
  for (uint32_t i = 0; i < MT_TRACE_FOOT_MAX; i++) big[i] = (mt_trace_span_t){i + 1, i * 8, i * 3};
  mt_trace_launch_t launchbig = {{MT_TR_LAUNCH, 0, 2, 0, 1012}, 5, 79, 0, 1, MT_TRACE_FOOT_MAX};
  cr_assert_eq(mt_trace_write_launch(w, &launchbig, big, NULL), 0);
  cr_assert_eq(mt_trace_write(w, &alloc.h), 0);
  cr_assert_eq(mt_trace_writer_close(w), 0);

  char err[512];
  mt_trace_reader_t *r;
  cr_assert_eq(mt_trace_open(path, &r, err, sizeof(err)), 0, "%s", err);
  const mt_trace_header_t *rh = mt_trace_header(r);
  cr_assert_eq(rh->version, MT_TRACE_VERSION);
  cr_assert_eq(rh->header_bytes, 160 + 32); /* 28 bytes of options, padded to 8 */
  cr_assert_eq(rh->clock, MT_TRACE_CLOCK_MONOTONIC);
  cr_assert_eq(rh->start_ns, 123456789);
  cr_assert_eq(rh->chunk_bytes, 2 << 20);
  cr_assert_eq(rh->gpu_budget, 1ull << 34);
  cr_assert_eq(rh->host_budget, 1ull << 36);
  cr_assert_eq(rh->gpu_total, 80ull << 30);
  cr_assert_str_eq(rh->device, "NVIDIA H200");
  cr_assert_str_eq(rh->source, "mtalloc");
  cr_assert_str_eq(mt_trace_options(r), opts);

  for (int pass = 0; pass < 2; pass++) {
    const mt_trace_rec_t *rec;
    uint64_t off = rh->header_bytes;
    for (size_t i = 0; i < sizeof(fixed) / sizeof(fixed[0]); i++) {
      cr_assert_eq(mt_trace_next(r, &rec), 1, "%s", mt_trace_error(r));
      cr_assert_eq(mt_trace_offset(r), off);
      cr_assert_eq(rec->size, fixed[i]->size);
      cr_assert(memcmp(rec, fixed[i], fixed[i]->size) == 0, "record %zu differs", i);
      off += rec->size;
    }
    cr_assert_eq(mt_trace_next(r, &rec), 1);
    const mt_trace_name_t *n = (const void *)rec;
    cr_assert_eq(rec->type, MT_TR_NAME);
    cr_assert_eq(rec->t_ns, 1010);
    cr_assert_eq(n->id, 77);
    cr_assert_eq(n->len, strlen("void gemm<float>(int)"));
    cr_assert_eq(rec->size, 32 + 24);
    cr_assert(memcmp(n + 1, "void gemm<float>(int)", n->len) == 0);

    cr_assert_eq(mt_trace_next(r, &rec), 1);
    const mt_trace_launch_t *l = (const void *)rec;
    cr_assert_eq(rec->size, sizeof(launch) + sizeof(foot) + 8); /* 3 kinds, padded to 8 */
    cr_assert_eq(rec->type, MT_TR_LAUNCH);
    cr_assert_eq(rec->flags, MT_TRF_GRAPH);
    cr_assert_eq(rec->thread, 2);
    cr_assert_eq(rec->t_ns, 1008);
    cr_assert_eq(l->launch_id, 0xabcdef);
    cr_assert_eq(l->func, 77);
    cr_assert_eq(l->dur_ns, 350);
    cr_assert_eq(l->stream, 3);
    cr_assert_eq(l->nfoot, 3);
    cr_assert(memcmp(l + 1, foot, sizeof(foot)) == 0);
    const uint8_t *k = mt_trace_launch_kinds(l);
    cr_assert_not_null(k);
    cr_assert(memcmp(k, kinds, 3) == 0, "kinds %u %u %u", k[0], k[1], k[2]);
    cr_assert(k[3] == 0 && k[4] == 0 && k[5] == 0 && k[6] == 0 && k[7] == 0, "padding is zero");

    cr_assert_eq(mt_trace_next(r, &rec), 1);
    l = (const void *)rec;
    cr_assert_eq(rec->size, sizeof(launch0));
    cr_assert_eq(l->nfoot, 0);
    cr_assert_null(mt_trace_launch_kinds(l));
    cr_assert_eq(l->launch_id, 0x1234);

    cr_assert_eq(mt_trace_next(r, &rec), 1);
    n = (const void *)rec;
    cr_assert_eq(rec->size, 32);
    cr_assert_eq(n->len, 0);
    cr_assert_eq(n->id, 78);

    cr_assert_eq(mt_trace_next(r, &rec), 1, "%s", mt_trace_error(r));
    l = (const void *)rec;
    cr_assert_eq(rec->size, MT_TRACE_REC_MAX);
    cr_assert_eq(l->nfoot, MT_TRACE_FOOT_MAX);
    cr_assert(memcmp(l + 1, big, MT_TRACE_FOOT_MAX * sizeof(*big)) == 0);
    k = mt_trace_launch_kinds(l); /* written without kinds: every span unknown */
    cr_assert_not_null(k);
    for (uint32_t i = 0; i < MT_TRACE_FOOT_MAX; i++) cr_assert_eq(k[i], MT_ACC_UNKNOWN);

    cr_assert_eq(mt_trace_next(r, &rec), 1);
    cr_assert(memcmp(rec, &alloc, sizeof(alloc)) == 0);
    cr_assert_eq(mt_trace_next(r, &rec), 0);
    cr_assert_eq(mt_trace_next(r, &rec), 0, "the end stays the end");
    cr_assert_eq(mt_trace_offset(r), mt_trace_size(r));
    cr_assert_eq(mt_trace_rewind(r), 0);
  }
  free(big);
  mt_trace_close(r);
}

Test(trace_io, header_only_is_valid) {
  raw_t r;
  raw_init(&r);
  write_file(r.b, r.n);
  char err[512];
  mt_trace_reader_t *rd;
  cr_assert_eq(mt_trace_open(path, &rd, err, sizeof(err)), 0, "%s", err);
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(rd, &rec), 0);
  cr_assert_str_eq(mt_trace_options(rd), "");
  cr_assert_eq(mt_trace_size(rd), 160);
  mt_trace_close(rd);
}

Test(trace_io, writer_errors) {
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "test");
  mt_trace_writer_t *w;
  cr_assert_eq(mt_trace_writer_open("/nonexistent-dir/t.bin", &h, NULL, &w), -ENOENT);
  /* A full disk shows at the latest on close. */
  cr_assert_eq(mt_trace_writer_open("/dev/full", &h, NULL, &w), 0);
  mt_trace_alloc_t a = {{MT_TR_ALLOC, 0, 0, sizeof(a), 1}, 1, 1, 0, 0};
  cr_assert_eq(mt_trace_write(w, &a.h), 0);
  cr_assert_eq(mt_trace_writer_close(w), -ENOSPC);
  /* ... and on write once the buffer fills. */
  cr_assert_eq(mt_trace_writer_open("/dev/full", &h, NULL, &w), 0);
  int rc = 0;
  for (int i = 0; i < 100000 && rc == 0; i++) rc = mt_trace_write(w, &a.h);
  cr_assert_eq(rc, -ENOSPC);
  cr_assert_eq(mt_trace_write(w, &a.h), -ENOSPC, "the error is sticky");
  cr_assert_eq(mt_trace_writer_close(w), -ENOSPC);
  /* Records with impossible sizes are refused. */
  cr_assert_eq(mt_trace_writer_open(path, &h, NULL, &w), 0);
  a.h.size = 36;
  cr_assert_eq(mt_trace_write(w, &a.h), -EINVAL);
  a.h.size = 8;
  cr_assert_eq(mt_trace_write(w, &a.h), -EINVAL);
  mt_trace_launch_t l = {{MT_TR_LAUNCH, 0, 0, 0, 0}, 1, 1, 0, 0, MT_TRACE_FOOT_MAX + 1};
  mt_trace_span_t s = {0};
  cr_assert_eq(mt_trace_write_launch(w, &l, &s, NULL), -EINVAL);
  cr_assert_eq(mt_trace_writer_close(w), 0);
}

Test(trace_io, long_names_are_cut) {
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "test");
  mt_trace_writer_t *w;
  cr_assert_eq(mt_trace_writer_open(path, &h, NULL, &w), 0);
  char name[MT_TRACE_NAME_MAX + 100];
  memset(name, 'x', sizeof(name) - 1);
  name[sizeof(name) - 1] = '\0';
  cr_assert_eq(mt_trace_write_name(w, 1, 2, name), 0);
  cr_assert_eq(mt_trace_writer_close(w), 0);
  char err[512];
  mt_trace_reader_t *r;
  cr_assert_eq(mt_trace_open(path, &r, err, sizeof(err)), 0);
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(r, &rec), 1, "%s", mt_trace_error(r));
  cr_assert_eq(((const mt_trace_name_t *)rec)->len, MT_TRACE_NAME_MAX);
  cr_assert_eq(mt_trace_next(r, &rec), 0);
  mt_trace_close(r);
}

/* ---- malformed files ------------------------------------------------------------------ */

Test(trace_io, empty_file) {
  expect_bad_open("", 0, 0, "empty file");
}

Test(trace_io, bad_magic) {
  raw_t r;
  raw_init(&r);
  memcpy(r.b, "MTTRACX", 7);
  expect_bad_open(r.b, r.n, 0, "not an mtalloc trace (bad magic)");
  expect_bad_open("MTTR", 4, 0, "bad magic");
}

Test(trace_io, wrong_version) {
  raw_t r;
  raw_init(&r);
  uint32_t v = 3;
  memcpy(r.b + 8, &v, 4);
  expect_bad_open(r.b, r.n, 8, "version 3, this reader reads 1 to 2");
  v = 0;
  memcpy(r.b + 8, &v, 4);
  expect_bad_open(r.b, r.n, 8, "version 0, this reader reads 1 to 2");
}

static void set_version(raw_t *r, uint32_t v) {
  memcpy(r->b + 8, &v, 4);
}

/* A version 1 trace as the version 1 writer laid it out (no kinds after
 * the spans) still reads; its spans have no kinds (all unknown). */
Test(trace_io, version1_still_reads) {
  raw_t r;
  raw_init(&r);
  set_version(&r, 1);
  raw_alloc(&r);
  mt_trace_launch_t *l = raw_add(&r, MT_TR_LAUNCH, 48 + 2 * 24, 48 + 2 * 24);
  l->nfoot = 2;
  mt_trace_span_t *sp = (void *)(l + 1);
  sp[0] = (mt_trace_span_t){1, 0, 4096};
  sp[1] = (mt_trace_span_t){1, 4096, 0};
  l = raw_add(&r, MT_TR_LAUNCH, 48, 48); /* no spans: the same in both versions */
  raw_alloc(&r);
  write_file(r.b, r.n);
  char err[512];
  mt_trace_reader_t *rd;
  cr_assert_eq(mt_trace_open(path, &rd, err, sizeof(err)), 0, "%s", err);
  cr_assert_eq(mt_trace_header(rd)->version, 1);
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(rd, &rec), 1, "%s", mt_trace_error(rd));
  cr_assert_eq(mt_trace_next(rd, &rec), 1, "%s", mt_trace_error(rd));
  const mt_trace_launch_t *rl = (const void *)rec;
  cr_assert_eq(rl->nfoot, 2);
  cr_assert_eq(mt_trace_launch_spans(rl)[1].offset, 4096);
  cr_assert_null(mt_trace_launch_kinds(rl));
  cr_assert_eq(mt_trace_next(rd, &rec), 1, "%s", mt_trace_error(rd));
  cr_assert_null(mt_trace_launch_kinds((const void *)rec));
  cr_assert_eq(mt_trace_next(rd, &rec), 1, "%s", mt_trace_error(rd));
  cr_assert_eq(mt_trace_next(rd, &rec), 0);
  mt_trace_close(rd);
}

/* A version 2 launch laid out as version 1 (kinds missing) is cut short,
 * and a version 1 launch with kinds after its spans is too long. */
Test(trace_io, launch_kinds_missing_or_extra) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  mt_trace_launch_t *l = raw_add(&r, MT_TR_LAUNCH, 48 + 24, 48 + 24);
  l->nfoot = 1;
  expect_bad_record(&r, 1, 200, "LAUNCH record size 72 does not match its 1 spans and their access kinds (80 bytes)");
  raw_init(&r);
  set_version(&r, 1);
  l = raw_add(&r, MT_TR_LAUNCH, 48 + 24 + 8, 48 + 24 + 8);
  l->nfoot = 1;
  expect_bad_record(&r, 0, 160, "LAUNCH record size 80 does not match its 1 spans (72 bytes)");
}

Test(trace_io, launch_kind_out_of_range) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  mt_trace_launch_t *l = raw_add(&r, MT_TR_LAUNCH, 48 + 3 * 24 + 8, 48 + 3 * 24 + 8);
  l->nfoot = 3;
  uint8_t *k = (uint8_t *)(l + 1) + 3 * 24;
  k[0] = MT_ACC_READ;
  k[1] = MT_ACC_RW;
  k[2] = 4;
  expect_bad_record(&r, 1, 200, "LAUNCH span 2 has access kind 4 (byte 122 of the record; known: 0-3)");
  k[2] = 0xff;
  expect_bad_record(&r, 1, 200, "LAUNCH span 2 has access kind 255");
}

Test(trace_io, launch_kinds_truncated) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  mt_trace_launch_t *l = raw_add(&r, MT_TR_LAUNCH, 48 + 24 + 8, 48 + 24 + 8);
  l->nfoot = 1;
  r.n -= 8; /* the file ends where the kinds should be */
  expect_bad_record(&r, 1, 200, "truncated record (72 bytes of 80)");
}

Test(trace_io, writer_refuses_bad_kinds) {
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "test");
  mt_trace_writer_t *w;
  cr_assert_eq(mt_trace_writer_open(path, &h, NULL, &w), 0);
  mt_trace_launch_t l = {{MT_TR_LAUNCH, 0, 0, 0, 0}, 1, 1, 0, 0, 2};
  mt_trace_span_t s[2] = {{1, 0, 1}, {2, 0, 1}};
  const uint8_t bad[2] = {MT_ACC_READ, MT_ACC__COUNT};
  cr_assert_eq(mt_trace_write_launch(w, &l, s, bad), -EINVAL);
  cr_assert_eq(mt_trace_writer_close(w), 0);
}

Test(trace_io, truncated_header) {
  raw_t r;
  raw_init(&r);
  expect_bad_open(r.b, 100, 100, "truncated header (100 bytes of 160)");
}

static void set_header_bytes(raw_t *r, uint32_t hb) {
  memcpy(r->b + 12, &hb, 4);
}

Test(trace_io, header_bytes_too_small) {
  raw_t r;
  raw_init(&r);
  set_header_bytes(&r, 152);
  expect_bad_open(r.b, r.n, 12, "header_bytes 152 is smaller than the header (160)");
}

Test(trace_io, header_bytes_not_multiple_of_8) {
  raw_t r;
  raw_init(&r);
  set_header_bytes(&r, 164);
  r.n = 168;
  expect_bad_open(r.b, r.n, 12, "header_bytes 164 is not a multiple of 8");
}

Test(trace_io, header_bytes_too_big) {
  raw_t r;
  raw_init(&r);
  set_header_bytes(&r, 2u << 20);
  expect_bad_open(r.b, r.n, 12, "header_bytes 2097152 exceeds the limit");
  set_header_bytes(&r, 168);
  expect_bad_open(r.b, r.n, 12, "header_bytes 168 exceeds the file size 160");
}

Test(trace_io, options_text) {
  raw_t r;
  raw_init(&r);
  set_header_bytes(&r, 176);
  memcpy(r.b + 160, "MT_A=1\nMT_B=22\n\0", 16);
  r.n = 176;
  raw_alloc(&r);
  write_file(r.b, r.n);
  char err[512];
  mt_trace_reader_t *rd;
  cr_assert_eq(mt_trace_open(path, &rd, err, sizeof(err)), 0, "%s", err);
  cr_assert_str_eq(mt_trace_options(rd), "MT_A=1\nMT_B=22\n");
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(rd, &rec), 1);
  cr_assert_eq(mt_trace_offset(rd), 176);
  cr_assert_eq(mt_trace_next(rd, &rec), 0);
  mt_trace_close(rd);
}

Test(trace_io, record_size_zero) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_add(&r, MT_TR_ALLOC, 0, 40);
  expect_bad_record(&r, 1, 200, "record size 0 is below 16");
}

Test(trace_io, record_size_not_multiple_of_8) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_add(&r, MT_TR_ALLOC, 44, 48);
  expect_bad_record(&r, 1, 200, "record size 44 is not a multiple of 8");
}

Test(trace_io, record_bigger_than_the_rest) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_add(&r, MT_TR_ALLOC, 48, 40);
  expect_bad_record(&r, 1, 200, "truncated record (40 bytes of 48)");
}

Test(trace_io, record_bigger_than_the_limit) {
  raw_t r;
  raw_init(&r);
  raw_add(&r, MT_TR_ALLOC, 1u << 30, 40);
  expect_bad_record(&r, 0, 160, "record size 1073741824 exceeds the limit");
}

Test(trace_io, record_smaller_than_its_type) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_add(&r, MT_TR_ALLOC, 32, 32);
  raw_alloc(&r);
  expect_bad_record(&r, 1, 200, "record size 32 is smaller than the fixed part of ALLOC (40 bytes)");
  raw_init(&r);
  raw_add(&r, MT_TR_LAUNCH, 40, 40);
  expect_bad_record(&r, 0, 160, "fixed part of LAUNCH (48 bytes)");
}

Test(trace_io, bigger_fixed_record_is_accepted) {
  raw_t r;
  raw_init(&r);
  raw_add(&r, MT_TR_ITER, 32, 32);
  raw_alloc(&r);
  write_file(r.b, r.n);
  char err[512];
  mt_trace_reader_t *rd;
  cr_assert_eq(mt_trace_open(path, &rd, err, sizeof(err)), 0, "%s", err);
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(rd, &rec), 1);
  cr_assert_eq(mt_trace_next(rd, &rec), 1);
  cr_assert_eq(mt_trace_offset(rd), 192);
  cr_assert_eq(mt_trace_next(rd, &rec), 0);
  mt_trace_close(rd);
}

Test(trace_io, launch_nfoot_inconsistent) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  mt_trace_launch_t *l = raw_add(&r, MT_TR_LAUNCH, 48 + 24 + 8, 48 + 24 + 8);
  l->nfoot = 2;
  expect_bad_record(&r, 1, 200, "LAUNCH record size 80 does not match its 2 spans and their access kinds (104 bytes)");
  raw_init(&r);
  l = raw_add(&r, MT_TR_LAUNCH, 48 + 48 + 8, 48 + 48 + 8);
  l->nfoot = 1;
  expect_bad_record(&r, 0, 160, "does not match its 1 spans");
}

Test(trace_io, launch_nfoot_too_big) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_alloc(&r);
  mt_trace_launch_t *l = raw_add(&r, MT_TR_LAUNCH, 48, 48);
  l->nfoot = MT_TRACE_FOOT_MAX + 1;
  expect_bad_record(&r, 2, 240, "LAUNCH with 65537 spans, more than the limit of 65536");
}

Test(trace_io, name_too_long) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  mt_trace_name_t *n = raw_add(&r, MT_TR_NAME, 64, 64);
  n->len = MT_TRACE_NAME_MAX + 1;
  expect_bad_record(&r, 1, 200, "NAME of 4097 bytes, longer than the limit of 4096");
  raw_init(&r);
  n = raw_add(&r, MT_TR_NAME, 48, 48);
  n->len = 17;
  expect_bad_record(&r, 0, 160, "NAME of 17 bytes does not fit its record of 48 bytes");
}

Test(trace_io, unknown_type) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_add(&r, MT_TR__COUNT, 16, 16);
  expect_bad_record(&r, 1, 200, "unknown record type 11");
  raw_init(&r);
  raw_add(&r, 0, 16, 16);
  expect_bad_record(&r, 0, 160, "unknown record type 0");
  raw_init(&r);
  raw_add(&r, 0xff, 16, 16);
  expect_bad_record(&r, 0, 160, "unknown record type 255");
}

Test(trace_io, truncated_last_record) {
  raw_t r;
  raw_init(&r);
  raw_alloc(&r);
  raw_alloc(&r);
  r.n -= 20;
  expect_bad_record(&r, 1, 200, "truncated record (20 bytes of 40)");
  raw_init(&r);
  raw_alloc(&r);
  r.n -= 36;
  expect_bad_record(&r, 0, 160, "truncated record (4 bytes of at least 16)");
}

Test(trace_io, check_record_in_memory) {
  char err[256];
  mt_trace_alloc_t a = {{MT_TR_ALLOC, 0, 0, sizeof(a), 1}, 1, 1, 0, 0};
  cr_assert_eq(mt_trace_check_record(&a, sizeof(a), err, sizeof(err)), 0);
  cr_assert_eq(mt_trace_check_record(&a, sizeof(a) - 8, err, sizeof(err)), -EINVAL);
  cr_assert_str_eq(err, "truncated record (32 bytes of 40)");
  cr_assert_eq(mt_trace_check_record(&a, 3, err, sizeof(err)), -EINVAL);
  a.h.type = 99;
  cr_assert_eq(mt_trace_check_record(&a, sizeof(a), err, sizeof(err)), -EINVAL);
  cr_assert_str_eq(err, "unknown record type 99 (size 40)");
  cr_assert_eq(mt_trace_check_record(&a, sizeof(a), NULL, 0), -EINVAL);
}

/* ---- the recorder ------------------------------------------------------------------ */

static mt_trace_header_t rec_header(void) {
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_MONOTONIC, "mtalloc");
  return h;
}

Test(recorder, four_threads_every_event_once_in_order) {
  rc_record(path, 1, 4, 20000);
  uint64_t iters = rc_verify(path, 4, 20000);
  cr_assert_gt(iters, 0, "the repeating launch sequence gives heuristic ITER records");
}

Test(recorder, threads_exit_and_rings_are_reused) {
  rc_record(path, 3, 4, 3000);
  rc_verify(path, 12, 3000);
}

typedef struct seen_rec {
  uint8_t type, flags;
  uint64_t id; /* launch_id or iteration */
} seen_rec_t;

static size_t read_all(seen_rec_t *out, size_t max) {
  char err[512];
  mt_trace_reader_t *r;
  cr_assert_eq(mt_trace_open(path, &r, err, sizeof(err)), 0, "%s", err);
  const mt_trace_rec_t *rec;
  size_t n = 0;
  int rc;
  while ((rc = mt_trace_next(r, &rec)) == 1) {
    cr_assert_lt(n, max);
    out[n].type = rec->type;
    out[n].flags = rec->flags;
    out[n].id = rec->type == MT_TR_LAUNCH ? ((const mt_trace_launch_t *)rec)->launch_id
              : rec->type == MT_TR_ITER ? ((const mt_trace_iter_t *)rec)->iteration : 0;
    n++;
  }
  cr_assert_eq(rc, 0, "%s", mt_trace_error(r));
  mt_trace_close(r);
  return n;
}

static void launch(uint64_t id) {
  _mt_trace_launch(id, id % 5, NULL, 0, NULL, NULL, 0, 0, false);
}

Test(recorder, iteration_heuristic_and_mark) {
  mt_trace_header_t h = rec_header();
  cr_assert_eq(_mt_trace_start(path, &h, NULL), 0);
  /* Start-up: a kernel run back to back is not an iteration. */
  for (uint64_t id = 1; id <= 3; id++) launch(id);
  for (int i = 0; i < 5; i++) launch(50);
  /* Six passes of a 12-launch loop: ITER 0..4 at passes 2..6. */
  for (int pass = 0; pass < 6; pass++)
    for (uint64_t id = 100; id < 112; id++) launch(id);
  mt_mark_iteration();
  for (int pass = 0; pass < 2; pass++)
    for (uint64_t id = 100; id < 112; id++) launch(id);
  _mt_trace_stop();

  static seen_rec_t s[1000];
  size_t n = read_all(s, 1000);
  cr_assert_eq(n, 8 + 8 * 12 + 5 + 1);
  uint64_t heur = 0, marks = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i].type != MT_TR_ITER) continue;
    cr_assert_lt(i + 1, n);
    if (s[i].flags & MT_TRF_HEURISTIC) {
      cr_assert_eq(s[i].id, heur, "heuristic ITER %llu in order", (unsigned long long)heur);
      cr_assert_eq(s[i + 1].type, MT_TR_LAUNCH);
      cr_assert_eq(s[i + 1].id, 100, "an iteration begins with the loop's first launch");
      heur++;
    } else {
      cr_assert_eq(s[i].id, 5, "mt_mark_iteration continues the numbering");
      cr_assert_eq(marks, 0);
      marks++;
      /* 6 passes of 12 plus 8 start-up launches before it */
      cr_assert_eq(i, 8 + 6 * 12 + 5);
    }
  }
  cr_assert_eq(heur, 5);
  cr_assert_eq(marks, 1);
}

Test(recorder, no_iterations_without_repetition) {
  mt_trace_header_t h = rec_header();
  cr_assert_eq(_mt_trace_start(path, &h, NULL), 0);
  for (uint64_t id = 1; id <= 5000; id++) launch(id);
  _mt_trace_iter(true); /* the pager's own guess is recorded as given */
  _mt_trace_stop();
  static seen_rec_t s[6000];
  size_t n = read_all(s, 6000);
  cr_assert_eq(n, 5001);
  cr_assert_eq(s[5000].type, MT_TR_ITER);
  cr_assert_eq(s[5000].flags, MT_TRF_HEURISTIC);
  cr_assert_eq(s[5000].id, 0);
}

Test(recorder, huge_footprints_keep_their_place) {
  mt_trace_header_t h = rec_header();
  cr_assert_eq(_mt_trace_start(path, &h, NULL), 0);
  const uint32_t nf = 6000; /* 144 KB: bigger than a ring slot, goes through the heap */
  mt_trace_span_t *foot = calloc(nf, sizeof(*foot));
  for (uint32_t k = 0; k < 40; k++) {
    for (uint32_t i = 0; i < nf; i++) foot[i] = (mt_trace_span_t){k, i, i + k};
    _mt_trace_alloc(k, 1, 0, false);
    _mt_trace_launch(k, 1, "big", 0, foot, NULL, nf, 0, false);
    _mt_trace_free(k, 0, false);
  }
  _mt_trace_stop();
  free(foot);
  char err[512];
  mt_trace_reader_t *r;
  cr_assert_eq(mt_trace_open(path, &r, err, sizeof(err)), 0, "%s", err);
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  cr_assert_eq(rec->type, MT_TR_NAME);
  for (uint32_t k = 0; k < 40; k++) {
    cr_assert_eq(mt_trace_next(r, &rec), 1);
    cr_assert_eq(rec->type, MT_TR_ALLOC);
    cr_assert_eq(((const mt_trace_alloc_t *)rec)->region, k);
    cr_assert_eq(mt_trace_next(r, &rec), 1, "%s", mt_trace_error(r));
    const mt_trace_launch_t *l = (const void *)rec;
    cr_assert_eq(rec->type, MT_TR_LAUNCH);
    cr_assert_eq(l->nfoot, nf);
    const mt_trace_span_t *f = (const void *)(l + 1);
    for (uint32_t i = 0; i < nf; i += 997) cr_assert(f[i].region == k && f[i].offset == i && f[i].bytes == i + k);
    cr_assert_eq(mt_trace_next(r, &rec), 1);
    cr_assert_eq(rec->type, MT_TR_FREE);
  }
  cr_assert_eq(mt_trace_next(r, &rec), 0);
  mt_trace_close(r);
}

Test(recorder, flushed_within_a_second) {
  mt_trace_header_t h = rec_header();
  cr_assert_eq(_mt_trace_start(path, &h, NULL), 0);
  for (uint32_t k = 0; k < 10; k++) _mt_trace_stall(MT_STALL_FETCH, k, k + 1);
  usleep(1200 * 1000);
  static seen_rec_t s[64];
  size_t n = read_all(s, 64); /* while still recording: what a crash would leave */
  cr_assert_eq(n, 10);
  _mt_trace_stop();
}

Test(recorder, every_entry_point) {
  mt_trace_header_t h = rec_header();
  cr_assert_eq(_mt_trace_start(path, &h, NULL), 0);
  cr_assert_eq(_mt_trace_start(path, &h, NULL), -EBUSY);
  uint64_t t0 = _mt_trace_now();
  _mt_trace_alloc(1, 100, 2, true);
  _mt_trace_free(1, 2, true);
  _mt_trace_copy(MT_TR_D2H, true, 3, 4096, 10, 20);
  _mt_trace_move(MT_TR_FETCH, 4, 5, MT_TIER_HOST, MT_TIER_GPU, false, true, 2 << 20);
  _mt_trace_move(MT_TR_EVICT, 4, 6, MT_TIER_GPU, MT_TIER_HOST, true, false, 2 << 20);
  _mt_trace_move(MT_TR_ALLOC, 4, 6, 0, 0, false, false, 0); /* not a move: ignored */
  _mt_trace_stall(MT_STALL_HOLD, 30, 40);
  _mt_trace_opt_step(1 << 20, 50, 60);
  _mt_trace_iter(false);
  mt_trace_span_t f = {1, 0, 100};
  const uint8_t fk = MT_ACC_READ; /* what an application's read-mostly advice gives */
  _mt_trace_launch(9, 8, "k", 7, &f, &fk, 1, 55, true);
  _mt_trace_stop();
  _mt_trace_alloc(2, 1, 0, false); /* after stop: not recorded, no crash */

  char err[512];
  mt_trace_reader_t *r;
  cr_assert_eq(mt_trace_open(path, &r, err, sizeof(err)), 0, "%s", err);
  cr_assert_geq(mt_trace_header(r)->start_ns, 1);
  cr_assert_leq(mt_trace_header(r)->start_ns, t0);
  const mt_trace_rec_t *rec;
  cr_assert_eq(mt_trace_next(r, &rec), 1); /* NAME first: the queue is drained before the rings */
  cr_assert_eq(rec->type, MT_TR_NAME);
  cr_assert_eq(((const mt_trace_name_t *)rec)->id, 8);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_alloc_t *a = (const void *)rec;
  cr_assert(rec->type == MT_TR_ALLOC && rec->flags == MT_TRF_SMALL && a->region == 1 && a->bytes == 100 &&
            a->stream == 2 && rec->t_ns >= t0);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_free_t *fr = (const void *)rec;
  cr_assert(rec->type == MT_TR_FREE && rec->flags == MT_TRF_ASYNC && fr->region == 1 && fr->stream == 2);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_copy_t *c = (const void *)rec;
  cr_assert(rec->type == MT_TR_COPY && rec->flags == MT_TRF_PAGER && c->dir == MT_TR_D2H && c->stream == 3 &&
            c->bytes == 4096 && rec->t_ns == 10 && c->end_ns == 20);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_move_t *m = (const void *)rec;
  cr_assert(rec->type == MT_TR_FETCH && rec->flags == MT_TRF_PREFETCH && m->region == 4 && m->chunk == 5 &&
            m->from == MT_TIER_HOST && m->to == MT_TIER_GPU && m->bytes == 2 << 20);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  m = (const void *)rec;
  cr_assert(rec->type == MT_TR_EVICT && rec->flags == MT_TRF_DIRTY && m->chunk == 6);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_stall_t *st = (const void *)rec;
  cr_assert(rec->type == MT_TR_STALL && st->cause == MT_STALL_HOLD && rec->t_ns == 30 && st->end_ns == 40);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_opt_step_t *o = (const void *)rec;
  cr_assert(rec->type == MT_TR_OPT_STEP && o->bytes == 1 << 20 && rec->t_ns == 50 && o->end_ns == 60);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  cr_assert(rec->type == MT_TR_ITER && rec->flags == 0 && ((const mt_trace_iter_t *)rec)->iteration == 0);
  cr_assert_eq(mt_trace_next(r, &rec), 1);
  const mt_trace_launch_t *l = (const void *)rec;
  cr_assert(rec->type == MT_TR_LAUNCH && rec->flags == MT_TRF_GRAPH && l->launch_id == 9 && l->func == 8 &&
            l->stream == 7 && l->nfoot == 1 && l->dur_ns == 55);
  cr_assert(mt_trace_launch_kinds(l) && mt_trace_launch_kinds(l)[0] == MT_ACC_READ);
  cr_assert_eq(mt_trace_next(r, &rec), 0);
  mt_trace_close(r);
}

/* Errors: one clear message, tracing off, the program goes on. */
static int logpipe[2];

static void capture_log(void) {
  cr_assert_eq(pipe(logpipe), 0);
  _mt_log_configure(MT_LOG_WARN, logpipe[1]);
}

static void read_log(char *out, size_t len) {
  _mt_log_configure(MT_LOG_WARN, -1);
  close(logpipe[1]);
  size_t got = 0;
  ssize_t n;
  while (got < len - 1 && (n = read(logpipe[0], out + got, len - 1 - got)) > 0) got += (size_t)n;
  out[got] = '\0';
  close(logpipe[0]);
}

Test(recorder, cannot_create) {
  mt_trace_header_t h = rec_header();
  capture_log();
  cr_assert_eq(_mt_trace_start("/nonexistent-dir/t.bin", &h, NULL), -ENOENT);
  cr_assert(!_mt_trace_on());
  _mt_trace_alloc(1, 1, 0, false);
  _mt_trace_stop();
  char out[1024];
  read_log(out, sizeof(out));
  cr_assert_str_eq(out, "mtalloc: error: MT_TRACE=/nonexistent-dir/t.bin: cannot create the trace: No such file "
                        "or directory; tracing is off\n");
}

Test(recorder, disk_full_stops_tracing) {
  mt_trace_header_t h = rec_header();
  capture_log();
  cr_assert_eq(_mt_trace_start("/dev/full", &h, NULL), 0);
  for (int i = 0; i < 100000 && _mt_trace_on(); i++) {
    _mt_trace_copy(MT_TR_H2D, false, 0, 1, 1, 2);
    if (i % 1000 == 0) usleep(1000);
  }
  for (int i = 0; i < 300 && _mt_trace_on(); i++) usleep(10 * 1000);
  cr_assert(!_mt_trace_on(), "tracing stops when the disk is full");
  _mt_trace_copy(MT_TR_H2D, false, 0, 1, 1, 2);
  _mt_trace_stop();
  char out[1024];
  read_log(out, sizeof(out));
  cr_assert(strstr(out, "mtalloc: error: MT_TRACE=/dev/full: writing the trace failed: No space left on device; "
                        "tracing stopped"), "%s", out);
  cr_assert(strchr(out, '\n') == out + strlen(out) - 1, "one line: %s", out);
}
