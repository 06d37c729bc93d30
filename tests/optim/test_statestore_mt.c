/*
 * Description: optimizer state on NVMe under concurrency, for
 * ThreadSanitizer (criterion's arena cannot start under TSan, so this is
 * a plain program): four parameters, two spilled to a store and two in
 * RAM, stepped together and one by one on a 2-worker pool, so two streams
 * contend for the store while workers update the RAM ones; the result is
 * compared bit for bit with the same parameters all in RAM.
 *
 *   test_statestore_mt DIR   (DIR on a disk file system: O_DIRECT)
 * Exits 77 (skip) when DIR refuses O_DIRECT.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "nvme_store.h"
#include "optim.h"
#include "statestore.h"

#define NP 4
#define N ((size_t)300001)

#define CHECK(c, ...)                                               \
  do {                                                              \
    if (!(c)) {                                                     \
      fprintf(stderr, "test_statestore_mt: FAIL line %d: ", __LINE__); \
      fprintf(stderr, __VA_ARGS__);                                 \
      fprintf(stderr, "\n");                                        \
      exit(1);                                                      \
    }                                                               \
  } while (0)

static float val(size_t i, int salt) {
  uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(salt * 40503u);
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (float)(x & 0xffff) / 65536.0f - 0.5f;
}

int main(int argc, char **argv) {
  if (argc != 2) return 2;
  char probe[4300], dir[4200];
  snprintf(dir, sizeof(dir), "%s/ssmt.XXXXXX", argv[1]);
  CHECK(mkdtemp(dir) != NULL, "mkdtemp");
  snprintf(probe, sizeof(probe), "%s/probe", dir);
  int fd = open(probe, O_RDWR | O_CREAT | O_DIRECT, 0600);
  if (fd < 0) {
    rmdir(dir);
    fprintf(stderr, "%s has no O_DIRECT: skipped\n", argv[1]);
    return 77;
  }
  close(fd);
  unlink(probe);
  _mt_nvme_cfg_t nc = {.dirs = dir, .max_bytes = (uint64_t)64 << 20, .queue_depth = 8, .numa_node = -1};
  _mt_nvme_t *store;
  _mt_ss_t *ss;
  CHECK(_mt_nvme_open(&nc, &store) == 0, "store");
  CHECK(_mt_ss_open(store, NULL, &ss) == 0, "ss");
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01, .decoupled = true},
                         .isa = _MT_ISA_AUTO, .codec = _MT_CODEC_NONE, .threads = 2, .node = -1};
  _mt_optim_t *o[2];
  float *w[2][NP], *g[NP];
  for (int i = 0; i < NP; i++) {
    g[i] = malloc(N * 4);
    for (size_t k = 0; k < N; k++) g[i][k] = val(k, 50 + i);
  }
  /* o[0]: all in RAM; o[1]: parameters 0 and 2 spilled */
  for (int m = 0; m < 2; m++) {
    CHECK(_mt_optim_create(&cfg, &o[m]) == 0, "create");
    for (int i = 0; i < NP; i++) {
      w[m][i] = malloc(N * 4);
      for (size_t k = 0; k < N; k++) w[m][i][k] = val(k, i);
      if (m == 1) CHECK(_mt_optim_set_store(o[m], ss, i % 2 == 0) == 0, "store");
      CHECK(_mt_optim_add(o[m], w[m][i], N, _MT_DT_F32, g[i]) == i, "add");
      CHECK(_mt_optim_spilled(o[m], i) == (m == 1 && i % 2 == 0), "placement of %d", i);
    }
  }
  for (int s = 0; s < 3; s++)
    for (int m = 0; m < 2; m++) {
      CHECK(_mt_optim_step(o[m], -1, 1.0f) == 0, "step");
      for (int i = NP - 1; i >= 0; i--) CHECK(_mt_optim_step(o[m], i, 1.0f) == 0, "step %d", i);
      CHECK(_mt_optim_wait(o[m]) == 0, "wait");
    }
  for (int i = 0; i < NP; i++)
    CHECK(memcmp(w[0][i], w[1][i], N * 4) == 0, "parameter %d differs", i);
  for (int m = 0; m < 2; m++) {
    _mt_optim_destroy(o[m]);
    for (int i = 0; i < NP; i++) free(w[m][i]);
  }
  for (int i = 0; i < NP; i++) free(g[i]);
  _mt_ss_close(ss);
  _mt_nvme_close(store);
  rmdir(dir);
  printf("test_statestore_mt: ok\n");
  return 0;
}
