/*
 * synth.c - `mt-trace synth --model CONFIG -o TRACE [--iterations N]`: the
 * trace of a transformer's training iterations (forward, backward, Adam),
 * with tensor sizes and lifetimes as a framework without recomputation
 * would have them, at any scale: a 100B model is a few thousand launches
 * per iteration and is written in well under a second.
 *
 * The model (a config file of `key = value` lines, see usage()) is a
 * decoder-only transformer: token embedding (+ learned positions), L layers
 * of pre-norm attention and MLP, a final norm, an LM head (tied to the
 * embedding or not) and a cross-entropy loss. Every parameter is its own
 * tensor (weight and bias separately), as with a caching-free allocator.
 *
 * Persistent tensors, allocated at the start in this order and never freed:
 * the weights (module order), their gradients, fp32 master weights when the
 * dtype is 16-bit, then Adam's m and v (fp32) parameter by parameter.
 *
 * One micro-batch (T = micro_batch * seq tokens, d = dtype bytes):
 *   forward, per layer, x = the layer's input (T x hidden):
 *     layernorm(x) -> ln1, stats | gemm ln1 -> qkv | flash attention qkv ->
 *     att, lse | gemm att -> proj | add x + proj -> h1 | layernorm(h1) ->
 *     ln2, stats | gemm ln2 -> up | gelu/swiglu up -> act | gemm act -> down
 *     | add h1 + down -> next layer's x.
 *   proj and down are temporaries, freed after the add that consumes them;
 *   everything else is saved for the backward pass and freed right after
 *   the last backward kernel that reads it.
 *   then final layernorm, LM head (logits T x vocab), cross entropy.
 *   backward in reverse: each matmul is two kernels (dgrad: input grad from
 *   output grad and weight; wgrad: weight and bias grads from output grad
 *   and saved input), norms and activations one kernel each, a grad_add
 *   where the residual stream's two gradient paths meet, flash attention
 *   backward one kernel, embedding backward a scatter into the grads.
 * With grad_accum > 1 the micro-batch repeats; then one Adam kernel per
 * parameter tensor reads and writes the weight (or master), grad, m and v.
 *
 * Every span carries its access kind (trace format version 2): weights,
 * saved activations and the loss inputs are read, a kernel's outputs
 * written, gradients written (read-write with grad_accum > 1, where
 * micro-batches add to them), Adam's master, m and v read-write and the
 * 16-bit weights written from the master (read-write without one).
 *
 * Activation checkpointing (checkpoint = K), the host optimizer
 * (optimizer_placement = host) and compressed Adam state
 * (state_compression) change the program as usage() says: recomputation
 * adds each layer's forward kernels again before its segment's backward;
 * with the host optimizer the GPU keeps only the weights, and each
 * parameter group's gradients leave in a zero-time "mt_host_optimizer"
 * launch (gradients read, weights written) that replay runs on its host
 * pool.
 *
 * Kernel time (ideal, all data resident) is a roofline: max(FLOPs / tflops,
 * bytes moved / mem_bw, min_kernel_us); matmuls count 2*M*N*K FLOPs, causal
 * flash attention 2*b*s^2*hidden forward and 2.5 times that backward.
 */
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>

#include "commands.h"
#include "common.h"
#include "synth_emit.h"
#include "trace_io.h"

#define WHO "mt-trace synth"
#define SYNTH_MAX_ITERATIONS 100000

/* ---- the model config ---------------------------------------------------- */

typedef struct synth_model {
  char name[64];
  uint64_t layers, hidden, heads, ffn, vocab, seq, micro_batch, grad_accum;
  uint64_t dtype;             /* bytes per element of weights and activations: 4 or 2 */
  double tflops;              /* matmul throughput, 1e12 FLOP/s; default 100 */
  double mem_bw;              /* memory bandwidth, GB/s (1e9 B/s); default 2000 */
  double min_kernel_us;       /* shortest kernel, us; default 2 */
  uint64_t swiglu;            /* activation: 0 gelu (ffn x1 up), 1 swiglu (fused gate+up, 2 x ffn) */
  uint64_t rmsnorm;           /* norm: 0 layernorm (weight+bias), 1 rmsnorm (weight) */
  uint64_t bias;              /* linear layers have biases: 1/0; default 1 */
  uint64_t tied;              /* LM head shares the token embedding: 1/0; default 1 */
  uint64_t learned_pos;       /* position embedding: 1 learned (seq x hidden), 0 none (rotary) */
  uint64_t optimizer;         /* 0 adam, 1 adamw: the same memory traffic */
  uint64_t checkpoint;        /* activation checkpointing: keep the input of every K-th layer,
                               * recompute the rest in backward; 0 = off (default) */
  uint64_t host_opt;          /* optimizer placement: 0 gpu (Adam kernels, default), 1 host
                               * (MT_OPTIMIZER=host: gradients leave, weights come back) */
  uint64_t compress;          /* Adam's m and v: 0 none (fp32), 1 8bit, 2 4bit
                               * (MT_OPTIMIZER_COMPRESSION); default 0 */
} synth_model_t;

enum key_type { K_UINT, K_UINT0, K_REAL, K_NAME, K_ENUM };

typedef struct key_def {
  const char *key;
  enum key_type type;
  size_t off;
  bool required;
  uint64_t max;               /* K_UINT, K_UINT0: largest value (smallest 1, or 0 for K_UINT0) */
  const char *choices;        /* K_ENUM: "a|b|c" -> 0, 1, 2 (fp32|bf16|fp16 -> 4, 2, 2) */
} key_def_t;

#define KOFF(f) offsetof(synth_model_t, f)
static const key_def_t KEYS[] = {
    {"name", K_NAME, KOFF(name), false, 0, NULL},
    {"layers", K_UINT, KOFF(layers), true, 100000, NULL},
    {"hidden", K_UINT, KOFF(hidden), true, 1u << 20, NULL},
    {"heads", K_UINT, KOFF(heads), true, 1u << 16, NULL},
    {"ffn", K_UINT, KOFF(ffn), false, 1u << 22, NULL},
    {"vocab", K_UINT, KOFF(vocab), true, 1u << 24, NULL},
    {"seq", K_UINT, KOFF(seq), true, 1u << 24, NULL},
    {"micro_batch", K_UINT, KOFF(micro_batch), false, 1u << 20, NULL},
    {"dtype", K_ENUM, KOFF(dtype), false, 0, "fp32|bf16|fp16"},
    {"grad_accum", K_UINT, KOFF(grad_accum), false, 10000, NULL},
    {"tflops", K_REAL, KOFF(tflops), false, 0, NULL},
    {"mem_bw", K_REAL, KOFF(mem_bw), false, 0, NULL},
    {"min_kernel_us", K_REAL, KOFF(min_kernel_us), false, 0, NULL},
    {"optimizer", K_ENUM, KOFF(optimizer), false, 0, "adam|adamw"},
    {"activation", K_ENUM, KOFF(swiglu), false, 0, "gelu|swiglu"},
    {"norm", K_ENUM, KOFF(rmsnorm), false, 0, "layernorm|rmsnorm"},
    {"bias", K_ENUM, KOFF(bias), false, 0, "0|1"},
    {"tie_embeddings", K_ENUM, KOFF(tied), false, 0, "0|1"},
    {"pos_embedding", K_ENUM, KOFF(learned_pos), false, 0, "none|learned"},
    {"checkpoint", K_UINT0, KOFF(checkpoint), false, 100000, NULL},
    {"optimizer_placement", K_ENUM, KOFF(host_opt), false, 0, "gpu|host"},
    {"state_compression", K_ENUM, KOFF(compress), false, 0, "none|8bit|4bit"},
};
#define NKEYS (sizeof KEYS / sizeof KEYS[0])

static char *trim(char *s) {
  while (*s == ' ' || *s == '\t') s++;
  char *e = s + strlen(s);
  while (e > s && (e[-1] == ' ' || e[-1] == '\t' || e[-1] == '\r' || e[-1] == '\n')) e--;
  *e = '\0';
  return s;
}

/* Index of value in "a|b|c", or -1. */
static int choice(const char *choices, const char *v) {
  size_t n = strlen(v);
  int i = 0;
  for (const char *c = choices;; i++) {
    const char *bar = strchr(c, '|');
    size_t len = bar ? (size_t)(bar - c) : strlen(c);
    if (len == n && strncmp(c, v, n) == 0) return i;
    if (!bar) return -1;
    c = bar + 1;
  }
}

/* One line "WHO: FILE:LINE: what" on stderr; returns 2 (bad input). */
#define cfg_bad(path, line, ...) mtt_input_error(WHO, path, line, __VA_ARGS__)

static int set_key(synth_model_t *m, const key_def_t *k, const char *v, const char *path, unsigned line) {
  char *p = (char *)m + k->off;
  switch (k->type) {
  case K_NAME:
    if (strlen(v) >= sizeof m->name) return cfg_bad(path, line, "name: at most %zu characters", sizeof m->name - 1);
    strcpy(p, v);
    return 0;
  case K_UINT:
  case K_UINT0: {
    char *end;
    errno = 0;
    unsigned long long x = strtoull(v, &end, 10);
    unsigned lo = k->type == K_UINT0 ? 0 : 1;
    if (v[0] < '0' || v[0] > '9' || *end || errno || x < lo || x > k->max)
      return cfg_bad(path, line, "%s = '%s': expected a whole number from %u to %llu", k->key, v, lo,
                     (unsigned long long)k->max);
    *(uint64_t *)(void *)p = x;
    return 0;
  }
  case K_REAL: {
    char *end;
    errno = 0;
    double x = strtod(v, &end);
    bool zero_ok = strcmp(k->key, "min_kernel_us") == 0;
    if (end == v || *end || errno || !isfinite(x) || x < 0 || (x == 0 && !zero_ok) || x > 1e9)
      return cfg_bad(path, line, "%s = '%s': expected a %s number", k->key, v, zero_ok ? "non-negative" : "positive");
    *(double *)(void *)p = x;
    return 0;
  }
  case K_ENUM: {
    int c = choice(k->choices, v);
    if (c < 0) return cfg_bad(path, line, "%s = '%s': expected one of %s", k->key, v, k->choices);
    uint64_t x = (uint64_t)c;
    if (k->off == KOFF(dtype)) x = c == 0 ? 4 : 2;
    *(uint64_t *)(void *)p = x;
    return 0;
  }
  }
  return 2;
}

/* a*b*c with overflow check against limit. */
static bool mul_ok(uint64_t a, uint64_t b, uint64_t c, uint64_t limit) {
  uint64_t x;
  return !__builtin_mul_overflow(a, b, &x) && !__builtin_mul_overflow(x, c, &x) && x <= limit;
}

/* A `key=value` from the command line, set after the config file's keys. */
typedef struct synth_override {
  const char *key, *val;
} synth_override_t;
#define SYNTH_MAX_OVERRIDES 32

/* Index of key in KEYS, or NKEYS after one message naming the known keys. */
static size_t find_key(const char *key, const char *path, unsigned line) {
  size_t k = 0;
  while (k < NKEYS && strcmp(KEYS[k].key, key) != 0) k++;
  if (k == NKEYS) {
    char known[640] = "";
    for (size_t j = 0; j < NKEYS; j++) {
      strcat(known, j ? ", " : "");
      strcat(known, KEYS[j].key);
    }
    cfg_bad(path, line, "unknown key '%.60s' (known: %s)", key, known);
  }
  return k;
}

/* Reads and checks a model config, then applies the command line's
 * overrides (which replace the file's values). Returns 0, or 2 after one
 * message. */
static int read_model(const char *path, synth_model_t *m, const synth_override_t *ov, size_t nov) {
  *m = (synth_model_t){.micro_batch = 1, .dtype = 4, .grad_accum = 1, .tflops = 100, .mem_bw = 2000,
                       .min_kernel_us = 2, .bias = 1, .tied = 1, .learned_pos = 1};
  const char *base = strrchr(path, '/');
  base = base ? base + 1 : path;
  snprintf(m->name, sizeof m->name, "%.*s", (int)strcspn(base, "."), base);
  FILE *f = fopen(path, "r");
  if (!f) return cfg_bad(path, 0, "cannot open: %s", strerror(errno));
  unsigned seen[NKEYS] = {0};
  char *buf = NULL;
  size_t cap = 0;
  unsigned line = 0;
  int rc = 0;
  while (!rc && getline(&buf, &cap, f) >= 0) {
    line++;
    char *hash = strchr(buf, '#');
    if (hash) *hash = '\0';
    char *s = trim(buf);
    if (!*s) continue;
    char *eq = strchr(s, '=');
    if (!eq) {
      rc = cfg_bad(path, line, "expected 'key = value', got '%.60s'", s);
      break;
    }
    *eq = '\0';
    char *key = trim(s), *val = trim(eq + 1);
    if (!*key || !*val) {
      rc = cfg_bad(path, line, "expected 'key = value' with both parts non-empty");
      break;
    }
    size_t k = find_key(key, path, line);
    if (k == NKEYS) {
      rc = 2;
      break;
    }
    if (seen[k]) {
      rc = cfg_bad(path, line, "%s is already set on line %u", key, seen[k]);
      break;
    }
    seen[k] = line;
    rc = set_key(m, &KEYS[k], val, path, line);
  }
  if (!rc && ferror(f)) rc = cfg_bad(path, 0, "read error");
  free(buf);
  fclose(f);
  for (size_t i = 0; !rc && i < nov; i++) {
    size_t k = find_key(ov[i].key, "--set", 0);
    if (k == NKEYS) return 2;
    if (KEYS[k].off == KOFF(name)) return cfg_bad("--set", 0, "name cannot be overridden");
    seen[k] = 1;
    rc = set_key(m, &KEYS[k], ov[i].val, "--set", 0);
  }
  for (size_t k = 0; !rc && k < NKEYS; k++)
    if (KEYS[k].required && !seen[k]) rc = cfg_bad(path, 0, "%s is missing (required: layers, hidden, heads, vocab, seq)", KEYS[k].key);
  if (rc) return rc;
  if (!m->ffn) m->ffn = 4 * m->hidden;
  if (m->hidden % m->heads) return cfg_bad(path, 0, "hidden (%llu) is not a multiple of heads (%llu)",
                                           (unsigned long long)m->hidden, (unsigned long long)m->heads);
  if (m->checkpoint > m->layers)
    return cfg_bad(path, 0, "checkpoint (%llu) is more than layers (%llu): at most one segment of all layers",
                   (unsigned long long)m->checkpoint, (unsigned long long)m->layers);
  /* The largest tensors must stay far from 64-bit overflow (1 PiB each). */
  uint64_t t = m->micro_batch * m->seq, lim = 1ull << 50;
  if (!mul_ok(t, m->vocab, 4, lim) || !mul_ok(t, m->ffn, 8, lim) || !mul_ok(m->vocab, m->hidden, 4, lim) ||
      !mul_ok(m->hidden, m->ffn, 8, lim) || !mul_ok(t, m->seq, m->heads * 4, lim))
    return cfg_bad(path, 0, "the model's tensors are too large (over 1 PiB)");
  return 0;
}

/* ---- the trace ------------------------------------------------------------ */

/* Parameters of one layer, in module order; absent ones have n == 0. */
enum { P_LN1_W, P_LN1_B, P_QKV_W, P_QKV_B, P_O_W, P_O_B, P_LN2_W, P_LN2_B, P_UP_W, P_UP_B, P_DOWN_W,
       P_DOWN_B, P_LAYER };
/* Per-layer transient tensors: forward activations (A_), gradients (G_).
 * A_X is the layer's input, G_X the gradient of it. */
enum { A_X, A_LN1, A_LN1S, A_QKV, A_ATT, A_LSE, A_PROJ, A_H1, A_LN2, A_LN2S, A_UP, A_ACT, A_DOWN, G_ACT, G_UP,
       G_LN2, G_H1P, G_H1, G_ATT, G_QKV, G_LN1, G_XP, G_X, A_ROUT, A_LAYER };
/* A_ROUT: the recomputed output of a checkpoint segment's last layer,
 * which backward does not need (the next segment's input is kept). */
/* The model's top and bottom. */
enum { F_TOK, F_LAB, F_X, F_LNF, F_LNFS, F_LOGITS, F_LOSS, F_DLOGITS, F_DLNF, F_DX, F_COUNT };

typedef struct param {
  uint64_t n;                 /* elements; 0 = absent */
  uint32_t w, g, master, m, v; /* tensor handles; master UINT32_MAX when the weights are fp32 */
} param_t;

typedef struct synth {
  const synth_model_t *m;
  synth_emit_t *e;
  param_t *p;                 /* all parameters, module order */
  uint32_t np;
  uint32_t *layer_p;          /* [layers][P_LAYER]: index into p, UINT32_MAX = absent */
  uint32_t *layer_a;          /* [layers][A_LAYER]: tensor handles */
  uint32_t *layer_f;          /* [layers][A_LAYER]: the first forward pass's activations under
                               * checkpointing, freed after each layer (NULL without) */
  uint32_t wte, wpe, lnf_w, lnf_b, head; /* index into p (UINT32_MAX = absent) */
  uint32_t top[F_COUNT];
  uint64_t key;               /* next tensor key */
  uint64_t f[32];             /* function ids by kernel kind */
  uint64_t params;            /* total elements */
  bool last_mb;               /* the micro-batch being written is the step's last */
  uint64_t host_steps;        /* host optimizer hand-offs per iteration */
} synth_t;

enum { K_EMB_F, K_EMB_B, K_LN_F, K_LN_B, K_GEMM_F, K_GEMM_DG, K_GEMM_WG, K_ATT_F, K_ATT_B, K_ADD, K_GADD, K_ACT_F,
       K_ACT_B, K_HEAD_F, K_HEAD_DG, K_HEAD_WG, K_CE_F, K_CE_B, K_ADAM, K_HOPT, K_KINDS };

/* Bytes of one Adam moment of n elements: fp32, or blocks of 128 codes
 * with an fp32 scale each (8 or 4 bits a code); tensors under 4,096
 * elements stay fp32, as in the library's codec (optim/). */
static uint64_t moment_bytes(uint64_t n, uint64_t compress) {
  if (compress == 0 || n < 4096) return n * 4;
  uint64_t scales = (n + 127) / 128 * 4;
  return (compress == 1 ? n : (n + 1) / 2) + scales;
}

static uint32_t tensor(synth_t *s, uint64_t bytes, bool persistent) {
  return synth_emit_tensor(s->e, s->key++, bytes, persistent);
}

static uint32_t add_param(synth_t *s, uint64_t n) {
  if (n == 0) return UINT32_MAX;
  s->p[s->np] = (param_t){.n = n};
  s->params += n;
  return s->np++;
}

/* Declares every tensor and allocates the persistent ones. */
static int layout(synth_t *s) {
  const synth_model_t *m = s->m;
  uint64_t h = m->hidden, f = m->ffn, fu = m->swiglu ? 2 * f : f, L = m->layers, nb = m->bias ? 1 : 0,
           nn = m->rmsnorm ? 0 : 1, T = m->micro_batch * m->seq, d = m->dtype;
  s->p = calloc(L * P_LAYER + 5, sizeof *s->p);
  s->layer_p = malloc(L * P_LAYER * sizeof *s->layer_p);
  s->layer_a = malloc(L * A_LAYER * sizeof *s->layer_a);
  s->layer_f = m->checkpoint ? malloc(L * A_LAYER * sizeof *s->layer_f) : NULL;
  if (!s->p || !s->layer_p || !s->layer_a || (m->checkpoint && !s->layer_f)) return -ENOMEM;

  s->wte = add_param(s, m->vocab * h);
  s->wpe = add_param(s, m->learned_pos ? m->seq * h : 0);
  for (uint64_t l = 0; l < L; l++) {
    uint32_t *lp = &s->layer_p[l * P_LAYER];
    const uint64_t n[P_LAYER] = {h, h * nn, h * 3 * h, 3 * h * nb, h * h, h * nb,
                                 h, h * nn, h * fu,    fu * nb,    f * h, h * nb};
    for (int i = 0; i < P_LAYER; i++) lp[i] = add_param(s, n[i]);
  }
  s->lnf_w = add_param(s, h);
  s->lnf_b = add_param(s, h * nn);
  s->head = m->tied ? s->wte : add_param(s, m->vocab * h);

  /* With the host optimizer the GPU holds only the weights: a gradient
   * lives from its first write in the step to its hand-off to the host
   * (held across micro-batches), and the masters and moments are the host
   * optimizer's memory, not the trace's. */
  bool host = m->host_opt;
  for (uint32_t i = 0; i < s->np; i++) s->p[i].w = tensor(s, s->p[i].n * d, true);
  for (uint32_t i = 0; i < s->np; i++) {
    s->p[i].g = tensor(s, s->p[i].n * d, !host);
    if (host) synth_emit_hold(s->e, s->p[i].g);
  }
  for (uint32_t i = 0; i < s->np; i++)
    s->p[i].master = d == 4 || host ? UINT32_MAX : tensor(s, s->p[i].n * 4, true);
  for (uint32_t i = 0; i < s->np; i++) {
    s->p[i].m = host ? UINT32_MAX : tensor(s, moment_bytes(s->p[i].n, m->compress), true);
    s->p[i].v = host ? UINT32_MAX : tensor(s, moment_bytes(s->p[i].n, m->compress), true);
  }
  /* Allocation order: weights, grads, masters, then m and v per parameter. */
  for (uint32_t i = 0; i < s->np; i++) synth_emit_alloc(s->e, s->p[i].w);
  for (uint32_t i = 0; i < s->np && !host; i++) synth_emit_alloc(s->e, s->p[i].g);
  for (uint32_t i = 0; i < s->np && d != 4 && !host; i++) synth_emit_alloc(s->e, s->p[i].master);
  for (uint32_t i = 0; i < s->np && !host; i++) {
    synth_emit_alloc(s->e, s->p[i].m);
    synth_emit_alloc(s->e, s->p[i].v);
  }

  uint64_t stats = T * 4 * (m->rmsnorm ? 1 : 2); /* fp32 mean and rstd per token */
  uint64_t lse = m->micro_batch * m->heads * m->seq * 4;
  const uint64_t ab[A_LAYER] = {
      [A_X] = T * h * d,    [A_LN1] = T * h * d,   [A_LN1S] = stats,      [A_QKV] = T * 3 * h * d,
      [A_ATT] = T * h * d,  [A_LSE] = lse,         [A_PROJ] = T * h * d,  [A_H1] = T * h * d,
      [A_LN2] = T * h * d,  [A_LN2S] = stats,      [A_UP] = T * fu * d,   [A_ACT] = T * f * d,
      [A_DOWN] = T * h * d, [G_ACT] = T * f * d,   [G_UP] = T * fu * d,   [G_LN2] = T * h * d,
      [G_H1P] = T * h * d,  [G_H1] = T * h * d,    [G_ATT] = T * h * d,   [G_QKV] = T * 3 * h * d,
      [G_LN1] = T * h * d,  [G_XP] = T * h * d,    [G_X] = T * h * d,     [A_ROUT] = T * h * d,
  };
  for (uint64_t l = 0; l < L; l++)
    for (int i = 0; i < A_LAYER; i++) s->layer_a[l * A_LAYER + i] = tensor(s, ab[i], false);
  for (uint64_t l = 0; s->layer_f && l < L; l++)
    for (int i = 0; i < A_LAYER; i++) s->layer_f[l * A_LAYER + i] = tensor(s, ab[i], false);
  const uint64_t fb[F_COUNT] = {
      [F_TOK] = T * 4,          [F_LAB] = T * 4,     [F_X] = T * h * d,        [F_LNF] = T * h * d,
      [F_LNFS] = stats,         [F_LOGITS] = T * m->vocab * d, [F_LOSS] = 4,   [F_DLOGITS] = T * m->vocab * d,
      [F_DLNF] = T * h * d,     [F_DX] = T * h * d,
  };
  for (int i = 0; i < F_COUNT; i++) s->top[i] = tensor(s, fb[i], false);

  static const char *const names[K_KINDS] = {
      [K_EMB_F] = "embedding_fwd",     [K_EMB_B] = "embedding_bwd",    [K_LN_F] = "layernorm_fwd",
      [K_LN_B] = "layernorm_bwd",      [K_GEMM_F] = "gemm_fwd",        [K_GEMM_DG] = "gemm_dgrad",
      [K_GEMM_WG] = "gemm_wgrad",      [K_ATT_F] = "flash_attn_fwd",   [K_ATT_B] = "flash_attn_bwd",
      [K_ADD] = "residual_add",        [K_GADD] = "grad_add",          [K_ACT_F] = "gelu_fwd",
      [K_ACT_B] = "gelu_bwd",          [K_HEAD_F] = "lm_head_fwd",     [K_HEAD_DG] = "lm_head_dgrad",
      [K_HEAD_WG] = "lm_head_wgrad",   [K_CE_F] = "cross_entropy_fwd", [K_CE_B] = "cross_entropy_bwd",
      [K_ADAM] = "adam_step",         [K_HOPT] = "mt_host_optimizer",
  };
  /* The host optimizer's hand-off names what replay needs to cost it:
   * bytes per weight (and gradient) element and the state's compression. */
  char hopt[64];
  snprintf(hopt, sizeof hopt, "mt_host_optimizer w=%llu state=%s", (unsigned long long)d,
           m->compress == 0 ? "none" : m->compress == 1 ? "8bit" : "4bit");
  for (int k = 0; k < K_KINDS; k++) {
    const char *n = names[k];
    if (m->swiglu && k == K_ACT_F) n = "swiglu_fwd";
    if (m->swiglu && k == K_ACT_B) n = "swiglu_bwd";
    if (m->rmsnorm && k == K_LN_F) n = "rmsnorm_fwd";
    if (m->rmsnorm && k == K_LN_B) n = "rmsnorm_bwd";
    if (k == K_HOPT) n = hopt;
    s->f[k] = synth_emit_func(s->e, n);
  }
  return 0;
}

/* Roofline time of one kernel, ns. */
static uint64_t kt(const synth_t *s, double flops, double bytes) {
  double ns = flops / (s->m->tflops * 1e3);
  double mem = bytes / s->m->mem_bw;
  if (mem > ns) ns = mem;
  if (ns < s->m->min_kernel_us * 1e3) ns = s->m->min_kernel_us * 1e3;
  return ns < 1 ? 1 : (uint64_t)llround(ns);
}

#define MAXT 32
typedef struct kernel {
  uint32_t t[MAXT];
  uint8_t kind[MAXT];
  uint32_t n;
} kernel_t;

static void kadd(kernel_t *k, uint32_t t, uint8_t kind) {
  if (t != UINT32_MAX && k->n < MAXT) {
    k->t[k->n] = t;
    k->kind[k->n++] = kind;
  }
}

/* Access kinds, one letter per tensor of a run() list: r read, w written
 * (an output, its old contents unused), m read and written (Adam's state),
 * a accumulated into (a gradient: written by the first micro-batch,
 * read-write when later ones add to it). */
static uint8_t access_of(const synth_t *s, char c) {
  switch (c) {
    case 'r': return MT_ACC_READ;
    case 'w': return MT_ACC_WRITE;
    case 'm': return MT_ACC_RW;
    case 'a': return s->m->grad_accum > 1 ? MT_ACC_RW : MT_ACC_WRITE;
    default: return MT_ACC_UNKNOWN;
  }
}

/* Launches kind over the listed tensors (UINT32_MAX entries skipped), each
 * accessed as the letter of acc at its position (access_of), then frees the
 * tensors in `frees` (same convention), ends with UINT32_MAX. */
static void run(synth_t *s, int kind, double flops, double bytes, const char *acc, const uint32_t *use,
                const uint32_t *frees) {
  kernel_t k = {.n = 0};
  size_t i = 0;
  for (const uint32_t *u = use; *u != UINT32_MAX - 1; u++, i++)
    kadd(&k, *u, access_of(s, i < strlen(acc) ? acc[i] : '?'));
  synth_emit_launch(s->e, s->f[kind], k.t, k.kind, k.n, kt(s, flops, bytes));
  for (const uint32_t *u = frees; u && *u != UINT32_MAX - 1; u++)
    if (*u != UINT32_MAX) synth_emit_free(s->e, *u);
}
#define END (UINT32_MAX - 1)
#define L_(...) ((const uint32_t[]){__VA_ARGS__, END})
#define NONE NULL

/* Weight / grad handles of parameter index i (UINT32_MAX when absent). */
static uint32_t W(const synth_t *s, uint32_t i) { return i == UINT32_MAX ? UINT32_MAX : s->p[i].w; }
static uint32_t G(const synth_t *s, uint32_t i) { return i == UINT32_MAX ? UINT32_MAX : s->p[i].g; }

/* The forward kernels of layer l over the activations a (A_LAYER handles),
 * writing the layer's output into next. */
static void forward_layer(synth_t *s, uint64_t l, const uint32_t *a, uint32_t next) {
  const synth_model_t *m = s->m;
  const uint32_t *p = &s->layer_p[l * P_LAYER];
  double T = (double)(m->micro_batch * m->seq), h = (double)m->hidden, f = (double)m->ffn,
         fu = m->swiglu ? 2 * f : f, d = (double)m->dtype, b = (double)m->micro_batch, sq = (double)m->seq;
  double act = T * h * d;
  run(s, K_LN_F, 0, 2 * act, "rrrww", L_(a[A_X], W(s, p[P_LN1_W]), W(s, p[P_LN1_B]), a[A_LN1], a[A_LN1S]), NONE);
  run(s, K_GEMM_F, 2 * T * h * 3 * h, act * 4 + 3 * h * h * d,
      "rrrw", L_(a[A_LN1], W(s, p[P_QKV_W]), W(s, p[P_QKV_B]), a[A_QKV]), NONE);
  run(s, K_ATT_F, 2 * b * sq * sq * h, act * 4, "rww", L_(a[A_QKV], a[A_ATT], a[A_LSE]), NONE);
  run(s, K_GEMM_F, 2 * T * h * h, act * 2 + h * h * d, "rrrw", L_(a[A_ATT], W(s, p[P_O_W]), W(s, p[P_O_B]), a[A_PROJ]),
      NONE);
  run(s, K_ADD, 0, 3 * act, "rrw", L_(a[A_X], a[A_PROJ], a[A_H1]), L_(a[A_PROJ]));
  run(s, K_LN_F, 0, 2 * act, "rrrww", L_(a[A_H1], W(s, p[P_LN2_W]), W(s, p[P_LN2_B]), a[A_LN2], a[A_LN2S]), NONE);
  run(s, K_GEMM_F, 2 * T * h * fu, act + T * fu * d + h * fu * d,
      "rrrw", L_(a[A_LN2], W(s, p[P_UP_W]), W(s, p[P_UP_B]), a[A_UP]), NONE);
  run(s, K_ACT_F, 0, T * (fu + f) * d, "rw", L_(a[A_UP], a[A_ACT]), NONE);
  run(s, K_GEMM_F, 2 * T * f * h, act + T * f * d + h * f * d,
      "rrrw", L_(a[A_ACT], W(s, p[P_DOWN_W]), W(s, p[P_DOWN_B]), a[A_DOWN]), NONE);
  run(s, K_ADD, 0, 3 * act, "rrw", L_(a[A_H1], a[A_DOWN], next), L_(a[A_DOWN]));
}

static void backward_layer(synth_t *s, uint64_t l) {
  const synth_model_t *m = s->m;
  const uint32_t *p = &s->layer_p[l * P_LAYER], *a = &s->layer_a[l * A_LAYER];
  uint32_t dnext = l + 1 < m->layers ? s->layer_a[(l + 1) * A_LAYER + G_X] : s->top[F_DX];
  double T = (double)(m->micro_batch * m->seq), h = (double)m->hidden, f = (double)m->ffn,
         fu = m->swiglu ? 2 * f : f, d = (double)m->dtype, b = (double)m->micro_batch, sq = (double)m->seq;
  double act = T * h * d;
  /* MLP */
  run(s, K_GEMM_DG, 2 * T * h * f, act + T * f * d + h * f * d, "rrw", L_(dnext, W(s, p[P_DOWN_W]), a[G_ACT]), NONE);
  run(s, K_GEMM_WG, 2 * T * h * f, act + T * f * d + h * f * d,
      "rraa", L_(dnext, a[A_ACT], G(s, p[P_DOWN_W]), G(s, p[P_DOWN_B])), L_(a[A_ACT]));
  run(s, K_ACT_B, 0, T * (f + 2 * fu) * d, "rrw", L_(a[G_ACT], a[A_UP], a[G_UP]), L_(a[G_ACT], a[A_UP]));
  run(s, K_GEMM_DG, 2 * T * h * fu, act + T * fu * d + h * fu * d, "rrw", L_(a[G_UP], W(s, p[P_UP_W]), a[G_LN2]), NONE);
  run(s, K_GEMM_WG, 2 * T * h * fu, act + T * fu * d + h * fu * d,
      "rraa", L_(a[G_UP], a[A_LN2], G(s, p[P_UP_W]), G(s, p[P_UP_B])), L_(a[G_UP], a[A_LN2]));
  run(s, K_LN_B, 0, 3 * act,
      "rrrrwaa", L_(a[G_LN2], a[A_H1], a[A_LN2S], W(s, p[P_LN2_W]), a[G_H1P], G(s, p[P_LN2_W]), G(s, p[P_LN2_B])),
      L_(a[G_LN2], a[A_LN2S], a[A_H1]));
  run(s, K_GADD, 0, 3 * act, "rrw", L_(a[G_H1P], dnext, a[G_H1]), L_(a[G_H1P], dnext));
  /* attention */
  run(s, K_GEMM_DG, 2 * T * h * h, 2 * act + h * h * d, "rrw", L_(a[G_H1], W(s, p[P_O_W]), a[G_ATT]), NONE);
  run(s, K_GEMM_WG, 2 * T * h * h, 2 * act + h * h * d, "rraa", L_(a[G_H1], a[A_ATT], G(s, p[P_O_W]), G(s, p[P_O_B])),
      NONE);
  run(s, K_ATT_B, 2.5 * 2 * b * sq * sq * h, act * 8, "rrrrw", L_(a[G_ATT], a[A_QKV], a[A_ATT], a[A_LSE], a[G_QKV]),
      L_(a[G_ATT], a[A_QKV], a[A_ATT], a[A_LSE]));
  run(s, K_GEMM_DG, 2 * T * h * 3 * h, 4 * act + 3 * h * h * d, "rrw", L_(a[G_QKV], W(s, p[P_QKV_W]), a[G_LN1]), NONE);
  run(s, K_GEMM_WG, 2 * T * h * 3 * h, 4 * act + 3 * h * h * d,
      "rraa", L_(a[G_QKV], a[A_LN1], G(s, p[P_QKV_W]), G(s, p[P_QKV_B])), L_(a[G_QKV], a[A_LN1]));
  run(s, K_LN_B, 0, 3 * act,
      "rrrrwaa", L_(a[G_LN1], a[A_X], a[A_LN1S], W(s, p[P_LN1_W]), a[G_XP], G(s, p[P_LN1_W]), G(s, p[P_LN1_B])),
      L_(a[G_LN1], a[A_LN1S], a[A_X]));
  run(s, K_GADD, 0, 3 * act, "rrw", L_(a[G_XP], a[G_H1], a[G_X]), L_(a[G_XP], a[G_H1]));
}

/* Checkpoint segments: layers [jK, (j+1)K), the last one possibly shorter. */
static bool seg_start(const synth_model_t *m, uint64_t l) { return m->checkpoint && l % m->checkpoint == 0; }
static bool seg_last(const synth_model_t *m, uint64_t l) {
  return m->checkpoint && (l + 1 == m->layers || (l + 1) % m->checkpoint == 0);
}

/* The first forward pass of layer l under checkpointing, over the layer_f
 * set: every activation it would save is freed once the layer is done,
 * except a segment's input (the checkpoint, in layer_a, kept for the
 * recomputation); the layer's output is the next layer's input, a
 * checkpoint when the next layer starts a segment. */
static void forward_checkpointed(synth_t *s, uint64_t l) {
  const synth_model_t *m = s->m;
  uint32_t a[A_LAYER];
  memcpy(a, &s->layer_f[l * A_LAYER], sizeof a);
  if (seg_start(m, l)) a[A_X] = s->layer_a[l * A_LAYER + A_X];
  uint32_t next = l + 1 == m->layers     ? s->top[F_X]
                  : seg_start(m, l + 1) ? s->layer_a[(l + 1) * A_LAYER + A_X]
                                        : s->layer_f[(l + 1) * A_LAYER + A_X];
  forward_layer(s, l, a, next);
  static const int saved[] = {A_LN1, A_LN1S, A_QKV, A_ATT, A_LSE, A_H1, A_LN2, A_LN2S, A_UP, A_ACT};
  for (size_t i = 0; i < sizeof saved / sizeof saved[0]; i++) synth_emit_free(s->e, a[saved[i]]);
  if (!seg_start(m, l)) synth_emit_free(s->e, a[A_X]);
}

/* Recomputes the segment that ends at layer last, just before its
 * backward: its forward again from the kept checkpoint, over layer_a,
 * saving what backward reads; the last layer's output (A_ROUT) is not
 * needed and is freed at once. */
static void recompute(synth_t *s, uint64_t last) {
  uint64_t first = last - last % s->m->checkpoint;
  for (uint64_t l = first; l <= last; l++) {
    const uint32_t *a = &s->layer_a[l * A_LAYER];
    forward_layer(s, l, a, l == last ? a[A_ROUT] : s->layer_a[(l + 1) * A_LAYER + A_X]);
  }
  synth_emit_free(s->e, s->layer_a[last * A_LAYER + A_ROUT]);
}

/* The host optimizer's hand-off of the parameters idx[0..n) (UINT32_MAX
 * entries skipped) on the step's last micro-batch, once their gradients
 * are final: one zero-time launch of "mt_host_optimizer w=D state=S" that
 * reads the gradients (they leave the GPU) and writes the weights (the
 * host pool writes the updated ones into their host copies, so the device
 * copies are stale and the next forward fetches them), then the
 * gradients are freed. mt-trace replay runs it on the host pool, not the
 * GPU; it is no kernel, so it adds nothing to the ideal time. */
static void hand_off(synth_t *s, const uint32_t *idx, size_t n) {
  if (!s->m->host_opt || !s->last_mb) return;
  uint32_t t[2 * P_LAYER];
  uint8_t k[2 * P_LAYER];
  uint32_t nt = 0;
  for (size_t i = 0; i < n && i < P_LAYER; i++)
    if (idx[i] != UINT32_MAX) {
      t[nt] = s->p[idx[i]].g;
      k[nt++] = MT_ACC_READ;
    }
  for (size_t i = 0; i < n && i < P_LAYER; i++)
    if (idx[i] != UINT32_MAX) {
      t[nt] = s->p[idx[i]].w;
      k[nt++] = MT_ACC_WRITE;
    }
  synth_emit_launch(s->e, s->f[K_HOPT], t, k, nt, 0);
  for (size_t i = 0; i < n && i < P_LAYER; i++)
    if (idx[i] != UINT32_MAX) synth_emit_free(s->e, s->p[idx[i]].g);
  s->host_steps++;
}

static void micro_batch(synth_t *s) {
  const synth_model_t *m = s->m;
  const uint32_t *t = s->top;
  uint32_t x0 = s->layer_a[A_X], dx0 = s->layer_a[G_X];
  double T = (double)(m->micro_batch * m->seq), h = (double)m->hidden, V = (double)m->vocab,
         d = (double)m->dtype, act = T * h * d;
  run(s, K_EMB_F, 0, T * 4 + act * (m->learned_pos ? 3 : 2), "rrrw", L_(t[F_TOK], W(s, s->wte), W(s, s->wpe), x0), NONE);
  for (uint64_t l = 0; l < m->layers; l++) {
    if (m->checkpoint)
      forward_checkpointed(s, l);
    else
      forward_layer(s, l, &s->layer_a[l * A_LAYER],
                    l + 1 < m->layers ? s->layer_a[(l + 1) * A_LAYER + A_X] : s->top[F_X]);
  }
  run(s, K_LN_F, 0, 2 * act, "rrrww", L_(t[F_X], W(s, s->lnf_w), W(s, s->lnf_b), t[F_LNF], t[F_LNFS]), NONE);
  run(s, K_HEAD_F, 2 * T * h * V, act + V * h * d + T * V * d, "rrw", L_(t[F_LNF], W(s, s->head), t[F_LOGITS]), NONE);
  run(s, K_CE_F, 0, T * V * d + T * 4, "rrw", L_(t[F_LOGITS], t[F_LAB], t[F_LOSS]), NONE);

  run(s, K_CE_B, 0, 2 * T * V * d, "rrrw", L_(t[F_LOGITS], t[F_LAB], t[F_LOSS], t[F_DLOGITS]),
      L_(t[F_LOGITS], t[F_LAB], t[F_LOSS]));
  run(s, K_HEAD_DG, 2 * T * h * V, act + V * h * d + T * V * d, "rrw", L_(t[F_DLOGITS], W(s, s->head), t[F_DLNF]), NONE);
  run(s, K_HEAD_WG, 2 * T * h * V, act + V * h * d + T * V * d, "rra", L_(t[F_DLOGITS], t[F_LNF], G(s, s->head)),
      L_(t[F_DLOGITS], t[F_LNF]));
  run(s, K_LN_B, 0, 3 * act,
      "rrrrwaa", L_(t[F_DLNF], t[F_X], t[F_LNFS], W(s, s->lnf_w), t[F_DX], G(s, s->lnf_w), G(s, s->lnf_b)),
      L_(t[F_DLNF], t[F_LNFS], t[F_X]));
  const uint32_t top[3] = {s->lnf_w, s->lnf_b, m->tied ? UINT32_MAX : s->head};
  hand_off(s, top, 3);
  for (uint64_t l = m->layers; l-- > 0;) {
    if (seg_last(m, l)) recompute(s, l);
    backward_layer(s, l);
    hand_off(s, &s->layer_p[l * P_LAYER], P_LAYER);
  }
  run(s, K_EMB_B, 0, T * 4 + act * (m->learned_pos ? 3 : 2), "rraa", L_(dx0, t[F_TOK], G(s, s->wte), G(s, s->wpe)),
      L_(dx0, t[F_TOK]));
  const uint32_t bottom[2] = {s->wte, s->wpe};
  hand_off(s, bottom, 2);
}

static void optimizer(synth_t *s) {
  double d = (double)s->m->dtype;
  for (uint32_t i = 0; i < s->np; i++) {
    const param_t *p = &s->p[i];
    double n = (double)p->n, mv = 2.0 * (double)moment_bytes(p->n, s->m->compress);
    /* read grad, weight or master, m, v; write them back (and the 16-bit copy) */
    double bytes = n * (d + 4) + mv + n * 4 + mv + (d == 4 ? 0 : n * d);
    run(s, K_ADAM, 0, bytes, p->master == UINT32_MAX ? "mrmmm" : "wrmmm", L_(p->w, p->g, p->master, p->m, p->v),
        NONE);
  }
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mt-trace synth --model CONFIG -o TRACE [--iterations N] [--checkpoint K]\n"
          "                      [--optimizer-placement gpu|host] [--state-compression none|8bit|4bit]\n"
          "                      [--micro-batch N] [--grad-accum N] [--set KEY=VALUE]...\n"
          "\n"
          "Writes the trace of a decoder-only transformer's training iterations\n"
          "(forward, backward, Adam), with every parameter, gradient, optimizer\n"
          "state and activation a tensor with a framework's size and lifetime,\n"
          "every kernel a launch with its ideal (roofline) time, for `mt-trace\n"
          "replay`. Prints the parameter count, memory and time per iteration.\n"
          "\n"
          "  -m, --model CONFIG   model description (tools/models/*.conf)\n"
          "  -o, --output TRACE   the trace to write\n"
          "  --iterations N       iterations to write (default 1)\n"
          "  --checkpoint K       activation checkpointing every K layers (0: off); as\n"
          "                       the config key checkpoint\n"
          "  --optimizer-placement gpu|host\n"
          "                       Adam kernels on the GPU, or the host optimizer\n"
          "                       (MT_OPTIMIZER=host); key optimizer_placement\n"
          "  --state-compression none|8bit|4bit\n"
          "                       Adam's m and v (MT_OPTIMIZER_COMPRESSION); key\n"
          "                       state_compression\n"
          "  --micro-batch N, --grad-accum N\n"
          "                       as the keys micro_batch, grad_accum\n"
          "  --set KEY=VALUE      any config key; command-line settings replace the file's\n"
          "  -h, --help           show this help and exit\n"
          "\n"
          "CONFIG: 'key = value' lines, '#' starts a comment. Required: layers,\n"
          "hidden, heads, vocab, seq. Optional (default): name (file name),\n"
          "ffn (4 x hidden), micro_batch (1), grad_accum (1), dtype fp32|bf16|fp16\n"
          "(fp32), tflops (100, matmul TFLOP/s), mem_bw (2000, GB/s),\n"
          "min_kernel_us (2), optimizer adam|adamw (adam), activation gelu|swiglu\n"
          "(gelu), norm layernorm|rmsnorm (layernorm), bias 0|1 (1),\n"
          "tie_embeddings 0|1 (1), pos_embedding learned|none (learned),\n"
          "checkpoint K (0: off; at most layers), optimizer_placement gpu|host (gpu),\n"
          "state_compression none|8bit|4bit (none).\n"
          "\n"
          "checkpoint K: the first forward pass keeps only the input of layers 0, K,\n"
          "2K, ... (frees every other activation when its layer is done); before the\n"
          "backward of a segment's last layer the segment's forward runs again and\n"
          "saves what backward reads: every layer's forward kernels run twice.\n"
          "optimizer_placement host: no gradient, master or moment is persistent on\n"
          "the GPU; each gradient lives from its first write in the step to its\n"
          "hand-off, a zero-time launch of 'mt_host_optimizer w=BYTES state=C' on the\n"
          "last micro-batch right after the backward that finishes it (per layer; the\n"
          "final norm and untied head; the embeddings), which reads the gradients\n"
          "and writes the weights (the host pool's update lands in their host copies;\n"
          "mt-trace replay runs it on the host pool); the gradients are then freed.\n"
          "Between steps the weights are only read. state_compression: m and v in\n"
          "blocks of 128 codes of 8 or 4 bits plus an fp32 scale; tensors under 4096\n"
          "elements stay fp32.\n");
}

static bool parse_count(const char *v, uint64_t max, uint64_t *out) {
  char *end;
  errno = 0;
  unsigned long long x = strtoull(v, &end, 10);
  if (v[0] < '0' || v[0] > '9' || *end || errno || x < 1 || x > max) return false;
  *out = x;
  return true;
}

static double gib(uint64_t b) { return (double)b / (double)(1ull << 30); }

static int generate(const synth_model_t *m, const char *out, uint64_t iterations) {
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  synth_t s = {.m = m};
  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "mt-trace synth");
  h.chunk_bytes = 2ull << 20;
  snprintf(h.device, sizeof h.device, "synthetic: %.3g TFLOP/s, %.0f GB/s", m->tflops, m->mem_bw);
  int rc = synth_emit_open(&s.e, out, &h);
  if (rc < 0) {
    fprintf(stderr, WHO ": cannot create %s: %s\n", out, strerror(-rc));
    return 1;
  }
  if (layout(&s) < 0) {
    fprintf(stderr, WHO ": out of memory\n");
    synth_emit_close(s.e, NULL, WHO);
    rc = 1;
    goto out;
  }
  uint64_t it_start = 0, it_end = 0, per_iter = 0;
  synth_emit_stats_t st;
  for (uint64_t it = 0; it < iterations; it++) {
    synth_emit_renew(s.e);
    if (it == 0) it_start = synth_emit_now(s.e);
    synth_emit_iter(s.e, it);
    for (uint64_t mb = 0; mb < m->grad_accum; mb++) {
      if (mb) synth_emit_renew(s.e);
      s.last_mb = mb + 1 == m->grad_accum;
      micro_batch(&s);
    }
    if (!m->host_opt) optimizer(&s);
    if (it == 0) it_end = synth_emit_now(s.e);
    mt_progress("synth", it + 1, iterations);
  }
  mt_progress_end();
  if (synth_emit_close(s.e, &st, WHO) < 0) {
    rc = 1;
    goto out;
  }
  per_iter = st.launches / iterations;
  uint64_t opt_per_iter = m->host_opt ? s.host_steps / iterations : s.np;
  /* the host optimizer's memory: the two moments, and fp32 masters for
   * 16-bit weights (fp32 weights are their own master, in the pager's host copy) */
  uint64_t host_state = 0;
  for (uint32_t i = 0; i < s.np; i++)
    host_state += (m->dtype == 4 ? 0 : s.p[i].n * 4) + 2 * moment_bytes(s.p[i].n, m->compress);
  clock_gettime(CLOCK_MONOTONIC, &t1);
  struct stat sb;
  uint64_t fbytes = stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0;
  uint64_t per_mb = per_iter - opt_per_iter;
  printf("%s: %s, %llu layers, hidden %llu, %llu heads, ffn %llu, vocab %llu, seq %llu, micro_batch %llu x "
         "grad_accum %llu, %s\n",
         out, m->name, (unsigned long long)m->layers, (unsigned long long)m->hidden, (unsigned long long)m->heads,
         (unsigned long long)m->ffn, (unsigned long long)m->vocab, (unsigned long long)m->seq,
         (unsigned long long)m->micro_batch, (unsigned long long)m->grad_accum,
         m->dtype == 4 ? "fp32" : "16-bit weights, fp32 master");
  printf("  parameters: %llu (%.3g)\n", (unsigned long long)s.params, (double)s.params);
  static const char *const comp[] = {"fp32", "8-bit", "4-bit"};
  if (m->host_opt) {
    printf("  persistent bytes: %llu (%.2f GiB: weights; gradients live until their hand-off)\n",
           (unsigned long long)st.persistent_bytes, gib(st.persistent_bytes));
    printf("  host optimizer state: %llu (%.2f GiB: %s%s m and v), %llu gradient bytes to the host "
           "per step\n", (unsigned long long)host_state, gib(host_state), m->dtype == 4 ? "" : "fp32 masters, ",
           comp[m->compress],
           (unsigned long long)(s.params * m->dtype));
  } else {
    printf("  persistent bytes: %llu (%.2f GiB: weights, grads, %s%s Adam m and v)\n",
           (unsigned long long)st.persistent_bytes, gib(st.persistent_bytes), m->dtype == 4 ? "" : "masters, ",
           comp[m->compress]);
  }
  if (m->checkpoint)
    printf("  activation checkpointing: every %llu layer(s), each layer's forward recomputed in backward\n",
           (unsigned long long)m->checkpoint);
  printf("  peak transient bytes: %llu (%.2f GiB: activations%s)\n", (unsigned long long)st.transient_peak,
         gib(st.transient_peak), m->host_opt ? ", gradients until their hand-off" : "");
  printf("  kernels per iteration: %llu (%llu per micro-batch x %llu, %llu %s)\n",
         (unsigned long long)per_iter, (unsigned long long)(per_mb / m->grad_accum),
         (unsigned long long)m->grad_accum, (unsigned long long)opt_per_iter,
         m->host_opt ? "host optimizer hand-offs" : "optimizer");
  printf("  ideal iteration time: %.6f s\n", (double)(it_end - it_start) / 1e9);
  printf("  wrote %llu iteration(s), %llu launches, %.2f MiB in %.2f s\n", (unsigned long long)iterations,
         (unsigned long long)st.launches, (double)fbytes / (1 << 20),
         (double)(t1.tv_sec - t0.tv_sec) + (double)(t1.tv_nsec - t0.tv_nsec) / 1e9);
  rc = 0;
out:
  free(s.p);
  free(s.layer_p);
  free(s.layer_a);
  free(s.layer_f);
  return rc;
}

/* Named options that set a config key (the same checks as in the file). */
static const struct {
  const char *opt, *key;
} KEY_OPTS[] = {
    {"--checkpoint", "checkpoint"},
    {"--optimizer-placement", "optimizer_placement"},
    {"--state-compression", "state_compression"},
    {"--micro-batch", "micro_batch"},
    {"--grad-accum", "grad_accum"},
};

int mt_cmd_synth(int argc, char **argv) {
  const char *model = NULL, *out = NULL;
  uint64_t iterations = 1;
  synth_override_t ov[SYNTH_MAX_OVERRIDES];
  size_t nov = 0;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    const char **dst = NULL;
    size_t ko = 0, alen = strcspn(a, "=");
    while (ko < sizeof KEY_OPTS / sizeof KEY_OPTS[0] &&
           !(strlen(KEY_OPTS[ko].opt) == alen && strncmp(KEY_OPTS[ko].opt, a, alen) == 0))
      ko++;
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (ko < sizeof KEY_OPTS / sizeof KEY_OPTS[0] || strcmp(a, "--set") == 0 || strncmp(a, "--set=", 6) == 0) {
      const char *v = a[alen] == '=' ? a + alen + 1 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v) {
        fprintf(stderr, WHO ": %s needs a value\n", a);
        return 2;
      }
      if (nov == SYNTH_MAX_OVERRIDES) {
        fprintf(stderr, WHO ": at most %d key settings on the command line\n", SYNTH_MAX_OVERRIDES);
        return 2;
      }
      if (ko < sizeof KEY_OPTS / sizeof KEY_OPTS[0]) {
        ov[nov++] = (synth_override_t){KEY_OPTS[ko].key, v};
      } else {
        /* --set KEY=VALUE: split at the first '=' (argv is ours to cut) */
        char *eq = strchr(v, '=');
        if (!eq || eq == v || !eq[1]) {
          fprintf(stderr, WHO ": --set '%s': expected KEY=VALUE\n", v);
          return 2;
        }
        *eq = '\0';
        ov[nov++] = (synth_override_t){v, eq + 1};
      }
      continue;
    } else if (strcmp(a, "-m") == 0 || strcmp(a, "--model") == 0) {      dst = &model;
    } else if (strncmp(a, "--model=", 8) == 0) {
      model = a + 8;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      dst = &out;
    } else if (strncmp(a, "--output=", 9) == 0) {
      out = a + 9;
    } else if (strcmp(a, "--iterations") == 0 || strncmp(a, "--iterations=", 13) == 0) {
      const char *v = a[12] == '=' ? a + 13 : (i + 1 < argc ? argv[++i] : NULL);
      if (!v) {
        fprintf(stderr, WHO ": %s needs a value\n", a);
        return 2;
      }
      if (!parse_count(v, SYNTH_MAX_ITERATIONS, &iterations)) {
        fprintf(stderr, WHO ": --iterations '%s': expected a whole number from 1 to %d\n", v,
                SYNTH_MAX_ITERATIONS);
        return 2;
      }
    } else {
      fprintf(stderr, WHO ": unexpected argument '%s' (see --help)\n", a);
      return 2;
    }
    if (dst) {
      if (i + 1 == argc) {
        fprintf(stderr, WHO ": %s needs a value\n", a);
        return 2;
      }
      *dst = argv[++i];
    }
  }
  if (!model || !out) {
    fprintf(stderr, WHO ": %s is missing (see --help)\n", !model ? "--model CONFIG" : "-o TRACE");
    return 2;
  }
  synth_model_t m;
  int rc = read_model(model, &m, ov, nov);
  if (rc) return rc;
  return generate(&m, out, iterations);
}
