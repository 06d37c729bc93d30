/* Description: MT_PREDICTOR_MEM bounds the predictor's tables, and a loop
 * they cannot hold is reported (prefetch.c, pred_count), on the
 * virtual-clock device.
 *
 * A loop of 2,500 launches, each a function of its own over one of four
 * 2 MiB regions (room for all: nothing pages), run 30 times: 75,000
 * launches, past one judging window (65,536).
 * a_loop_larger_than_the_table_is_reported: at 64 KiB (1,270 entries, one
 * a launch wanted) the table keeps overflowing: the stats count the keys
 * it had no room for, the predictor names part of the loop (the share the
 * table keeps: predictor/correlation.c, Loops too long), and one warning,
 * naming the option and its value, says so.
 * a_loop_that_fits_is_not: at the default (32 MiB) nothing is evicted,
 * every launch after the first iteration but a few is named, and nothing
 * is logged. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "predictor.h"
#include "vpager.h"

#define LOOP 2500
#define ITERS 30

/* Runs the loop with the predictor's memory at mem; returns the warnings
 * logged (their text in buf). */
static int run_loop(size_t mem, char *buf, size_t len) {
  char path[] = "/tmp/mt-predmem-XXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  unlink(path);
  _mt_log_configure(MT_LOG_WARN, fd);
  mt_pager_config_t pc = {.budget = 32 * MiB, .host_budget = 64 * MiB, .chunk = 2 * MiB, .small_limit = 4096,
                          .policy = "nextuse", .predictor = "correlation", .prefetch_depth = 8, .handoff = 2,
                          .predictor_mem = mem};
  mt_device_t *d;
  mt_pager_t *p = vp_start(&pc, &d);
  uintptr_t r[4];
  for (int i = 0; i < 4; i++) cr_assert_eq(_mt_alloc(2 * MiB, &r[i]), 0);
  vp_kern_t k = {d, 0, 1000};
  bool w = true;
  for (int it = 0; it < ITERS; it++)
    for (uint64_t i = 0; i < LOOP; i++) vp_launch(p, &k, &r[i % 4], &w, 1, 5000 + i);
  vp_stop(p);
  _mt_log_configure(MT_LOG_ERROR, 2);
  ssize_t n = pread(fd, buf, len - 1, 0);
  close(fd);
  buf[n > 0 ? n : 0] = '\0';
  int warnings = 0;
  for (const char *s = buf; (s = strstr(s, "warning: ")) != NULL; s++) warnings++;
  return warnings;
}

Test(predmem_pager, a_loop_larger_than_the_table_is_reported) {
  static char log[8192];
  uint64_t ev0 = mt_stat_get(predictor_evictions), hits0 = mt_stat_get(predictor_hits);
  int warnings = run_loop(64 << 10, log, sizeof log);
  uint64_t ev = mt_stat_get(predictor_evictions) - ev0, hits = mt_stat_get(predictor_hits) - hits0;
  cr_assert_gt(ev, (uint64_t)LOOP * ITERS / 2, "the table keeps overflowing: %llu", (unsigned long long)ev);
  cr_assert(hits > (uint64_t)LOOP * ITERS / 10 && hits < (uint64_t)LOOP * ITERS * 3 / 4,
            "part of the loop named: %llu", (unsigned long long)hits);
  cr_assert_eq(warnings, 1, "one warning, once: %s", log);
  cr_assert_not_null(strstr(log, "MT_PREDICTOR_MEM=65536"), "it names the option and its value: %s", log);
}

Test(predmem_pager, a_loop_that_fits_is_not) {
  static char log[8192];
  uint64_t ev0 = mt_stat_get(predictor_evictions), hits0 = mt_stat_get(predictor_hits);
  int warnings = run_loop(MT_PREDICTOR_MEM_DEFAULT, log, sizeof log);
  uint64_t ev = mt_stat_get(predictor_evictions) - ev0, hits = mt_stat_get(predictor_hits) - hits0;
  cr_assert_eq(ev, 0, "nothing evicted: %llu", (unsigned long long)ev);
  cr_assert_geq(hits, (uint64_t)LOOP * (ITERS - 1) - 10, "every launch after the first iteration named: %llu",
                (unsigned long long)hits);
  cr_assert_eq(warnings, 0, "nothing logged: %s", log);
}
