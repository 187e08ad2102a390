/*
 * link_class.c — the simulator's side of explain (explain.h): which link
 * class a rank's WAIT counts its transfer time to. A message's is the class of
 * the route SimGrid moved it on (its links' name prefixes, topologies/topo.h);
 * a collective's is the span of its group: the network when it crosses nodes,
 * else the class of the routes inside the rank's node (under the fold, a
 * message between real ranks of two nodes is the network's, whatever actors
 * stand for them). Looked-up classes are remembered per rank.
 */
#include "sim/point.h"

#include <simgrid/host.h>
#include <simgrid/link.h>
#include <xbt/dynar.h>

#define ROUTE_MAX_LINKS 64

/* The SimGrid host of actor slot; NULL in the search's walk, which places no hosts (every route
 * then reads as inside the node, and none is asked). */
static sg_host_t host_at(const sim_ctx *c, int slot) { return c->hosts ? c->hosts[slot] : NULL; }

/* The class of the route from host a to host b. */
static bs_explain_link route_link(sg_host_t a, sg_host_t b) {
  int cls[ROUTE_MAX_LINKS], n = 0;
  xbt_dynar_t d = xbt_dynar_new(sizeof(sg_link_t), NULL);
  sg_host_get_route(a, b, d);
  unsigned i;
  sg_link_t l;
  xbt_dynar_foreach(d, i, l) {
    if (n < ROUTE_MAX_LINKS) cls[n++] = bs_link_class_of(sg_link_get_name(l));
  }
  xbt_dynar_free(&d);
  return bs_explain_route(cls, n);
}

/* The class of the routes inside rs's node: to another actor of the node on another host (the one
 * host's own route when every rank shares it); BS_XL_OTHER when the node has no other. */
static bs_explain_link node_link(rank_state *rs) {
  sim_ctx *c = rs->ctx;
  if (rs->xnode) return (bs_explain_link)(rs->xnode - 1);
  bs_explain_link link = BS_XL_OTHER;
  if (c->shared_host) link = route_link(host_at(c, rs->slot), host_at(c, rs->slot));
  else
    for (int s = 0; s < c->A; s++)
      if (c->rs[s].node == rs->node && host_at(c, s) != host_at(c, rs->slot)) {
        link = route_link(host_at(c, rs->slot), host_at(c, s));
        break;
      }
  rs->xnode = (int)link + 1;
  return link;
}

/* The class of a message between rs and real rank peer. */
static bs_explain_link peer_link(rank_state *rs, int peer) {
  sim_ctx *c = rs->ctx;
  int ps = slot_of(c, peer);
  for (int i = 0; i < rs->nxroute; i++)
    if (rs->xroute[i].peer == ps) return (bs_explain_link)rs->xroute[i].link;
  bs_explain_link link;
  int across = node_of_rank(c, peer) != node_of_rank(c, rs->rank);
  if (c->A != c->G && across) link = BS_XL_NETWORK; /* folded: the real ranks' nodes, not their images' */
  else if (host_at(c, ps) != host_at(c, rs->slot) || c->shared_host)
    link = route_link(host_at(c, rs->slot), host_at(c, ps));
  else link = node_link(rs);
  if (rs->nxroute < MAX_PEERS) {
    rs->xroute[rs->nxroute].peer = ps;
    rs->xroute[rs->nxroute].link = (int)link;
    rs->nxroute++;
  }
  return link;
}

bs_explain_link sim_handle_link(rank_state *rs, const handle *h) {
  sim_ctx *c = rs->ctx;
  if (h->kind != H_COLL) return peer_link(rs, h->peer);
  int me = node_of_rank(c, rs->rank), spans = 0;
  for (int i = 0; i < h->group.size && !spans; i++) spans = node_of_rank(c, h->group.first + h->group.stride * i) != me;
  return bs_explain_group(spans, spans ? BS_XL_NETWORK : node_link(rs));
}
