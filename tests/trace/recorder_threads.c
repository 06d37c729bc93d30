/* Description: the recorder under load from many threads, as a plain
 * program so that ThreadSanitizer can check it (criterion cannot run under
 * TSan): 2 waves of 4 threads record 20000 events each; every event must be
 * in the file exactly once, in its thread's order, each function named
 * once. Usage: recorder_threads [FILE] (default: a temporary file). */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#define RC_CHECK(cond, ...)                                   \
  do {                                                        \
    if (!(cond)) {                                            \
      fprintf(stderr, "recorder_threads: %s:%d: ", __FILE__, __LINE__); \
      fprintf(stderr, __VA_ARGS__);                           \
      fputc('\n', stderr);                                    \
      exit(1);                                                \
    }                                                         \
  } while (0)
#include "recorder_check.h"

int main(int argc, char **argv) {
  char tmp[] = "/tmp/mt-trace-threads-XXXXXX";
  const char *path = argc > 1 ? argv[1] : tmp;
  if (argc <= 1) {
    int fd = mkstemp(tmp);
    RC_CHECK(fd >= 0, "mkstemp");
    close(fd);
  }
  rc_record(path, 2, 4, 20000);
  uint64_t iters = rc_verify(path, 8, 20000);
  RC_CHECK(iters > 0, "no heuristic ITER records");
  printf("recorder_threads: 8 threads x 20000 events, %llu heuristic iterations: ok\n", (unsigned long long)iters);
  if (argc <= 1) unlink(tmp);
  return 0;
}
