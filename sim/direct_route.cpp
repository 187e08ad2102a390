// direct_route.cpp — what the direct engine (direct_net.c) asks SimGrid about
// the loaded platform: a link's sharing policy and the route between two
// hosts with its latency, as the CM02 network model itself looks them up
// (Host::route_to). C++ only because the policy's full enum is C++ API.
#include "sim/direct_net.h"

#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>

#include <exception>
#include <vector>

extern "C" int bs_direct_link_shared(const void *link) {
  using P = simgrid::s4u::Link::SharingPolicy;
  P p = static_cast<const simgrid::s4u::Link *>(link)->get_sharing_policy();
  return p == P::SHARED ? 1 : p == P::SPLITDUPLEX ? 2 : 0;
}

extern "C" void bs_direct_seal(void) {
  /* routes exist only in a sealed platform; SimGrid seals it when it runs, sealing twice is a no-op */
  simgrid::s4u::Engine::get_instance()->seal_platform();
}

extern "C" int bs_direct_route(const void *src, const void *dst, void **links, int max, double *lat) {
  try {
    std::vector<simgrid::s4u::Link *> route;
    double l = 0;
    static_cast<const simgrid::s4u::Host *>(src)->route_to(static_cast<const simgrid::s4u::Host *>(dst), route, &l);
    if (route.empty() || static_cast<int>(route.size()) > max) return -1;
    for (size_t i = 0; i < route.size(); i++) links[i] = route[i];
    *lat = l;
    return static_cast<int>(route.size());
  } catch (const std::exception &) {
    return -1;
  }
}
