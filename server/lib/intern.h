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
const char *intern_str(const intern *t, long id); /* borrowed; NULL if out of range */
size_t intern_count(const intern *t);
void intern_free(intern *t);

#endif
