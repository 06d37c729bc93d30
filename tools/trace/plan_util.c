/*
 * plan_util.c - the children of `mt-trace plan` and reading their output
 * (plan.h). The planner runs its own executable (/proc/self/exe) so that
 * synth, summary and replay are exactly the commands a user can run by
 * hand; their output is text or one JSON object, read by key.
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "plan.h"

const char *const PLAN_RES[R_COUNT] = {"GPU compute", "host link (host to GPU)", "host link (GPU to host)", "NVMe",
                                  "host optimizer"};
const char *const PLAN_COMP[3] = {"none", "8bit", "4bit"};

int plan_busy(const char *out, double sim, double *busy) {
  busy[R_GPU] = plan_num_after(out, "\"ideal_s\"") / sim;
  busy[R_H2D] = plan_num_after(out, "\"h2d_busy_s\"") / sim;
  busy[R_D2H] = plan_num_after(out, "\"d2h_busy_s\"") / sim;
  busy[R_NVME] = plan_num_after(out, "\"nvme_busy_s\"") / sim;
  busy[R_POOL] = plan_num_after(out, "\"host_opt_busy_s\"") / sim;
  int bind = 0;
  for (int r = 1; r < R_COUNT; r++)
    if (busy[r] > busy[bind]) bind = r;
  return bind;
}

int plan_parse_bw(const char *s, double *out) {
  char *end;
  double v = strtod(s, &end), mul = 1;
  switch (*end) {
    case 'k': case 'K': mul = 1e3; end++; break;
    case 'm': case 'M': mul = 1e6; end++; break;
    case 'g': case 'G': mul = 1e9; end++; break;
    case 't': case 'T': mul = 1e12; end++; break;
    default: break;
  }
  if (end == s || *end || !(v > 0) || !isfinite(v)) return -EINVAL;
  *out = v * mul;
  return 0;
}

int plan_child(const char *self, const char *dir, const char *const *args, char *out, size_t cap) {
  return plan_child_timed(self, dir, args, out, cap, 0, NULL);
}

static double now_s(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (double)ts.tv_sec + (double)ts.tv_nsec * 1e-9;
}

int plan_child_timed(const char *self, const char *dir, const char *const *args, char *out, size_t cap,
                     double limit_s, double *wall_s) {
  double t0 = now_s();
  int fd[2];
  if (pipe(fd) < 0) return -1;
  pid_t pid = fork();
  if (pid < 0) {
    close(fd[0]);
    close(fd[1]);
    return -1;
  }
  if (pid == 0) {
    dup2(fd[1], 1);
    close(fd[0]);
    close(fd[1]);
    char err[600];
    snprintf(err, sizeof err, "%s/stderr", dir);
    FILE *n = freopen(err, "w", stderr);
    (void)n;
    execv(self, (char *const *)args);
    _exit(127);
  }
  close(fd[1]);
  size_t len = 0;
  char sink[4096];
  bool late = false;
  for (;;) {
    if (limit_s > 0) { /* the child's output, until it ends or its time is up */
      double left = limit_s - (now_s() - t0);
      struct pollfd pf = {.fd = fd[0], .events = POLLIN};
      int r = left > 0 ? poll(&pf, 1, (int)(left * 1000) + 1) : 0;
      if (r == 0) {
        late = true;
        kill(pid, SIGKILL);
        break;
      }
      if (r < 0 && errno == EINTR) continue;
    }
    ssize_t k = len + 1 < cap ? read(fd[0], out + len, cap - 1 - len) : read(fd[0], sink, sizeof sink);
    if (k < 0 && errno == EINTR) continue;
    if (k <= 0) break;
    if (len + 1 < cap) len += (size_t)k;
  }
  out[len] = '\0';
  close(fd[0]);
  int st;
  pid_t w;
  while ((w = waitpid(pid, &st, 0)) < 0 && errno == EINTR) {}
  if (wall_s) *wall_s = now_s() - t0;
  if (late) return -2;
  if (w != pid || !WIFEXITED(st)) return -1;
  return WEXITSTATUS(st);
}

void plan_last_error(const char *dir, char *buf, size_t n) {
  char path[600], line[512];
  snprintf(path, sizeof path, "%s/stderr", dir);
  buf[0] = '\0';
  FILE *f = fopen(path, "r");
  if (!f) return;
  while (fgets(line, sizeof line, f))
    if (line[0] != '\n') snprintf(buf, n, "%.*s", (int)strcspn(line, "\n"), line);
  fclose(f);
}

double plan_num_after(const char *text, const char *key) {
  const char *s = strstr(text, key);
  if (!s) return NAN;
  s += strlen(key);
  while (*s == ' ' || *s == ':' || *s == '"' || *s == '[') s++;
  char *end;
  double v = strtod(s, &end);
  return end == s ? NAN : v;
}

double plan_last_of(const char *text, const char *key) {
  const char *s = strstr(text, key);
  if (!s || !(s = strchr(s, '['))) return NAN;
  const char *e = strchr(s, ']');
  double v = NAN;
  for (const char *q = s + 1; e && q < e;) {
    char *end;
    double x = strtod(q, &end);
    if (end == q) break;
    v = x;
    q = *end == ',' ? end + 1 : end;
  }
  return v;
}

int plan_setup(char *self, size_t cap, char *dir) {
  ssize_t sl = readlink("/proc/self/exe", self, cap - 1);
  if (sl <= 0) {
    fprintf(stderr, "mt-trace plan: cannot find its own executable: %s\n", strerror(errno));
    return 1;
  }
  self[sl] = '\0';
  if (!mkdtemp(dir)) {
    fprintf(stderr, "mt-trace plan: cannot make a folder for its scratch files: %s\n", strerror(errno));
    return 1;
  }
  return 0;
}
