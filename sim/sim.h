/*
 * sim.h — the predicted executor: runs a plan (plans/plan.h) in SimGrid on a
 * platform built from a topology and a profile, and fills a bs_result.
 *
 * One SimGrid actor per GPU iterates its rank's plan: COMPUTE sleeps for the
 * profile's modelled duration (or executes on a shared CPU for the host
 * topology), SEND/RECV are asynchronous communications on one mailbox per
 * ordered pair of ranks (messages between a pair must be received in the
 * order they were sent, as NCCL requires; tags and sizes are checked), WAIT
 * joins them, COLL runs NCCL's ring (one rail-aligned channel per NIC over
 * whole dgx nodes) or double-binary-tree algorithm (cfg->cluster.coll_algo;
 * auto picks the faster modelled one) as point-to-point steps, as one flow per
 * hop, or as an analytic alpha-beta time (bs_coll_model), ALLOC/FREE drive a
 * per-GPU memory counter.
 *
 * SimGrid can be initialised only once per process, so by default every call
 * runs the simulation in a forked child that sends the result back through a
 * pipe: bs_sim_run can be called any number of times (sweeps, tests).
 */
#ifndef BURSTSIM_SIM_H
#define BURSTSIM_SIM_H

#include <stddef.h>
#include <stdint.h>
#include "plans/config.h"
#include "plans/plan.h"
#include "plans/result.h"

/* How a collective's algorithm (cfg->cluster.coll_algo) becomes SimGrid activity:
 *   steps     every step of the ring (or tree chunk) a message, neighbours in lockstep;
 *   flow      a ring's whole volume per hop and channel as one message (sharing the links
 *             with everything else in flight), never faster than its lockstep alpha-beta time;
 *   analytic  the alpha-beta time alone, no link sharing (sim/coll_shape.h);
 *   auto      steps for a group inside one node, flow for one that spans nodes.
 * Trees and all-to-alls run as steps under flow. */
typedef enum { BS_COLL_MODEL_AUTO = 0, BS_COLL_STEPS, BS_COLL_FLOW, BS_COLL_ANALYTIC } bs_coll_model;
const char *bs_coll_model_name(bs_coll_model m);

/* Which simulator runs a point's rank programs:
 *   simgrid  one SimGrid actor per rank, every op SimGrid activity (actor.c);
 *   direct   one event loop over the same programs, with SimGrid's network model reproduced on
 *            the loaded platform (direct.h): the same result, without SimGrid's per-message cost;
 *   auto     direct when it models the point (no collective, a generated platform, CM02 without
 *            cross traffic or TCP-gamma, no trace), else SimGrid. */
typedef enum { BS_ENGINE_AUTO = 0, BS_ENGINE_SIMGRID, BS_ENGINE_DIRECT } bs_engine;

typedef struct {
  char name[48]; /* SimGrid link name (with _UP / _DOWN for split-duplex) */
  double bytes;  /* bytes of all communications routed over it */
  double busy_s; /* sum of the durations of those communications */
} bs_link_stat;

typedef struct {
  const char *profile;    /* overrides cfg->cluster.profile (NULL: use cfg) */
  const char *trace_path; /* Chrome trace-event JSON of this point (NULL: none) */
  bs_tristate fold;       /* symmetric-plan shortcut: AUTO (when proven exact), ON (required), OFF */
  bs_coll_model coll_model;
  const char *net_model; /* NULL: the profile's (CM02) */
  int crosstraffic;      /* -1: the profile's (0) */
  double tcp_gamma;      /* < 0: the profile's (0) */
  int nodes_per_leaf;    /* dgx topologies: 0 = generator default */
  double oversub;        /* dgx topologies: 0 = generator default (1) */
  int in_process;        /* 1: run SimGrid in this process (once per process); 0: fork */
  bs_tristate layers;    /* model scope: simulate 3 and 4 layers and extend to L (AUTO, OFF) (layers.c) */
  /* pipeline steps: simulate Ma and Ma + g micro-batches and extend to M (AUTO, OFF) (micro.c) */
  bs_tristate micro_batches;
  const char *label; /* "point 3/8": names the point in the lines that say a long simulation is
                               still running (stderr not a terminal; NULL: none) */
  /* Said in the trace (otherData.note, an instant event): what it shows when it is not the whole
   * point (the layer shortcut's layers); NULL: the whole point. */
  const char *trace_note;
  bs_engine engine; /* AUTO (the default), SIMGRID or DIRECT (refused when it cannot) */
  /* SimGrid recomputes every transfer at every event (network/optim Full) instead of lazily: the
   * direct engine's reference in tests. Both are meant to be the same model, but SimGrid 3.32's lazy
   * update lets some transfers that start as others end on the same links finish early. */
  int sg_full_update;
  /* The fold's pre-pass reads every rank's program even where the plan proves its ranks alike
   * (bs_plan_ring_uniform; sim/fold.c): the reference tests compare the shortcut with. */
  int prepass_full;
  /* Refuse (bs_sim_run returns -2) a point whose ranks' programs hold more events (sim.events:
   * COMPUTEs, SENDs, collective steps) than this, estimated from a few ranks before the fold, or
   * after it on the simulated ranks where the plan proves its ranks alike (estimate.c); 0: no bound (the default; burstsim sim sets BS_SIM_MAX_EVENTS). */
  double max_events;
  /* Layer and model scope: every layer regenerates its attention's ops instead of reading them from
   * each rank's record of the first (bs_plan_set_op_cache; the same ops either way): the reference
   * the search's tests compare with (search --no-cache). */
  int no_op_cache;
} bs_sim_opts;

/* The bound burstsim sim puts on a point's events unless --max-events says otherwise: about an hour of
 * CPU at BS_SIM_EVENTS_PER_S. */
#define BS_SIM_MAX_EVENTS 4e9
/* Events the simulator runs per CPU second, for the refusal's time: a 1024-GPU ring (the direct
 * engine, no fold) ran 11,788,288 events in 10.7 s of CPU (docs/reliability.md). */
#define BS_SIM_EVENTS_PER_S 1e6

void bs_sim_opts_default(bs_sim_opts *o);

/*
 * Simulates one point. Returns 0 with out filled (out->ranks: one entry per
 * rank, free with bs_result_free); -2 with a message in err (and in
 * out->error) when the point is not valid (config, plan, topology, profile,
 * an impossible --fold on); -1 when the simulation failed: a plan whose sends
 * and receives do not match, a bad op, a deadlock (naming the ranks and ops),
 * or SimGrid aborting.
 */
int bs_sim_run(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen);

/*
 * Where the ops come from: by default a plan (bs_plan_create(cfg, ...)); tests
 * and other producers may hand their own per-rank iterators.
 */
typedef struct {
  void *ctx;
  int ranks; /* must equal cfg->par.gpus */
  void *(*iter_new)(void *ctx, int rank);
  int (*next)(void *it, bs_op *op); /* 1 and the op, or 0 at the end */
  void (*iter_free)(void *it);
  const char *(*iter_error)(void *it); /* optional: why next() ended early, or NULL */
  /* optional: the next op in place (valid until the iterator's next call; NULL at the end), read
   * instead of next() so that the simulation does not copy every op (bs_plan_next_ref) */
  const bs_op *(*next_ref)(void *it);
} bs_sim_source;

/*
 * bs_sim_run with an op source (NULL: the plan of cfg) and, when links is not
 * NULL, per-link statistics (*links malloc'd, *nlinks entries; caller frees).
 */
int bs_sim_run_source(const bs_config *cfg, const bs_sim_opts *opts, const bs_sim_source *source, bs_result *out,
                      bs_link_stat **links, int *nlinks, char *err, size_t errlen);

/* The layer shortcut (layers.c): whether it applies to cfg under opts (opts.c), and
 * bs_sim_run through it. bs_sim_run uses it by itself when it applies. */
int bs_sim_layers_apply(const bs_config *cfg, const bs_sim_opts *opts);
int bs_sim_run_layers(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen);

/* The micro-batch shortcut (micro.c): whether it applies to cfg under opts (opts.c: a pipeline step
 * whose micro-batches outnumber the two reduced steps'), the reduced counts it simulates (Ma and
 * Ma + g; 0, or -1 for no pipeline schedule it extends), and bs_sim_run through it. bs_sim_run uses it by
 * itself when it applies. */
int bs_sim_micro_apply(const bs_config *cfg, const bs_sim_opts *opts);
int bs_sim_micro_plan(const bs_config *cfg, int64_t *ma, int64_t *g);
int bs_sim_run_micro(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen);

/*
 * The forked simulation (the default) dies with its parent (PR_SET_PDEATHSIG);
 * SIGINT, SIGTERM and SIGHUP to the parent kill and reap it first. An allocation
 * it cannot make is reported as "out of memory" (with the ulimit -v in force).
 *
 * OpenBLAS, linked for `run`, starts a thread pool when the program loads and
 * joins it in a fork handler; under a low address-space limit its threads never
 * get their buffers and fork() waits for ever. The simulator calls no BLAS:
 * bs_sim_single_blas_thread re-executes the program once with
 * OPENBLAS_NUM_THREADS=1 (no pool) unless it is already set so; call it at the
 * start of a command that forks simulations, before any thread is started.
 * Returns only when no re-execution was needed or possible.
 */
void bs_sim_single_blas_thread(void);
/* In a child about to execute another program (mpirun): OPENBLAS_NUM_THREADS
 * back to what the user set before bs_sim_single_blas_thread, so real runs keep
 * their BLAS threads. */
void bs_sim_blas_threads_restore(void);

/*
 * The names a point gives, checked before any point runs (a sweep's typo is one
 * error up front, not a failed row or one error per point):
 * bs_sim_check_profile loads the profile (opts->profile over cfg's), errors
 * start "--profile: " or "cluster.profile: "; bs_sim_check_topology accepts a
 * generator, or loads a platform file in a forked SimGrid and checks its links
 * and the routes between its gpu<i> hosts (platform.h), errors start
 * "cluster.topology: ". Return 0 or -1 with the message in err.
 */
int bs_sim_check_profile(const bs_config *cfg, const bs_sim_opts *opts, char *err, size_t errlen);
int bs_sim_check_topology(const bs_config *cfg, char *err, size_t errlen);

/* Writes the platform XML the simulator would use for cfg (topology + profile). */
char *bs_sim_platform_xml(const bs_config *cfg, const bs_sim_opts *opts, char *err, size_t errlen);

#endif
