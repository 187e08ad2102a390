/*
 * host_load.h — how much of this machine's CPU other work took while validate's jobs ran. A real
 * run on a shared host measures the host as much as the method: when other processes take CPU
 * time from the ranks, the measured step is slower and the prediction's "error" is the machine's.
 * A mark reads the CPU time every process has used (/proc/stat) and the time this process's
 * waited-for children (mpirun and its ranks) have used (getrusage); two marks around a job give
 * the share of the machine's CPUs that went to anything else.
 */
#ifndef BURSTSIM_CALIB_HOST_LOAD_H
#define BURSTSIM_CALIB_HOST_LOAD_H

typedef struct {
  double wall_s;     /* monotonic clock */
  double busy_s;     /* CPU time used by every process of the machine (all CPUs), or < 0 unknown */
  double children_s; /* CPU time of this process's waited-for children (user + system) */
  int ncpu;          /* CPUs online */
} bs_load_mark;

/* Reads a mark now. Never fails: busy_s < 0 when /proc/stat cannot be read. */
void bs_load_mark_now(bs_load_mark *m);

/* The share (0..1) of the machine's CPU capacity between a and b that neither this process nor
 * its children used: (busy - children) / (wall x CPUs), at least 0. -1 when unknown. */
double bs_load_others_share(const bs_load_mark *a, const bs_load_mark *b);

/* Above this share of other work a measurement is called disturbed. */
#define BS_LOAD_DISTURBED 0.10

#endif
