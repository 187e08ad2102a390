// factors.cpp — installs the profile's piecewise factors as SimGrid network
// factor callbacks (see factors.h). C++ only because that is SimGrid's API.
#include "sim/factors.h"

#include <simgrid/kernel/resource/NetworkModelIntf.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/s4u/NetZone.hpp>

#include <memory>

namespace {

// The piece of the route's bottleneck class for a message of `size` bytes.
double factor(const bs_factor_table &t, double size, const std::vector<simgrid::s4u::Link *> &links, bool bw) {
  int cls = -1;
  double slowest = 0;
  for (const auto *l : links) {
    int c = bs_link_class_of(l->get_cname());
    if (c < 0) continue;
    double b = l->get_bandwidth();
    if (cls < 0 || b < slowest) {
      cls = c;
      slowest = b;
    }
  }
  if (cls < 0) return 1.0;
  const bs_factor_class &f = t.cls[cls];
  double v = 1.0;
  for (int i = 0; i < f.n; i++)
    if (size >= f.min_bytes[i]) v = bw ? f.bw[i] : f.lat[i];
  return v;
}

} // namespace

extern "C" int bs_sim_install_factors(const bs_factor_table *t) {
  auto *zone = simgrid::s4u::Engine::get_instance()->get_netzone_root();
  auto *model = zone ? zone->get_network_model() : nullptr;
  if (!model) return -1;
  auto table = std::make_shared<bs_factor_table>(*t);
  model->set_bw_factor_cb(
    [table](double size, const simgrid::s4u::Host *, const simgrid::s4u::Host *,
            const std::vector<simgrid::s4u::Link *> &links,
            const std::unordered_set<simgrid::s4u::NetZone *> &) { return factor(*table, size, links, true); });
  model->set_lat_factor_cb(
    [table](double size, const simgrid::s4u::Host *, const simgrid::s4u::Host *,
            const std::vector<simgrid::s4u::Link *> &links,
            const std::unordered_set<simgrid::s4u::NetZone *> &) { return factor(*table, size, links, false); });
  return 0;
}
