/*
 * commands.h - mt-trace's subcommands. Each takes the arguments after its
 * name (argv[0] is the subcommand), prints its own --help, and returns the
 * exit code: 0 success, 2 bad input (a bad option or a bad trace), 1 any
 * other failure.
 */
#ifndef MT_TRACE_COMMANDS_H
#define MT_TRACE_COMMANDS_H

#include <stdint.h>

int mt_cmd_summary(int argc, char **argv);
int mt_cmd_timeline(int argc, char **argv);
int mt_cmd_plot(int argc, char **argv);
int mt_cmd_replay(int argc, char **argv);
int mt_cmd_import_g10(int argc, char **argv);
int mt_cmd_synth(int argc, char **argv);
int mt_cmd_perturb(int argc, char **argv);
int mt_cmd_plan(int argc, char **argv);

/* progress.c: a progress bar on stderr when it is a terminal, nothing
 * otherwise. done/total in any unit. */
void mt_progress(const char *what, uint64_t done, uint64_t total);
void mt_progress_end(void);

#endif
