/* intern.c: open-addressing hash table from string to dense id (FNV-1a, linear probe).
 * Owns every key copy; the slot array doubles at 50% load so probes stay short. */
#include "intern.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

struct intern {
    char **strs;     /* id -> string */
    size_t *lens;    /* id -> length */
    size_t n, cap;   /* ids used / allocated */
    long *slots;     /* hash slot -> id, -1 empty */
    size_t nslots;   /* power of two */
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
        size_t i = hash(t->strs[id], t->lens[id]) & (ns - 1);
        while (s[i] != -1) i = (i + 1) & (ns - 1);
        s[i] = (long)id;
    }
    free(t->slots);
    t->slots = s;
    t->nslots = ns;
    return 0;
}

long intern_id(intern *t, const char *s, size_t len) {
    size_t i = hash(s, len) & (t->nslots - 1);
    while (t->slots[i] != -1) {
        long id = t->slots[i];
        if (t->lens[id] == len && !memcmp(t->strs[id], s, len)) return id;
        i = (i + 1) & (t->nslots - 1);
    }
    if (t->n == t->cap) {
        size_t cap = t->cap ? t->cap * 2 : 256;
        char **ns = realloc(t->strs, cap * sizeof *ns);
        if (!ns) return -1;
        t->strs = ns;
        size_t *nl = realloc(t->lens, cap * sizeof *nl);
        if (!nl) return -1;
        t->lens = nl;
        t->cap = cap;
    }
    char *copy = malloc(len + 1);
    if (!copy) return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    long id = (long)t->n++;
    t->strs[id] = copy;
    t->lens[id] = len;
    t->slots[i] = id;
    if (t->n * 2 > t->nslots && grow_slots(t)) return -1;
    return id;
}

const char *intern_str(const intern *t, long id) {
    return id >= 0 && (size_t)id < t->n ? t->strs[id] : NULL;
}
size_t intern_count(const intern *t) { return t->n; }

void intern_free(intern *t) {
    if (!t) return;
    for (size_t i = 0; i < t->n; i++) free(t->strs[i]);
    free(t->strs);
    free(t->lens);
    free(t->slots);
    free(t);
}
