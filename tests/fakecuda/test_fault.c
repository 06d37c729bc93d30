/*
 * Description: the fake turns a kernel or copy that touches device memory
 * which is reserved but not mapped into one "fakecuda: illegal address"
 * line naming the kernel (or the copy) and the address, and exit code 86,
 * as a GPU raises CUDA_ERROR_ILLEGAL_ADDRESS. Each scenario runs in a
 * forked child whose stderr comes back through a pipe; the parent checks
 * the exit status and the report. A fault outside fake work must still
 * kill the process with SIGSEGV (the fake re-raises, it does not swallow).
 * Exit 0 when every report is right.
 */
#include <errno.h>
#include <inttypes.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include "fakecuda.h"

/* With ASan the fake's SIGSEGV handler needs ASan to leave the signal alone. */
__attribute__((visibility("default"), used)) const char *__asan_default_options(void) {
  return "handle_segv=0:allow_user_segv_handler=1";
}

#define MiB ((size_t)1 << 20)
#define CHECK(call)                                                         \
  do {                                                                      \
    CUresult r_ = (call);                                                   \
    if (r_ != CUDA_SUCCESS) {                                               \
      fprintf(stderr, "child: %s failed: %d\n", #call, (int)r_);            \
      _exit(3);                                                             \
    }                                                                       \
  } while (0)

static void k_touch(void **p, const fakecuda_launch_t *l) {
  (void)l;
  volatile int *x = *(int **)p[0];
  *x = 42;
}

static void init_ctx(void) {
  CUdevice d;
  CUcontext c;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&d, 0));
  CHECK(cuDevicePrimaryCtxRetain(&c, d));
  CHECK(cuCtxSetCurrent(c));
}

/* A reservation with its first chunk mapped and accessible, the rest not. */
static CUdeviceptr reserve_partly_mapped(void) {
  CUdeviceptr base;
  CUmemGenericAllocationHandle h;
  CUmemAllocationProp prop = {.type = CU_MEM_ALLOCATION_TYPE_PINNED,
                              .location = {.type = CU_MEM_LOCATION_TYPE_DEVICE, .id = 0}};
  CUmemAccessDesc acc = {.location = prop.location, .flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE};
  CHECK(cuMemAddressReserve(&base, 8 * MiB, 0, 0, 0));
  CHECK(cuMemCreate(&h, 2 * MiB, &prop, 0));
  CHECK(cuMemMap(base, 2 * MiB, 0, h, 0));
  CHECK(cuMemSetAccess(base, 2 * MiB, &acc, 1));
  return base;
}

/* scenario bodies: run in the child, report the address they expect to be
 * named through *lo / *hi (written to a pipe before the fault) */
static void kernel_unmapped(int info_fd) {
  init_ctx();
  CUdeviceptr base = reserve_partly_mapped();
  uintptr_t bad = (uintptr_t)base + 4 * MiB + 64;
  dprintf(info_fd, "%" PRIxPTR " %" PRIxPTR "\n", bad, bad + 1);
  size_t sz[] = {sizeof(void *)};
  CUfunction f = fakecuda_register_kernel("touch_unmapped", k_touch, 1, sz);
  CUstream s;
  CHECK(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  int *ok = (int *)(uintptr_t)base, *p = (int *)bad;
  void *args_ok[] = {&ok};
  CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args_ok, NULL)); /* mapped: fine */
  CHECK(cuStreamSynchronize(s));
  void *args[] = {&p};
  CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, s, args, NULL));
  cuStreamSynchronize(s);
  _exit(0); /* not reached when the fake catches the fault */
}

static void kernel_after_unmap(int info_fd) {
  init_ctx();
  CUdeviceptr base = reserve_partly_mapped();
  CHECK(cuMemUnmap(base, 2 * MiB)); /* a pager that evicted a chunk in use */
  uintptr_t bad = (uintptr_t)base + 128;
  dprintf(info_fd, "%" PRIxPTR " %" PRIxPTR "\n", bad, bad + 1);
  size_t sz[] = {sizeof(void *)};
  CUfunction f = fakecuda_register_kernel("use_after_evict", k_touch, 1, sz);
  int *p = (int *)bad;
  void *args[] = {&p};
  CHECK(cuLaunchKernel(f, 1, 1, 1, 1, 1, 1, 0, NULL, args, NULL));
  cuCtxSynchronize();
  _exit(0);
}

static void copy_unmapped(int info_fd) {
  init_ctx();
  CUdeviceptr base = reserve_partly_mapped();
  static char src[8192];
  CUdeviceptr dst = base + 2 * MiB; /* the first unmapped byte */
  dprintf(info_fd, "%" PRIxPTR " %" PRIxPTR "\n", (uintptr_t)dst, (uintptr_t)dst + sizeof src);
  cuMemcpyHtoD(dst, src, sizeof src);
  _exit(0);
}

static void fault_outside_work(int info_fd) {
  init_ctx();
  CUdeviceptr base = reserve_partly_mapped();
  dprintf(info_fd, "0 0\n");
  *(volatile int *)(uintptr_t)(base + 4 * MiB) = 1; /* host code, not fake GPU work */
  _exit(0);
}

typedef struct scenario {
  const char *name;
  void (*body)(int info_fd);
  int want_exit;          /* expected exit code, or -1 for "killed by SIGSEGV" */
  const char *want_text;  /* must appear in the child's stderr */
} scenario_t;

static bool run(const scenario_t *sc) {
  int err[2], info[2];
  if (pipe(err) || pipe(info)) return false;
  fflush(NULL);
  pid_t pid = fork();
  if (pid < 0) return false;
  if (pid == 0) {
    close(err[0]);
    close(info[0]);
    dup2(err[1], 2);
    struct rlimit no_core = {0, 0};
    setrlimit(RLIMIT_CORE, &no_core); /* the SIGSEGV scenario must not dump core */
    sc->body(info[1]);
    _exit(2);
  }
  close(err[1]);
  close(info[1]);
  char out[4096] = {0}, inf[128] = {0};
  size_t n = 0;
  ssize_t k;
  while (n + 1 < sizeof out && (k = read(err[0], out + n, sizeof out - 1 - n)) != 0) {
    if (k < 0 && errno == EINTR) continue;
    if (k < 0) break;
    n += (size_t)k;
  }
  if (read(info[0], inf, sizeof inf - 1) < 0) inf[0] = 0;
  close(err[0]);
  close(info[0]);
  int status = 0;
  while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }

  bool ok = true;
  if (sc->want_exit >= 0) {
    if (!WIFEXITED(status) || WEXITSTATUS(status) != sc->want_exit) {
      fprintf(stderr, "%s: child status 0x%x, want exit %d\n", sc->name, status, sc->want_exit);
      ok = false;
    }
  } else if (!(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) &&
             !(WIFEXITED(status) && WEXITSTATUS(status) != 0 &&
               strstr(out, "AddressSanitizer: SEGV"))) {
    /* killed by SIGSEGV, or ASan (handle_segv=1) reported it: either way
     * the fake passed on a fault that was not its own */
    fprintf(stderr, "%s: child status 0x%x, want death by SIGSEGV\n", sc->name, status);
    ok = false;
  }
  if (sc->want_text && !strstr(out, sc->want_text)) {
    fprintf(stderr, "%s: stderr lacks \"%s\"\n", sc->name, sc->want_text);
    ok = false;
  }
  if (sc->want_exit == 86) {
    /* exactly one report line, naming an address inside the expected range */
    uintptr_t lo = 0, hi = 0, addr = 0;
    const char *at = strstr(out, "fakecuda: illegal address 0x");
    if (sscanf(inf, "%" SCNxPTR " %" SCNxPTR, &lo, &hi) != 2 || !at ||
        sscanf(at, "fakecuda: illegal address 0x%" SCNxPTR, &addr) != 1 || addr < lo ||
        addr >= hi) {
      fprintf(stderr, "%s: address 0x%" PRIxPTR " not in [0x%" PRIxPTR ", 0x%" PRIxPTR ")\n",
              sc->name, addr, lo, hi);
      ok = false;
    }
    if (at && strstr(at + 1, "fakecuda: illegal address")) {
      fprintf(stderr, "%s: more than one report\n", sc->name);
      ok = false;
    }
  }
  if (!ok) fprintf(stderr, "---- child stderr ----\n%s----\n", out);
  const char *line = strstr(out, "fakecuda: ");
  printf("%s: %s  %.*s\n", sc->name, ok ? "ok" : "FAILED", line ? (int)strcspn(line, "\n") : 0,
         line ? line : "");
  return ok;
}

int main(void) {
  const scenario_t scenarios[] = {
      {"kernel on reserved-but-unmapped memory", kernel_unmapped, 86,
       "in kernel touch_unmapped (stream 0x"},
      {"kernel on an unmapped (evicted) chunk", kernel_after_unmap, 86,
       "in kernel use_after_evict (stream 0x0)"},
      {"HtoD copy into unmapped memory", copy_unmapped, 86, "in copy HtoD"},
      {"host fault outside fake work", fault_outside_work, -1, NULL},
  };
  bool all = true;
  for (size_t i = 0; i < sizeof scenarios / sizeof scenarios[0]; i++) all = run(&scenarios[i]) && all;
  return all ? 0 : 1;
}
