/* rcache.h: rendered replies of the read endpoints (per session, and the sessions list), kept in memory.
 *
 * Why it is safe: a stored session's aggregates never change after ingest; what can
 * change a reply is a report edit or a deletion (by a client or by retention), and each
 * bumps the store's write generation (store_generation). An entry remembers the
 * generation it was rendered at and misses once that moved on, so no write path has to
 * know about the cache, and a reply is never staler than the last committed write. The
 * sessions list depends on uploads too: routes.c checks it against
 * store_list_generation, which every committed upload bumps as well (store.h).
 *
 * Why it is worth it: the operator table of a big session is ~20 KB of JSON rendered
 * from ~100 rows on every request; bench/README.md measured 1.3-3.2k req/s for it. A hit
 * is one mutex, one hash lookup and one memcpy.
 *
 * Bounded by bytes (the body sizes plus keys); the least recently used entry goes first.
 * Thread-safe (one mutex); replies over a quarter of the budget are not kept. */
#ifndef FP_RCACHE_H
#define FP_RCACHE_H

#include <stddef.h>

typedef struct rcache rcache;

/* A cache of at most max_bytes; 0 disables it (every get misses, put does nothing).
 * NULL when out of memory. */
rcache *rcache_new(size_t max_bytes);
void rcache_free(rcache *c); /* accepts NULL */

/* On a hit for key at generation gen: 1, with *body a malloc'd copy (caller frees),
 * *len, and the *ctype (a static string) and *flags the entry was put with (routes.c
 * keeps the reply's Vary bits there). 0 on a miss. */
int rcache_get(rcache *c, const char *key, unsigned long gen, char **body, size_t *len, const char **ctype, unsigned *flags);

/* Keeps a copy of body for key at generation gen (replacing an older entry). ctype must
 * be a static string. Out of memory only means the reply is not kept. */
void rcache_put(rcache *c, const char *key, unsigned long gen, const char *body, size_t len, const char *ctype, unsigned flags);

/* Counters, for /metrics and tests. */
void rcache_stats(rcache *c, unsigned long long *hits, unsigned long long *misses, size_t *bytes);

#endif
