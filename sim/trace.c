/*
 * trace.c — what a point records beside its result: the Chrome trace-event
 * timeline of --trace (one complete event per compute, wait and finished
 * send; tracks named by node and rank; what a partial trace shows in its
 * otherData.note; the file is replaced only when the point succeeds) and the per-link
 * statistics tests and tools ask for (bytes and busy time on every link a
 * message was routed over).
 */
#include "sim/point.h"

#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>

int sim_trace_open(sim_ctx *c, const char *path, char *err, size_t errlen) {
  char oerr[512];
  c->trace_out = bs_out_open(path, oerr, sizeof oerr);
  if (!c->trace_out) {
    snprintf(err, errlen, "cannot write the trace: %s", oerr);
    return -1;
  }
  c->trace = bs_out_stream(c->trace_out);
  fprintf(c->trace, "{\"displayTimeUnit\":\"ms\",\"traceEvents\":[");
  return 0;
}

void sim_trace_event(sim_ctx *c, const char *name, int rank, int node, double t0, double t1, const char *cat) {
  if (!c->trace) return;
  double ts = t0 * 1e6, dur = (t1 - t0) * 1e6;
  if (!isfinite(ts) || !isfinite(dur)) { /* JSON has no inf or nan: the point fails, no file */
    sim_error(c, "%s: rank %d's %s at %g s for %g s is not a finite time; no trace written", c->opts->trace_path, rank,
              name, t0, t1 - t0);
    return;
  }
  fprintf(c->trace,
          "%s{\"name\":\"%s\",\"cat\":\"%s\",\"ph\":\"X\",\"pid\":%d,\"tid\":%d,"
          "\"ts\":%.3f,\"dur\":%.3f}",
          c->trace_first ? "\n" : ",\n", name, cat, node, rank, ts, dur);
  c->trace_first = 0;
}

/* A JSON string's body: quotes and backslashes escaped, control characters dropped. */
static void put_json_text(FILE *f, const char *s) {
  for (; *s; s++) {
    if (*s == '"' || *s == '\\') fputc('\\', f);
    if ((unsigned char)*s >= 0x20) fputc(*s, f);
  }
}

/* The tracks named: a process per node ("node 3"), a thread per rank ("rank 17"; composed, its
 * place in the grid "rank 17 (tp 1, cp 4, dp 0, pp 0)"; a folded actor "... (fold: for N ranks)"),
 * and the note of a partial trace as an instant event at 0. */
static void trace_names(sim_ctx *c) {
  for (int s = 0; s < c->A; s++) {
    const rank_state *rs = &c->rs[s];
    int first_of_node = 1;
    for (int t = 0; t < s && first_of_node; t++) first_of_node = c->rs[t].node != rs->node;
    if (first_of_node)
      fprintf(c->trace, ",\n{\"name\":\"process_name\",\"ph\":\"M\",\"pid\":%d,\"args\":{\"name\":\"node %d\"}}",
              rs->node, rs->node);
    fprintf(c->trace, ",\n{\"name\":\"thread_name\",\"ph\":\"M\",\"pid\":%d,\"tid\":%d,\"args\":{\"name\":\"rank %d",
            rs->node, rs->rank, rs->rank);
    if (c->mesh.size[0] > 0 && c->mesh.size[BS_DIM_CP] < c->G) /* its place in the grid: its role */
      fprintf(c->trace, " (tp %d, cp %d, dp %d, pp %d)", bs_mesh_coord(&c->mesh, rs->rank, BS_DIM_TP),
              bs_mesh_coord(&c->mesh, rs->rank, BS_DIM_CP), bs_mesh_coord(&c->mesh, rs->rank, BS_DIM_DP),
              bs_mesh_coord(&c->mesh, rs->rank, BS_DIM_PP));
    if (c->A < c->G) fprintf(c->trace, " (fold: for %d ranks)", c->G / c->A);
    fprintf(c->trace, "\"}}");
  }
  if (c->opts->trace_note) {
    fprintf(c->trace, ",\n{\"name\":\"");
    put_json_text(c->trace, c->opts->trace_note);
    fprintf(c->trace, "\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":0}");
  }
}

int sim_trace_commit(sim_ctx *c, char *err, size_t errlen) {
  if (!c->trace_out) return 0;
  if (c->trace_first)
    fprintf(c->trace, "\n{\"name\":\"(no event)\",\"ph\":\"i\",\"s\":\"g\",\"pid\":0,\"tid\":0,\"ts\":0}");
  trace_names(c);
  fprintf(c->trace, "\n],\"otherData\":{\"ranks\":%d,\"actors\":%d,\"note\":\"", c->G, c->A);
  put_json_text(c->trace, c->opts->trace_note ? c->opts->trace_note : "the whole point");
  fprintf(c->trace, "\"}}\n");
  c->trace = NULL;
  char oerr[512];
  int wrc = bs_out_commit(c->trace_out, oerr, sizeof oerr);
  c->trace_out = NULL;
  if (wrc) {
    snprintf(err, errlen, "cannot write the trace: %s", oerr);
    return -1;
  }
  return 0;
}

void sim_trace_abort(sim_ctx *c) {
  bs_out_abort(c->trace_out);
  c->trace_out = NULL;
  c->trace = NULL;
}

void sim_links_attach(sim_ctx *c) {
  size_t nl = sg_link_count();
  sg_link_t *ll = sg_link_list();
  c->links = calloc(nl * 2 + 1, sizeof *c->links);
  for (size_t i = 0; c->links && i < nl; i++) {
    snprintf(c->links[i].name, sizeof c->links[i].name, "%s", sg_link_get_name(ll[i]));
    sg_link_set_data(ll[i], (void *)(intptr_t)(i + 1));
  }
  c->nlinks = c->links ? (int)nl : 0;
  free(ll);
}

void sim_link_account(sim_ctx *c, sg_host_t src, sg_host_t dst, int64_t bytes, double dur) {
  if (!c->nlinks) return;
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(src, dst, d);
  unsigned i;
  sg_link_t l;
  xbt_dynar_foreach(d, i, l) {
    intptr_t id = (intptr_t)sg_link_get_data(l);
    if (id > 0 && id <= c->nlinks) {
      c->links[id - 1].bytes += (double)bytes;
      c->links[id - 1].busy_s += dur;
    }
  }
  xbt_dynar_free(&d);
}
