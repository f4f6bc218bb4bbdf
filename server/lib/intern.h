/* intern.h: string interning for one upload (names, categories, shapes, tracks).
 *
 * Maps a string to a dense id 0..n-1 and back. Owns copies of the strings; memory
 * grows with the number of DISTINCT strings, not with the number of events. */
#ifndef FP_INTERN_H
#define FP_INTERN_H
#include <stddef.h>

typedef struct intern intern;

intern *intern_new(void);
/* Id of s (len bytes), adding it if new; -1 on allocation failure. */
long intern_id(intern *t, const char *s, size_t len);
/* Id of s when it was interned, -1 otherwise (nothing is added). */
long intern_lookup(const intern *t, const char *s, size_t len);
const char *intern_str(const intern *t, long id); /* borrowed; NULL if out of range */
size_t intern_count(const intern *t);
size_t intern_bytes(const intern *t); /* the interned strings' lengths added up */
void intern_free(intern *t);

/* The "intern a key, grow the array its id indexes" idiom, written once: interns key and
 * makes room for its slot in arr (vec.h), counting a new key in n (ids are dense, so a new
 * id is always n). Returns the id, with *fresh = 1 for a new key (its slot zeroed) and 0
 * for a known one; -1 when out of memory. arr, n and cap are lvalues (size_t n, cap). */
#define INTERN_SLOT(t, key, len, arr, n, cap, first, fresh) \
    intern_slot_((t), (key), (len), (void *)&(arr), &(n), &(cap), sizeof *(arr), (first), (fresh))
long intern_slot_(intern *t, const void *key, size_t len, void *arrp, size_t *n, size_t *cap, size_t elem, size_t first, int *fresh);

#endif
