/*
 * methods.c — the method table: one row per bs_method, each defined next to
 * its generator (burst.c, ring.c, li2021.c, ulysses.c, tp.c, tree.c, allgather.c), and the
 * scope row of layer and model scope (workload.c). Plan creation and the
 * iterator reach a method or a scope only through its row.
 */
#include "plan_impl.h"

static const plan_method *const methods[BS_METHOD_COUNT] = {
  [BS_BURST] = &plan_method_burst,
  [BS_RING] = &plan_method_ring,
  [BS_RING_LI2021] = &plan_method_li2021,
  [BS_ULYSSES] = &plan_method_ulysses,
  [BS_USP] = &plan_method_usp,
  [BS_TP] = &plan_method_tp,
  [BS_TREE] = &plan_method_tree,
  [BS_ALLGATHER] = &plan_method_allgather,
};

const plan_method *plan_method_of(bs_method m) { return m >= 0 && m < BS_METHOD_COUNT ? methods[m] : NULL; }

/* Layer and model scope wrap the attention plan in the transformer around it (workload.c). */
const plan_scope *plan_scope_of(bs_scope s) { return s == BS_SCOPE_ATTENTION ? NULL : &plan_scope_workload; }
