/* stubs_tmp.c — placeholders for the methods not written yet (removed as each lands). */
#include "plan_impl.h"
int plan_check_li2021(const bs_plan *p, char *err, size_t errlen) { (void)p; snprintf(err, errlen, "parallel.method: ring-li2021 is not implemented yet"); return -1; }
int plan_check_ulysses(const bs_plan *p, char *err, size_t errlen) { (void)p; snprintf(err, errlen, "parallel.method: ulysses/usp is not implemented yet"); return -1; }
int plan_check_tp(const bs_plan *p, char *err, size_t errlen) { (void)p; snprintf(err, errlen, "parallel.method: tp is not implemented yet"); return -1; }
int plan_check_tree(const bs_plan *p, char *err, size_t errlen) { (void)p; snprintf(err, errlen, "parallel.method: tree is not implemented yet"); return -1; }
int plan_gen_li2021(bs_plan_iter *it) { (void)it; return 0; }
int plan_gen_ulysses(bs_plan_iter *it) { (void)it; return 0; }
int plan_gen_tp(bs_plan_iter *it) { (void)it; return 0; }
int plan_gen_tree(bs_plan_iter *it) { (void)it; return 0; }
