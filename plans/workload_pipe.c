/*
 * workload_pipe.c — the pipeline schedule of a workload plan: which task
 * (a microbatch's forward or backward, of which model chunk) a stage runs
 * next, and the point-to-point messages between neighbour stages at a task's
 * start and end. One stage (no pipeline) runs each microbatch's forward then
 * its backward; pipeline stages run 1F1B or Megatron's interleaved 1F1B.
 */
#include "workload_impl.h"

/*
 * The schedule: task t of this stage is a microbatch's forward or backward.
 * One stage (no pipeline) runs each microbatch's forward then its backward.
 * Pipeline stages run 1F1B (PipeDream-Flush, Narayanan et al. 2021, as
 * Megatron-LM schedules it): stage s of p runs min(p - s - 1, m) forwards,
 * then alternates one forward and one backward, then the backwards left.
 * Inference runs the forwards only.
 */
static void pp_task_1f1b(const bs_wl *w, int64_t t, int *bwd, int64_t *mb) {
  int64_t m = w->nmb, warm = w->pp - w->pstage - 1;
  if (warm > m) warm = m;
  if (!w->train || t < warm) {
    *bwd = 0;
    *mb = t;
  } else if (t < warm + 2 * (m - warm)) {
    int64_t k = t - warm;
    *bwd = (int)(k % 2);
    *mb = k % 2 ? k / 2 : warm + k / 2;
  } else {
    *bwd = 1;
    *mb = t - warm - (m - warm);
  }
}

/*
 * Interleaved 1F1B (Narayanan et al. 2021, section 2.2.2, as Megatron-LM's
 * forward_backward_pipelining_with_interleaving orders it): rank s holds v
 * chunks, chunk c being stage c x p + s of p x v. The k-th of the m x v
 * chunk-microbatches is microbatch (k / (p v)) p + k % p of chunk (k / p) % v
 * for a forward and of chunk v - 1 - (k / p) % v for a backward: p
 * microbatches through one chunk, then the same p through the next. Rank s
 * runs (p - s - 1) x 2 + (v - 1) x p forwards (all of them when m = p), then
 * alternates one forward and one backward, then the backwards left.
 */
static void pp_task_interleaved(const bs_wl *w, int64_t t, int *bwd, int64_t *mb, int *chunk) {
  int64_t p = w->pp, v = w->v, total = w->nmb * v;
  int64_t warm = (p - w->pstage - 1) * 2 + (v - 1) * p;
  if (warm > total || w->nmb == p) warm = total;
  int64_t k;
  if (!w->train || t < warm) {
    *bwd = 0;
    k = t;
  } else if (t < warm + 2 * (total - warm)) {
    int64_t j = t - warm;
    *bwd = (int)(j % 2);
    k = j % 2 ? j / 2 : warm + j / 2;
  } else {
    *bwd = 1;
    k = t - warm - (total - warm);
  }
  *mb = k / (p * v) * p + k % p;
  int64_t c = k / p % v;
  *chunk = (int)(*bwd ? v - 1 - c : c);
}

static void pp_task(const bs_wl *w, int64_t t, int *bwd, int64_t *mb, int *chunk) {
  *chunk = 0;
  if (w->v > 1) pp_task_interleaved(w, t, bwd, mb, chunk);
  else pp_task_1f1b(w, t, bwd, mb);
}

/* Point-to-point with a neighbour stage (tags of kind 0: microbatch in the step bits; interleaved:
 * a backward's bit 1024 as well, since one pair of ranks then carries both directions' messages). */
static int32_t w_p2p(bs_wl *w, bs_op_kind kind, int32_t peer, int32_t buf, int64_t bytes) {
  bs_op *op = plan_push(w->it, kind);
  op->handle = wl_take(w->hnds, BS_WL_MAX_HANDLES, w->it);
  op->u.p2p.peer = peer;
  op->u.p2p.tag = w->v > 1 ? (int32_t)((w->task_bwd ? 1024 : 0) | (w->mb & 1023)) : (int32_t)(w->mb & 2047);
  op->u.p2p.buf = R(buf, 0);
  op->u.p2p.bytes = bytes;
  op->step = (int32_t)w->mb;
  return op->handle;
}

/* The sends to neighbour stages still in flight: joined before the next task's own messages. */
static void pp_join_sends(bs_wl *w) {
  for (int i = 0; i < w->nps; i++) {
    w_wait(w, &w->ps_h[i]);
    w_free(w, &w->ps_b[i]);
  }
}

/* A stage's output (forward: activations, backward: their gradient) to a neighbour stage. */
static void pp_send(bs_wl *w, int32_t peer) {
  /* interleaved: the oldest is joined when the ring is full (a rank's chunks send to two peers, and
   * a blocking join of a newer send could wait on a peer that is itself waiting on this rank) */
  int i = w->nps > 2 ? (int)(w->nsent++ % w->nps) : w->ps_h[0] < 0 ? 0 : 1;
  w_wait(w, &w->ps_h[i]);
  w_free(w, &w->ps_b[i]);
  w->ps_b[i] = w_alloc(w, w->Tn * w->H * w->es, BS_MEM_COMM);
  w->ps_h[i] = w_p2p(w, BS_OP_SEND, peer, w->ps_b[i], w->Tn * w->H * w->es);
}

/* A neighbour stage's output into a new buffer, waited (the task cannot start without it). */
static int32_t pp_recv(bs_wl *w, int32_t peer, bs_mem_class cls) {
  int32_t b = w_alloc(w, w->Tn * w->H * w->es, cls);
  int32_t h = w_p2p(w, BS_OP_RECV, peer, b, w->Tn * w->H * w->es);
  w_wait(w, &h);
  return b;
}

/* The start of task t: phase marks, the microbatch, the input from the neighbour stage. */
void wl_task_start(bs_wl *w) {
  int bwd, chunk;
  int64_t mb;
  pp_task(w, w->task, &bwd, &mb, &chunk);
  if (w->task > 0 && bwd != w->task_bwd) {
    plan_phase(w->it, w->task_bwd, 0);
    plan_phase(w->it, bwd, 1);
  }
  w->task_bwd = bwd;
  w->mb = mb;
  w->chunk = chunk;
  w->t_embed = w->has_embed && chunk == 0;
  w->t_head = w->has_head && chunk == w->v - 1;
  w->fsub = 0;
  w->sub = 0;
  if (!bwd) {
    if (w->pstage > 0) w->pp_in = pp_recv(w, w->prev, BS_MEM_COMM);
    else if (chunk > 0) w->pp_in = pp_recv(w, w->last, BS_MEM_COMM); /* chunk - 1 of the last stage */
    w->layer = 0;
    w->stage = w->t_embed ? S_EMBED : S_LFWD;
    return;
  }
  if (w->t_head) {
    w->dx = w_alloc(w, w->Tn * w->H * w->es, BS_MEM_WORKSPACE); /* gradient of the residual stream */
    wl_stage_head_bwd(w);
  } else if (w->pstage < w->pp - 1) {
    w->dx = pp_recv(w, w->next, BS_MEM_WORKSPACE);
  } else if (chunk < w->v - 1) {
    w->dx = pp_recv(w, w->first, BS_MEM_WORKSPACE); /* from chunk + 1 of the first stage */
  }
  w->layer = w->L - 1;
  w->stage = S_LBWD;
}

/* The end of a task: the output to the neighbour stage; the next task, or the step's end. */
void wl_task_end(bs_wl *w) {
  if (!w->task_bwd) {
    w_free(w, &w->pp_in);
    if (w->pstage < w->pp - 1) pp_send(w, w->next);
    else if (w->chunk < w->v - 1) pp_send(w, w->first); /* on to chunk + 1 of the first stage */
  } else {
    w_free(w, &w->dx);
    if (w->pstage > 0) pp_send(w, w->prev);
    else if (w->chunk > 0) pp_send(w, w->last); /* back to chunk - 1 of the last stage */
  }
  if (++w->task < w->ntasks) {
    w->stage = S_TASK;
    return;
  }
  pp_join_sends(w);
  w->stage = w->train ? S_OPT : S_FINI;
}
