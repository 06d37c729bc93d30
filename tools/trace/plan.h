/*
 * plan.h - what `mt-trace plan` shares between its two searches: from a
 * model config (plan.c) and from a recorded trace (plan_trace.c). Both run
 * this executable's own `synth`, `summary` and `replay` as children, one at
 * a time, and read the numbers from their output (plan_util.c).
 */
#ifndef MT_TRACE_PLAN_H
#define MT_TRACE_PLAN_H

#include <stdbool.h>
#include <stdint.h>

/* The machine, as the user gave it (sizes in bytes, bandwidths in bytes/s). */
typedef struct plan_machine {
  uint64_t gpu, host, nvme;   /* --gpu-mem, --host-mem, --nvme-mem (default 8T) */
  double pcie, nrd, nwr;      /* --pcie-bw (each way), --nvme-read-bw, --nvme-write-bw */
  double rate;                /* --host-opt-gparams-per-s, 1e9 params/s with FP32 state */
} plan_machine_t;

/* 25G -> 25e9 (decimal suffixes k, M, G, T). 0 or -EINVAL. */
int plan_parse_bw(const char *s, double *out);

/* The resources a plan can be bound by, and their names. */
enum { R_GPU, R_H2D, R_D2H, R_NVME, R_POOL, R_COUNT };
extern const char *const PLAN_RES[R_COUNT];
/* State compression names, as MT_OPTIMIZER_COMPRESSION. */
extern const char *const PLAN_COMP[3];
/* Each resource's busy share of a replay's simulated time sim, from its
 * JSON out, into busy[R_COUNT]; returns the busiest (the binding one). */
int plan_busy(const char *out, double sim, double *busy);

/* Its own executable (the replays run as child processes of it) into
 * self[0..cap), and a scratch folder made from the mkdtemp template dir.
 * 0, or 1 after a message naming the command. */
int plan_setup(char *self, size_t cap, char *dir);
/* Runs the executable self with args (NULL-terminated), its stdout into out
 * (NUL-terminated, truncated to cap), its stderr into DIR/stderr (see
 * plan_last_error). Returns the exit status, or -1 when it could not run. */
int plan_child(const char *self, const char *dir, const char *const *args, char *out, size_t cap);
/* The same, the child killed once it has run limit_s seconds (0: no limit),
 * then -2; wall_s (may be NULL) gets how long it ran. */
int plan_child_timed(const char *self, const char *dir, const char *const *args, char *out, size_t cap,
                     double limit_s, double *wall_s);

/* The last non-empty line the last child wrote to stderr, into buf ("" if none). */
void plan_last_error(const char *dir, char *buf, size_t n);

/* The number after key in text ("key: 123", "\"key\":1.5"); NAN if absent. */
double plan_num_after(const char *text, const char *key);

/* The last number of the JSON array at key; NAN if absent or empty. */
double plan_last_of(const char *text, const char *key);

/* `mt-trace plan --trace`: plans from a recorded (or synthetic) trace, whose
 * model, batch and kernel times are fixed. tokens is the step's tokens (0:
 * unknown, step time only); only_comp -1 or a state compression (0 none,
 * 1 8bit, 2 4bit). Exit code as mt_cmd_plan's. */
int plan_trace(const char *trace, const plan_machine_t *m, uint64_t tokens, int only_comp, bool json);

#endif
