/*
 * plot.c - `mt-trace plot TRACE -o out.svg`: one self-contained SVG (no
 * scripts, fonts or links) with two panels over the trace's time:
 *   - residency: bytes on the GPU, in host memory and (when used) on NVMe,
 *     the highest value in each time bin, from common.c's bookkeeping, with
 *     the GPU budget as a dashed line when the header knows it;
 *   - link utilisation: H2D and D2H bytes per time bin (application and
 *     pager copies together, each copy spread evenly over its span) as a
 *     share of the busiest bin of either direction.
 *
 * One streaming pass with a fixed number of bins: the bin width starts at
 * 1 ns and doubles (merging neighbours) whenever a record falls beyond the
 * last bin, so memory does not grow with the trace.
 */
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "commands.h"
#include "common.h"

enum { NB = 512, NRES = 3, NLINK = 2 };  /* bins; tiers GPU/host/NVMe; links H2D/D2H */

typedef struct bins {
  uint64_t w;                    /* bin width, ns */
  double link[NLINK][NB];        /* bytes moved in the bin */
  uint64_t res[NRES][NB];        /* highest residency in the bin, bytes */
  long filled;                   /* res[.][0..filled] hold values; -1: none */
  uint64_t level[NRES];          /* current residency */
  uint64_t peak[NRES];
} bins_t;

static void grow(bins_t *b, uint64_t t) {
  while (t / b->w >= NB) {
    for (int i = 0; i < NB / 2; i++) {
      for (int k = 0; k < NLINK; k++) b->link[k][i] = b->link[k][2 * i] + b->link[k][2 * i + 1];
      for (int k = 0; k < NRES; k++)
        b->res[k][i] = b->res[k][2 * i] > b->res[k][2 * i + 1] ? b->res[k][2 * i] : b->res[k][2 * i + 1];
    }
    for (int k = 0; k < NLINK; k++) memset(&b->link[k][NB / 2], 0, sizeof b->link[k] / 2);
    for (int k = 0; k < NRES; k++) memset(&b->res[k][NB / 2], 0, sizeof b->res[k] / 2);
    if (b->filled >= 0) b->filled /= 2;
    b->w *= 2;
  }
}

/* Residency becomes v at time t (relative ns). */
static void res_sample(bins_t *b, uint64_t t, const uint64_t *v) {
  grow(b, t);
  long i = (long)(t / b->w);
  for (long j = b->filled + 1; j <= i; j++)
    for (int k = 0; k < NRES; k++) b->res[k][j] = b->level[k];
  if (i > b->filled) b->filled = i;
  for (int k = 0; k < NRES; k++) {
    long j = i < b->filled ? b->filled : i; /* a late record counts where the plot is */
    if (v[k] > b->res[k][j]) b->res[k][j] = v[k];
    b->level[k] = v[k];
    if (v[k] > b->peak[k]) b->peak[k] = v[k];
  }
}

static void link_add(bins_t *b, int k, uint64_t t0, uint64_t t1, uint64_t bytes) {
  grow(b, t1 > t0 ? t1 : t0);
  if (t1 <= t0) {
    b->link[k][t0 / b->w] += (double)bytes;
    return;
  }
  double per_ns = (double)bytes / (double)(t1 - t0);
  for (uint64_t i = t0 / b->w; i <= (t1 - 1) / b->w; i++) {
    uint64_t lo = i * b->w > t0 ? i * b->w : t0, hi = (i + 1) * b->w < t1 ? (i + 1) * b->w : t1;
    b->link[k][i] += per_ns * (double)(hi - lo);
  }
}

/* ---- drawing ---- */

enum { W = 960, H = 700, ML = 90, MR = 30, PW = W - ML - MR };
enum { P1T = 100, P1H = 240, P2T = 430, P2H = 200 };

static double nice_step(double range, int n) {
  double raw = range / n, mag = pow(10, floor(log10(raw))), f = raw / mag;
  return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 5 ? 5 : 10) * mag;
}

typedef struct unit {
  const char *name;
  double scale;
} unit_t;

static unit_t time_unit(uint64_t ns) {
  if (ns >= 10000000000ull) return (unit_t){"s", 1e9};
  if (ns >= 10000000ull) return (unit_t){"ms", 1e6};
  if (ns >= 10000ull) return (unit_t){"us", 1e3};
  return (unit_t){"ns", 1};
}

static unit_t byte_unit(uint64_t bytes) {
  static const char *names[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  int u = 0;
  double s = 1;
  while (u < 5 && (double)bytes >= s * 1024 * 2) {
    s *= 1024;
    u++;
  }
  return (unit_t){names[u], s};
}

/* The frame, grid and tick labels of one panel: x over [0, T] ns, y over
 * [0, ymax] in unit yu. */
static void axes(FILE *f, int top, int height, uint64_t T, double ymax, unit_t yu, const char *ylabel,
                 bool percent) {
  unit_t tu = time_unit(T);
  double span = (double)T / tu.scale, step = nice_step(span, 8);
  fprintf(f, "<g font-size=\"11\" fill=\"#333\">\n");
  for (double x = 0; x <= span * 1.000001; x += step) {
    double px = ML + x / span * PW;
    fprintf(f, "<line x1=\"%.1f\" y1=\"%d\" x2=\"%.1f\" y2=\"%d\" stroke=\"#e4e4e4\"/>\n", px, top, px, top + height);
    fprintf(f, "<text x=\"%.1f\" y=\"%d\" text-anchor=\"middle\">%g</text>\n", px, top + height + 15, x);
  }
  double ys = ymax / yu.scale, ystep = nice_step(ys, 5);
  for (double y = 0; y <= ys * 1.000001; y += ystep) {
    double py = top + height - y / ys * height;
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#e4e4e4\"/>\n", ML, py, ML + PW, py);
    fprintf(f, "<text x=\"%d\" y=\"%.1f\" text-anchor=\"end\">%g%s</text>\n", ML - 6, py + 4, y, percent ? "%" : "");
  }
  fprintf(f, "<rect x=\"%d\" y=\"%d\" width=\"%d\" height=\"%d\" fill=\"none\" stroke=\"#888\"/>\n", ML, top, PW,
          height);
  fprintf(f, "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\">time (%s)</text>\n", ML + PW / 2,
          top + height + 32, tu.name);
  fprintf(f,
          "<text x=\"%d\" y=\"%d\" text-anchor=\"middle\" font-size=\"12\" transform=\"rotate(-90 %d %d)\">%s"
          "%s%s%s</text>\n",
          24, top + height / 2, 24, top + height / 2, ylabel, percent ? "" : " (", percent ? "" : yu.name,
          percent ? "" : ")");
  fputs("</g>\n", f);
}

/* A step line through per-bin values v (0 <= v <= ymax). */
static void step_line(FILE *f, const bins_t *b, long n, uint64_t T, int top, int height, double ymax,
                      double (*val)(const bins_t *, int, long), int k, const char *color, const char *dash) {
  fprintf(f, "<polyline fill=\"none\" stroke=\"%s\" stroke-width=\"1.5\"%s%s%s points=\"", color,
          dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
  for (long i = 0; i < n; i++) {
    double x0 = ML + (double)(i * b->w) / (double)T * PW;
    double x1 = ML + (double)((uint64_t)(i + 1) * b->w < T ? (uint64_t)(i + 1) * b->w : T) / (double)T * PW;
    double y = top + height - (ymax > 0 ? val(b, k, i) / ymax : 0) * height;
    fprintf(f, "%.1f,%.1f %.1f,%.1f ", x0, y, x1, y);
  }
  fputs("\"/>\n", f);
}

static double res_val(const bins_t *b, int k, long i) { return (double)b->res[k][i]; }
static double link_val(const bins_t *b, int k, long i) { return b->link[k][i]; }

static void legend(FILE *f, int x, int y, const char *color, const char *label, const char *dash) {
  fprintf(f, "<line x1=\"%d\" y1=\"%d\" x2=\"%d\" y2=\"%d\" stroke=\"%s\" stroke-width=\"2\"%s%s%s/>\n", x, y - 4,
          x + 18, y - 4, color, dash ? " stroke-dasharray=\"" : "", dash ? dash : "", dash ? "\"" : "");
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\">%s</text>\n", x + 22, y, label);
}

static void draw(FILE *f, const bins_t *b, uint64_t T, const char *path, const mt_trace_header_t *h) {
  long n = (long)((T ? T - 1 : 0) / b->w) + 1;
  if (T == 0) T = 1;
  char s1[32], s2[32];
  fprintf(f, "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
             "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%d\" height=\"%d\" viewBox=\"0 0 %d %d\" "
             "font-family=\"sans-serif\">\n",
          W, H, W, H);
  fputs("<title>mtalloc trace: ", f);
  mtt_xml_text(f, path, strlen(path));
  fputs("</title>\n", f);
  fprintf(f, "<rect width=\"%d\" height=\"%d\" fill=\"white\"/>\n", W, H);
  fprintf(f, "<text x=\"%d\" y=\"28\" font-size=\"17\" font-weight=\"bold\">mtalloc trace: ", ML);
  mtt_xml_text(f, path, strlen(path));
  fputs("</text>\n", f);
  fprintf(f, "<text x=\"%d\" y=\"48\" font-size=\"12\" fill=\"#555\">", ML);
  mtt_xml_text(f, h->source, mtt_strnlen(h->source, sizeof h->source));
  fputs(" on ", f);
  mtt_xml_text(f, h->device, mtt_strnlen(h->device, sizeof h->device));
  char s3[32];
  fprintf(f, "; GPU budget %s, host budget %s; bins of %s</text>\n",
          h->gpu_budget ? mtt_fmt_bytes(s1, sizeof s1, h->gpu_budget) : "unknown",
          h->host_budget ? mtt_fmt_bytes(s2, sizeof s2, h->host_budget) : "unknown", mtt_fmt_ns(s3, sizeof s3, b->w));

  /* residency */
  uint64_t ymax = b->peak[0] > b->peak[1] ? b->peak[0] : b->peak[1];
  if (b->peak[2] > ymax) ymax = b->peak[2];
  if (h->gpu_budget > ymax && h->gpu_budget <= 4 * ymax) ymax = h->gpu_budget;
  if (ymax == 0) ymax = 1;
  unit_t bu = byte_unit(ymax);
  double ytop = nice_step((double)ymax / bu.scale, 5);
  ytop = ceil((double)ymax / bu.scale / ytop) * ytop * bu.scale;
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">Residency per tier (highest in each bin)</text>\n",
          ML, P1T - 28);
  axes(f, P1T, P1H, T, ytop, bu, "resident", false);
  if (h->gpu_budget && (double)h->gpu_budget <= ytop) {
    double py = P1T + P1H - (double)h->gpu_budget / ytop * P1H;
    fprintf(f, "<line x1=\"%d\" y1=\"%.1f\" x2=\"%d\" y2=\"%.1f\" stroke=\"#1f77b4\" stroke-dasharray=\"6 4\"/>\n",
            ML, py, ML + PW, py);
  }
  static const char *const rcolor[NRES] = {"#1f77b4", "#ff7f0e", "#2ca02c"};
  static const char *const rname[NRES] = {"GPU", "host", "NVMe"};
  int lx = ML + 120; /* legend row under the panel title; the GPU budget's entry first */
  for (int k = 0; k < NRES; k++) {
    if (k == 2 && b->peak[2] == 0) continue;
    step_line(f, b, n, T, P1T, P1H, ytop, res_val, k, rcolor[k], NULL);
    char lab[64];
    snprintf(lab, sizeof lab, "%s (peak %s)", rname[k], mtt_fmt_bytes(s1, sizeof s1, b->peak[k]));
    legend(f, lx + k * 190, P1T - 8, rcolor[k], lab, NULL);
  }
  if (h->gpu_budget && (double)h->gpu_budget <= ytop) legend(f, ML, P1T - 8, "#1f77b4", "GPU budget", "6 4");

  /* link utilisation */
  double lmax = 0;
  for (int k = 0; k < NLINK; k++)
    for (long i = 0; i < n; i++)
      if (b->link[k][i] > lmax) lmax = b->link[k][i];
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"14\" font-weight=\"bold\">Link utilisation (bytes per bin, share of the busiest bin)</text>\n",
          ML, P2T - 26);
  fprintf(f, "<text x=\"%d\" y=\"%d\" font-size=\"11\" fill=\"#555\">", ML, P2T - 10);
  if (lmax > 0)
    fprintf(f, "100%% = %s in %s (%.2f GB/s)", mtt_fmt_bytes(s1, sizeof s1, (uint64_t)lmax),
            mtt_fmt_ns(s3, sizeof s3, b->w), lmax / (double)b->w);
  else
    fputs("no H2D or D2H copies", f);
  fputs("</text>\n", f);
  axes(f, P2T, P2H, T, 100, (unit_t){"%", 1}, "utilisation (%)", true);
  static const char *const lcolor[NLINK] = {"#9467bd", "#d62728"};
  static const char *const lname[NLINK] = {"H2D", "D2H"};
  for (int k = 0; k < NLINK; k++) {
    step_line(f, b, n, T, P2T, P2H, lmax, link_val, k, lcolor[k], NULL);
    legend(f, ML + PW - 120 + k * 60, P2T - 10, lcolor[k], lname[k], NULL);
  }
  fputs("</svg>\n", f);
}

static void help(FILE *f) {
  fputs("usage: mt-trace plot TRACE -o OUT.svg\n"
        "\n"
        "Draws a self-contained SVG: residency per tier (GPU, host, NVMe when used;\n"
        "the highest value in each time bin, with the GPU budget dashed) and link\n"
        "utilisation (H2D and D2H bytes per bin as a share of the busiest bin) over\n"
        "the trace's time. The trace is streamed into 512 bins.\n"
        "\n"
        "  -o, --output FILE   where to write the SVG ('-': standard output)\n"
        "  -h, --help          show this help and exit\n",
        f);
}

int mt_cmd_plot(int argc, char **argv) {
  const char *path, *out;
  int code = mtt_trace_to_file_args("plot", argc, argv, help, "OUT.svg", &path, &out);
  if (code >= 0) return code;

  mtt_stream_t *st;
  int rc = mtt_open("plot", path, &st);
  if (rc) return rc;
  bins_t *b = calloc(1, sizeof *b);
  mtt_book_t *book = mtt_book_new(mtt_header(st)->chunk_bytes, NULL, NULL);
  bool oom = !b || !book;
  const mt_trace_rec_t *rec;
  uint64_t off, t0 = 0, end = 0;
  bool first = true;
  if (b) {
    b->w = 1;
    b->filled = -1;
  }
  while (!oom && (rc = mtt_next(st, &rec, &off)) == 1) {
    if (first) {
      t0 = end = rec->t_ns;
      first = false;
    }
    uint64_t e = mtt_rec_end(rec);
    if (e > end) end = e;
    uint64_t t = rec->t_ns >= t0 ? rec->t_ns - t0 : 0, te = e >= t0 ? e - t0 : 0; /* late: clamp */
    if (rec->type == MT_TR_COPY) {
      const mt_trace_copy_t *cp = (const void *)rec;
      if (cp->dir == MT_TR_H2D || cp->dir == MT_TR_D2H) link_add(b, cp->dir == MT_TR_H2D ? 0 : 1, t, te, cp->bytes);
    }
    if (mtt_book_apply(book, rec, off) < 0) {
      oom = true;
      break;
    }
    const uint64_t *lv = mtt_book_levels(book);
    uint64_t v[NRES] = {lv[MT_TIER_GPU], lv[MT_TIER_HOST], lv[MT_TIER_NVME]};
    if (memcmp(v, b->level, sizeof v) != 0) res_sample(b, t, v);
  }
  int ret = 0;
  if (oom) {
    fprintf(stderr, "mt-trace plot: out of memory\n");
    ret = 1;
  } else if (rc < 0) {
    ret = 2;
  } else {
    uint64_t T = end - t0;
    res_sample(b, T, b->level); /* carry the last level to the end */
    bool to_stdout = strcmp(out, "-") == 0;
    FILE *f = to_stdout ? stdout : fopen(out, "w");
    if (!f) {
      perror(out);
      ret = 1;
    } else {
      draw(f, b, T, path, mtt_header(st));
      bool failed = fflush(f) != 0 || ferror(f);
      if (!to_stdout && fclose(f) != 0) failed = true;
      if (failed) {
        fprintf(stderr, "mt-trace plot: %s: write failed\n", out);
        if (!to_stdout) unlink(out);
        ret = 1;
      }
    }
    mtt_book_warn(book, "plot");
  }
  mtt_book_free(book);
  free(b);
  mtt_close(st);
  return ret;
}
