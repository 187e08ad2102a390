/*
 * run.c — the front of the simulator (sim.h): bs_sim_run puts the
 * micro-batch shortcut (micro.c) or the layer shortcut (layers.c) on top of
 * the point simulation (isolate.c, engine.c) when it applies (the first runs
 * its reduced steps through bs_sim_run again, so the two compose), and runs
 * the point as it is otherwise; and the platform XML the simulator would use.
 */
#include "sim/point.h"

#include <stdio.h>
#include <stdlib.h>

int bs_sim_run(const bs_config *cfg, const bs_sim_opts *opts, bs_result *out, char *err, size_t errlen) {
  bs_sim_opts d;
  if (!opts) {
    bs_sim_opts_default(&d);
    opts = &d;
  }
  int micro = bs_sim_micro_apply(cfg, opts);
  if (micro || bs_sim_layers_apply(cfg, opts)) {
    int rc = micro ? bs_sim_run_micro(cfg, opts, out, err, errlen) : bs_sim_run_layers(cfg, opts, out, err, errlen);
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
