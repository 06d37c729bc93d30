/*
 * progress.c - one progress bar on stderr for long runs, drawn only when
 * stderr is a terminal (so logs, pipes and tests see nothing), redrawn at
 * most ten times a second, and erased by mt_progress_end() so the next line
 * starts clean. Single-threaded, like the commands that call it.
 */
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <time.h>
#include <unistd.h>

#include "commands.h"

static int tty = -1;             /* -1: not checked yet */
static bool drawn;
static uint64_t last_ns;

static uint64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

void mt_progress(const char *what, uint64_t done, uint64_t total) {
  if (tty < 0) tty = isatty(STDERR_FILENO);
  if (!tty || total == 0) return;
  uint64_t now = now_ns();
  if (drawn && now - last_ns < 100000000u) return;
  last_ns = now;
  if (done > total) done = total;
  enum { WIDTH = 40 };
  unsigned fill = (unsigned)((double)done / (double)total * WIDTH);
  char bar[WIDTH + 1];
  for (unsigned i = 0; i < WIDTH; i++) bar[i] = i < fill ? '#' : '.';
  bar[WIDTH] = '\0';
  fprintf(stderr, "\r%s [%s] %3u%%", what, bar, (unsigned)((double)done / (double)total * 100));
  fflush(stderr);
  drawn = true;
}

void mt_progress_end(void) {
  if (!drawn) return;
  fputs("\r\033[K", stderr);
  fflush(stderr);
  drawn = false;
}
