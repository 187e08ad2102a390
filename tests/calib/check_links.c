/*
 * check_links.c — reads a profile written by `burstsim calib --ranks-per-node P`
 * over two or more nodes and checks that both link classes were calibrated: the
 * shm class from the intra-node ping-pong and the nic class from the inter-node
 * one, each with a positive latency and bandwidth, and that the raw measurements
 * carry ping-pong points of both classes. Usage: check_links PROFILE.json
 */
#include <cjson/cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include "profile/profile.h"

static int fail(const char *what) {
  fprintf(stderr, "check_links: %s\n", what);
  return 1;
}

static int count_class(const cJSON *links, const char *cls) {
  int n = 0;
  const cJSON *l;
  cJSON_ArrayForEach(l, links) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(l, "test"), *c = cJSON_GetObjectItemCaseSensitive(l, "class");
    if (cJSON_IsString(t) && !strcmp(t->valuestring, "pingpong") && cJSON_IsString(c) && !strcmp(c->valuestring, cls))
      n++;
  }
  return n;
}

int main(int argc, char **argv) {
  if (argc != 2) return fail("usage: check_links PROFILE.json");
  bs_profile p;
  char err[512];
  if (bs_profile_load(argv[1], &p, err, sizeof err)) return fail(err);
  const bs_prof_link *shm = &p.link[BS_LINK_SHM], *nic = &p.link[BS_LINK_NIC];
  if (!shm->present || !(shm->bw_Bps > 0) || !(shm->lat_s > 0)) return fail("no calibrated shm link");
  if (!nic->present || !(nic->bw_Bps > 0) || !(nic->lat_s > 0)) return fail("no calibrated nic link");
  FILE *f = fopen(argv[1], "rb");
  if (!f) return fail("cannot reopen the profile");
  fseek(f, 0, SEEK_END);
  long n = ftell(f);
  fseek(f, 0, SEEK_SET);
  char *text = malloc((size_t)n + 1);
  if (!text || fread(text, 1, (size_t)n, f) != (size_t)n) return fail("cannot read the profile");
  fclose(f);
  text[n] = 0;
  cJSON *root = cJSON_Parse(text);
  free(text);
  const cJSON *m = cJSON_GetObjectItemCaseSensitive(root, "measurements");
  const cJSON *links = cJSON_GetObjectItemCaseSensitive(m, "links");
  int intra = count_class(links, "intra"), inter = count_class(links, "inter");
  const cJSON *cal = cJSON_GetObjectItemCaseSensitive(root, "calibration");
  const cJSON *nodes = cJSON_GetObjectItemCaseSensitive(cal, "nodes");
  printf("check_links: shm %.3g B/s %.3g s, nic %.3g B/s %.3g s; ping-pong points intra %d, inter %d; nodes %g\n",
         shm->bw_Bps, shm->lat_s, nic->bw_Bps, nic->lat_s, intra, inter,
         cJSON_IsNumber(nodes) ? nodes->valuedouble : -1);
  int ok = intra > 0 && inter > 0 && cJSON_IsNumber(nodes) && nodes->valuedouble >= 2;
  cJSON_Delete(root);
  return ok ? 0 : fail("the measurements lack a class of ping-pong points or the node count");
}
