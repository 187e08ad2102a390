/*
 * load.h — loading a SimGrid platform file with its faults reported as a
 * message instead of an abort (SimGrid throws C++ exceptions for bad XML, an
 * unknown route end or a duplicate host; load.cpp catches them).
 */
#ifndef BURSTSIM_LOAD_H
#define BURSTSIM_LOAD_H

#include <stddef.h>

#ifdef __cplusplus
extern "C" {
#endif
/* After simgrid_init: loads path. Returns 0, or -1 with "what SimGrid said" in err. */
int bs_sim_load_platform(const char *path, char *err, size_t errlen);
/* Makes a failed C++ allocation (SimGrid's) call fn, which must not return (std::set_new_handler). */
void bs_sim_on_out_of_memory(void (*fn)(void));
/* After loading: 1 when SimGrid has a route from host `from` to host `to` (sg_host_t), else 0. */
int bs_sim_route_exists(const void *from, const void *to);
#ifdef __cplusplus
}
#endif

#endif
