/*
 * gen.c - writes the small traces the mt-trace tests check, through the one
 * writer (trace_io.h), so the numbers the tests expect can be worked out by
 * hand from the records below (check.py lists them).
 *
 *   mttrace-gen basic FILE       setup + 2 iterations: known bytes, fetches,
 *                                evictions, stalls, prefetches (one timely,
 *                                one wasted, one late)
 *   mttrace-gen noiter FILE      no ITER records: the whole trace is iteration 0
 *   mttrace-gen unordered FILE   a prefetch written after the launch that used
 *                                it but stamped earlier, as per-thread buffers
 *                                flush it: it must still count as timely
 *   mttrace-gen big FILE N       N launches cycling over 64 regions with
 *                                evictions and fetches, for the streaming check
 *
 * Exit: 0, 1 on a write error, 2 on bad arguments.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "trace_io.h"

#define MIB (1ull << 20)
#define C (2 * MIB)

static mt_trace_writer_t *w;
static int failed;

static void put(const void *rec) {
  if (mt_trace_write(w, rec) < 0) failed = 1;
}

static void alloc(uint64_t t, uint64_t region, uint64_t bytes, int small) {
  mt_trace_alloc_t a = {.h = {.type = MT_TR_ALLOC, .flags = small ? MT_TRF_SMALL : 0, .size = sizeof a, .t_ns = t},
                        .region = region, .bytes = bytes};
  put(&a);
}

static void free_(uint64_t t, uint64_t region) {
  mt_trace_free_t f = {.h = {.type = MT_TR_FREE, .size = sizeof f, .t_ns = t}, .region = region};
  put(&f);
}

static void launch(uint64_t t, uint64_t func, uint32_t stream, uint64_t dur, const mt_trace_span_t *foot,
                   uint32_t n) {
  mt_trace_launch_t l = {.h = {.type = MT_TR_LAUNCH, .size = (uint32_t)(sizeof l + n * sizeof *foot), .t_ns = t},
                         .launch_id = func * 1000 + t, .func = func, .dur_ns = dur, .stream = stream, .nfoot = n};
  if (mt_trace_write_launch(w, &l, foot, NULL) < 0) failed = 1;
}

static void copy(uint64_t t, uint64_t end, uint32_t dir, int pager, uint32_t stream, uint64_t bytes) {
  mt_trace_copy_t c = {.h = {.type = MT_TR_COPY, .flags = pager ? MT_TRF_PAGER : 0, .size = sizeof c, .t_ns = t},
                       .end_ns = end, .bytes = bytes, .dir = dir, .stream = stream};
  put(&c);
}

static void move(uint8_t type, uint64_t t, uint64_t region, uint32_t chunk, uint8_t from, uint8_t to, uint8_t flags) {
  mt_trace_move_t m = {.h = {.type = type, .flags = flags, .size = sizeof m, .t_ns = t},
                       .region = region, .chunk = chunk, .from = from, .to = to, .bytes = C};
  put(&m);
}

static void stall(uint64_t t, uint64_t end) {
  mt_trace_stall_t s = {.h = {.type = MT_TR_STALL, .size = sizeof s, .t_ns = t}, .end_ns = end, .cause = MT_STALL_FETCH};
  put(&s);
}

static void iter(uint64_t t, uint64_t n) {
  mt_trace_iter_t i = {.h = {.type = MT_TR_ITER, .size = sizeof i, .t_ns = t}, .iteration = n};
  put(&i);
}

static void name(uint64_t t, uint64_t id, const char *s) {
  if (mt_trace_write_name(w, t, id, s) < 0) failed = 1;
}

#define FETCH(t, r, c, fl) move(MT_TR_FETCH, t, r, c, MT_TIER_HOST, MT_TIER_GPU, fl)
#define EVICT(t, r, c, fl) move(MT_TR_EVICT, t, r, c, MT_TIER_GPU, MT_TIER_HOST, fl)

/* check.py's comments follow the residency through these records. */
static void basic(void) {
  const mt_trace_span_t r1_all = {1, 0, 6 * MIB}, r1_c0 = {1, 0, 2 * MIB}, r2_whole = {2, 0, 0},
                        r2_all = {2, 0, 4 * MIB}, r3 = {3, 0, 4096};
  name(0, 1, "gemm<float>");
  name(0, 2, "relu \"q\"\n\xff");
  alloc(0, 1, 6 * MIB, 0);
  alloc(0, 2, 4 * MIB, 0);
  alloc(0, 3, 4096, 1);
  copy(100, 1100, MT_TR_H2D, 0, 0, 6 * MIB);

  iter(1000, 0);
  launch(1100, 1, 0, 500, (mt_trace_span_t[]){r1_all, r3}, 2);
  EVICT(2000, 1, 0, MT_TRF_DIRTY);
  copy(2000, 2500, MT_TR_D2H, 1, 7, 2 * MIB);
  launch(2100, 2, 1, 0, &r2_whole, 1);
  EVICT(2200, 1, 1, 0);
  stall(2300, 2800);
  FETCH(2300, 1, 0, 0);
  copy(2300, 2800, MT_TR_H2D, 1, 7, 2 * MIB);
  FETCH(2900, 1, 1, MT_TRF_PREFETCH);
  copy(2900, 3400, MT_TR_H2D, 1, 7, 2 * MIB);
  launch(3000, 1, 0, 400, &r1_all, 1);

  iter(5000, 1);
  EVICT(5100, 2, 0, MT_TRF_DIRTY);
  copy(5100, 5600, MT_TR_D2H, 1, 7, 2 * MIB);
  FETCH(5200, 2, 0, MT_TRF_PREFETCH);
  copy(5200, 5300, MT_TR_H2D, 1, 7, 2 * MIB);
  EVICT(5300, 2, 0, 0);
  launch(5400, 2, 1, 0, &r2_all, 1);
  stall(5400, 5700);
  FETCH(5600, 2, 0, MT_TRF_PREFETCH);
  copy(5600, 5700, MT_TR_H2D, 1, 7, 2 * MIB);
  copy(6000, 6100, MT_TR_D2D, 0, 1, MIB);
  copy(6050, 6060, MT_TR_SET, 0, 1, 512);
  free_(6500, 2);
  mt_trace_opt_step_t o = {.h = {.type = MT_TR_OPT_STEP, .size = sizeof o, .t_ns = 7000}, .end_ns = 8000,
                           .bytes = 6 * MIB};
  put(&o);
  launch(8000, 1, 0, 1000, &r1_c0, 1);
  free_(8500, 3);
}

static void noiter(void) {
  const mt_trace_span_t r1 = {1, 0, 4 * MIB};
  alloc(10, 1, 4 * MIB, 0);
  launch(20, 1, 0, 30, &r1, 1);
  copy(60, 70, MT_TR_H2D, 0, 0, 1000);
  free_(100, 1);
}

static void unordered(void) {
  const mt_trace_span_t r1 = {1, 0, 2 * MIB};
  alloc(0, 1, 2 * MIB, 0);
  EVICT(100, 1, 0, MT_TRF_DIRTY);
  launch(300, 1, 0, 10, &r1, 1);      /* the app thread's buffer first ... */
  FETCH(200, 1, 0, MT_TRF_PREFETCH);  /* ... then the prefetch thread's */
  free_(400, 1);
}

static void big(unsigned long n) {
  enum { NR = 64 };
  for (uint64_t r = 1; r <= NR; r++) alloc(0, r, 4 * MIB, 0);
  uint64_t t = 1000;
  for (unsigned long i = 0; i < n; i++, t += 1000) {
    uint64_t r = 1 + i % NR;
    if (i % 1000 == 0) iter(t, i / 1000);
    if (i >= NR) {
      EVICT(t, 1 + (i + NR / 2) % NR, 0, MT_TRF_DIRTY);
      FETCH(t + 1, r, 0, i % 2 ? MT_TRF_PREFETCH : 0);
    }
    mt_trace_span_t s = {r, 0, 4 * MIB};
    launch(t + 10, 1 + i % 7, (uint32_t)(i % 3), 0, &s, 1);
  }
}

int main(int argc, char **argv) {
  if (argc < 3 || (strcmp(argv[1], "big") == 0 && argc < 4)) {
    fprintf(stderr, "usage: mttrace-gen basic|noiter|unordered|big FILE [N]\n");
    return 2;
  }
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "mttrace-gen");
  h.chunk_bytes = C;
  h.gpu_budget = 12 * MIB;
  h.host_budget = 64 * MIB;
  snprintf(h.device, sizeof h.device, "Test GPU <&>");
  int rc = mt_trace_writer_open(argv[2], &h, "MT_MAX_VRAM=12M\n", &w);
  if (rc < 0) {
    fprintf(stderr, "mttrace-gen: %s: cannot create (%d)\n", argv[2], rc);
    return 1;
  }
  if (strcmp(argv[1], "basic") == 0)
    basic();
  else if (strcmp(argv[1], "noiter") == 0)
    noiter();
  else if (strcmp(argv[1], "unordered") == 0)
    unordered();
  else if (strcmp(argv[1], "big") == 0)
    big(strtoul(argv[3], NULL, 10));
  else {
    fprintf(stderr, "mttrace-gen: unknown trace '%s'\n", argv[1]);
    mt_trace_writer_close(w);
    return 2;
  }
  if (mt_trace_writer_close(w) < 0 || failed) {
    fprintf(stderr, "mttrace-gen: %s: write failed\n", argv[2]);
    return 1;
  }
  return 0;
}
