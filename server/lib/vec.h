/* vec.h: growable arrays, the one way an array grows in the server.
 *
 *   if (VEC_RESERVE(a->aggs, a->capaggs, n + 1, 256)) return ERR_NOMEM;
 *
 * makes room for at least n + 1 elements of a->aggs (whatever its type), doubling the
 * capacity from 256 at first, and zeroes the new room; a->aggs and a->capaggs (a size_t)
 * are left as they were when it fails. With intern_id (intern.h) it is the "look a key up,
 * grow the array its dense id indexes" idiom, written once. */
#ifndef FP_VEC_H
#define FP_VEC_H

#include <stddef.h>

/* arrp points to the array pointer (of any object type). 0 or ERR_NOMEM. */
int vec_reserve_(void *arrp, size_t *cap, size_t need, size_t elem, size_t first);

#define VEC_RESERVE(arr, cap, need, first) \
    ((size_t)(need) <= (cap) ? 0 : vec_reserve_((void *)&(arr), &(cap), (size_t)(need), sizeof *(arr), (first)))

#endif
