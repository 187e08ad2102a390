/*
 * commands.h — the subcommands of `burstsim`. Each lives in its own
 * src/cmd_NAME.c, parses its own options and returns the process exit code.
 */
#ifndef BURSTSIM_COMMANDS_H
#define BURSTSIM_COMMANDS_H

int cmd_sim(int argc, char **argv);
int cmd_run(int argc, char **argv);
int cmd_calib(int argc, char **argv);
int cmd_validate(int argc, char **argv);
int cmd_bench(int argc, char **argv);
int cmd_topo(int argc, char **argv);
int cmd_search(int argc, char **argv);
int cmd_diff(int argc, char **argv);
int cmd_import(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_schema(int argc, char **argv);

#endif
