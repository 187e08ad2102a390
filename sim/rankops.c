/*
 * rankops.c — what a rank's ops do to its own state, whichever engine moves
 * its messages (SimGrid actors, actor.c, or the direct event loop, direct.c):
 * ALLOC/FREE on the memory counter (held bytes as the profile's allocator
 * rounds them: bs_sim_alloc_held, memory.h), PHASE boundaries, the in-order
 * matching of a pair's posts (time_s.wait_for_peers) and of a collective's
 * arrivals, a message's tag and
 * size as its payload and the RECV's check of them, the size a p2p message
 * moves, the end-of-plan checks and the deadlock's message. Both engines call the same functions so
 * that their results can only differ in time.
 */
#include "sim/point.h"
#include "sim/memory.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* rs's side of the pair with peer_slot (created), or NULL when rs already has MAX_PEERS. The
 * table rs->pm is open-addressed by (peer, dir), its dir field holding dir + 1 (0: an empty
 * slot, as calloc left it), so that a post reads one entry, not every peer's before it. */
static pairmatch *pair_entry(rank_state *rs, int peer_slot, int dir) {
  uint32_t x = ((uint32_t)peer_slot * 2u + (uint32_t)dir) * 0x9e3779b1u;
  int i = (int)(x >> 26) % MAX_PEERS;
  for (int probe = 0; probe < MAX_PEERS; probe++, i = (i + 1) % MAX_PEERS) {
    pairmatch *e = &rs->pm[i];
    if (e->dir == 0) {
      if (rs->npm >= MAX_PEERS) return NULL;
      rs->npm++;
      memset(e, 0, sizeof *e);
      e->peer = peer_slot;
      e->dir = dir + 1;
      return e;
    }
    if (e->peer == peer_slot && e->dir == dir + 1) return e;
  }
  return NULL; /* every slot taken by other peers */
}

/*
 * When a message's two sides have both posted (time_s.wait_for_peers): the k-th SEND of a pair
 * meets the k-th RECV (one mailbox per ordered pair, matched in order), so whichever side posts
 * second fixes the match time of both. A side that posts first leaves its handle in its ring;
 * the other side, posting, stamps it. Beyond the peer cache or the ring the time stays unknown
 * (-1) and the wait counts as transfer.
 */
void sim_note_match(rank_state *rs, int peer_slot, int dir, int hd) {
  sim_ctx *c = rs->ctx;
  handle *h = &rs->h[hd];
  h->t_match = -1;
  pairmatch *me = pair_entry(rs, peer_slot, dir), *other = pair_entry(&c->rs[peer_slot], rs->slot, !dir);
  if (!me || !other) return;
  int64_t k = me->posted++;
  if (other->posted > k) { /* the peer posted its k-th first: both meet now */
    h->t_match = h->t_post;
    if (other->posted - k <= PEND_RING) c->rs[peer_slot].h[other->pend[k % PEND_RING]].t_match = h->t_post;
  } else {
    me->pend[k % PEND_RING] = (short)hd;
  }
}

/* When rs arrived (simulated time now) at its next collective, number rs->coll_seq, for its peers'
 * waits; 0 or -1 with the error recorded. */
static int note_coll_arrival(rank_state *rs, double now) {
  int k = rs->coll_seq;
  if (k >= rs->coll_arr_cap) {
    int cap = rs->coll_arr_cap ? 2 * rs->coll_arr_cap : 64;
    double *a = realloc(rs->coll_arr, sizeof *a * (size_t)cap);
    if (!a) {
      sim_error(rs->ctx, "out of memory");
      return -1;
    }
    rs->coll_arr = a;
    rs->coll_arr_cap = cap;
  }
  rs->coll_arr[k] = now;
  return 0;
}

void *sim_msg_encode(int tag, int64_t bytes) {
  uint64_t v = (1ull << 63) | ((uint64_t)(uint32_t)tag << 31) | ((uint64_t)bytes & 0x7fffffffull);
  return (void *)(uintptr_t)v;
}

static void decode_msg(void *p, int *tag, int64_t *bytes_low) {
  uint64_t v = (uint64_t)(uintptr_t)p;
  *tag = (int)(uint32_t)((v >> 31) & 0xffffffffull);
  *bytes_low = (int64_t)(v & 0x7fffffffull);
}

/* The rank's table of buffers grown to hold id b (doubling, at most the source's buf_ids): a plan's
 * ids are handed out lowest first, so most ranks never touch the top of a large bound. 0 or -1. */
static int grow_bufs(rank_state *rs, int b) {
  int64_t n = rs->nbuf ? 2 * (int64_t)rs->nbuf : 64;
  if (n <= b) n = (int64_t)b + 1;
  if (n > rs->ctx->buf_ids) n = rs->ctx->buf_ids;
  membuf *p = realloc(rs->buf, sizeof *p * (size_t)n);
  if (!p) return -1;
  memset(p + rs->nbuf, 0, sizeof *p * (size_t)(n - rs->nbuf));
  rs->buf = p;
  rs->nbuf = (int32_t)n;
  return 0;
}

int sim_op_alloc(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int b = op->u.alloc.buf;
  if (b >= rs->nbuf && b < c->buf_ids && grow_bufs(rs, b)) {
    sim_error(c, "rank %d: out of memory for a table of %d buffer ids", rs->rank, (int)b + 1);
    return -1;
  }
  if (b < 0 || b >= rs->nbuf || rs->buf[b].used || op->u.alloc.bytes < 0 || op->u.alloc.cls < 0 ||
      op->u.alloc.cls >= BS_MEM_CLASS_COUNT) {
    sim_error(c,
              "rank %d op #%lld: ALLOC of buffer %d (%lld bytes, class %d) is invalid or the "
              "buffer is already allocated",
              rs->rank, (long long)rs->op_index, b, (long long)op->u.alloc.bytes, (int)op->u.alloc.cls);
    return -1;
  }
  int64_t held = bs_sim_alloc_held(c->prof, op); /* memory.c: search's walk prunes by the same count */
  rs->buf[b] = (membuf){1, held, op->u.alloc.cls};
  sim_add_bytes(rs, &rs->mem_cur, held, "memory in use");
  sim_add_bytes(rs, &rs->cls_cur[op->u.alloc.cls], held, "memory in use");
  if (rs->mem_cur > rs->mem_peak) {
    rs->mem_peak = rs->mem_cur;
    memcpy(rs->cls_at_peak, rs->cls_cur, sizeof rs->cls_cur);
  }
  return 0;
}

int sim_op_free(rank_state *rs, const bs_op *op) {
  int b = op->u.free.buf;
  if (b < 0 || b >= rs->nbuf || !rs->buf[b].used) {
    sim_error(rs->ctx, "rank %d op #%lld: FREE of buffer %d that is not allocated", rs->rank, (long long)rs->op_index,
              b);
    return -1;
  }
  rs->mem_cur -= rs->buf[b].bytes;
  rs->cls_cur[rs->buf[b].cls] -= rs->buf[b].bytes;
  rs->buf[b].used = 0;
  return 0;
}

void sim_op_phase(rank_state *rs, const bs_op *op, double now) {
  if (op->u.phase.fwd_bwd == 0) {
    if (op->u.phase.begin) rs->fwd_begin = now;
    else rs->fwd += now - rs->fwd_begin;
  } else {
    if (op->u.phase.begin) rs->bwd_begin = now;
    else rs->bwd += now - rs->bwd_begin;
  }
}

uint64_t sim_p2p_wire_bytes(const bs_profile *prof, int w, int64_t bytes) {
  double eff = prof ? prof->p2p_efficiency[w] : 1;
  if (!(eff > 0 && eff < 1)) return (uint64_t)bytes;
  return (uint64_t)((double)bytes / eff + 0.5);
}

int sim_check_recv(rank_state *rs, const handle *h) {
  int tag;
  int64_t low;
  decode_msg(h->rx, &tag, &low);
  if (tag != h->tag || low != (h->bytes & 0x7fffffff)) {
    /* the payload carries the size's low 31 bits: exact for every message below 2 GiB */
    char got[64];
    if (h->bytes < 0x80000000ll) snprintf(got, sizeof got, "%lld bytes", (long long)low);
    else snprintf(got, sizeof got, "a size of %lld mod 2^31 bytes", (long long)low);
    sim_error(rs->ctx,
              "rank %d op #%lld (step %d): RECV from rank %d expected tag %d (step %d) and "
              "%lld bytes, but the next message from rank %d has tag %d (step %d) and %s: sends and "
              "receives between two ranks must match in order, tag and size",
              rs->rank, (long long)h->op_index, h->step, h->peer, h->tag, h->tag & 2047, (long long)h->bytes, h->peer,
              tag, tag & 2047, got);
    return -1;
  }
  return 0;
}

int sim_check_end(rank_state *rs) {
  sim_ctx *c = rs->ctx;
  const char *why = c->src->iter_error ? c->src->iter_error(rs->it) : NULL;
  if (why) {
    sim_error(c, "rank %d: %s", rs->rank, why);
    return -1;
  }
  for (int hd = 0; hd < MAX_HANDLES; hd++)
    if (rs->h[hd].kind != H_FREE) {
      const handle *h = &rs->h[hd];
      sim_error(c,
                "rank %d: the plan ended with handle %d (op #%lld, %s rank %d tag %d) never "
                "waited",
                rs->rank, hd, (long long)h->op_index,
                h->kind == H_SEND   ? "SEND to"
                : h->kind == H_RECV ? "RECV from"
                                    : "COLL with",
                h->peer, h->tag);
      return -1;
    }
  return 0;
}

int sim_op_post_p2p(rank_state *rs, const bs_op *op, double now) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle, peer = op->u.p2p.peer;
  if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind != H_FREE) {
    sim_error(c, "rank %d op #%lld: %s uses handle %d that is invalid or still in use", rs->rank,
              (long long)rs->op_index, bs_op_kind_name(op->kind), hd);
    return -1;
  }
  if (peer < 0 || peer >= c->G || peer == rs->rank || op->u.p2p.bytes < 0) {
    sim_error(c, "rank %d op #%lld: %s with peer %d (of %d ranks) and %lld bytes", rs->rank, (long long)rs->op_index,
              bs_op_kind_name(op->kind), peer, c->G, (long long)op->u.p2p.bytes);
    return -1;
  }
  handle *h = &rs->h[hd];
  h->peer = peer;
  h->tag = op->u.p2p.tag;
  h->bytes = op->u.p2p.bytes;
  h->t_post = now;
  h->op_index = rs->op_index;
  h->step = op->step;
  return 0;
}

/* A COLL's handle and group checked against the point's ranks; 0 or -1 with the error recorded. */
static int check_coll(rank_state *rs, const bs_op *op) {
  sim_ctx *c = rs->ctx;
  int hd = op->handle;
  const bs_group *g = &op->u.coll.group;
  if (hd < 0 || hd >= MAX_HANDLES || rs->h[hd].kind != H_FREE) {
    sim_error(c, "rank %d op #%lld: COLL uses handle %d that is invalid or still in use", rs->rank,
              (long long)rs->op_index, hd);
    return -1;
  }
  if (g->size < 1 || g->first < 0 || g->first + (int64_t)g->stride * (g->size - 1) >= c->G ||
      (g->size > 1 && g->stride < 1) || op->u.coll.bytes < 0) {
    sim_error(c,
              "rank %d op #%lld: COLL group {first %d, stride %d, size %d} or %lld bytes out of "
              "range for %d ranks",
              rs->rank, (long long)rs->op_index, g->first, g->stride, g->size, (long long)op->u.coll.bytes, c->G);
    return -1;
  }
  return 0;
}

int sim_op_post_coll(rank_state *rs, const bs_op *op, double now) {
  sim_ctx *c = rs->ctx;
  const bs_group *g = &op->u.coll.group;
  if (check_coll(rs, op) || note_coll_arrival(rs, now)) return -1;
  if (c->mesh.size[0] > 0) {
    int k = bs_mesh_group_kind(&c->mesh, g->first, g->stride, g->size);
    if (k >= 0) rs->by_group[k] += bs_coll_bytes_sent(op->u.coll.kind, op->u.coll.bytes, g->size);
  }
  handle *h = &rs->h[op->handle];
  h->coll_seq = rs->coll_seq;
  h->group = *g;
  h->ckind = op->u.coll.kind;
  h->kind = H_COLL;
  h->t_post = now;
  h->op_index = rs->op_index;
  h->peer = -1;
  rs->coll_seq++;
  return 0;
}

void sim_deadlock_error(sim_ctx *c) {
  char list[360] = "";
  int shown = 0;
  size_t len = 0;
  for (int s = 0; s < c->A && shown < 3 && len < sizeof list; s++)
    if (!c->rs[s].finished) {
      const rank_state *rs = &c->rs[s];
      char at[224];
      if (rs->blk_kind == 1 && rs->blk_peer >= 0)
        snprintf(at, sizeof at,
                 "op #%lld WAIT on %d handle(s), first %s rank %d tag %d posted at op #%lld "
                 "(step %d)",
                 (long long)rs->blk_op, rs->blk_n, rs->blk_send ? "SEND to" : "RECV from", rs->blk_peer, rs->blk_tag,
                 (long long)rs->blk_post_op, rs->blk_step);
      else if (rs->blk_kind)
        snprintf(at, sizeof at, "op #%lld WAIT on a collective posted at op #%lld", (long long)rs->blk_op,
                 (long long)rs->blk_post_op);
      else snprintf(at, sizeof at, "op #%lld", (long long)rs->op_index);
      len += (size_t)snprintf(list + len, len < sizeof list ? sizeof list - len : 0, "%srank %d at %s",
                              shown ? "; " : "", rs->rank, at);
      shown++;
    }
  sim_error(c, "deadlock: %d of %d simulated ranks never finished (%s)", c->A - c->nfinished, c->A, list);
}
