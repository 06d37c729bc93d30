/* Description: libFuzzer target for the trace reader. Each input is a whole
 * trace file (written to a memfd and opened by path, so the real reader code
 * runs: header checks, buffered reads, record checks) and also a run of
 * records for mt_trace_check_record. The reader must never crash, read out
 * of bounds or allocate hugely; every record it hands out must pass the
 * in-memory check, and every error must name the byte offset.
 * Built and run by tests/fuzz/run.sh (clang -fsanitize=fuzzer,address,undefined). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "trace_io.h"

#define CHECK(c)                                                    \
  do {                                                              \
    if (!(c)) {                                                     \
      fprintf(stderr, "fuzz_trace: %s:%d: %s\n", __FILE__, __LINE__, #c); \
      abort();                                                      \
    }                                                               \
  } while (0)

static int memfd = -1;
static char path[64];

/* Reads every byte of a record the reader accepted, so that ASan sees any
 * overrun; returns a checksum so the reads are not optimised away. */
static uint64_t touch(const mt_trace_rec_t *rec) {
  const uint8_t *p = (const uint8_t *)rec;
  uint64_t sum = 0;
  for (uint32_t i = 0; i < rec->size; i++) sum += p[i];
  return sum;
}

static uint64_t walk(mt_trace_reader_t *r, uint64_t *count) {
  const mt_trace_rec_t *rec;
  uint64_t sum = 0, last = 0;
  int rc;
  *count = 0;
  while ((rc = mt_trace_next(r, &rec)) == 1) {
    uint64_t off = mt_trace_offset(r);
    CHECK(off % 8 == 0 && off >= mt_trace_header(r)->header_bytes && off >= last);
    CHECK(off + rec->size <= mt_trace_size(r));
    CHECK(((uintptr_t)rec & 7) == 0);
    char err[256];
    uint32_t version = mt_trace_header(r)->version;
    CHECK(mt_trace_check_record_version(rec, rec->size, version, err, sizeof(err)) == 0);
    if (rec->type == MT_TR_LAUNCH) {
      const mt_trace_launch_t *l = (const void *)rec;
      CHECK(rec->size == (version >= 2 ? MT_TRACE_LAUNCH_BYTES(l->nfoot) : MT_TRACE_LAUNCH_BYTES_V1(l->nfoot)));
      const uint8_t *k = mt_trace_launch_kinds(l);
      for (uint32_t i = 0; k && i < l->nfoot; i++) CHECK(k[i] < MT_ACC__COUNT);
    }
    sum += touch(rec);
    last = off + rec->size;
    (*count)++;
  }
  if (rc < 0) {
    CHECK(rec == NULL);
    CHECK(strstr(mt_trace_error(r), ": byte ") != NULL);
    CHECK(mt_trace_next(r, &rec) == rc); /* sticky */
  }
  return sum;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
  if (memfd < 0) {
    memfd = memfd_create("mt-trace-fuzz", 0);
    CHECK(memfd >= 0);
    snprintf(path, sizeof(path), "/proc/self/fd/%d", memfd);
  }
  CHECK(ftruncate(memfd, 0) == 0);
  CHECK(size == 0 || pwrite(memfd, data, size, 0) == (ssize_t)size);

  char err[512];
  mt_trace_reader_t *r;
  int rc = mt_trace_open(path, &r, err, sizeof(err));
  if (rc == 0) {
    CHECK(mt_trace_size(r) == size);
    CHECK(strlen(mt_trace_options(r)) < mt_trace_header(r)->header_bytes);
    CHECK(strlen(mt_trace_header(r)->device) < sizeof(mt_trace_header(r)->device));
    uint64_t n1, n2;
    uint64_t s1 = walk(r, &n1);
    CHECK(mt_trace_rewind(r) == 0);
    uint64_t s2 = walk(r, &n2);
    CHECK(n1 == n2 && s1 == s2);
    mt_trace_close(r);
  } else {
    CHECK(strstr(err, path) == err);
  }

  /* The same bytes as a run of records in memory. */
  size_t off = 0;
  while (off < size) {
    if (mt_trace_check_record(data + off, size - off, err, sizeof(err)) != 0) break;
    uint32_t rsize;
    memcpy(&rsize, data + off + 4, sizeof(rsize));
    CHECK(rsize >= 16 && rsize <= size - off);
    off += rsize;
  }
  return 0;
}
