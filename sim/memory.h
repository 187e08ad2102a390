/*
 * memory.h — the one rule for the bytes an ALLOC holds on a simulated GPU,
 * below everything that counts memory: the rank interpreter (rankops.c) and
 * the search's plan walk (walk.c) both call it, so the walk's peak is the
 * simulator's peak byte for byte (tests/sim/test_search.c).
 */
#ifndef BURSTSIM_SIM_MEMORY_H
#define BURSTSIM_SIM_MEMORY_H

#include <stdint.h>
#include "plans/plan.h"
#include "profile/profile.h"

/*
 * The bytes an ALLOC holds on a simulated GPU: rounded as the profile's
 * allocator rounds a request, except the model state (weights, gradients,
 * optimizer states). A plan holds those as one buffer per set where a
 * framework holds one tensor per parameter, and the parameter tensors of the
 * model presets are whole multiples of the allocator's granules already (but
 * for llama2-13b's 16-bit MLP matrices, half a granule off each); rounding the
 * merged buffer would also make memory grow other than linearly with the
 * layers, which the layer shortcut (layers.c) relies on.
 */
int64_t bs_sim_alloc_held(const bs_profile *prof, const bs_op *op);

#endif
