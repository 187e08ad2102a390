/*
 * memory.c — the bytes an ALLOC holds (memory.h), a rule of its own so that
 * the simulator's ranks and the search's walk count memory by one function
 * and neither calls the other for it.
 */
#include "sim/memory.h"

int64_t bs_sim_alloc_held(const bs_profile *prof, const bs_op *op) {
  bs_mem_class cls = op->u.alloc.cls;
  if (cls == BS_MEM_WEIGHTS || cls == BS_MEM_GRADS || cls == BS_MEM_OPTIMIZER) return op->u.alloc.bytes;
  return bs_profile_alloc_bytes(prof, op->u.alloc.bytes);
}
