/*
 * watchdog.h — bounds the blocking calls that lie outside a plan's timed
 * waits: MPI start-up and shutdown, the start of an execution, the result
 * gather and the --verify gather (in `run`, and in `sim` / `calib` under
 * mpirun). A thread per process watches one armed phase at a time; when its
 * deadline passes it prints which rank, which phase and what it waited for,
 * and ends the process with exit status 3, which makes mpirun end the whole
 * job. Before a collective, bs_arrive lets rank 0 name the ranks that never
 * reached it.
 */
#ifndef BURSTSIM_WATCHDOG_H
#define BURSTSIM_WATCHDOG_H

#include <stddef.h>
#include <mpi.h>

#define BS_WATCHDOG_EXIT 3
#define BS_WATCHDOG_DEFAULT_S 120.0

/*
 * Arms the watchdog for `phase` ("the result gather") for timeout_s seconds
 * (<= 0: BS_WATCHDOG_DEFAULT_S). who: the message prefix ("burstsim run");
 * rank < 0: taken from the launcher's environment (before MPI_Init). Starts
 * the thread on first use. Returns 0, or -1 when no thread could be started
 * (the phase is then unbounded).
 */
int bs_watchdog_arm(const char *who, int rank, const char *phase, double timeout_s);
/* What the armed phase is waiting for now ("rank 2's outputs"), for the message. */
void bs_watchdog_waiting(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
/* Progress in the armed phase: its deadline starts again from now (a phase of many steps, such as
 * calib's measurements, is bounded step by step). Does nothing when disarmed. */
void bs_watchdog_feed(void);
void bs_watchdog_disarm(void);

/* The rank mpirun gave this process (OMPI_COMM_WORLD_RANK, PMIX_RANK or PMI_RANK), or 0. */
int bs_launcher_rank(void);

/*
 * Test hook: with BURSTSIM_TEST_STALL=RANK:PHASE in the environment, rank
 * RANK stops for good on reaching PHASE, as a rank stopped by SIGSTOP would:
 * init (before MPI_Init), start (an execution's first barrier), verify
 * (before the verify gather), gather (before the result gather), gathering
 * (inside it, once every rank has arrived), finalize (before MPI_Finalize),
 * measure (calib: before a measurement's warm-up). Does nothing otherwise.
 */
void bs_test_stall(int rank, const char *phase);

/*
 * Every rank of comm reports at `phase` to rank 0, which waits at most
 * timeout_s (<= 0: BS_WATCHDOG_DEFAULT_S; and no bound at all when
 * unbounded is set) and names the ranks that did not come. 0, or -1 on rank
 * 0 with "rank 2 did not reach the result gather within 30 s" in err.
 */
int bs_arrive(MPI_Comm comm, const char *phase, double timeout_s, int unbounded, char *err, size_t errlen);

#endif
