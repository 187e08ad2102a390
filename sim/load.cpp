/*
 * load.cpp — bs_sim_load_platform (load.h): simgrid_load_platform inside a
 * try block, so that a user's faulty platform file becomes an error message
 * naming the file and line SimGrid found fault with, not an abort; and the
 * forked simulation's handler for a failed C++ allocation.
 */
#include "load.h"

#include <simgrid/Exception.hpp>
#include <simgrid/engine.h>

#include <cstdio>
#include <exception>
#include <new>

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
