/*
 * engine.c — one point in SimGrid, in this process: load the profile,
 * resolve the platform and the plan, choose the fold (fold.c), generate the
 * platform XML of the simulated ranks, start SimGrid with settings chosen on
 * purpose and recorded in the result, give every simulated rank its host and
 * op stream, run the ranks to the end, and fill the result (result.c). The
 * ranks run as SimGrid actors (actor.c) or, when it models the point, in the
 * direct engine (direct.h) on the same loaded platform; a point the direct
 * engine gives up on half way (a route it does not model) starts again in
 * SimGrid from scratch.
 * sim.network says which ran. A deadlock is named by the ranks that never
 * finished.
 *
 * SimGrid starts once per process: isolate.c runs this in a forked child.
 */
#include "sim/point.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <unistd.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <xbt/config.h>
#include <xbt/log.h>

#include "sim/direct.h"
#include "sim/load.h"

/* What one point is built from, before and while SimGrid runs it. */
typedef struct {
  bs_profile *prof;
  bs_plan *plan; /* the plan of cfg, unless a source was given */
  bs_sim_source src;
  bs_platform_spec ps;
  char why[160];      /* the fold, as a sentence for the result */
  sim_fold fold;      /* the fold (nodes per block, ranks per node, leaf wrap, block) */
  int A;              /* actors */
  char *xml;          /* a generated platform */
  char xml_path[600]; /* ... in its temporary file */
  const char *model;  /* the network settings the point runs with */
  int cross;
  double gamma;
  int sargc; /* SimGrid's command line (it may keep it) */
  char arg0[16];
  char *sargv[2];
} point;

/* The real op source: a plan from plans/. */
static void *plan_iter_new_cb(void *ctx, int rank) { return bs_plan_iter_new(ctx, rank); }
static int plan_next_cb(void *it, bs_op *op) { return bs_plan_next(it, op); }
static const bs_op *plan_next_ref_cb(void *it) { return bs_plan_next_ref(it); }
static void plan_iter_free_cb(void *it) { bs_plan_iter_free(it); }
static const char *plan_iter_error_cb(void *it) { return bs_plan_iter_errmsg(it); }

static void plan_source(bs_plan *plan, bs_sim_source *src) {
  src->ctx = plan;
  src->ranks = bs_plan_ranks(plan);
  src->iter_new = plan_iter_new_cb;
  src->next = plan_next_cb;
  src->iter_free = plan_iter_free_cb;
  src->iter_error = plan_iter_error_cb;
  src->next_ref = plan_next_ref_cb;
}

static int write_temp(const char *text, char *path, size_t pathlen, char *err, size_t errlen) {
  const char *dir = getenv("TMPDIR");
  snprintf(path, pathlen, "%s/burstsim-platform-XXXXXX.xml", dir && *dir ? dir : "/tmp");
  int fd = mkstemps(path, 4);
  if (fd < 0) {
    snprintf(err, errlen, "cannot create a temporary platform file in %s: %s", dir && *dir ? dir : "/tmp",
             strerror(errno));
    return -1;
  }
  size_t n = strlen(text), off = 0;
  while (off < n) {
    ssize_t w = write(fd, text + off, n - off);
    if (w <= 0) {
      close(fd);
      unlink(path);
      snprintf(err, errlen, "cannot write the temporary platform file: %s", strerror(errno));
      return -1;
    }
    off += (size_t)w;
  }
  close(fd);
  return 0;
}

/* Everything a point needs before SimGrid starts: profile, platform, op source, fold, and the
 * generated platform's XML in a temporary file. 0, or -1 with the message. */
static int point_prepare(const bs_config *cfg, const bs_sim_opts *opts, const bs_sim_source *given, point *pt,
                         char *err, size_t errlen) {
  const char *pname = opts->profile ? opts->profile : cfg->cluster.profile;
  if (bs_profile_load(pname, pt->prof, err, errlen)) {
    char why[512];
    snprintf(why, sizeof why, "%s", err);
    snprintf(err, errlen, "%s: %s", opts->profile ? "--profile" : "cluster.profile", why);
    return -1;
  }
  if (bs_profile_use_attention(pt->prof, cfg->model.attention_kernel, err, errlen)) return -1;
  if (bs_platform_resolve(cfg, opts, pt->prof, &pt->ps, err, errlen)) return -1;
  if (given) {
    pt->src = *given;
  } else {
    if (bs_plan_create(cfg, pt->ps.ranks_per_node, &pt->plan, err, errlen)) return -1;
    bs_plan_set_op_cache(pt->plan, !opts->no_op_cache);
    plan_source(pt->plan, &pt->src);
  }
  int G = pt->src.ranks;
  if (G != cfg->par.gpus) {
    snprintf(err, errlen, "internal: the plan has %d ranks for parallel.gpus = %d", G, cfg->par.gpus);
    return -1;
  }
  /* The fold's pre-pass reads every rank's program, so the bound on the point's work comes before
   * it; unless the plan proves its ranks alike (bs_plan_ring_uniform): then the pre-pass reads one
   * program per group, and the work is that of the ranks simulated after the fold. */
  const bs_plan *plan = given ? NULL : pt->plan;
  int up, um, alike = plan && bs_plan_ring_uniform(plan, &up, &um) && (int64_t)up * um == G;
  if (!alike && sim_work_check(&pt->src, G, opts->max_events, err, errlen)) return -1;
  if (sim_choose_fold(cfg, opts, pt->prof, &pt->ps, &pt->src, plan, &pt->fold, pt->why, sizeof pt->why, err, errlen))
    return -1;
  const sim_fold *f = &pt->fold;
  int nodes = f->Ki > 0 ? G / pt->ps.ranks_per_node / f->Ki * f->M : 0; /* folded nodes in all */
  pt->A = pt->ps.shared_host || !pt->ps.generated ? G : nodes * f->Pf;
  if (opts->fold == BS_ON && pt->A == G) {
    snprintf(err, errlen, "fold requested but not possible: %s", pt->why);
    return -1;
  }
  if (alike && sim_work_check(&pt->src, pt->A, opts->max_events, err, errlen)) return -1;
  if (pt->ps.generated) {
    int shared = pt->ps.shared_host;
    pt->xml = bs_platform_xml(&pt->ps, shared ? 1 : nodes, shared ? G : f->Pf, f->wrap, err, errlen);
    if (!pt->xml || write_temp(pt->xml, pt->xml_path, sizeof pt->xml_path, err, errlen)) return -1;
  }
  return 0;
}

/* SimGrid with settings chosen on purpose (SimGrid 3.32 configuration docs), the platform
 * loaded and the profile applied; the settings are recorded in out->sim_network. 0 or -1. */
static int start_simgrid(const bs_config *cfg, const bs_sim_opts *opts, point *pt, bs_result *out, char *err,
                         size_t errlen) {
  const bs_profile *prof = pt->prof;
  const char *model = opts->net_model ? opts->net_model : prof->net_model;
  int cross = opts->crosstraffic >= 0 ? opts->crosstraffic : prof->crosstraffic;
  double gamma = opts->tcp_gamma >= 0 ? opts->tcp_gamma : prof->tcp_gamma;
  pt->model = model;
  pt->cross = cross;
  pt->gamma = gamma;
  pt->sargc = 1;
  snprintf(pt->arg0, sizeof pt->arg0, "burstsim-sim");
  pt->sargv[0] = pt->arg0;
  pt->sargv[1] = NULL;
  simgrid_init(&pt->sargc, pt->sargv);
  xbt_log_control_set("root.thresh:critical");
  sg_cfg_set_string("network/model", model);
  sg_cfg_set_boolean("network/crosstraffic", cross ? "yes" : "no");
  sg_cfg_set_double("network/TCP-gamma", gamma);
  if (opts->sg_full_update) sg_cfg_set_string("network/optim", "Full");
#if defined(__SANITIZE_ADDRESS__)
  sg_cfg_set_int("contexts/stack-size", 1024);
#else
  sg_cfg_set_int("contexts/stack-size", 128);
#endif
  char lerr[400];
  int loaded = bs_sim_load_platform(pt->ps.generated ? pt->xml_path : pt->ps.file, lerr, sizeof lerr);
  if (pt->xml_path[0]) unlink(pt->xml_path);
  if (loaded) {
    if (pt->ps.generated) snprintf(err, errlen, "internal: the generated platform does not load: %s", lerr);
    else snprintf(err, errlen, "cluster.topology: %s", lerr);
    return -1;
  }
  int factors = 0, nset = bs_platform_apply_profile(prof, pt->ps.generated, &factors);
  if (nset < 0) {
    snprintf(err, errlen, "SimGrid refused the profile's message-size factors");
    return -1;
  }
  if (!pt->ps.generated && bs_platform_apply_degrade(cfg, pt->ps.file, err, errlen)) return -1;
  snprintf(out->sim_network, sizeof out->sim_network,
           "model=%.24s crosstraffic=%d TCP-gamma=%g; %d links from profile %.32s%s; coll: %s %s; "
           "fold: %.90s",
           model, cross, gamma, nset, prof->name, factors ? " with size factors" : "",
           bs_coll_algo_name(cfg->cluster.coll_algo), bs_coll_model_name(opts->coll_model), pt->why);
  return 0;
}

/*
 * A user platform file once loaded: ranks per node from its node properties (the plan is
 * rebuilt when they differ from the scenario's), one host means a shared CPU, and its links
 * and routes are checked. 0 or -1.
 */
static int adopt_user_platform(sim_ctx *c, const bs_config *cfg, point *pt, void **hosts, const int *node, char *err,
                               size_t errlen) {
  int rpn = 0;
  for (int i = 0; i < c->A; i++)
    if (node[i] == node[0]) rpn++;
  if (rpn != pt->ps.ranks_per_node && pt->plan) {
    bs_plan_free(pt->plan);
    pt->plan = NULL;
    c->rpn = pt->ps.ranks_per_node = rpn;
    if (bs_plan_create(cfg, rpn, &pt->plan, err, errlen)) return -1;
    bs_plan_set_op_cache(pt->plan, !c->opts->no_op_cache);
    plan_source(pt->plan, &pt->src);
  }
  if (sg_host_count() == 1) c->shared_host = 1;
  return bs_platform_check_loaded(pt->ps.file, hosts, c->A, err, errlen);
}

/* Every simulated rank's host and node; a shared host's speed and per-rank bound. 0 or -1. */
static int place_ranks(sim_ctx *c, const bs_config *cfg, point *pt, char *err, size_t errlen) {
  int A = c->A;
  void **hosts = calloc((size_t)A, sizeof *hosts);
  int *node = calloc((size_t)A, sizeof *node);
  int rc = -1;
  c->hosts = calloc((size_t)A, sizeof *c->hosts);
  if (!hosts || !node || !c->hosts) snprintf(err, errlen, "out of memory for %d ranks", A);
  else if (!bs_platform_hosts(A, pt->ps.ranks_per_node, hosts, node, err, errlen) &&
           (pt->ps.generated || !adopt_user_platform(c, cfg, pt, hosts, node, err, errlen)))
    rc = 0;
  if (rc == 0 && c->shared_host) {
    sg_host_t h0 = hosts[0];
    c->host_speed = sg_host_get_speed(h0);
    /* Threads per rank are cores / ranks (at least 1), as burstsim run and calib use them. */
    int cores = pt->prof->host_cores > 0 ? pt->prof->host_cores : sg_host_core_count(h0);
    int share = c->G < cores ? c->G : cores;
    c->exec_bound = c->host_speed / (share > 0 ? share : 1);
  }
  for (int s = 0; rc == 0 && s < A; s++) {
    rank_state *rs = &c->rs[s];
    rs->ctx = c;
    rs->slot = s;
    rs->rank = real_of(c, s);
    c->hosts[s] = hosts[s];
    rs->node = node[s];
  }
  free(hosts);
  free(node);
  return rc;
}

/* The point's state once SimGrid holds the platform: ranks placed, links numbered (when
 * asked), the trace opened, every rank's op stream started. 0 or -1. */
static int ctx_setup(sim_ctx *c, const bs_config *cfg, const bs_sim_opts *opts, point *pt, int want_links, char *err,
                     size_t errlen) {
  const bs_platform_spec *ps = &pt->ps;
  c->cfg = cfg;
  if (pt->plan) c->mesh = *bs_plan_mesh(pt->plan);
  else if (bs_mesh_of(cfg, &c->mesh, NULL, 0)) memset(&c->mesh, 0, sizeof c->mesh); /* a given source */
  c->opts = opts;
  c->prof = pt->prof;
  c->src = &pt->src;
  c->G = pt->src.ranks;
  c->A = pt->A;
  c->rpn = ps->ranks_per_node;
  c->M = pt->fold.M;
  c->Pf = pt->fold.Pf;
  c->Ki = pt->fold.Ki;
  c->shared_host = ps->shared_host;
  c->rails = ps->generated && !ps->shared_host && bs_topo_has_rails(ps->topo.name);
  c->ps = c->rails ? ps : NULL;
  c->host_speed = ps->topo.host_speed > 0 ? ps->topo.host_speed : 1e9;
  c->trace_first = 1;
  c->rs = calloc((size_t)c->A, sizeof *c->rs);
  c->buf_ids = pt->plan ? bs_plan_buf_ids(pt->plan) : MAX_BUFS;
  if (!c->rs) {
    snprintf(err, errlen, "out of memory for %d ranks", c->A);
    return -1;
  }
  if (place_ranks(c, cfg, pt, err, errlen)) return -1;
  if (want_links) sim_links_attach(c);
  if (opts->trace_path && sim_trace_open(c, opts->trace_path, err, errlen)) return -1;
  for (int s = 0; s < c->A; s++) {
    rank_state *rs = &c->rs[s];
    rs->it = c->src->iter_new(c->src->ctx, rs->rank);
    if (!rs->it) {
      snprintf(err, errlen, "out of memory (plan iterator of rank %d)", s);
      return -1;
    }
  }
  return 0;
}

/* What ctx_setup made, released (iterators, per-rank state, link statistics). */
static void ctx_release(sim_ctx *c) {
  sim_trace_abort(c);
  if (c->rs)
    for (int s = 0; s < c->A; s++) {
      if (c->rs[s].it) c->src->iter_free(c->rs[s].it);
      free(c->rs[s].coll_arr);
      free(c->rs[s].buf);
    }
  free(c->rs);
  free(c->hosts);
  free(c->sg);
  free(c->links);
  sim_route_memo_free(c);
  memset(c, 0, sizeof *c);
}

/* Appends "; engine: ..." to the settings the result records. */
static void say_engine(bs_result *out, const char *what) {
  size_t n = strlen(out->sim_network);
  snprintf(out->sim_network + n, sizeof out->sim_network - n, "; engine: %s", what);
}

/*
 * The ranks to the end, in the direct engine when it models the point (opts->engine), else as
 * SimGrid actors; a point the direct engine gives up on half way is set up again and runs in
 * SimGrid. 0, -1 with the point's first error, or -2 under --engine direct for a point the direct
 * engine cannot run (refused as bad input for this point, as --fold on refuses an unfoldable one).
 */
static int run_ranks(sim_ctx *c, const bs_config *cfg, const bs_sim_opts *opts, point *pt, int want_links,
                     bs_result *out, char *err, size_t errlen) {
  char why[200] = "--engine simgrid";
  int direct = opts->engine != BS_ENGINE_SIMGRID &&
               sim_direct_supports(c, pt->ps.generated, pt->model, pt->cross, pt->gamma, why, sizeof why);
  if (direct) {
    int rc = sim_direct_run(c, why, sizeof why);
    if (rc == 0) say_engine(out, "direct");
    if (rc < 0) {
      snprintf(err, errlen, "%s", c->error);
      return -1;
    }
    if (rc > 0 && opts->engine != BS_ENGINE_DIRECT) {
      ctx_release(c);
      if (ctx_setup(c, cfg, opts, pt, want_links, err, errlen)) return -1;
    }
    direct = rc == 0;
  }
  if (!direct && opts->engine == BS_ENGINE_DIRECT) {
    snprintf(err, errlen, "--engine direct: this point needs SimGrid: %s (--engine auto runs it there)", why);
    return -2;
  }
  if (!direct) {
    char said[240];
    snprintf(said, sizeof said, "simgrid (%s)", why);
    say_engine(out, said);
    sim_start_ranks(c);
    simgrid_run();
    /* SimGrid returns normally after "Deadlock detected": say who is stuck. */
    if (!c->error[0] && c->nfinished < c->A) sim_deadlock_error(c);
  }
  if (c->error[0]) {
    snprintf(err, errlen, "%s", c->error);
    return -1;
  }
  if (sim_fill_result(c, out, err, errlen) || sim_check_times(out, err, errlen)) return -1;
  /* complete and the point valid: only now does the trace replace the file */
  sim_trace_commit(c, out->trace_error, sizeof out->trace_error); /* a failed write loses the trace only */
  if (!out->ranks) {
    snprintf(err, errlen, "out of memory for the per-rank results");
    return -1;
  }
  out->sim_actors = c->A;
  return 0;
}

int sim_point(const bs_config *cfg, const bs_sim_opts *opts, const bs_sim_source *given, bs_result *out,
              bs_link_stat **links_out, int *nlinks_out, char *err, size_t errlen) {
  double w0 = sim_wall_now();
  memset(out, 0, sizeof *out);
  out->cfg = *cfg;
  out->mode = "sim";
  point pt;
  memset(&pt, 0, sizeof pt);
  pt.prof = calloc(1, sizeof *pt.prof);
  if (!pt.prof) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  sim_ctx ctx;
  memset(&ctx, 0, sizeof ctx);
  int rc = -2; /* until SimGrid starts: the point itself is not valid */
  if (!point_prepare(cfg, opts, given, &pt, err, errlen)) {
    rc = -1; /* from here on a failure is the simulation's */
    int ran = -1;
    if (!start_simgrid(cfg, opts, &pt, out, err, errlen) &&
        !ctx_setup(&ctx, cfg, opts, &pt, links_out != NULL, err, errlen))
      ran = run_ranks(&ctx, cfg, opts, &pt, links_out != NULL, out, err, errlen);
    if (ran == -2) rc = -2; /* --engine direct on a point it cannot run: refused */
    if (ran == 0) {
      if (ctx.links) {
        *links_out = ctx.links;
        *nlinks_out = ctx.nlinks;
        ctx.links = NULL;
      }
      rc = 0;
    }
  }
  if (ctx.rpn > 0) bs_plan_decide(cfg, ctx.rpn, &out->decision);
  ctx_release(&ctx);
  free(pt.xml);
  if (pt.plan) bs_plan_free(pt.plan);
  free(pt.prof);
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  out->sim_rss_bytes = (int64_t)ru.ru_maxrss * 1024;
  out->sim_wall_s = sim_wall_now() - w0;
  if (rc) snprintf(out->error, sizeof out->error, "%s", err);
  return rc;
}
