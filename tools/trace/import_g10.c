/*
 * import_g10.c - `mt-trace import-g10 DIR -o TRACE [--iterations N]`: turns
 * one of the G10 artifact's kernel-level workloads (shared/traces/g10/<model>,
 * formats in its README.md) into a trace that `mt-trace replay` can run.
 *
 * Three files are read: tensors.config (every tensor's size and whether it
 * is global), kernels.config (the kernels in execution order, their ideal
 * time in 1.2 GHz cycles and the tensors they read and write) and
 * interval.config (each intermediate tensor's liveness: Birth = first
 * kernel that uses it, Death = 1 + last kernel that reads it, -1 = never
 * read). Every tensor becomes a region:
 *
 *   - global tensors are allocated at time 0, in id order, and never freed;
 *   - an intermediate tensor is allocated just before kernel Birth and freed
 *     right after kernel Death-1 (after kernel Birth when Death is -1), and
 *     is allocated again, as a new region, in every further iteration;
 *   - every kernel is a LAUNCH whose footprint is inputs ∪ outputs (whole
 *     tensors) and whose dur_ns is its Execution Time at 1.2 GHz; a span's
 *     access kind is read for an input, write for an output and
 *     read-write for a tensor in both lists (G10's simulator knows each
 *     kernel's outputs the same way, which is what lets it drop clean
 *     tensors without a copy).
 *
 * Kernel times are converted on the running sum of cycles (start of kernel
 * k = floor(cycles before k * 5 / 6) ns), so the trace's iteration time is
 * the published "ideal" to the nanosecond. The liveness is cross-checked
 * against the kernels: a kernel that uses an intermediate tensor outside its
 * lifetime makes the input bad (exit 2), since replaying it would touch a
 * freed region. Tensor ids in kernels.config must agree with tensors.config
 * in size and global flag.
 *
 * A launch's id hashes the kernel type and the G10 tensor ids of its
 * footprint, so it is the same in every iteration.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "commands.h"
#include "common.h"
#include "synth_emit.h"
#include "trace_io.h"

#define WHO "mt-trace import-g10"
#define G10_HZ_NUM 5            /* ns = cycles * 5 / 6 (1.2 GHz) */
#define G10_HZ_DEN 6
#define G10_GPU_BYTES (40ull << 30)    /* GPU_memory_size_GB = 40 */
#define G10_HOST_BYTES (128ull << 30)  /* CPU_memory_line_GB = 128 */
#define G10_MAX_ITERATIONS 100000

typedef struct g10_tensor {
  uint64_t bytes;
  bool global;
  bool has_life;              /* a Liveness / Global! line was seen */
  int64_t birth, death;       /* as in interval.config */
  uint32_t life_line;         /* interval.config line of the liveness */
  uint32_t handle;            /* emitter handle */
} g10_tensor_t;

typedef struct g10_kernel {
  uint64_t cycles;
  uint64_t func;              /* emitter function id */
  uint32_t first, n;          /* refs[first .. first+n) */
} g10_kernel_t;

typedef struct g10_ref {
  uint32_t tensor;
  uint32_t line;              /* kernels.config line */
  uint8_t kind;               /* MT_ACC_READ (input list) or MT_ACC_WRITE (output list) */
} g10_ref_t;

typedef struct g10 {
  char dir[4096];
  g10_tensor_t *t;
  uint32_t nt;
  g10_kernel_t *k;
  uint32_t nk, capk;
  g10_ref_t *ref;
  uint32_t nref, capref;
  char (*names)[64];          /* kernel type of each func id - 1 */
  uint32_t nnames;
} g10_t;

/* A whole file in memory, read line by line. */
typedef struct g10_file {
  char path[4200];
  char *buf;
  size_t len, pos;
  uint32_t line;              /* of the line last returned, from 1 */
} g10_file_t;

/* One line "WHO: FILE:LINE: what" on stderr; returns 2 (bad input). */
#define bad(path, line, ...) mtt_input_error(WHO, path, line, __VA_ARGS__)

/* Reads DIR/name whole. Returns 0, or 2 after a message. */
static int file_open(g10_file_t *f, const char *dir, const char *name) {
  memset(f, 0, sizeof *f);
  snprintf(f->path, sizeof f->path, "%s/%s", dir, name);
  FILE *fp = fopen(f->path, "rb");
  if (!fp) return bad(f->path, 0, "cannot open: %s (is DIR a G10 workload folder?)", strerror(errno));
  size_t cap = 1 << 20;
  f->buf = malloc(cap + 1);
  while (f->buf) {
    f->len += fread(f->buf + f->len, 1, cap - f->len, fp);
    if (f->len < cap) break;
    cap *= 2;
    char *nb = realloc(f->buf, cap + 1);
    if (!nb) {
      free(f->buf);
      f->buf = NULL;
    }
    f->buf = nb;
  }
  int err = ferror(fp);
  fclose(fp);
  if (!f->buf) return bad(f->path, 0, "out of memory");
  if (err) {
    free(f->buf);
    return bad(f->path, 0, "read error");
  }
  f->buf[f->len] = '\0';
  return 0;
}

/* The next line, NUL-terminated in place, trailing blanks and CR removed;
 * NULL at the end. */
static char *file_line(g10_file_t *f) {
  if (f->pos >= f->len) return NULL;
  char *s = f->buf + f->pos;
  char *nl = memchr(s, '\n', f->len - f->pos);
  char *end = nl ? nl : f->buf + f->len;
  f->pos = (size_t)(end - f->buf) + (nl ? 1 : 0);
  while (end > s && (end[-1] == '\r' || end[-1] == ' ' || end[-1] == '\t')) end--;
  *end = '\0';
  f->line++;
  return s;
}

static void file_close(g10_file_t *f) {
  free(f->buf);
  f->buf = NULL;
}

static bool lit(const char **p, const char *s) {
  size_t n = strlen(s);
  if (strncmp(*p, s, n) != 0) return false;
  *p += n;
  return true;
}

/* An unsigned decimal (digits only, no overflow). */
static bool num(const char **p, uint64_t *v) {
  const char *s = *p;
  uint64_t x = 0;
  if (*s < '0' || *s > '9') return false;
  for (; *s >= '0' && *s <= '9'; s++) {
    if (x > (UINT64_MAX - 9) / 10) return false;
    x = x * 10 + (uint64_t)(*s - '0');
  }
  *v = x;
  *p = s;
  return true;
}

static bool snum(const char **p, int64_t *v) {
  bool neg = lit(p, "-");
  uint64_t x;
  if (!num(p, &x) || x > INT64_MAX) return false;
  *v = neg ? -(int64_t)x : (int64_t)x;
  return true;
}

static bool is_separator(const char *s) { return s[0] == '_' && strspn(s, "_") == strlen(s); }

/* "tensor<id> Is weight (global)?: <0|1>, Size in byte: <n>, Range:<a>--<b>" */
static bool tensor_line(const char *s, uint64_t *id, bool *global, uint64_t *bytes) {
  uint64_t g, a, b;
  if (!lit(&s, "tensor") || !num(&s, id) || !lit(&s, " Is weight (global)?: ") || !num(&s, &g) || g > 1 ||
      !lit(&s, ", Size in byte: ") || !num(&s, bytes) || !lit(&s, ", Range:") || !num(&s, &a) ||
      !lit(&s, "--") || !num(&s, &b) || *s != '\0')
    return false;
  if (b < a || b - a != *bytes) return false;
  *global = g == 1;
  return true;
}

static const char TENSOR_FORM[] =
    "expected 'tensor<id> Is weight (global)?: <0|1>, Size in byte: <n>, Range:<a>--<a+n>'";

static int read_tensors(g10_t *g) {
  g10_file_t f;
  int rc = file_open(&f, g->dir, "tensors.config");
  if (rc) return rc;
  uint32_t cap = 0;
  for (char *s; (s = file_line(&f));) {
    if (!*s) continue;
    uint64_t id, bytes;
    bool global;
    if (!tensor_line(s, &id, &global, &bytes)) {
      rc = bad(f.path, f.line, "%s", TENSOR_FORM);
      break;
    }
    if (id != g->nt) {
      rc = bad(f.path, f.line, "tensor%llu out of order: expected tensor%u (ids are dense, in order)",
               (unsigned long long)id, g->nt);
      break;
    }
    if (g->nt == cap) {
      cap = cap ? cap * 2 : 4096;
      g10_tensor_t *t = realloc(g->t, (size_t)cap * sizeof *t);
      if (!t) {
        rc = bad(f.path, f.line, "out of memory");
        break;
      }
      g->t = t;
    }
    g->t[g->nt++] = (g10_tensor_t){.bytes = bytes, .global = global};
  }
  if (!rc && g->nt == 0) rc = bad(f.path, 0, "no tensors");
  file_close(&f);
  return rc;
}

/* The tensor of a tensor line in kernels.config or interval.config, checked
 * against tensors.config. Returns 0 with *id, or 2 after a message. */
static int known_tensor(g10_t *g, g10_file_t *f, const char *s, uint32_t *id) {
  uint64_t i, bytes;
  bool global;
  if (!tensor_line(s, &i, &global, &bytes)) return bad(f->path, f->line, "%s", TENSOR_FORM);
  if (i >= g->nt) return bad(f->path, f->line, "tensor%llu is not in tensors.config", (unsigned long long)i);
  if (g->t[i].bytes != bytes || g->t[i].global != global)
    return bad(f->path, f->line, "tensor%llu disagrees with tensors.config (size %llu, global %d there)",
               (unsigned long long)i, (unsigned long long)g->t[i].bytes, g->t[i].global);
  *id = (uint32_t)i;
  return 0;
}

static uint64_t func_of(g10_t *g, const char *name) {
  for (uint32_t i = 0; i < g->nnames; i++)
    if (strcmp(g->names[i], name) == 0) return i + 1;
  char(*n)[64] = realloc(g->names, ((size_t)g->nnames + 1) * sizeof *n);
  if (!n) return 0;
  g->names = n;
  snprintf(g->names[g->nnames], sizeof *n, "%s", name);
  return ++g->nnames;
}

static int read_kernels(g10_t *g) {
  g10_file_t f;
  int rc = file_open(&f, g->dir, "kernels.config");
  if (rc) return rc;
  enum { OUTSIDE, HEAD, LIST } state = OUTSIDE;
  bool have_time = false;
  uint32_t block_line = 0;
  uint8_t list_kind = MT_ACC_UNKNOWN; /* of the list being read */
  for (char *s; !rc && (s = file_line(&f));) {
    const char *p = s;
    uint64_t v;
    if (!*s) continue;
    if (lit(&p, "Kernel ID: ")) {
      if (state != OUTSIDE) {
        rc = bad(f.path, f.line, "kernel block of line %u has no '____' end line", block_line);
        break;
      }
      if (!num(&p, &v) || !lit(&p, ", Name: ") || !*p || strlen(p) >= 64) {
        rc = bad(f.path, f.line, "expected 'Kernel ID: <k>, Name: <kernel type>'");
        break;
      }
      if (v != g->nk) {
        rc = bad(f.path, f.line, "kernel %llu out of order: expected kernel %u", (unsigned long long)v, g->nk);
        break;
      }
      if (g->nk == g->capk) {
        g->capk = g->capk ? g->capk * 2 : 1024;
        g10_kernel_t *k = realloc(g->k, (size_t)g->capk * sizeof *k);
        if (!k) {
          rc = bad(f.path, f.line, "out of memory");
          break;
        }
        g->k = k;
      }
      uint64_t func = func_of(g, p);
      if (!func) {
        rc = bad(f.path, f.line, "out of memory");
        break;
      }
      g->k[g->nk] = (g10_kernel_t){.func = func, .first = g->nref};
      state = HEAD;
      have_time = false;
      block_line = f.line;
    } else if (state == OUTSIDE) {
      rc = bad(f.path, f.line, "expected 'Kernel ID: <k>, Name: <kernel type>'");
    } else if (is_separator(s)) {
      if (!have_time) {
        rc = bad(f.path, f.line, "kernel %u (line %u) has no 'Execution Time:' line", g->nk, block_line);
        break;
      }
      g->nk++;
      state = OUTSIDE;
    } else if (lit(&p, "Execution Time: ")) {
      if (!num(&p, &v) || *p) {
        rc = bad(f.path, f.line, "expected 'Execution Time: <cycles>'");
        break;
      }
      g->k[g->nk].cycles = v;
      have_time = true;
    } else if (strncmp(s, "Parent ", 7) == 0 || s[0] == '(') {
      /* the parent layer/op and the input shape: not needed */
    } else if (strcmp(s, "Input Tensors:") == 0 || strcmp(s, "Output Tensors:") == 0) {
      state = LIST;
      list_kind = s[0] == 'I' ? MT_ACC_READ : MT_ACC_WRITE;
    } else if (strncmp(s, "tensor", 6) == 0 && state == LIST) {
      uint32_t id;
      rc = known_tensor(g, &f, s, &id);
      if (rc) break;
      if (g->nref == g->capref) {
        g->capref = g->capref ? g->capref * 2 : 16384;
        g10_ref_t *r = realloc(g->ref, (size_t)g->capref * sizeof *r);
        if (!r) {
          rc = bad(f.path, f.line, "out of memory");
          break;
        }
        g->ref = r;
      }
      g->ref[g->nref++] = (g10_ref_t){.tensor = id, .line = f.line, .kind = list_kind};
      g->k[g->nk].n++;
    } else {
      rc = bad(f.path, f.line, "unexpected line in a kernel block: '%.60s'", s);
    }
  }
  if (!rc && state != OUTSIDE)
    rc = bad(f.path, f.line, "kernel block of line %u has no '____' end line", block_line);
  if (!rc && g->nk == 0) rc = bad(f.path, 0, "no kernels");
  file_close(&f);
  return rc;
}

static int read_intervals(g10_t *g) {
  g10_file_t f;
  int rc = file_open(&f, g->dir, "interval.config");
  if (rc) return rc;
  uint32_t cur = UINT32_MAX;
  for (char *s; !rc && (s = file_line(&f));) {
    const char *p = s;
    if (!*s || is_separator(s)) continue;
    if (strncmp(s, "tensor", 6) == 0) {
      rc = known_tensor(g, &f, s, &cur);
    } else if (lit(&p, "Liveness: Birth: ")) {
      int64_t b, d;
      if (!snum(&p, &b) || !lit(&p, ", Death: ") || !snum(&p, &d) || strcmp(p, ".") != 0) {
        rc = bad(f.path, f.line, "expected 'Liveness: Birth: <k>, Death: <k>.'");
      } else if (cur == UINT32_MAX) {
        rc = bad(f.path, f.line, "liveness before any tensor line");
      } else if (g->t[cur].global) {
        rc = bad(f.path, f.line, "global tensor%u has a liveness", cur);
      } else if (b < 0 || b >= g->nk || (d != -1 && (d <= b || d > g->nk))) {
        rc = bad(f.path, f.line, "tensor%u: Birth %lld, Death %lld out of range for %u kernels", cur,
                 (long long)b, (long long)d, g->nk);
      } else {
        g->t[cur] = (g10_tensor_t){.bytes = g->t[cur].bytes, .has_life = true, .birth = b, .death = d,
                                   .life_line = f.line};
      }
    } else if (strcmp(s, "Global!") == 0) {
      if (cur == UINT32_MAX || !g->t[cur].global)
        rc = bad(f.path, f.line, "'Global!' for a tensor that is not global");
      else
        g->t[cur].has_life = true;
    } else if (strcmp(s, "Hidding Intervals:") == 0 || strncmp(s, "interval ", 9) == 0 ||
               strncmp(s, "Estimated Time:", 15) == 0) {
      /* idle intervals: a policy must learn these itself */
    } else {
      rc = bad(f.path, f.line, "unexpected line: '%.60s'", s);
    }
  }
  for (uint32_t i = 0; !rc && i < g->nt; i++)
    if (!g->t[i].has_life) rc = bad(f.path, 0, "no liveness for tensor%u", i);
  file_close(&f);
  return rc;
}

/* Last kernel during which intermediate tensor t is live. */
static int64_t last_kernel(const g10_tensor_t *t) { return t->death == -1 ? t->birth : t->death - 1; }

static int check_lifetimes(g10_t *g) {
  for (uint32_t k = 0; k < g->nk; k++) {
    for (uint32_t i = 0; i < g->k[k].n; i++) {
      const g10_ref_t *r = &g->ref[g->k[k].first + i];
      const g10_tensor_t *t = &g->t[r->tensor];
      if (t->global || (k >= t->birth && k <= last_kernel(t))) continue;
      fprintf(stderr,
              WHO ": %s/kernels.config:%u: kernel %u uses tensor%u outside its lifetime %lld..%lld "
              "(interval.config:%u)\n",
              g->dir, r->line, k, r->tensor, (long long)t->birth, (long long)last_kernel(t), t->life_line);
      return 2;
    }
  }
  return 0;
}

static void usage(FILE *f) {
  fprintf(f,
          "usage: mt-trace import-g10 DIR -o TRACE [--iterations N]\n"
          "\n"
          "Converts a G10 kernel-level workload (a folder with tensors.config,\n"
          "kernels.config and interval.config, e.g. shared/traces/g10/BERT_Base)\n"
          "into an mtalloc trace for `mt-trace replay`: every tensor a region\n"
          "(global tensors for the whole run, intermediate ones from their first\n"
          "to their last use), every kernel a launch with its tensors as footprint\n"
          "and its ideal time (1.2 GHz cycles) as duration.\n"
          "\n"
          "  -o, --output TRACE   the trace to write\n"
          "  --iterations N       repeat the iteration N times (default 1); global\n"
          "                       tensors persist, intermediate ones are allocated\n"
          "                       again each time\n"
          "  -h, --help           show this help and exit\n");
}

/* "N" in 1..max. */
static bool parse_count(const char *s, uint64_t max, uint64_t *out) {
  uint64_t v;
  if (!num(&s, &v) || *s || v == 0 || v > max) return false;
  *out = v;
  return true;
}

static void g10_free(g10_t *g) {
  free(g->t);
  free(g->k);
  free(g->ref);
  free(g->names);
}

static int emit(g10_t *g, const char *out, uint64_t iterations) {
  /* Births and deaths per kernel, as index lists in tensor id order. */
  uint32_t *bstart = calloc((size_t)g->nk + 1, sizeof *bstart);
  uint32_t *dstart = calloc((size_t)g->nk + 1, sizeof *dstart);
  uint32_t *blist = malloc((size_t)g->nt * sizeof *blist);
  uint32_t *dlist = malloc((size_t)g->nt * sizeof *dlist);
  uint32_t *foot = NULL;
  uint8_t *kinds = NULL;
  synth_emit_t *e = NULL;
  int rc = 1;
  if (!bstart || !dstart || !blist || !dlist) {
    fprintf(stderr, WHO ": out of memory\n");
    goto out;
  }
  for (uint32_t i = 0; i < g->nt; i++) {
    if (g->t[i].global) continue;
    bstart[g->t[i].birth + 1]++;
    dstart[last_kernel(&g->t[i]) + 1]++;
  }
  for (uint32_t k = 0; k < g->nk; k++) {
    bstart[k + 1] += bstart[k];
    dstart[k + 1] += dstart[k];
  }
  {
    uint32_t *bfill = calloc(g->nk, sizeof *bfill), *dfill = calloc(g->nk, sizeof *dfill);
    if (!bfill || !dfill) {
      free(bfill);
      free(dfill);
      fprintf(stderr, WHO ": out of memory\n");
      goto out;
    }
    for (uint32_t i = 0; i < g->nt; i++) {
      if (g->t[i].global) continue;
      uint32_t b = (uint32_t)g->t[i].birth, d = (uint32_t)last_kernel(&g->t[i]);
      blist[bstart[b] + bfill[b]++] = i;
      dlist[dstart[d] + dfill[d]++] = i;
    }
    free(bfill);
    free(dfill);
  }

  mt_trace_header_t h;
  mt_trace_header_init(&h, MT_TRACE_CLOCK_VIRTUAL, "mt-trace import-g10");
  h.chunk_bytes = 2ull << 20;
  h.gpu_total = G10_GPU_BYTES;
  h.gpu_budget = G10_GPU_BYTES;
  h.host_budget = G10_HOST_BYTES;
  snprintf(h.device, sizeof h.device, "NVIDIA A100 (G10 profile, 1.2 GHz cycles)");
  int orc = synth_emit_open(&e, out, &h);
  if (orc < 0) {
    fprintf(stderr, WHO ": cannot create %s: %s\n", out, strerror(-orc));
    goto out;
  }
  for (uint32_t i = 0; i < g->nt; i++) g->t[i].handle = synth_emit_tensor(e, i, g->t[i].bytes, g->t[i].global);
  uint64_t *func = malloc((size_t)g->nnames * sizeof *func);
  uint32_t maxn = 0;
  for (uint32_t k = 0; k < g->nk; k++)
    if (g->k[k].n > maxn) maxn = g->k[k].n;
  foot = malloc(((size_t)maxn + 1) * sizeof *foot);
  kinds = malloc((size_t)maxn + 1);
  if (!func || !foot || !kinds) {
    free(func);
    fprintf(stderr, WHO ": out of memory\n");
    synth_emit_close(e, NULL, WHO);
    goto out;
  }
  for (uint32_t i = 0; i < g->nnames; i++) func[i] = synth_emit_func(e, g->names[i]);
  for (uint32_t i = 0; i < g->nt; i++)
    if (g->t[i].global) synth_emit_alloc(e, g->t[i].handle);

  uint64_t cycles = 0, total = iterations * g->nk, done = 0;
  for (uint64_t it = 0; it < iterations; it++) {
    synth_emit_renew(e);
    synth_emit_iter(e, it);
    for (uint32_t k = 0; k < g->nk; k++, done++) {
      for (uint32_t j = bstart[k]; j < bstart[k + 1]; j++) synth_emit_alloc(e, g->t[blist[j]].handle);
      const g10_kernel_t *kk = &g->k[k];
      for (uint32_t i = 0; i < kk->n; i++) {
        foot[i] = g->t[g->ref[kk->first + i].tensor].handle;
        kinds[i] = g->ref[kk->first + i].kind;
      }
      uint64_t t0 = cycles * G10_HZ_NUM / G10_HZ_DEN;
      cycles += kk->cycles;
      synth_emit_launch(e, func[kk->func - 1], foot, kinds, kk->n, cycles * G10_HZ_NUM / G10_HZ_DEN - t0);
      for (uint32_t j = dstart[k]; j < dstart[k + 1]; j++) synth_emit_free(e, g->t[dlist[j]].handle);
      if ((done & 255) == 0) mt_progress("import-g10", done, total);
    }
  }
  mt_progress_end();
  free(func);
  synth_emit_stats_t st;
  if (synth_emit_close(e, &st, WHO) < 0) goto out;

  uint64_t gbytes = 0, ibytes = 0, iter_cycles = 0;
  uint32_t nglobal = 0;
  for (uint32_t i = 0; i < g->nt; i++) {
    if (g->t[i].global) {
      gbytes += g->t[i].bytes;
      nglobal++;
    } else {
      ibytes += g->t[i].bytes;
    }
  }
  for (uint32_t k = 0; k < g->nk; k++) iter_cycles += g->k[k].cycles;
  struct stat sb;
  uint64_t fbytes = stat(out, &sb) == 0 ? (uint64_t)sb.st_size : 0;
  printf("%s: %u kernels (%u kernel types), %u tensors: %u global (%llu bytes), %u intermediate (%llu bytes)\n",
         out, g->nk, g->nnames, g->nt, nglobal, (unsigned long long)gbytes, g->nt - nglobal,
         (unsigned long long)ibytes);
  printf("  footprint %.2f%% of 40 GiB; peak live intermediates %.2f GiB\n",
         100.0 * (double)(gbytes + ibytes) / (double)G10_GPU_BYTES, (double)st.transient_peak / (1 << 30));
  printf("  ideal iteration %llu cycles = %.3f s; %llu iteration(s), %llu launches, %.1f MiB\n",
         (unsigned long long)iter_cycles, (double)iter_cycles / 1.2e9, (unsigned long long)iterations,
         (unsigned long long)st.launches, (double)fbytes / (1 << 20));
  rc = 0;
out:
  free(bstart);
  free(dstart);
  free(blist);
  free(dlist);
  free(foot);
  free(kinds);
  return rc;
}

int mt_cmd_import_g10(int argc, char **argv) {
  const char *dir = NULL, *out = NULL;
  uint64_t iterations = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i];
    if (strcmp(a, "-h") == 0 || strcmp(a, "--help") == 0) {
      usage(stdout);
      return 0;
    } else if (strcmp(a, "-o") == 0 || strcmp(a, "--output") == 0) {
      if (++i == argc) goto missing;
      out = argv[i];
    } else if (strncmp(a, "--output=", 9) == 0) {
      out = a + 9;
    } else if (strcmp(a, "--iterations") == 0 || strncmp(a, "--iterations=", 13) == 0) {
      const char *v = a[12] == '=' ? a + 13 : (++i < argc ? argv[i] : NULL);
      if (!v) goto missing;
      if (!parse_count(v, G10_MAX_ITERATIONS, &iterations)) {
        fprintf(stderr, WHO ": --iterations '%s': expected a whole number from 1 to %d\n", v,
                G10_MAX_ITERATIONS);
        return 2;
      }
    } else if (a[0] == '-' && a[1]) {
      fprintf(stderr, WHO ": unknown option '%s' (see --help)\n", a);
      return 2;
    } else if (!dir) {
      dir = a;
    } else {
      fprintf(stderr, WHO ": one DIR only ('%s' and '%s')\n", dir, a);
      return 2;
    }
    continue;
  missing:
    fprintf(stderr, WHO ": %s needs a value\n", a);
    return 2;
  }
  if (!dir || !out) {
    fprintf(stderr, WHO ": %s (see --help)\n", !dir ? "DIR is missing" : "-o TRACE is missing");
    return 2;
  }
  g10_t g = {0};
  size_t dl = strlen(dir);
  while (dl > 1 && dir[dl - 1] == '/') dl--;
  if (dl >= sizeof g.dir) {
    fprintf(stderr, WHO ": DIR too long\n");
    return 2;
  }
  memcpy(g.dir, dir, dl);
  int rc = read_tensors(&g);
  if (!rc) rc = read_kernels(&g);
  if (!rc) rc = read_intervals(&g);
  if (!rc) rc = check_lifetimes(&g);
  if (!rc) rc = emit(&g, out, iterations);
  g10_free(&g);
  return rc;
}
