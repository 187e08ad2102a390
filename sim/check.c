/*
 * check.c — the names a point gives, checked before any point runs (sim.h):
 * the profile loads, and the topology is a generator or a platform file that
 * SimGrid loads with sound links and routes between its gpu<i> hosts. A file
 * is loaded in a forked child (isolate.c), since SimGrid starts once per
 * process.
 */
#include "sim/point.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <simgrid/engine.h>
#include <simgrid/host.h>
#include <xbt/log.h>

#include "sim/load.h"

int bs_sim_check_profile(const bs_config *cfg, const bs_sim_opts *opts, char *err, size_t errlen) {
  bs_profile *prof = calloc(1, sizeof *prof);
  if (!prof) {
    snprintf(err, errlen, "out of memory");
    return -1;
  }
  const char *name = opts && opts->profile ? opts->profile : cfg->cluster.profile;
  char why[512];
  int rc = bs_profile_load(name, prof, why, sizeof why);
  if (rc) snprintf(err, errlen, "%s: %s", opts && opts->profile ? "--profile" : "cluster.profile", why);
  else rc = bs_profile_use_attention(prof, cfg->model.attention_kernel, err, errlen);
  free(prof);
  return rc;
}

/* In the forked child: loads file, checks its links and gpu<i> routes, writes the message ("" when sound). */
__attribute__((noreturn)) static void check_platform_child(const char *file, int fd) {
  char e[512] = "", lerr[400];
  int sargc = 1;
  char arg0[] = "burstsim-check";
  char *sargv[] = {arg0, NULL};
  simgrid_init(&sargc, sargv);
  xbt_log_control_set("root.thresh:critical");
  if (bs_sim_load_platform(file, lerr, sizeof lerr)) {
    snprintf(e, sizeof e, "cluster.topology: %s", lerr);
  } else {
    size_t nh = sg_host_count();
    void **hosts = calloc(nh + 1, sizeof *hosts);
    int n = 0;
    char name[32];
    for (size_t i = 0; hosts && i < nh; i++) {
      snprintf(name, sizeof name, "gpu%zu", i);
      if (!(hosts[n] = sg_host_by_name(name))) break;
      n++;
    }
    int *node = calloc(nh + 1, sizeof *node);
    char herr[400];
    if (!hosts || !node) snprintf(e, sizeof e, "out of memory");
    else if (n > 0 && bs_platform_hosts(n, 1, hosts, node, herr, sizeof herr))
      snprintf(e, sizeof e, "cluster.topology: %.200s: %.280s", file, herr);
    else bs_platform_check_loaded(file, hosts, n, e, sizeof e);
    free(hosts);
    free(node);
  }
  _exit(sim_write_all(fd, e, sizeof e) ? 3 : 0);
}

int bs_sim_check_topology(const bs_config *cfg, char *err, size_t errlen) {
  const char *topo = cfg->cluster.topology;
  if (bs_platform_check_name(topo, err, errlen)) return -1;
  if (bs_topo_is_generator(topo)) return 0;
  sim_child ch;
  int started = sim_child_start(&ch, err, errlen);
  if (started < 0) return -1;
  if (started == 1) check_platform_child(topo, ch.fd);
  char e[512];
  int ok = sim_read_all(ch.fd, e, sizeof e) == 0;
  close(ch.fd);
  int status = sim_child_reap(ch.pid);
  if (!ok) {
    snprintf(err, errlen, "cluster.topology: %s: SimGrid could not load it (%s %d)", topo,
             WIFSIGNALED(status) ? "signal" : "status", WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
    return -1;
  }
  e[sizeof e - 1] = '\0';
  if (e[0]) {
    snprintf(err, errlen, "%s", e);
    return -1;
  }
  return 0;
}
