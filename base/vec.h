/*
 * vec.h — the growable array: an array appended to one element (or one run
 * of bytes) at a time, whose capacity doubles when it is full, so that n
 * appends cost O(n) copies in all. The caller keeps the pointer, its length
 * and its capacity; this grows them.
 */
#ifndef BURSTSIM_BASE_VEC_H
#define BURSTSIM_BASE_VEC_H

#include <stddef.h>

/*
 * Makes items (*cap elements of elem bytes) hold at least need elements: the
 * capacity doubles, from first when it is 0, until it does. Returns the array,
 * moved or not, with *cap updated; or NULL when out of memory, with items and
 * *cap untouched (the caller still owns and frees items).
 */
void *bs_vec_grow(void *items, size_t elem, size_t need, size_t *cap, size_t first);

#endif
