/*
 * toy.c — toy op sources, toy platforms and the toy profile the simulator
 * tests share (toy.h): hand-written per-rank programs on platforms whose every
 * route is two links, so that times have closed forms.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "toy.h"

/* ---------------- toy op sources ---------------- */

typedef struct {
  const toy_plan *p;
  int rank, pos;
} toy_iter;

static void *toy_new(void *ctx, int rank) {
  toy_iter *it = malloc(sizeof *it);
  if (!it) return NULL;
  it->p = ctx;
  it->rank = rank;
  it->pos = 0;
  return it;
}
static int toy_next(void *v, bs_op *op) {
  toy_iter *it = v;
  if (it->pos >= it->p->n[it->rank]) return 0;
  *op = it->p->ops[it->rank][it->pos++];
  return 1;
}
static void toy_free(void *v) { free(v); }

bs_sim_source toy_source(toy_plan *p) {
  bs_sim_source s = {p, p->ranks, toy_new, toy_next, toy_free, NULL, NULL};
  return s;
}

bs_op *toy_push(toy_plan *p, int r, bs_op_kind k) {
  assert_true(p->n[r] < TOY_MAX_OPS);
  bs_op *op = &p->ops[r][p->n[r]++];
  memset(op, 0, sizeof *op);
  op->kind = k;
  op->handle = -1;
  return op;
}
void toy_p2p(toy_plan *p, int r, bs_op_kind k, int h, int peer, int tag, int64_t bytes) {
  bs_op *op = toy_push(p, r, k);
  op->handle = h;
  op->u.p2p.peer = peer;
  op->u.p2p.tag = tag;
  op->u.p2p.bytes = bytes;
  op->u.p2p.buf = BS_NOREF;
}
void toy_wait(toy_plan *p, int r, int n, const int *h) {
  bs_op *op = toy_push(p, r, BS_OP_WAIT);
  op->u.wait.n = n;
  for (int i = 0; i < n; i++) op->u.wait.handles[i] = h[i];
}
/* A COPY of `bytes` bytes: 2 * bytes / mem_bw seconds in the toy profile. */
void toy_copy(toy_plan *p, int r, int64_t bytes) {
  bs_op *op = toy_push(p, r, BS_OP_COMPUTE);
  op->u.compute.kernel = BS_K_COPY;
  op->u.compute.elems = bytes;
}
void toy_alloc(toy_plan *p, int r, int buf, int64_t bytes, bs_mem_class cls) {
  bs_op *op = toy_push(p, r, BS_OP_ALLOC);
  op->u.alloc.buf = buf;
  op->u.alloc.bytes = bytes;
  op->u.alloc.cls = cls;
}
void toy_free_buf(toy_plan *p, int r, int buf) {
  bs_op *op = toy_push(p, r, BS_OP_FREE);
  op->u.free.buf = buf;
}

/* ---------------- toy platform and profile ---------------- */

void write_text(const char *path, const char *text) {
  FILE *f = fopen(path, "w");
  assert_non_null(f);
  assert_true(fputs(text, f) >= 0);
  assert_int_equal(fclose(f), 0);
}

void toy_setup(toy_files *t, int n, int per_node) { toy_setup_links(t, n, per_node, LINK_LAT, LINK_BW); }

void toy_setup_links(toy_files *t, int n, int per_node, double link_lat, double link_bw) {
  const char *dir = getenv("TMPDIR") ? getenv("TMPDIR") : "/tmp";
  snprintf(t->xml, sizeof t->xml, "%s/bs-toy-%d-XXXXXX.xml", dir, (int)getpid());
  int fd = mkstemps(t->xml, 4);
  assert_true(fd >= 0);
  close(fd);
  char *x = malloc(1 << 20);
  assert_non_null(x);
  size_t len = 0;
  len += (size_t)sprintf(x + len,
                         "<?xml version='1.0'?>\n<!DOCTYPE platform SYSTEM \"https://simgrid.org/simgrid.dtd\">\n"
                         "<platform version=\"4.1\"><zone id=\"toy\" routing=\"Full\">\n");
  for (int i = 0; i < n; i++)
    len += (size_t)sprintf(x + len, "<host id=\"gpu%d\" speed=\"1Gf\"><prop id=\"node\" value=\"%d\"/></host>\n", i,
                           i / per_node);
  for (int i = 0; i < n; i++)
    len += (size_t)sprintf(
      x + len, "<link id=\"w%d\" bandwidth=\"%.17gBps\" latency=\"%.17gs\" sharing_policy=\"SPLITDUPLEX\"/>\n", i,
      link_bw, link_lat);
  for (int i = 0; i < n; i++)
    for (int j = 0; j < n; j++)
      if (i != j)
        len += (size_t)sprintf(
          x + len,
          "<route src=\"gpu%d\" dst=\"gpu%d\" symmetrical=\"NO\"><link_ctn id=\"w%d\" direction=\"UP\"/>"
          "<link_ctn id=\"w%d\" direction=\"DOWN\"/></route>\n",
          i, j, i, j);
  sprintf(x + len, "</zone></platform>\n");
  write_text(t->xml, x);
  free(x);
  snprintf(t->prof, sizeof t->prof, "%s/bs-toyprof-%d-XXXXXX.json", dir, (int)getpid());
  fd = mkstemps(t->prof, 5);
  assert_true(fd >= 0);
  close(fd);
  char pj[2048];
  snprintf(pj, sizeof pj,
           "{\"format\":1,\"name\":\"toy\",\"device\":{"
           "\"memory_bytes\":{\"value\":%.17g,\"source\":\"test\"},"
           "\"peak_flops\":{\"value\":1e12,\"source\":\"test\"},"
           "\"mem_bw_Bps\":{\"value\":%.17g,\"source\":\"test\"}},"
           "\"kernels\":{\"copy\":{\"model\":\"roofline\",\"launch_s\":{\"value\":0,\"source\":\"test\"},"
           "\"efficiency\":{\"value\":1,\"source\":\"test\"}}},"
           "\"links\":{},\"network\":{\"model\":\"CM02\",\"crosstraffic\":0,\"tcp_gamma\":0}}",
           CAPACITY, MEM_BW);
  write_text(t->prof, pj);
}

void toy_teardown(toy_files *t) {
  unlink(t->xml);
  unlink(t->prof);
}

void toy_config(bs_config *c, const toy_files *t, int ranks) {
  bs_config_default(c);
  c->par.gpus = ranks;
  snprintf(c->cluster.topology, sizeof c->cluster.topology, "%s", t->xml);
  snprintf(c->cluster.profile, sizeof c->cluster.profile, "%s", t->prof);
}

int run_toy(toy_plan *p, const toy_files *t, bs_result *r, char *err, size_t errlen) {
  bs_config c;
  toy_config(&c, t, p->ranks);
  bs_sim_opts o;
  bs_sim_opts_default(&o);
  bs_sim_source s = toy_source(p);
  return bs_sim_run_source(&c, &o, &s, r, NULL, NULL, err, errlen);
}

void assert_close(double got, double want, double rel) {
  if (fabs(got - want) > rel * fabs(want)) {
    fprintf(stderr, "got %.12g, want %.12g (relative tolerance %g)\n", got, want, rel);
    fail();
  }
}
