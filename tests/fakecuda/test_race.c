/*
 * Description: a missing synchronisation gives a wrong answer on the fake,
 * as it would on a GPU. A kernel on stream A fills a buffer with the trial
 * number; stream B copies the buffer to the host. Without an event between
 * them, FAKECUDA_JITTER_US lets B's copy run before A's kernel in some
 * trials, so the host sees a stale value; with cuEventRecord(A) +
 * cuStreamWaitEvent(B) it never does. Exit 0 when the unsynchronised
 * version shows at least one mismatch and the synchronised one none.
 * With 2 ms of jitter per op, each unsynchronised trial goes wrong with
 * probability about 1/2, so 60 trials all being right has probability
 * ~1e-18: the test does not flake.
 */
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>

#include "fakecuda.h"

#define TRIALS 60
#define N 4096

#define CHECK(call)                                                   \
  do {                                                                \
    CUresult r_ = (call);                                             \
    if (r_ != CUDA_SUCCESS) {                                         \
      fprintf(stderr, "test_race: %s failed: %d\n", #call, (int)r_);  \
      exit(1);                                                        \
    }                                                                 \
  } while (0)

static void k_fill(void **p, const fakecuda_launch_t *l) {
  (void)l;
  int *x = *(int **)p[0];
  int v = *(int *)p[1];
  for (int i = 0; i < N; i++) x[i] = v;
}

static int run_trials(CUfunction fill, CUstream a, CUstream b, CUevent ev, int *host,
                      CUdeviceptr d, bool synced, int base) {
  int bad = 0;
  for (int t = 0; t < TRIALS; t++) {
    int v = base + t;
    void *args[] = {&d, &v};
    CHECK(cuLaunchKernel(fill, 1, 1, 1, 256, 1, 1, 0, a, args, NULL));
    if (synced) {
      CHECK(cuEventRecord(ev, a));
      CHECK(cuStreamWaitEvent(b, ev, 0));
    }
    CHECK(cuMemcpyDtoHAsync(host, d, N * sizeof(int), b));
    CHECK(cuStreamSynchronize(b));
    CHECK(cuStreamSynchronize(a));
    for (int i = 0; i < N; i++) {
      if (host[i] != v) {
        bad++;
        break;
      }
    }
  }
  return bad;
}

int main(void) {
  setenv("FAKECUDA_JITTER_US", "2000", 0);
  CUdevice dev;
  CUcontext ctx;
  CHECK(cuInit(0));
  CHECK(cuDeviceGet(&dev, 0));
  CHECK(cuDevicePrimaryCtxRetain(&ctx, dev));
  CHECK(cuCtxSetCurrent(ctx));
  size_t sz[] = {sizeof(void *), sizeof(int)};
  CUfunction fill = fakecuda_register_kernel("fill", k_fill, 2, sz);
  CUstream a, b;
  CUevent ev;
  CHECK(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CHECK(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CHECK(cuEventCreate(&ev, CU_EVENT_DISABLE_TIMING));
  CUdeviceptr d;
  void *hp;
  CHECK(cuMemAlloc(&d, N * sizeof(int)));
  CHECK(cuMemAllocHost(&hp, N * sizeof(int)));
  CHECK(cuMemsetD32(d, 0, N));

  int unsynced = run_trials(fill, a, b, ev, hp, d, false, 1);
  int synced = run_trials(fill, a, b, ev, hp, d, true, 1000);
  printf("test_race: missing sync: %d/%d trials wrong; with cuStreamWaitEvent: %d/%d wrong\n",
         unsynced, TRIALS, synced, TRIALS);

  CHECK(cuMemFreeHost(hp));
  CHECK(cuMemFree(d));
  CHECK(cuEventDestroy(ev));
  CHECK(cuStreamDestroy(a));
  CHECK(cuStreamDestroy(b));
  if (unsynced == 0) {
    fprintf(stderr, "test_race: the missing synchronisation went unnoticed\n");
    return 1;
  }
  if (synced != 0) {
    fprintf(stderr, "test_race: the synchronised version gave wrong answers\n");
    return 1;
  }
  return 0;
}
