/*
 * trace_bench - nanoseconds per recorder event on the caller's thread:
 * _mt_trace_launch with a 16-span footprint and a name, and _mt_trace_copy,
 * from one thread and from two at once, recording to a file under /tmp
 * (removed afterwards). Median over batches of BATCH calls, with a pause
 * between batches so that the flusher keeps up; the mean is shown too, as it
 * includes batches where a ring was full and the caller waited. A last,
 * unpaced run shows the flusher's throughput (callers wait on full rings).
 * Tracing off is the cost of the check alone.
 *
 *   build/tools/bench/trace_bench [BATCHES]
 *
 * The target is under 100 ns per event (median). It reports, it does not
 * assert: the machine is shared and noisy.
 */
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "bench.h"
#include "internal.h"
#include "trace.h"
#include "trace_io.h"

#define BATCH 100
#define PAUSE_NS 100000L  /* between batches, so the flusher keeps up (see main) */
#define NFOOT 16
#define FUNCS 64
#define CYCLE 400   /* launches per "iteration": the heuristic finds its anchor */

enum what { LAUNCH, COPY };

typedef struct job {
  enum what what;
  unsigned batches;
  unsigned seed;
  bool paced;
  double *ns;       /* per batch */
} job_t;

static const char *names[FUNCS];

static void *run(void *p) {
  job_t *j = p;
  mt_trace_span_t foot[NFOOT];
  uint64_t rnd = 0x9e3779b97f4a7c15ULL ^ j->seed;
  for (unsigned i = 0; i < NFOOT; i++) foot[i] = (mt_trace_span_t){bench_rand(&rnd) % 1000 + 1, 0, 2 << 20};
  uint64_t n = 0;
  for (unsigned b = 0; b < j->batches; b++) {
    uint64_t t0 = bench_now_ns();
    if (j->what == LAUNCH) {
      for (unsigned i = 0; i < BATCH; i++, n++) {
        uint64_t id = n % CYCLE;
        _mt_trace_launch(0x1000 + id, id % FUNCS, names[id % FUNCS], j->seed, foot, NULL, NFOOT, 0, false);
      }
    } else {
      for (unsigned i = 0; i < BATCH; i++, n++) _mt_trace_copy(MT_TR_H2D, true, j->seed, 2 << 20, n, n + 1);
    }
    j->ns[b] = (double)(bench_now_ns() - t0) / BATCH;
    if (j->paced) {
      struct timespec ts = {0, PAUSE_NS};
      nanosleep(&ts, NULL);
    }
  }
  return NULL;
}

static void measure(const char *label, enum what what, unsigned threads, unsigned batches, bool on, bool paced) {
  char path[] = "/tmp/mt-trace-bench-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) {
    perror("trace_bench: mkstemp");
    exit(1);
  }
  close(fd);
  if (on) {
    mt_trace_header_t h;
    mt_trace_header_init(&h, MT_TRACE_CLOCK_MONOTONIC, "trace_bench");
    if (_mt_trace_start(path, &h, NULL) != 0) exit(1);
  }
  pthread_t th[2];
  job_t jobs[2];
  double *ns = calloc((size_t)threads * batches, sizeof(double));
  uint64_t t0 = bench_now_ns();
  for (unsigned i = 0; i < threads; i++) {
    jobs[i] = (job_t){what, batches, i + 1, paced, ns + (size_t)i * batches};
    pthread_create(&th[i], NULL, run, &jobs[i]);
  }
  for (unsigned i = 0; i < threads; i++) pthread_join(th[i], NULL);
  double wall = (double)(bench_now_ns() - t0) / 1e9;
  if (on) _mt_trace_stop();
  struct stat st;
  stat(path, &st);
  unlink(path);
  double sum = 0;
  size_t n = (size_t)threads * batches;
  for (size_t i = 0; i < n; i++) sum += ns[i];
  double median = bench_median(ns, n);
  printf("%-36s %u thread%s  median %6.1f ns/event  mean %7.1f  p99 %7.1f  %6.1f MB written (%.0f MB/s)\n",
         label, threads, threads > 1 ? "s" : " ", median, sum / (double)n, ns[(size_t)((double)n * 0.99)],
         (double)st.st_size / 1e6, (double)st.st_size / 1e6 / wall);
  free(ns);
}

int main(int argc, char **argv) {
  unsigned batches = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 3001;
  if (batches == 0) {
    fprintf(stderr, "usage: trace_bench [BATCHES]\n");
    return 2;
  }
  static char buf[FUNCS][48];
  for (unsigned i = 0; i < FUNCS; i++) {
    snprintf(buf[i], sizeof(buf[i]), "void kernel_%u<float, 128>(Params)", i);
    names[i] = buf[i];
  }
  printf("trace_bench: %u batches of %u events per thread; launch = %d spans (%zu bytes), copy = %zu bytes\n", batches,
         BATCH, NFOOT, sizeof(mt_trace_launch_t) + NFOOT * sizeof(mt_trace_span_t), sizeof(mt_trace_copy_t));
  /* Paced: a pause after each batch keeps the event rate (a few hundred MB/s)
   * within what the flusher writes, so the median is the hot path itself.
   * Real launch rates are far lower (a CUDA launch takes microseconds). */
  for (unsigned threads = 1; threads <= 2; threads++) {
    measure("_mt_trace_launch (16 spans)", LAUNCH, threads, batches, true, true);
    measure("_mt_trace_copy", COPY, threads, batches, true, true);
  }
  measure("_mt_trace_launch, tracing off", LAUNCH, 1, batches, false, true);
  /* Saturated: no pause; the rings fill and callers wait for the flusher,
   * so this measures the flusher's throughput to the file. */
  printf("saturated (callers wait for the flusher; shows its write throughput):\n");
  measure("_mt_trace_launch (16 spans)", LAUNCH, 1, batches, true, false);
  measure("_mt_trace_launch (16 spans)", LAUNCH, 2, batches, true, false);
  return 0;
}
