/*
 * run.c — the front of the simulator (sim.h): bs_sim_run puts the layer
 * shortcut (layers.c) on top of the point simulation (isolate.c, engine.c)
 * when it applies, and runs the point as it is otherwise; and the platform
 * XML the simulator would use.
 */
#include "sim/point.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* A time the layer shortcut extended is a time: >= -tol, waiting for peers within the exposed time. */
static int extended_time_ok(double wait_for_peers, double exposed, double tol) {
  return wait_for_peers >= -tol && exposed >= -tol && wait_for_peers <= exposed + tol;
}

/*
 * The layer shortcut's straight line through 3 and 4 layers (layers.c) holds for sums over a rank's
 * ops; waiting for peers is where ranks meet, and can shrink from 3 to 4 layers, so that its line
 * leaves [0, exposed] at L layers. 1 when every extended time is in range: the point's figures
 * exactly (sim_check_times refuses a negative one), a rank's and explain's parts within rounding
 * (1e-9 of the step).
 */
static int extension_sound(const bs_result *r) {
  const bs_times *t = &r->time;
  double tol = 1e-9 * t->step;
  if (!(t->step >= 0 && t->fwd >= 0 && t->bwd >= 0 && t->compute >= 0 && t->wait_for_peers >= 0) ||
      !extended_time_ok(t->wait_for_peers, t->comm_exposed, tol))
    return 0;
  for (int i = 0; r->ranks && i < r->nranks; i++) {
    const bs_rank_result *x = &r->ranks[i];
    if (!(x->step >= -tol && x->fwd >= -tol && x->bwd >= -tol && x->compute >= -tol) ||
        !extended_time_ok(x->wait_for_peers, x->comm_exposed, tol))
      return 0;
  }
  const bs_explain_parts *p[] = {&r->explain.critical, &r->explain.mean};
  for (int j = 0; j < 2; j++) {
    if (!(p[j]->wait_for_peers >= -tol && p[j]->launch >= -tol)) return 0;
    for (int k = 0; k < BS_XK_COUNT; k++)
      if (!(p[j]->compute[k] >= -tol)) return 0;
    for (int l = 0; l < BS_XL_COUNT; l++)
      if (!(p[j]->exposed[l] >= -tol)) return 0;
  }
  return 1;
}

int bs_sim_run(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen) {
  bs_sim_opts d;
  if (!opts) {
    bs_sim_opts_default(&d);
    opts = &d;
  }
  if (bs_sim_layers_apply(cfg, opts)) {
    int rc = bs_sim_run_layers(cfg, opts, out, err, errlen);
    if (rc == 0 && !extension_sound(out)) { /* the line does not describe this model: every layer */
      bs_result_free(out);
      memset(out, 0, sizeof *out);
      bs_sim_opts all = *opts;
      all.layers = BS_OFF;
      rc = bs_sim_run_source(cfg, &all, NULL, out, NULL, NULL, err, errlen);
      size_t n = strlen(out->sim_network);
      snprintf(out->sim_network + n, sizeof out->sim_network - n,
               "; layers: all %lld simulated (the shortcut's extension left a time's range)",
               (long long)cfg->model.layers);
      return rc;
    }
    if (rc == 0 && sim_check_times(out, err, errlen)) {
      bs_result_free(out);
      snprintf(out->error, sizeof out->error, "%s", err);
      rc = -1;
    }
    sim_record_profile(out, opts);
    return rc;
  }
  return bs_sim_run_source(cfg, opts, NULL, out, NULL, NULL, err, errlen);
}

char *bs_sim_platform_xml(const bs_config *cfg, const bs_sim_opts *opts_in, char *err, size_t errlen) {
  bs_sim_opts opts;
  if (opts_in) opts = *opts_in;
  else bs_sim_opts_default(&opts);
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    snprintf(err, errlen, "out of memory");
    return NULL;
  }
  char *xml = NULL;
  bs_platform_spec ps;
  if (!bs_profile_load(opts.profile ? opts.profile : cfg->cluster.profile, prof, err, errlen) &&
      !bs_platform_resolve(cfg, &opts, prof, &ps, err, errlen)) {
    if (ps.generated) xml = bs_platform_xml(&ps, ps.topo.nodes, ps.topo.gpus_per_node, 0, err, errlen);
    else snprintf(err, errlen, "%s is a user platform file, not a generator", ps.file);
  }
  free(prof);
  return xml;
}
