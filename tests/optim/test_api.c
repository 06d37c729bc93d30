/*
 * Description: the public mt_optim_* API (mtalloc.h): defaults are
 * torch.optim.AdamW's, MT_THREADS and MT_OPTIMIZER_COMPRESSION are read,
 * register/step/wait update f32 weights in place and bf16 weights by
 * rounding, a bf16 gradient steps as its f32 value does, the global norm
 * is returned, amsgrad with quantised state and a forced missing kernel
 * are refused, save/load round-trips and a corrupt file's error is
 * readable.
 *
 *   test_api DIR
 */
#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "mtalloc.h"

#define CHECK(c, ...)                                             \
  do {                                                            \
    if (!(c)) {                                                   \
      fprintf(stderr, "test_api: FAIL line %d: ", __LINE__);      \
      fprintf(stderr, __VA_ARGS__);                               \
      fprintf(stderr, "\n");                                      \
      exit(1);                                                    \
    }                                                             \
  } while (0)

int main(int argc, char **argv) {
  const char *dir = argc > 1 ? argv[1] : ".";
  setenv("MT_THREADS", "2", 1);
  setenv("MT_OPTIMIZER_COMPRESSION", "8bit", 1);
  mt_optim_params_t p;
  mt_optim_defaults(&p);
  CHECK(p.lr == 1e-3 && p.beta1 == 0.9 && p.beta2 == 0.999 && p.eps == 1e-8 &&
            p.weight_decay == 1e-2 && p.adamw == 1,
        "defaults");
  mt_optim_t *o;
  p.amsgrad = 1; /* with MT_OPTIMIZER_COMPRESSION=8bit: refused */
  CHECK(mt_optim_create(&p, &o) == -EINVAL, "amsgrad + 8bit accepted");
  p.amsgrad = 0;
  p.kernel = 99;
  CHECK(mt_optim_create(&p, &o) == -EINVAL, "bad kernel accepted");
  p.kernel = MT_OPTIM_KERNEL_AUTO;
  p.lr = -1;
  CHECK(mt_optim_create(&p, &o) == -EINVAL, "negative lr accepted");
  p.lr = 1e-3;
  CHECK(mt_optim_create(&p, &o) == 0, "create");
  CHECK(mt_optim_threads(o) == 2, "MT_THREADS=2 not read: %d", mt_optim_threads(o));

  enum { N = 10000 };
  static float w[N], g[N];
  static uint16_t wb[N];
  for (int i = 0; i < N; i++) {
    w[i] = 1.0f;
    wb[i] = 0x3f80; /* bf16 1.0 */
    g[i] = i % 2 ? 1.0f : -1.0f;
  }
  CHECK(mt_optim_register(o, w, N, MT_DTYPE_F32, g) == 0, "register f32");
  CHECK(mt_optim_register(o, wb, N, MT_DTYPE_BF16, g) == 1, "register bf16");
  CHECK(mt_optim_register(o, w, N, (mt_dtype_t)7, g) == -EINVAL, "bad dtype");
  CHECK(mt_optim_step(o, -1, 1.0f) == 0, "step");
  mt_optim_wait(o);
  /* AdamW's first step moves every weight by lr against the gradient's
   * sign (m/sqrt(v) = +-1 after bias correction), after decay 1 - lr*wd */
  CHECK(w[0] > 1.0f && w[1] < 1.0f, "f32 weights did not move: %g %g", w[0], w[1]);
  CHECK(w[0] - 1.0f < 1.1e-3f && 1.0f - w[1] < 1.1e-3f, "f32 step size %g %g", w[0], w[1]);
  /* bf16: 1 +- 1e-3 rounds back to 1.0 (bf16 spacing near 1 is 2^-7);
   * the FP32 master keeps the change, so 10 steps show in the weights */
  for (int s = 0; s < 10; s++) {
    CHECK(mt_optim_step(o, 1, 1.0f) == 0, "step bf16");
    mt_optim_wait(o);
  }
  CHECK(wb[0] == 0x3f82 || wb[0] == 0x3f81, "bf16 write-back 0x%04x", wb[0]);
  CHECK(mt_optim_clip_coef(10.0f, 1.0) < 0.1f && mt_optim_clip_coef(0.5f, 1.0) == 1.0f, "clip");
  /* two gradients of N entries +-1: each norm is sqrt(N) = 100 exactly,
   * the total sqrt(2) * 100 rounded once (adam_exact checks torch's order) */
  float total = 0;
  CHECK(mt_optim_grad_norm(o, &total) == 0, "grad norm");
  CHECK(total == sqrtf(20000.0f), "grad norm %.9g", total);
  /* a bf16 gradient: the same values, the same step as the f32 one */
  static float w2[N], w3[N];
  static uint16_t gb[N];
  for (int i = 0; i < N; i++) {
    w2[i] = w3[i] = 0.5f;
    gb[i] = g[i] > 0 ? 0x3f80 : 0xbf80; /* bf16 +-1.0 */
  }
  mt_optim_t *o2;
  CHECK(mt_optim_create(&p, &o2) == 0, "create 2");
  CHECK(mt_optim_register(o2, w2, N, MT_DTYPE_F32, g) == 0, "register f32 grad");
  CHECK(mt_optim_register_grad(o2, w3, N, MT_DTYPE_F32, gb, MT_DTYPE_BF16) == 1,
        "register bf16 grad");
  CHECK(mt_optim_register_grad(o2, w3, N, MT_DTYPE_F32, gb, (mt_dtype_t)9) == -EINVAL,
        "bad grad dtype");
  CHECK(mt_optim_step(o2, -1, 1.0f) == 0, "step 2");
  mt_optim_wait(o2);
  CHECK(memcmp(w2, w3, sizeof(w2)) == 0, "bf16 gradient stepped differently");
  mt_optim_destroy(o2);

  char path[4096];
  snprintf(path, sizeof(path), "%s/api_ck.bin", dir);
  CHECK(mt_optim_save(o, path) == 0, "save: %s", mt_optim_error(o));
  CHECK(mt_optim_load(o, path) == 0, "load: %s", mt_optim_error(o));
  FILE *f = fopen(path, "r+b");
  fseek(f, 100, SEEK_SET);
  fputc(0x55, f);
  fclose(f);
  CHECK(mt_optim_load(o, path) == -EINVAL, "corrupt file loaded");
  CHECK(strstr(mt_optim_error(o), "byte") != NULL, "error text: %s", mt_optim_error(o));
  printf("corrupt checkpoint: %s\n", mt_optim_error(o));
  remove(path);
  mt_optim_destroy(o);

  /* the MKL kernel: available where libmkl_rt.so.2 loads, refused cleanly
   * otherwise (test_adam_exact proves its bits) */
  p.kernel = MT_OPTIM_KERNEL_TORCH_MKL;
  p.state = MT_OPTIM_STATE_FP32;
  int rc = mt_optim_create(&p, &o);
  CHECK(rc == 0 || rc == -ENOTSUP, "TORCH_MKL kernel: %d", rc);
  if (rc == 0) {
    CHECK(mt_optim_register(o, w, N, MT_DTYPE_F32, g) == 0, "register");
    CHECK(mt_optim_step(o, -1, 1.0f) == 0, "step");
    mt_optim_wait(o);
    mt_optim_destroy(o);
  }
  printf("TORCH_MKL kernel: %s\n", rc == 0 ? "loaded and stepped" : "libmkl_rt.so.2 not on the loader path");
  return 0;
}
