/*
 * load.cpp — bs_sim_load_platform (load.h): simgrid_load_platform inside a
 * try block, so that a user's faulty platform file becomes an error message
 * naming the file and line SimGrid found fault with, not an abort; and the
 * forked simulation's handler for a failed C++ allocation; whether a route
 * joins two hosts (SimGrid aborts a communication that has none).
 */
#include "load.h"

#include <simgrid/Exception.hpp>
#include <simgrid/s4u/Engine.hpp>
#include <simgrid/s4u/Host.hpp>
#include <simgrid/s4u/Link.hpp>
#include <simgrid/engine.h>

#include <cstdio>
#include <exception>
#include <new>
#include <vector>

int bs_sim_load_platform(const char *path, char *err, size_t errlen) {
  try {
    simgrid_load_platform(path);
    return 0;
  } catch (const simgrid::ParseError &e) {
    std::snprintf(err, errlen, "%s", e.what()); /* "Parse error at FILE:LINE: ..." */
  } catch (const std::exception &e) {
    std::snprintf(err, errlen, "%s: %s", path, e.what());
  }
  return -1;
}

void bs_sim_on_out_of_memory(void (*fn)(void)) { std::set_new_handler(fn); }

int bs_sim_route_exists(const void *from, const void *to) {
  try {
    /* routes exist only in a sealed platform (a lookup before reads unbuilt tables); sealing twice is a no-op */
    simgrid::s4u::Engine::get_instance()->seal_platform();
    std::vector<simgrid::s4u::Link *> links;
    double lat = 0;
    static_cast<const simgrid::s4u::Host *>(from)->route_to(static_cast<const simgrid::s4u::Host *>(to), links, &lat);
    return !links.empty() || lat > 0; /* SimGrid's own test before it aborts a communication */
  } catch (const std::exception &) {
    return 0;
  }
}
