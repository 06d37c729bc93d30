/* Description: runs the fuzz target (fuzz_trace.c) without libFuzzer, so
 * that every build (gcc, ASan+UBSan) checks the reader against malformed
 * input: the seed corpus (seeds.h), then a fixed-seed series of mutations
 * of it (bit flips, 32-bit fields set to edge values, truncation, splices).
 * Usage: fuzz_replay [MUTATIONS] [FILE...] (files: replay those inputs
 * only, e.g. a crash input from tests/fuzz/run.sh). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "seeds.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static uint64_t rnd(uint64_t *s) {
  *s ^= *s >> 12;
  *s ^= *s << 25;
  *s ^= *s >> 27;
  return *s * 0x2545F4914F6CDD1DULL;
}

static uint8_t *slurp(const char *path, size_t *len) {
  FILE *f = fopen(path, "rb");
  if (!f) {
    perror(path);
    exit(1);
  }
  uint8_t *b = NULL;
  size_t n = 0, cap = 0, got;
  do {
    if (cap - n < 4096) b = realloc(b, cap = cap * 2 + 4096);
    got = fread(b + n, 1, cap - n, f);
    n += got;
  } while (got > 0);
  fclose(f);
  *len = n;
  return b;
}

int main(int argc, char **argv) {
  unsigned long mutations = argc > 1 ? strtoul(argv[1], NULL, 10) : 20000;
  if (argc > 2) {
    for (int i = 2; i < argc; i++) {
      size_t n;
      uint8_t *b = slurp(argv[i], &n);
      LLVMFuzzerTestOneInput(b, n);
      free(b);
    }
    printf("fuzz_replay: %d inputs ok\n", argc - 2);
    return 0;
  }
  char dir[] = "/tmp/mt-fuzz-seeds-XXXXXX";
  if (!mkdtemp(dir)) {
    perror("mkdtemp");
    return 1;
  }
  write_seeds(dir);
  enum { NSEEDS = sizeof(seed_names) / sizeof(seed_names[0]) };
  uint8_t *seed[NSEEDS];
  size_t seed_len[NSEEDS];
  for (int i = 0; i < NSEEDS; i++) {
    char path[4200];
    snprintf(path, sizeof(path), "%s/%s", dir, seed_names[i]);
    seed[i] = slurp(path, &seed_len[i]);
    unlink(path);
    LLVMFuzzerTestOneInput(seed[i], seed_len[i]);
  }
  rmdir(dir);

  static const uint32_t edge[] = {0, 1, 7, 8, 15, 16, 17, 24, 31, 32, 40, 48, 72, 152, 160, 164, 168,
                                  4096, 4097, 65536, 65537, 1u << 20, (1u << 20) + 8, 0x7fffffff,
                                  0xfffffff8, 0xffffffff};
  uint64_t s = 1;
  uint8_t *buf = malloc(1 << 16);
  for (unsigned long m = 0; m < mutations; m++) {
    int k = (int)(rnd(&s) % NSEEDS);
    size_t n = seed_len[k];
    memcpy(buf, seed[k], n);
    unsigned edits = 1 + (unsigned)(rnd(&s) % 4);
    for (unsigned e = 0; e < edits && n > 0; e++) {
      size_t at = (size_t)(rnd(&s) % n);
      switch (rnd(&s) % 5) {
        case 0: buf[at] ^= (uint8_t)(1u << (rnd(&s) % 8)); break;
        case 1:
          if (n >= 4) {
            uint32_t v = edge[rnd(&s) % (sizeof(edge) / sizeof(edge[0]))];
            memcpy(buf + (at & ~(size_t)3) - ((at & ~(size_t)3) + 4 > n ? 4 : 0), &v, 4);
          }
          break;
        case 2: n = at; break;
        case 3: buf[at] = (uint8_t)rnd(&s); break;
        case 4: { /* splice a piece of another seed in */
          int j = (int)(rnd(&s) % NSEEDS);
          size_t from = (size_t)(rnd(&s) % (seed_len[j] + 1)), len = (size_t)(rnd(&s) % 256);
          if (from + len > seed_len[j]) len = seed_len[j] - from;
          if (at + len > (1 << 16)) len = (1 << 16) - at;
          memcpy(buf + at, seed[j] + from, len);
          if (at + len > n) n = at + len;
          break;
        }
      }
    }
    LLVMFuzzerTestOneInput(buf, n);
  }
  free(buf);
  for (int i = 0; i < NSEEDS; i++) free(seed[i]);
  printf("fuzz_replay: %d seeds and %lu mutations ok\n", NSEEDS, mutations);
  return 0;
}
