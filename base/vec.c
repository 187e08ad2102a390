/*
 * vec.c — see vec.h.
 */
#include "vec.h"

#include <stdint.h>
#include <stdlib.h>

void *bs_vec_grow(void *items, size_t elem, size_t need, size_t *cap, size_t first) {
  if (need <= *cap) return items;
  size_t c = *cap ? *cap : first ? first : 1;
  while (c < need) {
    if (c > SIZE_MAX / 2) return NULL;
    c *= 2;
  }
  if (elem && c > SIZE_MAX / elem) return NULL;
  void *p = realloc(items, c * elem);
  if (!p) return NULL;
  *cap = c;
  return p;
}
