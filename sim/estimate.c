/*
 * estimate.c — a point's work, known before it is simulated, so that a point
 * that cannot finish in a bounded time is refused with the figure instead of
 * running for hours (a causal ring of 65,536 GPUs over 1M tokens: about 4.8e10
 * events, 13 h of CPU) or until the host runs out of memory.
 *
 * The work is counted in the simulator's own unit, the events of sim.events
 * (rank.c and the collective engines count them): a COMPUTE and a SEND are one
 * each, a COLL of n ranks 2(n - 1) (a ring allreduce's steps) or n - 1 (the
 * other collectives). Every rank's program is read by the fold's pre-pass, or
 * simulated, so the events of all ranks are the work whatever the fold saves
 * later. They are counted on a few ranks spread over the plan (the first, the
 * middle, the last) and scaled to every rank (the ranks of a causal ring differ; three
 * spread over it follow their mean); counting stops once the bound is
 * known to be passed far enough to say by how much, so the estimate itself is
 * bounded (a few seconds of reading at most). The memory said with it is the
 * simulator's per-rank state (rank_state and a plan iterator, measured with
 * mallinfo2) for every rank, the address space a point takes when no fold
 * applies (most of rank_state's tables are never touched, so less is resident).
 */
#include "sim/point.h"

#include <malloc.h>
#include <stdio.h>
#include <stdlib.h>

/* Past the bound, up to this many more ops are read to say how far past it the point is. */
#define EXTRA_READ 50000000.0

/* The events one op adds (see the comment at the top). */
static double op_events(const bs_op *op) {
  switch (op->kind) {
  case BS_OP_COMPUTE:
  case BS_OP_SEND: return 1;
  case BS_OP_COLL: {
    double n = op->u.coll.group.size > 1 ? op->u.coll.group.size - 1 : 0;
    return op->u.coll.kind == BS_COLL_ALLREDUCE ? 2 * n : n;
  }
  default: return 0;
  }
}

int sim_work_estimate(const bs_sim_source *src, int nsim, double max_events, sim_work *w) {
  int G = src->ranks, pick[3] = {0, G / 2, G - 1}, n = 0;
  int ranks[3];
  for (int i = 0; i < 3; i++) {
    int dup = 0;
    for (int j = 0; j < n; j++) dup |= ranks[j] == pick[i];
    if (!dup && pick[i] >= 0 && pick[i] < G) ranks[n++] = pick[i];
  }
  *w = (sim_work){0};
  /* the sum over the sampled ranks past which the bound is passed, and where reading stops */
  double need = max_events > 0 ? max_events * n / nsim : 0,
         stop = need + (15 * need < EXTRA_READ ? 15 * need : EXTRA_READ);
  double sum = 0, iter_bytes = 0;
  int started = 0;
  for (int i = 0; i < n && !w->at_least; i++) {
    struct mallinfo2 m0 = mallinfo2();
    void *it = src->iter_new(src->ctx, ranks[i]);
    struct mallinfo2 m1 = mallinfo2();
    if (!it) return -1;
    if (m1.uordblks > m0.uordblks && (double)(m1.uordblks - m0.uordblks) > iter_bytes)
      iter_bytes = (double)(m1.uordblks - m0.uordblks);
    started++;
    bs_op op;
    while (src->next(it, &op)) {
      sum += op_events(&op);
      if (max_events > 0 && sum > stop) {
        w->at_least = 1;
        break;
      }
    }
    src->iter_free(it);
  }
  w->sampled = started;
  w->per_rank = started ? sum / started : 0;
  w->events = w->per_rank * nsim;
  w->state_bytes = (double)nsim * ((double)sizeof(rank_state) + MAX_BUFS * (double)sizeof(membuf) + iter_bytes);
  return 0;
}

/* "2.6e10" for a count in a message; "393216" below a million. */
static void count_text(double v, char *b, size_t n) {
  if (v < 1e6) snprintf(b, n, "%.0f", v);
  else snprintf(b, n, "%.2g", v);
}

int sim_work_check(const bs_sim_source *src, int nsim, double max_events, char *err, size_t errlen) {
  if (max_events <= 0) return 0;
  sim_work w;
  if (sim_work_estimate(src, nsim, max_events, &w)) {
    snprintf(err, errlen, "out of memory (estimating the point's work)");
    return -1;
  }
  if (w.events <= max_events) return 0;
  const char *more = w.at_least ? "more than " : "about ";
  char ev[32], each[32], bound[32];
  count_text(w.events, ev, sizeof ev);
  count_text(w.per_rank, each, sizeof each);
  count_text(max_events, bound, sizeof bound);
  char who[96];
  if (nsim < src->ranks)
    snprintf(who, sizeof who, "the %d ranks a fold simulates of %d (their programs alike)", nsim, src->ranks);
  else snprintf(who, sizeof who, "%d ranks' programs", nsim);
  snprintf(err, errlen,
           "parallel.gpus: %s hold %s%s events (%s%s a rank over %d read: COMPUTEs, SENDs and "
           "collective steps): %s%.3g h of CPU simulated rank by rank at %.0e events/s, with %.2f GiB of simulator "
           "state (address space; a fold, where one applies, simulates fewer ranks): past "
           "--max-events %s; fewer GPUs or a shorter sequence, or --max-events %s or more to simulate it anyway",
           who, more, ev, more, each, w.sampled, more, w.events / BS_SIM_EVENTS_PER_S / 3600, BS_SIM_EVENTS_PER_S,
           w.state_bytes / (1024.0 * 1024 * 1024), bound, ev);
  return -1;
}
