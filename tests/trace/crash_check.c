/* Description: a crash loses at most the last second of a trace. A child
 * starts the recorder, records a launch, records a second one 1.5 s later
 * and is killed with SIGKILL at once (no exit handlers, no flush). The
 * parent reads the file: the first launch (1.5 s before the crash) must be
 * there, whole, and the reader must not crash on whatever the kill left.
 * Usage: crash_check */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "trace.h"
#include "trace_io.h"

#define FAIL(...)                            \
  do {                                       \
    fprintf(stderr, "crash_check: ");        \
    fprintf(stderr, __VA_ARGS__);            \
    fputc('\n', stderr);                     \
    exit(1);                                 \
  } while (0)

int main(void) {
  char path[] = "/tmp/mt-trace-crash-XXXXXX";
  int fd = mkstemp(path);
  if (fd < 0) FAIL("mkstemp: %s", strerror(errno));
  close(fd);
  pid_t pid = fork();
  if (pid == 0) {
    mt_trace_header_t h;
    mt_trace_header_init(&h, MT_TRACE_CLOCK_MONOTONIC, "crash_check");
    if (_mt_trace_start(path, &h, NULL) < 0) _exit(3);
    mt_trace_span_t span = {1, 0, 4096};
    _mt_trace_alloc(1, 4096, 0, false);
    _mt_trace_launch(0xA11CE, 7, "before", 0, &span, NULL, 1, 0, false);
    usleep(1500 * 1000);
    _mt_trace_launch(0xB0B, 7, "before", 0, &span, NULL, 1, 0, false);
    raise(SIGKILL);
    _exit(4);
  }
  int st;
  if (waitpid(pid, &st, 0) != pid) FAIL("waitpid: %s", strerror(errno));
  if (!WIFSIGNALED(st) || WTERMSIG(st) != SIGKILL) FAIL("the child did not die by SIGKILL (status %#x)", st);
  char err[512];
  mt_trace_reader_t *r;
  if (mt_trace_open(path, &r, err, sizeof(err)) < 0) FAIL("%s", err);
  const mt_trace_rec_t *rec;
  int rc, first = 0, second = 0;
  while ((rc = mt_trace_next(r, &rec)) == 1) {
    if (rec->type != MT_TR_LAUNCH) continue;
    const mt_trace_launch_t *l = (const mt_trace_launch_t *)rec;
    first += l->launch_id == 0xA11CE;
    second += l->launch_id == 0xB0B;
  }
  /* What the kill cut off may end the file in the middle of a record; the
   * reader must say so, not crash. */
  if (rc < 0) printf("crash_check: the file ends in a cut record, as a crash may leave: %s\n", mt_trace_error(r));
  mt_trace_close(r);
  unlink(path);
  if (first != 1) FAIL("the launch recorded 1.5 s before the crash is %s", first ? "there twice" : "lost");
  printf("crash_check: the event recorded 1.5 s before SIGKILL survived (the one at the kill: %s)\n",
         second ? "also there" : "lost, as allowed");
  return 0;
}
