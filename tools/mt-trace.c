/*
 * mt-trace - study what mtalloc did: `mt-trace COMMAND ARGS...`. This file
 * only dispatches; each subcommand lives in tools/trace/ (commands.h), parses
 * its own arguments, prints its own --help and returns the exit code:
 * 0 success, 2 bad input (a bad option or a bad trace), 1 anything else.
 */
#include <stdio.h>
#include <string.h>

#include "trace/commands.h"

static const struct command {
  const char *name;
  int (*run)(int argc, char **argv);
  const char *what;
} commands[] = {
    {"summary", mt_cmd_summary, "totals and a per-iteration table (stalls, bytes per link, prefetch quality)"},
    {"timeline", mt_cmd_timeline, "a Chrome/Perfetto trace-event JSON timeline (ui.perfetto.dev)"},
    {"plot", mt_cmd_plot, "an SVG of residency per tier and link utilisation over time"},
    {"replay", mt_cmd_replay, "replay a trace through the pager's policy under other budgets and bandwidths"},
    {"import-g10", mt_cmd_import_g10, "convert a G10 trace into an mtalloc trace"},
    {"synth", mt_cmd_synth, "write a synthetic training trace"},
    {"perturb", mt_cmd_perturb, "rewrite a trace less regularly: jittered kernels, eval passes, branches"},
    {"plan", mt_cmd_plan, "the fastest way to train a model on a machine (synth + replay; --help)"},
};

static void usage(FILE *f) {
  fputs("usage: mt-trace COMMAND [ARGS]\n"
        "\n"
        "Study traces recorded with MT_TRACE=path, write synthetic ones (synth), and\n"
        "plan a training run before buying the machine:\n"
        "  mt-trace plan --model CONF --gpu-mem SIZE --host-mem SIZE --pcie-bw B\n"
        "                --nvme-read-bw B --nvme-write-bw B [--gpu-tflops T]\n"
        "                [--host-opt-gparams-per-s P] [--json]\n"
        "prints the fastest configuration as MT_* settings and training flags, its\n"
        "tokens/s and share of the compute-bound ideal, the resource that binds, and\n"
        "why the next best lose (or which resource is short, and by how much).\n"
        "\n"
        "commands:\n",
        f);
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    fprintf(f, "  %-11s %s\n", commands[i].name, commands[i].what);
  fputs("\n"
        "`mt-trace COMMAND --help` explains a command.\n"
        "\n"
        "  -h, --help   show this help and exit\n"
        "\n"
        "Exit status: 0 success, 2 bad input (an unknown command or option, a bad\n"
        "trace), 1 any other failure.\n",
        f);
}

int main(int argc, char **argv) {
  if (argc < 2) {
    usage(stderr);
    return 2;
  }
  if (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "help") == 0) {
    usage(stdout);
    return 0;
  }
  for (size_t i = 0; i < sizeof commands / sizeof commands[0]; i++)
    if (strcmp(argv[1], commands[i].name) == 0) return commands[i].run(argc - 1, argv + 1);
  fprintf(stderr, "mt-trace: unknown command '%s' (see mt-trace --help)\n", argv[1]);
  return 2;
}
