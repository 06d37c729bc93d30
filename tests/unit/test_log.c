/* Description: the log: one prefixed line per message, levels filter,
 * long messages stay one line, MT_LOG files append. */
#include <criterion/criterion.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

static int cap[2];

static void capture(int level) {
  cr_assert_eq(pipe(cap), 0);
  _mt_log_configure(level, cap[1]);
}

static void collect(char *out, size_t len) {
  _mt_log_configure(MT_LOG_WARN, -1);
  close(cap[1]);
  size_t got = 0;
  ssize_t n;
  while (got < len - 1 && (n = read(cap[0], out + got, len - 1 - got)) > 0) got += (size_t)n;
  out[got] = '\0';
  close(cap[0]);
}

Test(log, prefix_and_levels) {
  char out[4096];
  capture(MT_LOG_WARN);
  mt_error("disk %s is full", "/x");
  mt_warn("slow %d", 3);
  mt_info("not shown");
  mt_debug("not shown either");
  collect(out, sizeof(out));
  cr_assert_str_eq(out, "mtalloc: error: disk /x is full\nmtalloc: warning: slow 3\n");
  capture(MT_LOG_DEBUG);
  mt_info("shown\n"); /* a trailing newline is not doubled */
  mt_debug("too");
  collect(out, sizeof(out));
  cr_assert_str_eq(out, "mtalloc: shown\nmtalloc: debug: too\n");
  capture(MT_LOG_ERROR);
  mt_warn("hidden");
  collect(out, sizeof(out));
  cr_assert_str_empty(out);
}

Test(log, long_message_is_one_truncated_line) {
  static char big[5000];
  memset(big, 'x', sizeof(big) - 1);
  char out[8192];
  capture(MT_LOG_WARN);
  mt_error("%s", big);
  collect(out, sizeof(out));
  size_t n = strlen(out);
  cr_assert_lt(n, 1100);
  cr_assert_eq(out[n - 1], '\n');
  cr_assert_eq(strchr(out, '\n'), out + n - 1, "exactly one line");
  cr_assert(strstr(out, "...\n") != NULL);
}

Test(log, file_destination_appends) {
  char path[] = "/tmp/mtlogXXXXXX";
  int fd = mkstemp(path);
  cr_assert_geq(fd, 0);
  write(fd, "before\n", 7);
  close(fd);
  cr_assert_eq(_mt_log_open(path), 0);
  _mt_log_configure(MT_LOG_WARN, -2);
  mt_warn("into the file");
  _mt_log_configure(MT_LOG_WARN, -1);
  char out[256] = {0};
  fd = open(path, O_RDONLY);
  cr_assert_gt(read(fd, out, sizeof(out) - 1), 0);
  close(fd);
  unlink(path);
  cr_assert_str_eq(out, "before\nmtalloc: warning: into the file\n");
  cr_assert_eq(_mt_log_open("/nonexistent-dir/x.log"), -ENOENT);
}
