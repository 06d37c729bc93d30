/*
 * Description: `mt-trace synth`'s pipeline options (checkpoint,
 * optimizer_placement, state_compression) write the traces worked out by
 * hand below for tests/gen/tiny.conf.
 *
 * tiny.conf: 2 layers, hidden 64, ffn 256, vocab 1000, seq 32,
 * micro_batch 2 (T = 64 tokens), grad_accum 2, fp32, tied embeddings,
 * learned positions: 166,144 parameters (664,576 bytes), 57 kernels per
 * micro-batch, 28 parameter tensors; every kernel takes the 2 us minimum
 * (the largest, the LM head, is 8.2 MFLOP: 0.08 us at 100 TFLOP/s).
 *
 *   base:        142 launches per iteration (2 x 57 + 28 Adam).
 *   checkpoint 1: each layer's 10 forward kernels run again before its
 *     backward: 2 x (57 + 2 x 10) + 28 = 182 launches, 32 gemm_fwd
 *     (2 micro-batches x 2 layers x 4 x 2 passes), ideal time 80 us
 *     (40 launches x 2 us) longer. Peak transient bytes 578,564, live at
 *     cross_entropy_bwd: tokens and labels 2 x 256, the two layer inputs
 *     kept as checkpoints 2 x 16,384, the final norm's input and output
 *     2 x 16,384 and its stats 512, logits and their gradient 2 x 256,000,
 *     the loss 4 (without checkpointing every layer's saved activations
 *     are live there too).
 *   optimizer_placement host: no Adam kernel, 2 x 57 + 4 hand-offs = 118
 *     launches; allocated at the start only the weights (664,576 bytes);
 *     4 "mt_host_optimizer w=4 state=none" launches per iteration, all in
 *     the second micro-batch (the last), each right after the backward
 *     kernel that finishes its gradients: final norm (2 gradients + 2
 *     weights), layer 1 and layer 0 (12 + 12 each), embeddings (wte, wpe:
 *     2 + 2); their gradient spans read, weight spans written, together
 *     664,576 gradient bytes per iteration, each gradient region handed
 *     off once and freed right after; every weight span of every other
 *     launch read-only (clean evictions between steps).
 *   state_compression 8bit / 4bit (GPU Adam): m and v of the 162,304
 *     elements in tensors of 4,096 or more are 1 byte (8bit) or half a
 *     byte (4bit) each plus a 4-byte scale per 128 (1,268 blocks): per
 *     moment 167,376 / 86,224 bytes, with the 3,840 elements of small
 *     tensors in fp32 (30,720 for both moments): persistent bytes
 *     2 x 664,576 + 2 x 167,376 + 30,720 = 1,694,624 (8bit) and
 *     2 x 664,576 + 2 x 86,224 + 30,720 = 1,532,320 (4bit), against
 *     4 x 664,576 = 2,658,304 uncompressed.
 *
 * Usage: pipeline_check MT_TRACE TINY_CONF   (exit 0 pass, 1 fail)
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "trace_io.h"

static _Noreturn void die(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static _Noreturn void die(const char *fmt, ...) {
  va_list ap;
  va_start(ap, fmt);
  fputs("pipeline_check: FAIL: ", stderr);
  vfprintf(stderr, fmt, ap);
  fputc('\n', stderr);
  va_end(ap);
  exit(1);
}

#define CHECK(cond, ...) \
  do {                   \
    if (!(cond)) die(__VA_ARGS__); \
  } while (0)

#define MAXR 4096
#define MAXF 64

/* What one trace says, counted while reading it back. */
typedef struct counts {
  uint64_t launches, ideal_ns, gemm_fwd, hand_offs, hand_off_bytes, hand_off_mb2, adam;
  uint64_t start_bytes;          /* ALLOCs before the first ITER: the persistent tensors */
  uint64_t live, peak;           /* bytes allocated after it, live and at most */
  uint64_t weight_write_spans;   /* spans writing a weight outside the hand-offs */
  uint64_t handed[MAXR];         /* hand-offs per gradient region */
  bool grad_freed_after[MAXR];
} counts_t;

static char names[MAXF][96];
static uint64_t region_bytes[MAXR];
static bool region_weight[MAXR];

static void synth(const char *mt, const char *conf, const char *opts, const char *out) {
  char cmd[2048];
  snprintf(cmd, sizeof cmd, "'%s' synth --model '%s' -o '%s' %s >/dev/null", mt, conf, out, opts);
  CHECK(system(cmd) == 0, "%s failed", cmd);
}

static void count(const char *path, counts_t *c) {
  memset(c, 0, sizeof *c);
  memset(names, 0, sizeof names);
  memset(region_bytes, 0, sizeof region_bytes);
  memset(region_weight, 0, sizeof region_weight);
  char err[256];
  mt_trace_reader_t *r;
  CHECK(mt_trace_open(path, &r, err, sizeof err) == 0, "%s: %s", path, err);
  const mt_trace_rec_t *rec;
  int rc;
  uint64_t mb = 0, last_handoff = 0;
  bool started = false;
  while ((rc = mt_trace_next(r, &rec)) == 1) {
    if (rec->type == MT_TR_ITER) {
      started = true;
    } else if (rec->type == MT_TR_NAME) {
      const mt_trace_name_t *n = (const void *)rec;
      CHECK(n->id < MAXF && n->len < sizeof names[0], "function id %" PRIu64, n->id);
      memcpy(names[n->id], n + 1, n->len);
    } else if (rec->type == MT_TR_ALLOC) {
      const mt_trace_alloc_t *a = (const void *)rec;
      CHECK(a->region < MAXR, "region %" PRIu64, a->region);
      region_bytes[a->region] = a->bytes;
      if (!started) {
        c->start_bytes += a->bytes;
        /* the weights come first; with the host optimizer they are all there is */
        region_weight[a->region] = c->start_bytes <= 664576;
      } else {
        c->live += a->bytes;
        if (c->live > c->peak) c->peak = c->live;
      }
    } else if (rec->type == MT_TR_FREE) {
      const mt_trace_free_t *f = (const void *)rec;
      c->live -= region_bytes[f->region];
      if (c->handed[f->region] && last_handoff) c->grad_freed_after[f->region] = true;
    } else if (rec->type == MT_TR_LAUNCH) {
      const mt_trace_launch_t *l = (const void *)rec;
      const mt_trace_span_t *sp = mt_trace_launch_spans(l);
      const uint8_t *k = mt_trace_launch_kinds(l);
      CHECK(k != NULL, "no access kinds");
      const char *n = names[l->func];
      c->launches++;
      c->ideal_ns += l->dur_ns;
      if (strcmp(n, "embedding_fwd") == 0) mb++;
      if (strcmp(n, "gemm_fwd") == 0) c->gemm_fwd++;
      if (strcmp(n, "adam_step") == 0) c->adam++;
      bool ho = strncmp(n, "mt_host_optimizer", 17) == 0;
      last_handoff = ho;
      if (ho) {
        CHECK(strcmp(n, "mt_host_optimizer w=4 state=none") == 0, "hand-off named '%s'", n);
        CHECK(l->dur_ns == 0, "a hand-off takes %" PRIu64 " ns of GPU time", l->dur_ns);
        c->hand_offs++;
        if (mb % 2 == 0) c->hand_off_mb2++;
        for (uint32_t i = 0; i < l->nfoot; i++) {
          bool w = region_weight[sp[i].region];
          CHECK(k[i] == (w ? MT_ACC_WRITE : MT_ACC_READ), "hand-off span %u: kind %u", i, k[i]);
          if (!w) {
            c->handed[sp[i].region]++;
            c->hand_off_bytes += sp[i].bytes;
          }
        }
        continue;
      }
      for (uint32_t i = 0; i < l->nfoot; i++)
        if (region_weight[sp[i].region] && k[i] != MT_ACC_READ) c->weight_write_spans++;
    }
  }
  CHECK(rc == 0, "%s: %s", path, mt_trace_error(r));
  mt_trace_close(r);
}

int main(int argc, char **argv) {
  CHECK(argc == 3, "usage: pipeline_check MT_TRACE TINY_CONF");
  const char *mt = argv[1], *conf = argv[2];
  char dir[] = "/tmp/pipeline_check.XXXXXX";
  CHECK(mkdtemp(dir), "mkdtemp: %s", strerror(errno));
  char p[5][512];
  const char *opts[5] = {"", "--checkpoint 1", "--optimizer-placement host", "--state-compression 8bit",
                         "--set state_compression=4bit"};
  counts_t c[5];
  for (int i = 0; i < 5; i++) {
    snprintf(p[i], sizeof p[i], "%s/t%d.trace", dir, i);
    synth(mt, conf, opts[i], p[i]);
    count(p[i], &c[i]);
  }
  /* base */
  CHECK(c[0].launches == 142 && c[0].adam == 28 && c[0].gemm_fwd == 16, "base: %" PRIu64 " launches",
        c[0].launches);
  CHECK(c[0].ideal_ns == 142 * 2000, "base: ideal %" PRIu64 " ns", c[0].ideal_ns);
  CHECK(c[0].start_bytes == 2658304, "base: %" PRIu64 " persistent bytes", c[0].start_bytes);
  /* checkpoint 1 */
  CHECK(c[1].launches == 182, "checkpoint: %" PRIu64 " launches, want 182", c[1].launches);
  CHECK(c[1].gemm_fwd == 32, "checkpoint: %" PRIu64 " gemm_fwd, want 32", c[1].gemm_fwd);
  CHECK(c[1].ideal_ns == c[0].ideal_ns + 80000, "checkpoint: ideal %" PRIu64 " ns", c[1].ideal_ns);
  CHECK(c[1].peak == 578564, "checkpoint: peak transient %" PRIu64 ", want 578564", c[1].peak);
  CHECK(c[0].peak > c[1].peak, "checkpoint saves nothing");
  /* host optimizer */
  CHECK(c[2].launches == 118 && c[2].adam == 0, "host: %" PRIu64 " launches, %" PRIu64 " adam", c[2].launches,
        c[2].adam);
  CHECK(c[2].start_bytes == 664576, "host: %" PRIu64 " bytes at the start, want the weights' 664576",
        c[2].start_bytes);
  CHECK(c[2].hand_offs == 4 && c[2].hand_off_mb2 == 4, "host: %" PRIu64 " hand-offs, %" PRIu64 " in the last",
        c[2].hand_offs, c[2].hand_off_mb2);
  CHECK(c[2].hand_off_bytes == 664576, "host: %" PRIu64 " gradient bytes handed off", c[2].hand_off_bytes);
  uint64_t grads = 0;
  for (int r = 0; r < MAXR; r++) {
    CHECK(c[2].handed[r] <= 1, "host: region %d handed off %" PRIu64 " times", r, c[2].handed[r]);
    if (c[2].handed[r]) {
      grads++;
      CHECK(c[2].grad_freed_after[r], "host: gradient region %d not freed after its hand-off", r);
    }
  }
  CHECK(grads == 28, "host: %" PRIu64 " gradients handed off, want 28", grads);
  CHECK(c[2].weight_write_spans == 0, "host: %" PRIu64 " kernel spans write weights", c[2].weight_write_spans);
  CHECK(c[0].weight_write_spans == 28, "base: %" PRIu64 " spans write weights, want 28 (Adam)",
        c[0].weight_write_spans);
  /* compressed state */
  CHECK(c[3].start_bytes == 1694624, "8bit: %" PRIu64 " persistent bytes, want 1694624", c[3].start_bytes);
  CHECK(c[4].start_bytes == 1532320, "4bit: %" PRIu64 " persistent bytes, want 1532320", c[4].start_bytes);
  for (int i = 0; i < 5; i++) unlink(p[i]);
  rmdir(dir);
  printf("pipeline: checkpoint, host optimizer and compressed state as computed by hand\n");
  return 0;
}
