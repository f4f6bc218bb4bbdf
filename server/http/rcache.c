/* rcache.c: an LRU of rendered replies keyed by request (rcache.h).
 *
 * A chained hash table (FNV-1a, power-of-two buckets, doubled when the entries outnumber
 * the buckets) plus a doubly linked list in recency order: head is the most recent. */
#include "http/rcache.h"

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

typedef struct entry {
    struct entry *hnext;        /* hash chain */
    struct entry *prev, *next;  /* recency list */
    uint64_t hash;
    unsigned long gen;
    const char *ctype;
    unsigned flags;
    char *key, *body;
    size_t len, cost;
} entry;

struct rcache {
    pthread_mutex_t lock;
    entry **buckets;
    size_t nbuckets, nentries, bytes, max_bytes;
    entry *head, *tail;
    unsigned long long hits, misses;
};

static uint64_t fnv1a(const char *s) {
    uint64_t h = 1469598103934665603ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 1099511628211ull;
    return h;
}

rcache *rcache_new(size_t max_bytes) {
    rcache *c = calloc(1, sizeof *c);
    if (!c) return NULL;
    c->nbuckets = 256;
    c->buckets = calloc(c->nbuckets, sizeof *c->buckets);
    if (!c->buckets) { free(c); return NULL; }
    c->max_bytes = max_bytes;
    pthread_mutex_init(&c->lock, NULL);
    return c;
}

static void unlink_lru(rcache *c, entry *e) {
    if (e->prev) e->prev->next = e->next; else c->head = e->next;
    if (e->next) e->next->prev = e->prev; else c->tail = e->prev;
    e->prev = e->next = NULL;
}

static void push_front(rcache *c, entry *e) {
    e->prev = NULL;
    e->next = c->head;
    if (c->head) c->head->prev = e;
    c->head = e;
    if (!c->tail) c->tail = e;
}

static entry **slot_of(rcache *c, const char *key, uint64_t h) {
    entry **p = &c->buckets[h & (c->nbuckets - 1)];
    while (*p && ((*p)->hash != h || strcmp((*p)->key, key))) p = &(*p)->hnext;
    return p;
}

static void drop(rcache *c, entry *e) {
    entry **p = slot_of(c, e->key, e->hash);
    *p = e->hnext;
    unlink_lru(c, e);
    c->bytes -= e->cost;
    c->nentries--;
    free(e->key);
    free(e->body);
    free(e);
}

/* Doubling keeps chains short; a failed allocation just keeps the old table. */
static void grow(rcache *c) {
    size_t n = c->nbuckets * 2;
    entry **nb = calloc(n, sizeof *nb);
    if (!nb) return;
    for (size_t i = 0; i < c->nbuckets; i++) {
        for (entry *e = c->buckets[i], *next; e; e = next) {
            next = e->hnext;
            e->hnext = nb[e->hash & (n - 1)];
            nb[e->hash & (n - 1)] = e;
        }
    }
    free(c->buckets);
    c->buckets = nb;
    c->nbuckets = n;
}

int rcache_get(rcache *c, const char *key, unsigned long gen, char **body, size_t *len, const char **ctype, unsigned *flags) {
    if (!c || !c->max_bytes) return 0;
    uint64_t h = fnv1a(key);
    int hit = 0;
    pthread_mutex_lock(&c->lock);
    entry *e = *slot_of(c, key, h);
    if (e && e->gen != gen) {
        drop(c, e); /* rendered before a write: never serve it again */
        e = NULL;
    }
    if (e && (*body = malloc(e->len + 1))) {
        memcpy(*body, e->body, e->len + 1);
        *len = e->len;
        *ctype = e->ctype;
        *flags = e->flags;
        unlink_lru(c, e);
        push_front(c, e);
        hit = 1;
    }
    if (hit) c->hits++; else c->misses++;
    pthread_mutex_unlock(&c->lock);
    return hit;
}

void rcache_put(rcache *c, const char *key, unsigned long gen, const char *body, size_t len, const char *ctype, unsigned flags) {
    if (!c || !c->max_bytes) return;
    size_t klen = strlen(key), cost = len + klen + sizeof(entry);
    if (cost > c->max_bytes / 4) return;
    entry *e = calloc(1, sizeof *e);
    char *k = malloc(klen + 1), *b = malloc(len + 1);
    if (!e || !k || !b) { free(e); free(k); free(b); return; }
    memcpy(k, key, klen + 1);
    memcpy(b, body, len);
    b[len] = '\0';
    *e = (entry){.hash = fnv1a(key), .gen = gen, .ctype = ctype, .flags = flags, .key = k, .body = b, .len = len, .cost = cost};
    pthread_mutex_lock(&c->lock);
    entry *old = *slot_of(c, key, e->hash);
    if (old) drop(c, old);
    while (c->tail && c->bytes + cost > c->max_bytes) drop(c, c->tail);
    if (c->nentries >= c->nbuckets) grow(c);
    entry **p = &c->buckets[e->hash & (c->nbuckets - 1)];
    e->hnext = *p;
    *p = e;
    push_front(c, e);
    c->bytes += cost;
    c->nentries++;
    pthread_mutex_unlock(&c->lock);
}

void rcache_stats(rcache *c, unsigned long long *hits, unsigned long long *misses, size_t *bytes) {
    pthread_mutex_lock(&c->lock);
    *hits = c->hits;
    *misses = c->misses;
    *bytes = c->bytes;
    pthread_mutex_unlock(&c->lock);
}

void rcache_free(rcache *c) {
    if (!c) return;
    while (c->head) drop(c, c->head);
    free(c->buckets);
    pthread_mutex_destroy(&c->lock);
    free(c);
}
