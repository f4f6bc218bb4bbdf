/* intern.c: open-addressing hash table from string to dense id (FNV-1a, linear probe).
 * Owns every key copy; the slot array doubles at 50% load so probes stay short. */
#include "lib/intern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/vec.h"

typedef struct key {
    char *s;         /* the copy, NUL-terminated */
    size_t len;
} key;

struct intern {
    key *keys;       /* id -> key */
    size_t n, cap;   /* ids used / allocated */
    long *slots;     /* hash slot -> id, -1 empty */
    size_t nslots;   /* power of two */
    size_t bytes;    /* the keys' lengths added up */
};

static uint64_t hash(const char *s, size_t n) {
    uint64_t h = 1469598103934665603ull;
    for (size_t i = 0; i < n; i++) h = (h ^ (unsigned char)s[i]) * 1099511628211ull;
    return h;
}

intern *intern_new(void) {
    intern *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    t->nslots = 1024;
    t->slots = malloc(t->nslots * sizeof *t->slots);
    if (!t->slots) { free(t); return NULL; }
    memset(t->slots, 0xff, t->nslots * sizeof *t->slots);
    return t;
}

static int grow_slots(intern *t) {
    size_t ns = t->nslots * 2;
    long *s = malloc(ns * sizeof *s);
    if (!s) return -1;
    memset(s, 0xff, ns * sizeof *s);
    for (size_t id = 0; id < t->n; id++) {
        size_t i = hash(t->keys[id].s, t->keys[id].len) & (ns - 1);
        while (s[i] != -1) i = (i + 1) & (ns - 1);
        s[i] = (long)id;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = ns;
    return 0;
}

/* The slot of s: the one holding it, or the empty one where it would go. */
static size_t probe(const intern *t, const char *s, size_t len) {
    size_t i = hash(s, len) & (t->nslots - 1);
    while (t->slots[i] != -1) {
        long id = t->slots[i];
        if (t->keys[id].len == len && !memcmp(t->keys[id].s, s, len)) return i;
        i = (i + 1) & (t->nslots - 1);
    }
    return i;
}

size_t intern_bytes(const intern *t) { return t->bytes; }

long intern_lookup(const intern *t, const char *s, size_t len) { return t->slots[probe(t, s, len)]; }

long intern_id(intern *t, const char *s, size_t len) {
    size_t i = probe(t, s, len);
    if (t->slots[i] != -1) return t->slots[i];
    if (VEC_RESERVE(t->keys, t->cap, t->n + 1, 256)) return -1;
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    long id = (long)t->n++;
    t->keys[id] = (key){copy, len};
    t->bytes += len;
    t->slots[i] = id;
    if (t->n * 2 > t->nslots && grow_slots(t)) return -1;
    return id;
}

long intern_slot_(intern *t, const void *key, size_t len, void *arrp, size_t *n, size_t *cap, size_t elem, size_t first, int *fresh) {
    long i = intern_id(t, (const char *)key, len);
    *fresh = 0;
    if (i < 0 || ((size_t)i >= *cap && vec_reserve_(arrp, cap, (size_t)i + 1, elem, first))) return -1;
    if ((size_t)i == *n) {
        (*n)++;
        *fresh = 1;
    }
    return i;
}

const char *intern_str(const intern *t, long id) {
    return id >= 0 && (size_t)id < t->n ? t->keys[id].s : NULL;
}
size_t intern_count(const intern *t) { return t->n; }

void intern_free(intern *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->keys[i].s);
    free(t->keys);
    free(t->slots);
    free(t);
}
