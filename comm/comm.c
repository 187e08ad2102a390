/*
 * comm.c — the calls of comm.h, forwarded to the backend table of the
 * communicator they are given.
 */
#include "comm/comm.h"

#include <stdio.h>
#include <stdlib.h>

struct bs_comm {
  const bs_comm_ops *ops;
  void *self;
};

int bs_comm_wrap(const bs_comm_ops *ops, void *self, bs_comm **out, char *err, size_t errlen) {
  *out = NULL;
  bs_comm *c = malloc(sizeof *c);
  if (!c) {
    ops->free(self);
    snprintf(err, errlen, "comm: out of memory");
    return BS_COMM_ERR;
  }
  c->ops = ops;
  c->self = self;
  *out = c;
  return BS_COMM_OK;
}

const char *bs_comm_backend(const bs_comm *c) { return c->ops->name; }
void *bs_comm_self(bs_comm *c) { return c->self; }

int bs_comm_rank(const bs_comm *c) { return c->ops->rank(c->self); }
int bs_comm_size(const bs_comm *c) { return c->ops->size(c->self); }
int bs_comm_pending(const bs_comm *c) { return c->ops->pending(c->self); }

int bs_comm_isend(bs_comm *c, const void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  return c->ops->isend(c->self, buf, bytes, peer, tag, req, err, errlen);
}

int bs_comm_irecv(bs_comm *c, void *buf, int64_t bytes, int peer, int tag, int *req, char *err, size_t errlen) {
  return c->ops->irecv(c->self, buf, bytes, peer, tag, req, err, errlen);
}

int bs_comm_icoll(bs_comm *c, bs_comm_coll kind, bs_comm_red red, bs_comm_type type, bs_comm_group g, const void *send,
                  void *recv, int64_t bytes, int *req, char *err, size_t errlen) {
  return c->ops->icoll(c->self, kind, red, type, g, send, recv, bytes, req, err, errlen);
}

int bs_comm_test(bs_comm *c, int req, int *done) { return c->ops->test(c->self, req, done); }
int bs_comm_wait(bs_comm *c, int req, double timeout_s) { return c->ops->wait(c->self, req, timeout_s); }
void bs_comm_progress(bs_comm *c) { c->ops->progress(c->self); }
void bs_comm_abort(bs_comm *c, int code) { c->ops->abort(c->self, code); }

void bs_comm_free(bs_comm *c) {
  if (!c) return;
  c->ops->free(c->self);
  free(c);
}
