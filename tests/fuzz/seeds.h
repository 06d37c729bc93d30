/* seeds.h - the fuzz seed corpus, written with the real writer: a
 * header-only trace, one with options text and every record type, one
 * with launches of growing footprints and every access kind, and a version
 * 1 trace (launches without kinds, written by hand as the old writer laid
 * them out). Used by gen_seeds (for libFuzzer)
 * and fuzz_replay (the meson test). */
#ifndef MT_FUZZ_SEEDS_H
#define MT_FUZZ_SEEDS_H
#include <stdio.h>
#include <stdlib.h>

#include "trace_io.h"

static mt_trace_writer_t *open_seed(const char *dir, const char *name, const char *opts) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/%s", dir, name);
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "gen_seeds");
  h.chunk_bytes = 2 << 20;
  mt_trace_writer_t *w;
  if (mt_trace_writer_open(path, &h, opts, &w) != 0) {
    fprintf(stderr, "gen_seeds: cannot create %s\n", path);
    exit(1);
  }
  return w;
}

static void done(mt_trace_writer_t *w) {
  if (mt_trace_writer_close(w) != 0) {
    fprintf(stderr, "gen_seeds: write failed\n");
    exit(1);
  }
}

static const char *const seed_names[] = {"header-only", "every-type", "launches", "version1"};

/* A version 1 trace: an allocation and a launch of two spans, no kinds. */
static void write_v1_seed(const char *dir) {
  char path[4096];
  snprintf(path, sizeof(path), "%s/version1", dir);
  FILE *f = fopen(path, "wb");
  if (!f) {
    fprintf(stderr, "gen_seeds: cannot create %s\n", path);
    exit(1);
  }
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "gen_seeds");
  h.version = 1;
  mt_trace_alloc_t a = {{MT_TR_ALLOC, 0, 1, sizeof(a), 10}, 1, 4096, 0, 0};
  mt_trace_launch_t l = {{MT_TR_LAUNCH, 0, 1, (uint32_t)MT_TRACE_LAUNCH_BYTES_V1(2), 35}, 0x55, 7, 5, 0, 2};
  mt_trace_span_t foot[2] = {{1, 0, 2048}, {1, 2048, 2048}};
  int ok = fwrite(&h, sizeof(h), 1, f) == 1 && fwrite(&a, sizeof(a), 1, f) == 1 && fwrite(&l, sizeof(l), 1, f) == 1 &&
           fwrite(foot, sizeof(foot), 1, f) == 1;
  if (fclose(f) != 0 || !ok) {
    fprintf(stderr, "gen_seeds: write failed\n");
    exit(1);
  }
}

/* Writes the seeds into dir; exits on failure. */
static void write_seeds(const char *dir) {
  done(open_seed(dir, "header-only", NULL));

  mt_trace_writer_t *w = open_seed(dir, "every-type", "MT_MAX_VRAM=1G\n");
  mt_trace_alloc_t a = {{MT_TR_ALLOC, MT_TRF_SMALL, 1, sizeof(a), 10}, 1, 4096, 0, 0};
  mt_trace_free_t f = {{MT_TR_FREE, 0, 1, sizeof(f), 90}, 1, 0, 0};
  mt_trace_copy_t c = {{MT_TR_COPY, MT_TRF_PAGER, 1, sizeof(c), 20}, 30, 4096, MT_TR_H2D, 0};
  mt_trace_move_t fe = {{MT_TR_FETCH, 0, 1, sizeof(fe), 31}, 1, 0, MT_TIER_HOST, MT_TIER_GPU, 0, 4096};
  mt_trace_move_t ev = {{MT_TR_EVICT, MT_TRF_DIRTY, 1, sizeof(ev), 32}, 1, 0, MT_TIER_GPU, MT_TIER_HOST, 0, 4096};
  mt_trace_stall_t s = {{MT_TR_STALL, 0, 1, sizeof(s), 33}, 40, MT_STALL_FETCH, 0};
  mt_trace_opt_step_t o = {{MT_TR_OPT_STEP, 0, 1, sizeof(o), 41}, 50, 4096};
  mt_trace_iter_t it = {{MT_TR_ITER, 0, 1, sizeof(it), 9}, 0};
  mt_trace_launch_t l = {{MT_TR_LAUNCH, 0, 1, 0, 35}, 0x55, 7, 5, 0, 2};
  mt_trace_span_t foot[2] = {{1, 0, 2048}, {1, 2048, 2048}};
  mt_trace_write(w, &it.h);
  mt_trace_write(w, &a.h);
  mt_trace_write(w, &c.h);
  mt_trace_write(w, &fe.h);
  mt_trace_write(w, &ev.h);
  mt_trace_write(w, &s.h);
  mt_trace_write_name(w, 34, 7, "kernel");
  const uint8_t kinds[2] = {MT_ACC_READ, MT_ACC_WRITE};
  mt_trace_write_launch(w, &l, foot, kinds);
  mt_trace_write(w, &o.h);
  mt_trace_write(w, &f.h);
  done(w);

  w = open_seed(dir, "launches", NULL);
  mt_trace_span_t big[40];
  uint8_t bigk[40];
  for (int i = 0; i < 40; i++) {
    big[i] = (mt_trace_span_t){(uint64_t)i + 1, 0, 1 << 20};
    bigk[i] = (uint8_t)(i % MT_ACC__COUNT);
  }
  for (uint32_t i = 0; i < 4; i++) {
    mt_trace_launch_t li = {{MT_TR_LAUNCH, 0, 0, 0, i}, i, i, 0, 0, i * 13};
    mt_trace_write_launch(w, &li, big, bigk);
  }
  done(w);
  write_v1_seed(dir);
}

#endif
