/* intern.c: open-addressing hash table from string to dense id (FNV-1a, linear probe).
 * Owns every key copy; the slot array doubles at 50% load so probes stay short.
 *
 * Why the copies live in arena blocks and the slots are 32-bit: a trace of 100,000 distinct
 * kernel names (issue 24) interns each name once in the upload's strings and once more as a
 * GPU-row key; a malloc per copy cost 16-24 bytes of overhead each and a long slot 8 bytes
 * twice over, about 8 MB of such an upload's 78 MB heap peak (massif). */
#include "lib/intern.h"

#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "lib/vec.h"

typedef struct key {
    char *s;         /* the copy, NUL-terminated, in an arena block */
    size_t len;
} key;

/* One arena block: its copies back to back; a key longer than ARENA_BLOCK gets a block of
 * its own. Blocks are freed together (intern_free). */
#define ARENA_BLOCK (64u << 10)
typedef struct block {
    struct block *next;
    size_t used, cap, pad; /* pad: data starts 32 bytes in, aligned as malloc's memory is */
    char data[];
} block;
/* Each copy starts aligned as malloc would align it: suspects.c reads its binary keys as longs. */
#define ARENA_ALIGN ((size_t)_Alignof(max_align_t))

struct intern {
    key *keys;       /* id -> key */
    size_t n, cap;   /* ids used / allocated */
    int32_t *slots;  /* hash slot -> id, -1 empty */
    size_t nslots;   /* power of two */
    size_t bytes;    /* the keys' lengths added up */
    block *blocks;   /* the newest first */
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
    int32_t *s = malloc(ns * sizeof *s);
    if (!s) return -1;
    memset(s, 0xff, ns * sizeof *s);
    for (size_t id = 0; id < t->n; id++) {
        size_t i = hash(t->keys[id].s, t->keys[id].len) & (ns - 1);
        while (s[i] != -1) i = (i + 1) & (ns - 1);
        s[i] = (int32_t)id;
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

/* Room for n bytes in the newest block, or a new block. */
static char *arena_alloc(intern *t, size_t n) {
    n = (n + ARENA_ALIGN - 1) & ~(ARENA_ALIGN - 1);
    block *b = t->blocks;
    if (!b || b->cap - b->used < n) {
        size_t cap = n > ARENA_BLOCK ? n : ARENA_BLOCK;
        block *nb = malloc(sizeof *nb + cap);
        if (!nb) return NULL;
        nb->used = 0;
        nb->cap = cap;
        /* a key of its own block goes behind the current one, which may still have room */
        if (b && n > ARENA_BLOCK) {
            nb->next = b->next;
            b->next = nb;
        } else {
            nb->next = b;
            t->blocks = nb;
        }
        b = nb;
    }
    char *p = b->data + b->used;
    b->used += n;
    return p;
}

long intern_id(intern *t, const char *s, size_t len) {
    size_t i = probe(t, s, len);
    if (t->slots[i] != -1) return t->slots[i];
    if (t->n >= INT32_MAX || VEC_RESERVE(t->keys, t->cap, t->n + 1, 256)) return -1;
    char *copy = arena_alloc(t, len + 1);
    if (!copy) return -1;
    memcpy(copy, s, len);
    copy[len] = '\0';
    long id = (long)t->n++;
    t->keys[id] = (key){copy, len};
    t->bytes += len;
    t->slots[i] = (int32_t)id;
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
    for (block *b = t->blocks, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(t->keys);
    free(t->slots);
    free(t);
}
