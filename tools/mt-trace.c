/*
 * mt-trace - study what mtalloc did. The trace recorder and the subcommands
 * (summary, timeline, plot, replay, import-g10, synth) are built by their own
 * issue; until then this program only explains itself.
 */
#include <stdio.h>
#include <string.h>

static void usage(FILE *f) {
  fprintf(f,
          "usage: mt-trace COMMAND [ARGS]\n"
          "\n"
          "Study traces recorded with MT_TRACE=path.\n"
          "\n"
          "No subcommand is available in this build yet: trace recording and\n"
          "summary, timeline, plot, replay, import-g10 and synth come with the\n"
          "trace issue.\n"
          "\n"
          "  -h, --help   show this help and exit\n");
}

int main(int argc, char **argv) {
  if (argc >= 2 && (strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "--help") == 0)) {
    usage(stdout);
    return 0;
  }
  usage(stderr);
  if (argc >= 2) fprintf(stderr, "mt-trace: unknown command '%s'\n", argv[1]);
  return 2;
}
