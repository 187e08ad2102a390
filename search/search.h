/*
 * search.h — the engine of `burstsim search`: from the points a scenario fixes
 * (model, workload, cluster, gpus, and any lists the user gave), the space of
 * parallel configurations is enumerated, illegal ones are pruned with the
 * plan's own checks, those whose memory cannot fit with the simulator's own
 * accounting (walk.h), and the rest are simulated cheapest lower bound first,
 * skipping every candidate whose bound proves it can neither enter the top K
 * nor the Pareto front of step time against peak memory (branch and bound).
 * Every rule is exact: tests/search/test_search.c compares with simulating every
 * legal point.
 */
#ifndef BURSTSIM_SEARCH_SEARCH_H
#define BURSTSIM_SEARCH_SEARCH_H

#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include "plans/config.h"
#include "plans/result.h"
#include "sim/sim.h"
#include "sim/walk.h"

/* The keys searched over every legal value because the scenario left them out (or said auto). */
typedef struct {
  int method, tp, dp, pp, layout, zero, micro_batch, recompute, ulysses_degree;
  int pp_schedule; /* pipelines (pp > 1): 1F1B and the interleaved schedule over 2 or 4 chunks */
  int cp_pass;     /* burst, ring in prefill and decode: pass-KV and pass-Q */
  int fp8;         /* model.fp8 off, ffn, all (layer and model scope); only when the user gives auto */
  /* The next three take BS_SEARCH_EVERY (every legal value), a mask of the values given as a list
   * (BS_SEARCH_BIT), or 0 (the base point's value). Each spreads only where it changes the plan. */
  int double_ring; /* burst and ring with a ring (cp > 1) outside decode and pass-Q: off, on */
  int placement;   /* usp: head-first, ring-first */
  int tp_variant;  /* where a tensor-parallel dimension of more than one rank runs: v1, v3 */
  int ep;          /* model.experts > 0 at layer and model scope: the divisors of dp x cp that divide experts */
} bs_search_autos;

#define BS_SEARCH_EVERY (-1)
/* The bit of a value in a list mask: a placement, a tp_variant (1 or 3), a double_ring tristate + 1. */
#define BS_SEARCH_BIT(v) (1 << (v))

/* The keys whose values a candidate's configuration label names (bs_cand.spread). */
enum { BS_SPREAD_DOUBLE_RING = 1, BS_SPREAD_PLACEMENT = 2, BS_SPREAD_TP_VARIANT = 4 };

typedef enum {
  BS_CAND_PENDING = 0,
  BS_CAND_ILLEGAL,   /* the plan (or the platform) refuses it: why */
  BS_CAND_MEMORY,    /* its peak memory passes the capacity: not simulated (but memory_by_sim) */
  BS_CAND_BOUND,     /* its lower bound rules it out of the top K and the front: never simulated */
  BS_CAND_SIMULATED, /* res holds its figures */
  BS_CAND_FAILED,    /* the simulation failed or the simulator refused it: why */
  BS_CAND_SKIPPED,   /* the search was interrupted before it */
  BS_CAND_REMOTE     /* under mpirun: another rank's (bs_search_opts.part) */
} bs_cand_status;

/* The keys an enumeration spreads (search.c's odometer): a candidate holds the index of its value of each. */
#define BS_SEARCH_NKEYS 16

/* bs_cand.flags */
enum {
  BS_CAND_REFINED = 1, /* walked over the grid's corners (else one rank per stage: search.c) */
  BS_CAND_SIM_OOM = 2, /* simulated, and found past the capacity by the simulation */
  BS_CAND_WALKED = 4,  /* its walk (or its probe) came back with a capacity (not skipped before it was examined) */
  BS_CAND_PROBED = 8,  /* its bound and peak are its probe's (search/probe.h): it was never walked */
  BS_CAND_REACHED = 16 /* walked or refined by this search's branch and bound (under mpirun: this rank's) */
};

/*
 * One candidate, lean (a search holds millions): what identifies it in the space, its base point and
 * the index of its value of each searched key (bs_search_config rebuilds its configuration from
 * them), and the figures the walk and the branch and bound keep. Its result (bs_search_result) is
 * held apart, only for the simulated, and its reason (bs_search_why) in a pool of distinct strings.
 */
typedef struct {
  double bound;       /* seconds: the step is at least this */
  int64_t peak_bytes; /* the latest walk's peak (the first pass's, or the corners' once refined) */
  int32_t res;        /* index in bs_search.res, or -1 */
  int32_t why;        /* index in bs_search.whys, or -1 */
  int32_t base;       /* which base point */
  uint8_t at[BS_SEARCH_NKEYS];
  uint8_t status; /* bs_cand_status */
  uint8_t flags;  /* BS_CAND_* */
  uint8_t spread; /* BS_SPREAD_*: the keys spread over more than one value for this candidate */
} bs_cand;

#define BS_SEARCH_MAX_REASONS 32

typedef struct {
  char reason[160]; /* the plan's message with its numbers written N */
  char example[256];
  int count;
} bs_search_reason;

typedef struct {
  bs_cand *c;
  int n;
  bs_config *base; /* the base points the candidates are rebuilt from */
  int nbase;
  bs_search_autos autos;
  bs_result **res; /* the simulated candidates' results */
  int nres, capres;
  char **whys; /* distinct reasons, and their hash table (index + 1, 0 empty) */
  int nwhys, capwhys, *whyhash, capwhyhash;
  int64_t capacity_bytes; /* the first candidate's walk: the profile's capacity less its reserve */
  int legal, memory, bound, simulated, failed, skipped;
  int refined;          /* candidates walked a second time, over the grid's corners */
  int memory_by_sim;    /* of memory: found out of memory by their simulation (counted in simulated too) */
  int bound_violations; /* simulated steps below their bound (must stay 0: the bound's proof) */
  bs_search_reason reasons[BS_SEARCH_MAX_REASONS];
  int nreasons, other_reasons;
  int interrupted;
  int walked; /* walks done (first passes: with --walk-all every candidate an interruption left not) */
  /* lazy walks (the default): every candidate is probed (search/probe.h) and walked only when the
   * branch and bound reaches it */
  int memory_by_probe;  /* of memory: past the capacity by their probe alone, never walked */
  int not_walked;       /* of legal: never walked (their probe settled them: memory or bound; under mpirun,
                           those another rank pruned by bound count here) */
  int probe_violations; /* walked candidates whose walk found less than their probe (must stay 0) */
  double wall_s;
  double walk_s; /* of wall_s: the walks (legality, memory, bounds); the rest simulates */
} bs_search;

/* Called after every simulated candidate (and once per 64 walked), for a progress line. */
typedef void (*bs_search_progress)(void *ctx, const bs_search *s, int done, int todo, double best, double elapsed);

typedef struct {
  int top_k;                   /* K (>= 1) */
  int part, parts;             /* under mpirun: simulate the j-th cheapest candidate when j % parts == part
                                  (parts <= 1: all); pruning then uses this part's results alone, which
                                  prunes less but stays exact */
  const bs_sim_opts *opts;     /* how every point is simulated */
  volatile sig_atomic_t *stop; /* set (by SIGINT) to end the search with what it has */
  bs_search_progress progress; /* or NULL */
  void *progress_ctx;
  int brute_force; /* tests: simulate every legal point that fits, no bound */
  int dry_run;     /* walk only: legality, memory and bounds, nothing simulated */
  int top_only;    /* skip by the top K alone: the front is then that of the simulated points */
  int all_ranks;   /* walk every rank, not the grid's corners (walk.h) */
  int walk_all;    /* walk every candidate before the branch and bound (else each is probed, and walked
                      when reached: search.c) */
} bs_search_opts;

/* The candidates of the base points (a scenario's cross product) with the auto keys spread over
 * their values (README, "burstsim search"). 0, or -1 with a message (an empty space). */
int bs_search_expand(const bs_config *base, int nbase, const bs_search_autos *a, bs_search *s, char *err,
                     size_t errlen);

/* Legality, memory, bound, then simulations. 0, or -1 with a message (a profile that does not load). */
int bs_search_run(bs_search *s, const bs_search_opts *o, char *err, size_t errlen);

/* The simulated candidates, fastest first (ties: enumeration order); n of them. Caller frees. */
int *bs_search_ranking(const bs_search *s, int *n);

/* The Pareto front of step time against peak memory among the simulated candidates, fastest
 * first (each uses less memory than every faster one). Caller frees. */
int *bs_search_front(const bs_search *s, int *n);

/* The counts recomputed from the candidates' statuses (after merging the parts of mpirun ranks). */
void bs_search_recount(bs_search *s);

/* One searched key's share of the space (space.c): how many values it takes over the candidates,
 * its most common value, and by how much fixing it there would cut the space. */
typedef struct {
  const char *key; /* "parallel.tp" */
  int values;
  char common[48]; /* as a scenario writes it: "8", "zigzag" */
  double cut;      /* candidates / those with the common value */
} bs_search_key_spread;

/* The keys that take more than one value, largest cut first; n (<= max). */
int bs_search_spread(const bs_search *s, bs_search_key_spread *out, int max);

/* The CPU seconds one candidate's first walk takes (walk_mode: BS_WALK_*, as bs_search_run walks
 * first: BS_WALK_STAGES, or BS_WALK_CORNERS for --dry-run), from up to `sample` walks spread evenly
 * over the candidates, fewer (*sampled, one at least) when they pass 5 CPU seconds (thrown away: the
 * search walks every candidate itself). 0, or -1 with a message. */
int bs_search_estimate(const bs_search *s, const bs_sim_opts *opts, int sample, int walk_mode, double *walk_each_s,
                       int *sampled, char *err, size_t errlen);

/* Candidate i's configuration, rebuilt from its base point and its values of the searched keys. */
void bs_search_config(const bs_search *s, int i, bs_config *out);

/* Candidate i's result (BS_CAND_SIMULATED), or NULL. */
const bs_result *bs_search_result(const bs_search *s, int i);

/* Why candidate i is illegal or failed, or "". */
const char *bs_search_why(const bs_search *s, int i);

/* Under mpirun: what the rank that owned candidate i decided about it (its status, flags and why;
 * res is copied, its per-rank figures too, when status is BS_CAND_SIMULATED). 0, or -1 out of memory. */
int bs_search_settle(bs_search *s, int i, bs_cand_status status, int sim_oom, const char *why, const bs_result *res);

void bs_search_free(bs_search *s);

#endif
