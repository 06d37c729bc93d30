/*
 * stats.c - counters and their JSON. See stats.h.
 */
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "internal.h"
#include "stats.h"

mt_stats_t _mt_stats;

static const char *const *hook_names;
static _Atomic uint64_t (*hook_calls)[MT_ROUTE__COUNT];
static int hook_count;

void _mt_stat_peak(_Atomic uint64_t *peak, uint64_t v) {
  uint64_t cur = atomic_load_explicit(peak, memory_order_relaxed);
  while (v > cur && !atomic_compare_exchange_weak_explicit(peak, &cur, v, memory_order_relaxed,
                                                           memory_order_relaxed)) {
  }
}

void _mt_stats_set_hooks(const char *const *names, _Atomic uint64_t (*calls)[MT_ROUTE__COUNT], int n) {
  hook_names = names;
  hook_calls = calls;
  hook_count = n;
}

#define JSON_MAX 65536
static char json_buf[JSON_MAX];
static pthread_mutex_t json_lock = PTHREAD_MUTEX_INITIALIZER;

/* Appends to buf at *off, never past JSON_MAX (the output is then cut, which
 * only the calls object can cause and which ends the object cleanly). */
__attribute__((format(printf, 3, 4))) static void put(char *buf, size_t *off, const char *fmt, ...) {
  if (*off >= JSON_MAX - 1) return;
  va_list ap;
  va_start(ap, fmt);
  int n = vsnprintf(buf + *off, JSON_MAX - *off, fmt, ap);
  va_end(ap);
  if (n > 0) *off += (size_t)n < JSON_MAX - *off ? (size_t)n : JSON_MAX - 1 - *off;
}

static void render(char *buf) {
  size_t off = 0;
  put(buf, &off, "{");
#define MT_STAT_JSON(name) put(buf, &off, "\"%s\":%llu,", #name, (unsigned long long)mt_stat_get(name));
  MT_STAT_FIELDS(MT_STAT_JSON)
#undef MT_STAT_JSON
  put(buf, &off, "\"calls\":{");
  bool first = true;
  for (int i = 0; i < hook_count; i++) {
    uint64_t c[MT_ROUTE__COUNT];
    uint64_t sum = 0;
    for (int r = 0; r < MT_ROUTE__COUNT; r++) sum += c[r] = atomic_load_explicit(&hook_calls[i][r], memory_order_relaxed);
    if (sum == 0) continue;
    put(buf, &off, "%s\"%s\":{\"direct\":%llu,\"dlsym\":%llu,\"procaddr\":%llu}", first ? "" : ",",
        hook_names[i], (unsigned long long)c[0], (unsigned long long)c[1], (unsigned long long)c[2]);
    first = false;
  }
  if (off > JSON_MAX - 4) off = JSON_MAX - 4; /* room to close */
  memcpy(buf + off, "}}", 3);
}

MT_API const char *mt_stats_json(void) {
  pthread_mutex_lock(&json_lock);
  render(json_buf);
  pthread_mutex_unlock(&json_lock);
  return json_buf;
}

void _mt_stats_print(void) {
  static char buf[JSON_MAX];
  pthread_mutex_lock(&json_lock);
  render(buf);
  /* The log caps a line; the stats line may be long, so write it whole. */
  _mt_log_raw("mtalloc: stats ", buf);
  pthread_mutex_unlock(&json_lock);
}
