/*
 * log.c - one line per message, prefixed "mtalloc: ".
 *
 * The log is called from hooks inside someone else's process, possibly from a
 * signal handler or while malloc is half-way through, so it formats into a
 * stack buffer and emits the line with a single write(2): no heap, no stdio
 * locks, and lines from different threads do not interleave. A thread-local
 * guard drops a message logged while that thread is already logging (the
 * log's own write re-entering a hook), instead of recursing.
 *
 * Level and destination are two words read without locks; they change only
 * at start (options) or from tests.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

#define MT_LOG_LINE_MAX 1024

static _Atomic int log_level = MT_LOG_WARN;
static _Atomic int log_fd = -1; /* -1: stderr */
static _Atomic int log_owned_fd = -1;
static __thread int log_busy __attribute__((tls_model("initial-exec")));

void _mt_log_configure(int level, int fd) {
  atomic_store(&log_level, level);
  if (fd != -2) atomic_store(&log_fd, fd);
}

int _mt_log_level(void) {
  return atomic_load(&log_level);
}

int _mt_log_open(const char *path) {
  int fd = open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (fd < 0) return -errno;
  int old = atomic_exchange(&log_owned_fd, fd);
  atomic_store(&log_fd, fd);
  if (old >= 0) close(old);
  return 0;
}

static const char *level_tag(mt_log_level_t level) {
  switch (level) {
    case MT_LOG_ERROR: return "error: ";
    case MT_LOG_WARN: return "warning: ";
    case MT_LOG_DEBUG: return "debug: ";
    case MT_LOG_INFO: break;
  }
  return "";
}

void _mt_vlog(mt_log_level_t level, const char *fmt, va_list ap) {
  if ((int)level > atomic_load_explicit(&log_level, memory_order_relaxed)) return;
  if (log_busy) return;
  log_busy = 1;
  int saved_errno = errno;
  char line[MT_LOG_LINE_MAX];
  int n = snprintf(line, sizeof(line), "mtalloc: %s", level_tag(level));
  int m = vsnprintf(line + n, sizeof(line) - (size_t)n, fmt, ap);
  size_t len = (size_t)n + (m < 0 ? 0 : (size_t)m);
  if (len > sizeof(line) - 2) {
    len = sizeof(line) - 2; /* truncated: still one line */
    memcpy(line + len - 3, "...", 3);
  }
  if (len > 0 && line[len - 1] == '\n') len--;
  line[len++] = '\n';
  int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
  if (fd < 0) fd = STDERR_FILENO;
  const char *p = line;
  while (len > 0) {
    ssize_t w = write(fd, p, len);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) break;
    p += w;
    len -= (size_t)w;
  }
  errno = saved_errno;
  log_busy = 0;
}

void _mt_log(mt_log_level_t level, const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  _mt_vlog(level, fmt, ap);
  va_end(ap);
}

void _mt_assert_fail(const char *expr, const char *file, int line) {
  _mt_log(MT_LOG_ERROR, "internal check failed: %s (%s:%d)", expr, file, line);
  abort();
}

void _mt_log_raw(const char *prefix, const char *text) {
  if (log_busy) return;
  log_busy = 1;
  int fd = atomic_load_explicit(&log_fd, memory_order_relaxed);
  if (fd < 0) fd = STDERR_FILENO;
  struct { const char *p; size_t n; } part[3] = {{prefix, strlen(prefix)}, {text, strlen(text)}, {"\n", 1}};
  for (int i = 0; i < 3; i++) {
    const char *p = part[i].p;
    size_t len = part[i].n;
    while (len > 0) {
      ssize_t w = write(fd, p, len);
      if (w < 0 && errno == EINTR) continue;
      if (w <= 0) break;
      p += w;
      len -= (size_t)w;
    }
  }
  log_busy = 0;
}
