/*
 * Description: optimizer checkpoints: save, load, continue is bit-identical
 * to never stopping (FP32 state with amsgrad, and 4-bit state); a file with
 * any one byte changed (header, record, payload, checksum), truncated, or
 * saved from other parameters is refused with a message naming the byte,
 * and nothing is loaded. A version 1 or 2 file (before 4-bit v's and m's
 * power-of-two maps) is refused with 4-bit state and still loads with FP32
 * state.
 *
 *   test_checkpoint DIR
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "codec.h"
#include "hash.h"
#include "optim.h"

#define CHECK(c, ...)                                                   \
  do {                                                                  \
    if (!(c)) {                                                         \
      fprintf(stderr, "test_checkpoint: FAIL line %d: ", __LINE__);     \
      fprintf(stderr, __VA_ARGS__);                                     \
      fprintf(stderr, "\n");                                            \
      exit(1);                                                          \
    }                                                                   \
  } while (0)

#define NP 3
static const size_t sizes[NP] = {7, 5000, 70001};
static const int dtypes[NP] = {_MT_DT_F32, _MT_DT_BF16, _MT_DT_F32};

typedef struct model {
  _mt_optim_t *o;
  void *w[NP];
  float *g[NP];
} model_t;

static float val(size_t i, int salt) {
  uint32_t x = (uint32_t)(i * 2654435761u) ^ (uint32_t)(salt * 40503u);
  x ^= x >> 15;
  x *= 2246822519u;
  x ^= x >> 13;
  return (float)(x & 0xffff) / 65536.0f - 0.5f;
}

static void make(model_t *m, _mt_codec_t codec, int amsgrad, const size_t *sz) {
  _mt_optim_cfg_t cfg = {.hp = {.lr = 1e-2, .beta1 = 0.9, .beta2 = 0.999, .eps = 1e-8,
                                .weight_decay = 0.01, .decoupled = true, .amsgrad = amsgrad},
                         .isa = _MT_ISA_AUTO, .codec = codec, .threads = 2, .node = -1};
  CHECK(_mt_optim_create(&cfg, &m->o) == 0, "create");
  for (int i = 0; i < NP; i++) {
    m->w[i] = calloc(sz[i], 4);
    m->g[i] = calloc(sz[i], 4);
    for (size_t k = 0; k < sz[i]; k++) {
      float x = val(k, i);
      if (dtypes[i] == _MT_DT_F32)
        ((float *)m->w[i])[k] = x;
      else
        ((uint16_t *)m->w[i])[k] = _mt_f32_to_bf16(x);
    }
    CHECK(_mt_optim_add(m->o, m->w[i], sz[i], dtypes[i], m->g[i]) == i, "add");
  }
}

static void drop(model_t *m) {
  _mt_optim_destroy(m->o);
  for (int i = 0; i < NP; i++) {
    free(m->w[i]);
    free(m->g[i]);
  }
}

static void step(model_t *m, int s) {
  for (int i = 0; i < NP; i++)
    for (size_t k = 0; k < sizes[i]; k++)
      m->g[i][k] = val(k, 100 + s * 7 + i);
  CHECK(_mt_optim_step(m->o, -1, 1.0f) == 0, "step");
  _mt_optim_wait(m->o);
}

/* Every byte of state, weights included, in one buffer (caller frees). */
static unsigned char *snapshot(model_t *m, size_t *len) {
  size_t cap = 0;
  for (int i = 0; i < NP; i++)
    cap += sizes[i] * 4 * 6 + 64;
  unsigned char *b = malloc(cap), *p = b;
  for (int i = 0; i < NP; i++) {
    _mt_optim_view_t v;
    _mt_optim_view(m->o, i, &v);
#define PUT(ptr, n)           \
  do {                        \
    memcpy(p, (ptr), (n));    \
    p += (n);                 \
  } while (0)
    PUT(v.step, 4);
    PUT(v.master, v.n * 4);
    PUT(m->w[i], v.n * (dtypes[i] == _MT_DT_F32 ? 4 : 2));
    if (v.quant) {
      PUT(v.qm->codes, _mt_qtensor_code_bytes(v.qm));
      PUT(v.qm->scales, _mt_qtensor_blocks(v.qm) * 4);
      PUT(v.qv->codes, _mt_qtensor_code_bytes(v.qv));
      PUT(v.qv->scales, _mt_qtensor_blocks(v.qv) * 4);
    } else {
      PUT(v.m, v.n * 4);
      PUT(v.v, v.n * 4);
      if (v.vmax)
        PUT(v.vmax, v.n * 4);
    }
  }
  *len = (size_t)(p - b);
  return b;
}

static void resume_is_exact(const char *dir, _mt_codec_t codec, int amsgrad) {
  char path[4096], err[512];
  snprintf(path, sizeof(path), "%s/ck_%d_%d.bin", dir, codec, amsgrad);
  model_t a, b;
  make(&a, codec, amsgrad, sizes);
  for (int s = 0; s < 3; s++)
    step(&a, s);
  CHECK(_mt_optim_save(a.o, path, err, sizeof(err)) == 0, "save: %s", err);
  for (int s = 3; s < 5; s++)
    step(&a, s);
  make(&b, codec, amsgrad, sizes);
  CHECK(_mt_optim_load(b.o, path, err, sizeof(err)) == 0, "load: %s", err);
  for (int s = 3; s < 5; s++)
    step(&b, s);
  size_t la, lb;
  unsigned char *sa = snapshot(&a, &la), *sb = snapshot(&b, &lb);
  CHECK(la == lb && memcmp(sa, sb, la) == 0, "codec %d: save, load, continue differs", codec);
  printf("codec %d amsgrad %d: save/load/continue bit-identical (%zu bytes of state)\n", codec,
         amsgrad, la);

  /* corruption: one byte at a time, at offsets in each part of the file */
  FILE *f = fopen(path, "rb");
  CHECK(f != NULL, "open");
  fseek(f, 0, SEEK_END);
  long size = ftell(f);
  unsigned char *file = malloc((size_t)size);
  fseek(f, 0, SEEK_SET);
  CHECK(fread(file, 1, (size_t)size, f) == (size_t)size, "read");
  fclose(f);
  long offs[] = {0, 9, 13, 30, 64, 80, 64 + 32 + 5, size / 2, size - 9, size - 1};
  char bad[4096];
  snprintf(bad, sizeof(bad), "%s/bad.bin", dir);
  for (unsigned k = 0; k < sizeof(offs) / sizeof(offs[0]); k++) {
    file[offs[k]] ^= 0x20;
    f = fopen(bad, "wb");
    fwrite(file, 1, (size_t)size, f);
    fclose(f);
    file[offs[k]] ^= 0x20;
    size_t l1, l2;
    unsigned char *before = snapshot(&b, &l1);
    int rc = _mt_optim_load(b.o, bad, err, sizeof(err));
    unsigned char *after = snapshot(&b, &l2);
    CHECK(rc == -EINVAL, "byte %ld corrupted: load returned %d", offs[k], rc);
    CHECK(strstr(err, "byte ") != NULL, "message names no byte: %s", err);
    CHECK(memcmp(before, after, l1) == 0, "byte %ld corrupted: something was loaded", offs[k]);
    if (k == 0 || k == 7)
      printf("  corrupt byte %ld -> %s\n", offs[k], err);
    free(before);
    free(after);
  }
  /* the same file marked version 1 or 2 (checksum redone): only the 4-bit
   * codec's stored meaning changed since, so only it is refused */
  for (uint32_t v1 = 1; v1 <= 2; v1++) {
    unsigned char *old = malloc((size_t)size);
    memcpy(old, file, (size_t)size);
    memcpy(old + 8, &v1, 4);
    uint64_t sum = XXH3_64bits(old, (size_t)size - 8);
    memcpy(old + size - 8, &sum, 8);
    f = fopen(bad, "wb");
    fwrite(old, 1, (size_t)size, f);
    fclose(f);
    free(old);
    size_t l1, l2;
    unsigned char *before = snapshot(&b, &l1);
    int rc = _mt_optim_load(b.o, bad, err, sizeof(err));
    unsigned char *after = snapshot(&b, &l2);
    if (codec == _MT_CODEC_4BIT) {
      CHECK(rc == -EINVAL && strstr(err, "byte 8") && strstr(err, "dynamic-exponent"),
            "version %u 4-bit file: %d %s", v1, rc, err);
      CHECK(memcmp(before, after, l1) == 0, "version %u 4-bit file: something was loaded", v1);
      printf("  version %u -> %s\n", v1, err);
    } else {
      CHECK(rc == 0, "version %u file without 4-bit state: %s", v1, err);
      printf("  version %u (codec %d): loads\n", v1, codec);
    }
    free(before);
    free(after);
  }
  /* truncated */
  f = fopen(bad, "wb");
  fwrite(file, 1, (size_t)size - 100, f);
  fclose(f);
  CHECK(_mt_optim_load(b.o, bad, err, sizeof(err)) == -EINVAL, "truncated file loaded");
  printf("  truncated -> %s\n", err);
  /* other parameters */
  model_t c;
  size_t other[NP] = {7, 5001, 70001};
  make(&c, codec, amsgrad, other);
  CHECK(_mt_optim_load(c.o, path, err, sizeof(err)) == -EINVAL, "mismatched file loaded");
  printf("  mismatched -> %s\n", err);
  drop(&c);
  free(file);
  free(sa);
  free(sb);
  drop(&a);
  drop(&b);
  unlink(bad);
  unlink(path);
}

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  resume_is_exact(dir, _MT_CODEC_NONE, 1);
  resume_is_exact(dir, _MT_CODEC_4BIT, 0);
  return 0;
}
